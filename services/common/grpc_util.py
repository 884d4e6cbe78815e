"""gRPC plumbing shared by every server and client of the rig.

Servers: grpc.aio with the stock async health servicer (plus `List`, which grpcio-health-checking 1.85's
aio servicer leaves UNIMPLEMENTED), server reflection under both `grpc.reflection.v1` (what current grpcurl
and grpc clients ask first) and `grpc.reflection.v1alpha`, and a graceful stop
(`enter_graceful_shutdown()` on health, then `server.stop(grace)`). Clients: explicit deadlines on every call,
retries off (a rig must not hide faults), and a bound on calls in flight per channel.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable, Iterable

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2

CLIENT_OPTIONS = [
    ("grpc.enable_retries", 0),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.keepalive_time_ms", 30_000),
]
SERVER_OPTIONS = [
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.so_reuseport", 0),
    # Accept the clients' keepalive pings (every 30 s, CLIENT_OPTIONS) during a long call: grpc's defaults (one
    # ping per 5 min, 2 strikes) answered a ~6 min mem0-oss Ingest with GOAWAY "too_many_pings" (UNAVAILABLE).
    ("grpc.http2.min_recv_ping_interval_without_data_ms", 10_000),
    ("grpc.http2.max_ping_strikes", 0),
]
DEFAULT_MAX_IN_FLIGHT = 64
REFLECTION_V1 = "grpc.reflection.v1.ServerReflection"


def _register_reflection_v1_descriptor() -> None:
    """Put grpc/reflection/v1/reflection.proto into the default descriptor pool, so reflection can describe
    its own v1 service. grpcio-reflection 1.85 ships only v1alpha; v1 is the same file under another package
    (grpc-proto, reflection/v1/reflection.proto: "identical to v1alpha", same messages and field numbers), so
    it is derived from the v1alpha descriptor by renaming the package and the type references."""
    pool = descriptor_pool.Default()
    name = "grpc/reflection/v1/reflection.proto"
    try:
        pool.FindFileByName(name)
        return
    except KeyError:
        pass
    fdp = descriptor_pb2.FileDescriptorProto()
    reflection_pb2.DESCRIPTOR.CopyToProto(fdp)
    old, new = ".grpc.reflection.v1alpha.", ".grpc.reflection.v1."
    fdp.name, fdp.package = name, "grpc.reflection.v1"
    for msg in fdp.message_type:
        for f in msg.field:
            if f.HasField("type_name"):  # only message/enum fields carry one; setting "" would mark it set
                f.type_name = f.type_name.replace(old, new)
    for svc in fdp.service:
        for m in svc.method:
            m.input_type, m.output_type = m.input_type.replace(old, new), m.output_type.replace(old, new)
    pool.AddSerializedFile(fdp.SerializeToString())


def _add_reflection(server: grpc.aio.Server, service_names: list[str]) -> None:
    _register_reflection_v1_descriptor()
    names = [*service_names, REFLECTION_V1, reflection.SERVICE_NAME]
    reflection.enable_server_reflection(names, server)
    # Same servicer for v1: the wire format is identical, so v1alpha's message classes (de)serialize v1 bytes.
    servicer = reflection.aio.ReflectionServicer(names)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(REFLECTION_V1, {
        "ServerReflectionInfo": grpc.stream_stream_rpc_method_handler(
            servicer.ServerReflectionInfo,
            request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
            response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
        ),
    }),))


class ListingHealthServicer(health.aio.HealthServicer):
    """The stock aio health servicer plus `List` (grpc/grpc-proto health/v1/health.proto): a snapshot of every
    registered service's status, kept from the public `set` calls and the graceful shutdown."""

    def __init__(self) -> None:
        super().__init__()
        self._listed: dict[str, int] = {"": health_pb2.HealthCheckResponse.SERVING}
        self._closing = False

    async def set(self, service: str, status) -> None:
        if not self._closing:
            self._listed[service] = status
        await super().set(service, status)

    async def enter_graceful_shutdown(self) -> None:
        self._closing = True
        for service in self._listed:
            self._listed[service] = health_pb2.HealthCheckResponse.NOT_SERVING
        await super().enter_graceful_shutdown()

    async def List(self, request, context):
        return health_pb2.HealthListResponse(statuses={
            name: health_pb2.HealthCheckResponse(status=status) for name, status in self._listed.items()})


async def start_server(
    register: Callable[[grpc.aio.Server], None],
    service_names: Iterable[str],
    host: str = "127.0.0.1",
    port: int = 0,
) -> tuple[grpc.aio.Server, health.aio.HealthServicer, int]:
    """Start a grpc.aio server with health + reflection; returns (server, health servicer, bound port)."""
    server = grpc.aio.server(options=SERVER_OPTIONS)
    register(server)
    health_servicer = ListingHealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names = list(service_names)
    _add_reflection(server, [*names, health.SERVICE_NAME])
    bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise OSError(f"could not bind gRPC server to {host}:{port}")
    await server.start()
    for n in ["", *names]:
        await health_servicer.set(n, health_pb2.HealthCheckResponse.SERVING)
    return server, health_servicer, bound


async def graceful_stop(server: grpc.aio.Server, health_servicer: health.aio.HealthServicer, grace: float = 5.0) -> None:
    await health_servicer.enter_graceful_shutdown()
    await server.stop(grace)


def install_stop_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # pragma: no cover - non-main thread
            pass


def aio_channel(target: str) -> grpc.aio.Channel:
    return grpc.aio.insecure_channel(target, options=CLIENT_OPTIONS)


async def wait_healthy(target: str, timeout: float = 30.0, service: str = "") -> None:
    """Poll the standard health service until SERVING or raise TimeoutError."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: Exception | None = None
    async with aio_channel(target) as ch:
        stub = health_pb2_grpc.HealthStub(ch)
        while loop.time() < deadline:
            try:
                r = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=2.0)
                if r.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.aio.AioRpcError as e:
                last = e
            await asyncio.sleep(0.1)
    raise TimeoutError(f"{target} not healthy after {timeout}s ({last})")


class BoundedCalls:
    """Limits calls in flight on one channel (a channel with >1000 in flight starts cancelling calls)."""

    def __init__(self, limit: int = DEFAULT_MAX_IN_FLIGHT):
        self._sem = asyncio.Semaphore(limit)
        self.limit = limit

    async def run(self, coro_fn: Callable[[], Awaitable]):
        async with self._sem:
            return await coro_fn()
