"""CLI: `python -m services.fault_proxy --upstream URL --port P ...`; prints `READY http=<port> pid=<pid>`
(plus `admin=<port>` with --admin-port) once serving. SIGTERM/SIGINT stop it gracefully."""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import os
import signal
import sys

from aiohttp import web

from services.common import event_loop, process
from services.fault_proxy.admin import make_admin_app
from services.fault_proxy.app import make_proxy_app
from services.fault_proxy.engine import FaultEngine
from services.fault_proxy.shards import parse_shard_map
from services.fault_proxy.state import STATE, ProxyConfig
from services.fault_proxy.store import LocalStore, RedisStore


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m services.fault_proxy", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--upstream", default=os.environ.get("MEMRIG_PROXY_UPSTREAM", ""),
                   help="base URL requests are forwarded to (e.g. http://127.0.0.1:8791); "
                        "env MEMRIG_PROXY_UPSTREAM")
    p.add_argument("--shard-map", default=os.environ.get("MEMRIG_PROXY_SHARD_MAP", ""),
                   help="route each tenant (x-api-key) to the upstream that owns it: comma-separated NAME=URL "
                        "(or URL) entries, rendezvous hashing on the name (services/fault_proxy/shards.py); "
                        "replaces --upstream; env MEMRIG_PROXY_SHARD_MAP")
    p.add_argument("--host", default="127.0.0.1", help="proxy bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8792, help="proxy port (0 = ephemeral)")
    p.add_argument("--seed", type=int, default=None,
                   help="run seed for every random draw (same seed + same request order = same decisions); "
                        "random when omitted (shown by GET /__admin/status)")
    p.add_argument("--allow-header-faults", action="store_true",
                   help="honour x-fault-delay-ms / x-fault-abort / x-fault-reset / x-fault-timeout-after-ms "
                        "request headers (off by default)")
    p.add_argument("--admin-token", default=os.environ.get("MEMRIG_PROXY_ADMIN_TOKEN", ""),
                   help="bearer token the admin API requires (env MEMRIG_PROXY_ADMIN_TOKEN); mandatory when "
                        "the admin API listens on a non-loopback address")
    p.add_argument("--admin-token-file", default=os.environ.get("MEMRIG_PROXY_ADMIN_TOKEN_FILE", ""),
                   help="read the admin token from this file (env MEMRIG_PROXY_ADMIN_TOKEN_FILE): unlike "
                        "--admin-token it does not show in `ps`")
    p.add_argument("--admin-port", type=int, default=None,
                   help="serve the admin API on this separate port (0 = ephemeral) instead of under /__admin "
                        "on the proxy port")
    p.add_argument("--admin-host", default="127.0.0.1", help="bind address of --admin-port (default 127.0.0.1)")
    p.add_argument("--redis-url", default=os.environ.get("REDIS_URL", ""),
                   help="share fault state with other replicas through Redis (env REDIS_URL); local when empty")
    p.add_argument("--name", default="default", help="proxy name (namespaces the Redis keys)")
    p.add_argument("--log-size", type=int, default=10_000, help="decision-log entries kept (ring buffer)")
    p.add_argument("--upstream-timeout-s", type=float, default=300.0, help="overall upstream request timeout")
    a = p.parse_args(argv)
    a.shards = ()
    if a.shard_map:
        try:
            a.shards = parse_shard_map(a.shard_map)
        except ValueError as e:
            p.error(f"--shard-map: {e}")
        if a.upstream:
            p.error("--upstream and --shard-map exclude each other (a sharded proxy's upstreams are its shards)")
    elif not a.upstream:
        p.error("--upstream is required (or set MEMRIG_PROXY_UPSTREAM), or --shard-map")
    if a.admin_token_file:
        try:
            with open(a.admin_token_file, encoding="utf-8") as f:
                a.admin_token = f.read().strip()
        except (OSError, UnicodeDecodeError) as e:
            p.error(f"--admin-token-file {a.admin_token_file}: cannot be read ({e})")
        if not a.admin_token:
            p.error(f"--admin-token-file {a.admin_token_file} is empty")
    admin_host = a.admin_host if a.admin_port is not None else a.host
    if not _is_loopback(admin_host) and not a.admin_token:
        p.error(f"the admin API would listen on {admin_host}: set --admin-token or MEMRIG_PROXY_ADMIN_TOKEN")
    return a


async def serve(a: argparse.Namespace) -> None:
    store = RedisStore(a.redis_url, a.name) if a.redis_url else LocalStore()
    config = ProxyConfig(upstream=a.upstream.rstrip("/"), allow_header_faults=a.allow_header_faults,
                         admin_token=a.admin_token, admin_on_proxy_port=a.admin_port is None,
                         upstream_timeout_s=a.upstream_timeout_s,
                         store_kind="redis" if a.redis_url else "local", shards=a.shards)
    app = make_proxy_app(config, FaultEngine(store, seed=a.seed, log_size=a.log_size))
    # handler_cancellation: a client that hangs up on a blackholed request frees it (nothing is forwarded
    # for a client that is gone).
    runners = []
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
    await runner.setup()
    runners.append(runner)
    site = web.TCPSite(runner, a.host, a.port)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    ports = {"http": port}
    if a.admin_port is not None:
        admin_runner = web.AppRunner(make_admin_app(app), access_log=None)
        await admin_runner.setup()
        runners.insert(0, admin_runner)
        admin_site = web.TCPSite(admin_runner, a.admin_host, a.admin_port)
        await admin_site.start()
        ports["admin"] = admin_site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    process.announce_ready(**ports)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    # Release held requests first (they are forwarded, not dropped) so shutdown does not wait on them.
    app[STATE].engine.release_all()
    for r in runners:
        await r.cleanup()


def main(argv: list[str] | None = None) -> None:
    a = parse_args(argv)
    try:
        event_loop.run(serve(a))
    except KeyboardInterrupt:  # pragma: no cover
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
