"""Serve a `MemoryBackend` as a `MemoryBackendService` gRPC process, with /metrics on a side port.

    python -m services.adapters.<name> [--host 127.0.0.1] [--port 0] [--metrics-port 0]
                                       [--config '{"key": value}'] [--embedder minilm|wordllama|hash]

Prints one line `READY grpc=<port> metrics=<port> pid=<pid>` on stdout when serving, so a parent process
can wait for it. SIGTERM/SIGINT stop it gracefully.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import grpc

from memrig.v1 import memory_backend_pb2 as pb
from memrig.v1 import memory_backend_pb2_grpc as pb_grpc
from services.adapters.base import BackendContext, MemoryBackend
from services.adapters.host import BackendHost
from services.common import process
from services.common.grpc_status import status_for
from services.common.grpc_util import graceful_stop, install_stop_signals, start_server
from services.common.metrics_http import start_metrics_server
from services.common.types import (
    batch_from_pb,
    dict_to_struct,
    query_from_pb,
    result_to_pb,
)

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["MemoryBackendService"].full_name


class MemoryBackendServicer(pb_grpc.MemoryBackendServiceServicer):
    """Every RPC goes through `_serve`: bad input is INVALID_ARGUMENT naming the field, a missing dependency
    UNAVAILABLE / FAILED_PRECONDITION naming it (services/common/grpc_status.py), never UNKNOWN."""

    def __init__(self, host: BackendHost):
        self.host = host

    async def _serve(self, context: grpc.aio.ServicerContext, call: Callable[[], Awaitable[Any]]) -> Any:
        try:
            return await call()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # mapped to a status, never leaked as UNKNOWN
            code, message = status_for(e, self.host.name)
            await context.abort(code, message)

    async def Describe(self, request, context):
        async def call():
            d = await self.host.describe()
            return pb.DescribeResponse(
                name=d["name"],
                version=d["version"],
                config=dict_to_struct(d["config"]),
                capabilities=[pb.Capability(name=c["name"], detail=c["detail"]) for c in d["capabilities"]],
                embedder=d["embedder"],
                embedding_dim=d["embedding_dim"],
            )
        return await self._serve(context, call)

    async def Reset(self, request, context):
        async def call():
            return pb.ResetResponse(items_removed=await self.host.reset(request.namespace))
        return await self._serve(context, call)

    async def Ingest(self, request, context):
        async def call():
            counts = await self.host.ingest(request.namespace, batch_from_pb(request))
            return pb.IngestResponse(batch_id=request.batch_id, **counts)
        return await self._serve(context, call)

    async def Settle(self, request, context):
        async def call():
            r = await self.host.settle(request.namespace, request.timeout_seconds)
            return pb.SettleResponse(
                settled=r.settled, items_indexed=r.items_indexed, items_pending=r.items_pending, counts=r.counts
            )
        return await self._serve(context, call)

    async def Prepare(self, request, context):
        async def call():
            r = await self.host.prepare(request.namespace)
            return pb.PrepareResponse(note=r.note, server_duration_ns=r.server_duration_ns)
        return await self._serve(context, call)

    async def Retrieve(self, request, context):
        async def call():
            return result_to_pb(await self.host.retrieve(request.namespace, query_from_pb(request)))
        return await self._serve(context, call)

    async def Stats(self, request, context):
        async def call():
            s = await self.host.stats(request.namespace)
            return pb.StatsResponse(
                namespaces=[
                    pb.NamespaceStats(namespace=n.namespace, sessions=n.sessions, messages=n.messages,
                                      documents=n.documents, items=n.items)
                    for n in s["namespaces"]
                ],
                disk_bytes=s["disk_bytes"],
                rss_bytes=s["rss_bytes"],
                counters=s["counters"],
            )
        return await self._serve(context, call)


async def serve_backend(
    backend: MemoryBackend,
    host: str = "127.0.0.1",
    port: int = 0,
    metrics_port: int | None = 0,
    ready: asyncio.Event | None = None,
    stop: asyncio.Event | None = None,
    announce: bool = True,
) -> None:
    bh = BackendHost(backend)
    await bh.start()
    server, health_servicer, bound = await start_server(
        lambda s: pb_grpc.add_MemoryBackendServiceServicer_to_server(MemoryBackendServicer(bh), s),
        [SERVICE_NAME],
        host,
        port,
    )
    metrics_runner, mport = (None, 0)
    if metrics_port is not None:
        metrics_runner, mport = await start_metrics_server(host, metrics_port)
    stop = stop or asyncio.Event()
    install_stop_signals(stop)
    if announce:
        process.announce_ready(grpc=bound, metrics=mport)
    if ready is not None:
        ready.port = bound  # type: ignore[attr-defined]
        ready.set()
    try:
        await stop.wait()
    finally:
        await graceful_stop(server, health_servicer, grace=3.0)
        if metrics_runner is not None:
            await metrics_runner.cleanup()
        await bh.close()


def adapter_parser(backend_cls: type[MemoryBackend]) -> argparse.ArgumentParser:
    """The command line every adapter process takes (also parsed by services/k8s_check against the manifests)."""
    ap = argparse.ArgumentParser(prog=f"python -m services.adapters.{backend_cls.__module__.split('.')[-2]}",
                                 description=backend_cls.description or backend_cls.__doc__)
    ap.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    ap.add_argument("--port", type=int, default=0, help="gRPC port (0 = pick a free one)")
    ap.add_argument("--metrics-port", type=int, default=0, help="/metrics port (0 = pick; -1 = off)")
    ap.add_argument("--config", default="{}", help="JSON object of config overrides")
    ap.add_argument("--embedder", default=None, help="embedder name (minilm, wordllama, hash)")
    return ap


def adapter_main(backend_cls: type[MemoryBackend], argv: Sequence[str] | None = None) -> None:
    args = adapter_parser(backend_cls).parse_args(argv)
    try:
        cfg = json.loads(args.config)
        if not isinstance(cfg, dict):
            raise ValueError("--config must be a JSON object")
        backend = backend_cls(cfg, BackendContext(embedder_name=args.embedder))
    except (ValueError, json.JSONDecodeError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    mp = None if args.metrics_port < 0 else args.metrics_port
    asyncio.run(serve_backend(backend, args.host, args.port, mp))
