"""Locust users for a MemoryBackendService adapter over gRPC (`--host 127.0.0.1:<grpc port>`).

Locust is gevent-based, so this uses the *sync* grpc API after `grpc.experimental.gevent.init_gevent()` (grpc.aio
and gevent do not mix; anchors §3). A client interceptor times every unary call and fires locust's `request`
event (request_type "grpc", name = the full method, response time in ms, exception on any RpcError).

Each user ingests one small session of its own into the shared namespace at start, then mostly retrieves
(fast and full), with an occasional ingest and stats call.

    locust -f loadtests/grpc_locustfile.py --headless -u 10 -r 5 -t 30s --host 127.0.0.1:50051

Env: MEMRIG_GRPC_NAMESPACE (default "load"), MEMRIG_LOAD_SEED, MEMRIG_LOAD_WAIT, MEMRIG_LOAD_SHAPE / _PARAMS.
"""

from __future__ import annotations

import grpc.experimental.gevent as grpc_gevent

grpc_gevent.init_gevent()  # must run before any channel exists

import itertools  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402

import grpc  # noqa: E402
from google.protobuf.timestamp_pb2 import Timestamp  # noqa: E402
from locust import User, between, task  # noqa: E402

import loadtests.locust_hooks  # noqa: E402,F401 - registers options, request log, fault timeline, exporter
from loadtests.shapes import selected_shape  # noqa: E402
from loadtests.workload import Payloads  # noqa: E402
from memrig.v1 import memory_backend_pb2 as pb  # noqa: E402
from memrig.v1 import memory_backend_pb2_grpc as pb_grpc  # noqa: E402

NAMESPACE = os.environ.get("MEMRIG_GRPC_NAMESPACE", "load")
SEED = int(os.environ.get("MEMRIG_LOAD_SEED", "0"))
_WAIT = [float(x) for x in os.environ.get("MEMRIG_LOAD_WAIT", "0.1,0.5").split(",")]
DEADLINE_S = float(os.environ.get("MEMRIG_GRPC_DEADLINE_S", "10"))
_user_ids = itertools.count()


class LocustInterceptor(grpc.UnaryUnaryClientInterceptor):
    """Fires locust's request event for every unary call, success or failure."""

    def __init__(self, environment):
        self.env = environment

    def intercept_unary_unary(self, continuation, client_call_details, request):
        start_wall, t0 = time.time(), time.perf_counter()
        response, exc, length = None, None, 0
        call = continuation(client_call_details, request)
        try:
            response = call.result()
            length = response.ByteSize()
        except grpc.RpcError as e:
            exc = e
        self.env.events.request.fire(
            request_type="grpc", name=client_call_details.method, response_time=(time.perf_counter() - t0) * 1000.0,
            response_length=length, response=response, context=None, exception=exc, start_time=start_wall)
        return call


class GrpcBackendUser(User):
    host = os.environ.get("MEMRIG_GRPC_TARGET", "127.0.0.1:50051")
    wait_time = between(_WAIT[0], _WAIT[-1])

    def on_start(self) -> None:
        n = next(_user_ids)
        self.n = n
        self.payloads = Payloads(seed=SEED * 10_007 + n * 31 + os.getpid() % 1000, user_id=f"load-user-{n}")
        # No client retries: a rig must not hide faults.
        self.channel = grpc.insecure_channel(self.host, options=[("grpc.enable_retries", 0)])
        self.stub = pb_grpc.MemoryBackendServiceStub(
            grpc.intercept_channel(self.channel, LocustInterceptor(self.environment)))
        self._sessions = 0
        self.ingest()

    def on_stop(self) -> None:
        self.channel.close()

    def _call(self, method, request):
        try:
            return method(request, timeout=DEADLINE_S)
        except grpc.RpcError:
            return None  # already reported by the interceptor

    @task(6)
    def retrieve_fast(self) -> None:
        q = self.payloads.retrieve("fast")
        self._call(self.stub.Retrieve, pb.RetrieveRequest(namespace=NAMESPACE, query=q["query"], top_k=q["top_k"],
                                                          mode=pb.RETRIEVE_MODE_FAST))

    @task(2)
    def retrieve_full(self) -> None:
        q = self.payloads.retrieve("full")
        self._call(self.stub.Retrieve, pb.RetrieveRequest(namespace=NAMESPACE, query=q["query"], top_k=q["top_k"],
                                                          mode=pb.RETRIEVE_MODE_FULL))

    @task(1)
    def ingest(self) -> None:
        self._sessions += 1
        conv = self.payloads.conversation()
        ts = Timestamp()
        ts.FromSeconds(int(time.time()))
        sid = f"{conv['session_id']}-p{os.getpid()}-{self._sessions}"
        msgs = [pb.Message(id=f"{sid}:{i}", role=m["role"], content=m["content"], ts=ts)
                for i, m in enumerate(conv["messages"])]
        self._call(self.stub.Ingest, pb.IngestRequest(namespace=NAMESPACE, sessions=[
            pb.Session(session_id=sid, started_at=ts, messages=msgs)]))

    @task(1)
    def stats(self) -> None:
        self._call(self.stub.Stats, pb.StatsRequest(namespace=NAMESPACE))


_shape = selected_shape()
if _shape is not None:
    LoadShape = _shape
