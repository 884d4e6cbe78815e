"""Clients of a memory backend: over gRPC (any language) or in-process (a Python class, same semantics).

Both expose the same coroutines and return the rig's Python types. gRPC calls always carry a deadline,
never retry, and are bounded in flight.
"""

from __future__ import annotations

import time
from typing import Any

import grpc

from memrig.v1 import memory_backend_pb2 as pb
from memrig.v1 import memory_backend_pb2_grpc as pb_grpc
from services.adapters.base import BackendContext, MemoryBackend
from services.adapters.host import BackendHost
from services.common.errors import BackendError, BackendFailed, BackendUnavailable
from services.common.grpc_util import DEFAULT_MAX_IN_FLIGHT, BoundedCalls, aio_channel
from services.common.types import (
    IngestBatch,
    NamespaceStats,
    PrepareResult,
    RetrieveQuery,
    RetrieveResult,
    SettleResult,
    ValidationError,
    batch_to_pb,
    query_to_pb,
    result_from_pb,
    struct_to_dict,
)

# gRPC status name -> the error family a client raises (services/common/errors.py); a status not listed is a
# BackendError of that call alone (UNIMPLEMENTED, RESOURCE_EXHAUSTED, NOT_FOUND, ...). INVALID_ARGUMENT is a
# ValidationError naming the field.
_FAMILY: dict[str, type[BackendError]] = {
    "UNAVAILABLE": BackendUnavailable, "DEADLINE_EXCEEDED": BackendUnavailable,
    "FAILED_PRECONDITION": BackendFailed, "CANCELLED": BackendFailed, "UNKNOWN": BackendFailed,
    "INTERNAL": BackendFailed,
}


def backend_error(backend: str, code: str, message: str) -> BackendError:
    """The BackendError subclass for a gRPC status name (`_FAMILY`)."""
    return _FAMILY.get(code, BackendError)(backend, code, message)


def call_message(method: str, code: grpc.StatusCode, details: str | None, timeout_s: float) -> str:
    """What a failed call says after "<backend>: <CODE>: ": the call, what the backend (or gRPC) said, and for a
    deadline the deadline it missed, so a hung backend is named with the call it never answered."""
    msg = f"{method}: {details or code.name}"
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        msg += f" (no answer within the {timeout_s:g} s deadline)"
    return msg


