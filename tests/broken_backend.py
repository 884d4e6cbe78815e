"""A deliberately broken MemoryBackendService (raw servicer, no framework): proves the conformance suite fails.

It ignores top_k, returns scores in increasing order, accepts any input (no INVALID_ARGUMENT), keeps every
namespace in one bucket (Reset does not isolate, unknown namespaces see everything), and stores half of a batch
before looking at the rest.
"""

from __future__ import annotations

from memrig.v1 import memory_backend_pb2 as pb
from memrig.v1 import memory_backend_pb2_grpc as pb_grpc


class BrokenServicer(pb_grpc.MemoryBackendServiceServicer):
    def __init__(self):
        self.messages: list[pb.Message] = []

    async def Describe(self, request, context):
        return pb.DescribeResponse(name="broken", version="0.0.1")

    async def Reset(self, request, context):
        return pb.ResetResponse(items_removed=0)

    async def Ingest(self, request, context):
        n = 0
        for s in request.sessions:
            for m in s.messages:
                self.messages.append(m)
                n += 1
        return pb.IngestResponse(messages_accepted=n)

    async def Settle(self, request, context):
        return pb.SettleResponse(settled=True)

    async def Retrieve(self, request, context):
        # a span past its text's end (what recall at a context budget cannot credit)
        mems = [pb.Memory(id=m.id, text=m.content, score=i * 0.1, evidence_ids=["made-up-id"],
                          evidence_spans=[pb.EvidenceSpan(evidence_id="made-up-id", start=0, end=len(m.content) + 5)])
                for i, m in enumerate(self.messages)]
        return pb.RetrieveResponse(memories=mems)

    async def Stats(self, request, context):
        return pb.StatsResponse(namespaces=[pb.NamespaceStats(namespace=request.namespace,
                                                              messages=len(self.messages))])
