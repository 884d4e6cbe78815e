"""gRPC plumbing shared by every server and client of the rig.

Servers: grpc.aio with the stock async health servicer, reflection, and a graceful stop
(`enter_graceful_shutdown()` on health, then `server.stop(grace)`). Clients: explicit deadlines on every call,
retries off (a rig must not hide faults), and a bound on calls in flight per channel.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable, Iterable

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

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


async def start_server(
    register: Callable[[grpc.aio.Server], None],
    service_names: Iterable[str],
    host: str = "127.0.0.1",
    port: int = 0,
) -> tuple[grpc.aio.Server, health.aio.HealthServicer, int]:
    """Start a grpc.aio server with health + reflection; returns (server, health servicer, bound port)."""
    server = grpc.aio.server(options=SERVER_OPTIONS)
    register(server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names = list(service_names)
    reflection.enable_server_reflection([*names, health.SERVICE_NAME, reflection.SERVICE_NAME], server)
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