class GrpcBackendClient:
    def __init__(self, target: str, name: str | None = None, deadline_s: float = 60.0,
                 ingest_deadline_s: float = 600.0, max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
                 ingest_deadline_per_message_s: float = 3.0):
        self.target = target
        self.name = name or target
        self.deadline_s = deadline_s
        self.ingest_deadline_s = ingest_deadline_s
        self.ingest_deadline_per_message_s = ingest_deadline_per_message_s
        self._channel = aio_channel(target)
        self._stub = pb_grpc.MemoryBackendServiceStub(self._channel)
        self._bound = BoundedCalls(max_in_flight)

    async def _call(self, method: str, request: Any, deadline: float | None = None):
        fn = getattr(self._stub, method)
        timeout = deadline or self.deadline_s
        try:
            response = await self._bound.run(lambda: fn(request, timeout=timeout))
        except grpc.aio.AioRpcError as e:
            if e.code() == grpc.StatusCode.INVALID_ARGUMENT:
                detail = e.details() or ""
                field_name = detail.split(":", 1)[0] if ":" in detail else ""
                raise ValidationError(field_name, detail.split(":", 1)[-1].strip()) from e
            raise backend_error(self.name, e.code().name, call_message(method, e.code(), e.details(), timeout)) from e
        if response is None:
            # grpc.aio logs "Exception deserializing response!" and hands back None for an answer that is not a
            # protocol buffer of the response message: before, the caller's first attribute read raised
            # AttributeError, which no probe handler expects, and one backend's garbage ended the whole run
            raise backend_error(self.name, "INTERNAL", f"{method}: the answer is not a {method}Response message "
                                                       "(it could not be parsed)")
        return response

    async def describe(self, deadline: float | None = None) -> dict[str, Any]:
        r = await self._call("Describe", pb.DescribeRequest(), deadline)
        return {
            "name": r.name,
            "version": r.version,
            "config": struct_to_dict(r.config),
            "capabilities": [{"name": c.name, "detail": c.detail} for c in r.capabilities],
            "embedder": r.embedder,
            "embedding_dim": r.embedding_dim,
        }

    async def reset(self, namespace: str) -> int:
        return (await self._call("Reset", pb.ResetRequest(namespace=namespace))).items_removed

    def ingest_deadline(self, messages: int) -> float:
        """An Ingest's deadline: ingest_deadline_s, or ingest_deadline_per_message_s a message when that is longer
        (a backend may index a whole conversation in the call: BEAM's 1M conversations hold ~2,000 messages)."""
        return max(self.ingest_deadline_s, self.ingest_deadline_per_message_s * messages)

    async def ingest(self, namespace: str, batch: IngestBatch) -> dict[str, int]:
        r = await self._call("Ingest", batch_to_pb(namespace, batch), self.ingest_deadline(batch.message_count))
        return {
            "sessions_accepted": r.sessions_accepted,
            "messages_accepted": r.messages_accepted,
            "documents_accepted": r.documents_accepted,
        }

    async def settle(self, namespace: str, timeout_s: float = 60.0) -> SettleResult:
        r = await self._call("Settle", pb.SettleRequest(namespace=namespace, timeout_seconds=timeout_s),
                             timeout_s + 30.0)
        return SettleResult(r.settled, r.items_indexed, r.items_pending, dict(r.counts))

    async def prepare(self, namespace: str, timeout_s: float | None = None) -> PrepareResult:
        """Prepare (untimed setup before the first timed Retrieve); a backend that does not implement it
        (UNIMPLEMENTED: written before the RPC existed, or by someone else) has nothing to prepare."""
        t0 = time.perf_counter_ns()
        try:
            r = await self._call("Prepare", pb.PrepareRequest(namespace=namespace), timeout_s or self.ingest_deadline_s)
        except BackendError as e:
            if e.code != "UNIMPLEMENTED":
                raise
            return PrepareResult(client_duration_ns=time.perf_counter_ns() - t0, implemented=False)
        return PrepareResult(r.note, r.server_duration_ns, time.perf_counter_ns() - t0)

    async def retrieve(self, namespace: str, query: RetrieveQuery) -> tuple[RetrieveResult, int]:
        """Returns (result, client-observed latency in ns)."""
        req = query_to_pb(namespace, query)
        t0 = time.perf_counter_ns()
        r = await self._call("Retrieve", req)
        return result_from_pb(r), time.perf_counter_ns() - t0

    async def stats(self, namespace: str = "") -> dict[str, Any]:
        r = await self._call("Stats", pb.StatsRequest(namespace=namespace))
        return {
            "namespaces": [NamespaceStats(n.namespace, n.sessions, n.messages, n.documents, n.items)
                           for n in r.namespaces],
            "disk_bytes": r.disk_bytes,
            "rss_bytes": r.rss_bytes,
            "counters": dict(r.counters),
        }

    async def close(self) -> None:
        await self._channel.close()


class InProcessBackendClient:
    """Runs a backend class inside this process, through the same validation and locking as the server."""

    def __init__(self, backend: MemoryBackend | BackendHost):
        self.host = backend if isinstance(backend, BackendHost) else BackendHost(backend)
        self.name = self.host.name
        self._started = False

    @classmethod
    def from_spec(cls, name: str, config: dict[str, Any] | None = None,
                  context: BackendContext | None = None) -> InProcessBackendClient:
        from services.adapters.registry import get_spec

        spec = get_spec(name)
        cfg = {**spec.config, **(config or {})}
        return cls(spec.load_class()(cfg, context))

    async def _ensure(self) -> None:
        if not self._started:
            await self.host.start()
            self._started = True

    async def describe(self, deadline: float | None = None) -> dict[str, Any]:
        await self._ensure()  # in-process: no deadline to keep
        return await self.host.describe()

    async def reset(self, namespace: str) -> int:
        await self._ensure()
        return await self.host.reset(namespace)

    async def ingest(self, namespace: str, batch: IngestBatch) -> dict[str, int]:
        await self._ensure()
        return await self.host.ingest(namespace, batch)

    async def settle(self, namespace: str, timeout_s: float = 60.0) -> SettleResult:
        await self._ensure()
        return await self.host.settle(namespace, timeout_s)

    async def prepare(self, namespace: str, timeout_s: float | None = None) -> PrepareResult:
        await self._ensure()
        t0 = time.perf_counter_ns()
        r = await self.host.prepare(namespace)
        r.client_duration_ns = time.perf_counter_ns() - t0
        return r

    async def retrieve(self, namespace: str, query: RetrieveQuery) -> tuple[RetrieveResult, int]:
        await self._ensure()
        t0 = time.perf_counter_ns()
        r = await self.host.retrieve(namespace, query)
        return r, time.perf_counter_ns() - t0

    async def stats(self, namespace: str = "") -> dict[str, Any]:
        await self._ensure()
        return await self.host.stats(namespace)

    async def close(self) -> None:
        await self.host.close()
