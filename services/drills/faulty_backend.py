"""A memory backend that misbehaves on one call, for the rig-faults drill (services/drills/rig_faults.py).

    python -m services.drills.faulty_backend --fault hang|garbage [--call Retrieve] [--port 0]

It is the full-context backend (services/adapters/full_context) served over gRPC as every adapter is, except that
`--call` (default Retrieve) either hangs (accepts the call and never answers) or answers garbage (bytes that are
not a response message). Prints `READY grpc=<port> pid=<pid>` when serving; SIGTERM stops it. Binds 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import signal

import grpc

from memrig.v1 import memory_backend_pb2 as pb
from services.adapters.base import BackendContext
from services.adapters.host import BackendHost
from services.adapters.server import SERVICE_NAME, MemoryBackendServicer
from services.common.grpc_util import graceful_stop, start_server
from services.common.process import announce_ready

CALLS = ("Describe", "Reset", "Ingest", "Settle", "Prepare", "Retrieve", "Stats")
# Not a protocol buffer: field 31's tag with wire type 7, which does not exist, then bytes.
GARBAGE = b"\xff\xff\xff\xff\x0fgarbage, not a response"


def handlers(servicer: MemoryBackendServicer, fault: str, call: str) -> grpc.GenericRpcHandler:
    """Every RPC of the service served by `servicer` as usual, except `call`: a hang, or raw bytes sent as the
    response."""
    hung: list[asyncio.Future] = []

    async def hang(request: bytes, context) -> bytes:
        fut = asyncio.get_running_loop().create_future()
        hung.append(fut)  # kept, so it is never collected; the client gives up at its deadline
        return await fut

    async def garbage(request: bytes, context) -> bytes:
        return GARBAGE

    method = pb.DESCRIPTOR.services_by_name["MemoryBackendService"].methods_by_name
    table = {}
    for name in CALLS:
        if name == call:
            table[name] = grpc.unary_unary_rpc_method_handler(hang if fault == "hang" else garbage)
        else:
            m = method[name]
            table[name] = grpc.unary_unary_rpc_method_handler(
                getattr(servicer, name), request_deserializer=_message(m.input_type).FromString,
                response_serializer=_message(m.output_type).SerializeToString)
    return grpc.method_handlers_generic_handler(SERVICE_NAME, table)


def _message(descriptor) -> type:
    return getattr(pb, descriptor.name)


async def serve(fault: str, call: str, port: int, embedder: str | None) -> None:
    from services.adapters.full_context.backend import FullContextBackend

    host = BackendHost(FullContextBackend({}, BackendContext(embedder_name=embedder)))
    await host.start()

    def register(server: grpc.aio.Server) -> None:
        server.add_generic_rpc_handlers((handlers(MemoryBackendServicer(host), fault, call),))

    server, health, bound = await start_server(register, [SERVICE_NAME], "127.0.0.1", port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    announce_ready(grpc=bound)
    try:
        await stop.wait()
    finally:
        await graceful_stop(server, health, 0.5)
        await host.close()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m services.drills.faulty_backend", description=__doc__.split("\n")[0])
    ap.add_argument("--fault", required=True, choices=("hang", "garbage"))
    ap.add_argument("--call", default="Retrieve", choices=CALLS)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--embedder", default=None)
    args = ap.parse_args(argv)
    asyncio.run(serve(args.fault, args.call, args.port, args.embedder))


if __name__ == "__main__":
    main()
