"""Run cortex-mock.

    python -m services.cortex_mock --port P [--host 127.0.0.1] [--data-dir DIR] [--api-keys k1,k2]
        [--settle-delay-ms N] [--workers N] [--embedder minilm|wordllama|hash] [--extractor deterministic|llm]
        [--latency-fast-ms N] [--latency-full-ms N] [--latency-sigma S] [--seed N] [--job-delay-ms N]
        [--redis-url URL] [--lease-ms N] [--max-attempts N] [--token-budget N]

Prints `READY http=<port> pid=<pid>` once serving. Keys come from --api-keys or MEMRIG_CORTEX_API_KEYS (none =
dev mode: any non-empty key is its own tenant). With REDIS_URL (or --redis-url) jobs go through Redis and
--workers N worker processes are spawned (stopped by PID with the server); otherwise --workers is the number
of in-process asyncio job workers. SIGTERM/SIGINT stop it gracefully.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import subprocess
import sys
import time

from aiohttp import web

from services.cortex_mock.app import CONFIG_KEY, ENGINE_KEY, WORKER_PIDS_KEY, make_app
from services.cortex_mock.config import MockConfig, _keys_from

log = logging.getLogger("cortex_mock")


def build_parser(prog: str = "python -m services.cortex_mock", worker: bool = False) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0] if not worker else None)
    if not worker:
        ap.add_argument("--host", default="127.0.0.1", help="bind address (loopback by default)")
        ap.add_argument("--port", type=int, default=0, help="HTTP port (0 = pick a free one)")
        ap.add_argument("--api-keys", default=None, help="comma-separated allowed keys (else MEMRIG_CORTEX_API_KEYS)")
        ap.add_argument("--workers", type=int, default=2,
                        help="in-process job workers, or worker processes to spawn when Redis is used (0 = none)")
        ap.add_argument("--latency-fast-ms", type=float, default=0.0, help="added delay on fast retrieve/recall")
        ap.add_argument("--latency-full-ms", type=float, default=0.0, help="added delay on full retrieve")
        ap.add_argument("--latency-sigma", type=float, default=0.0, help="lognormal jitter sigma (median = base)")
        ap.add_argument("--seed", type=int, default=0, help="seed of the latency jitter RNG")
        ap.add_argument("--token-budget", type=int, default=2000, help="retrieve packing budget in tokens")
    ap.add_argument("--data-dir", default=None, help="tenant databases live here (default: a new temp dir)")
    ap.add_argument("--settle-delay-ms", type=float, default=0.0,
                    help="MENTIONS edges become visible this long after an ingest commits")
    ap.add_argument("--embedder", default=None, help="minilm | wordllama | hash (default MEMRIG_EMBEDDER or minilm)")
    ap.add_argument("--extractor", default="deterministic", choices=("deterministic", "llm"))
    ap.add_argument("--job-delay-ms", type=float, default=0.0, help="sleep this long at the start of every job")
    ap.add_argument("--redis-url", default=None, help="Redis job queue (default: REDIS_URL; none = in-process)")
    ap.add_argument("--redis-prefix", default="cortexmock", help="key prefix in Redis")
    ap.add_argument("--lease-ms", type=float, default=10_000.0, help="worker heartbeat lease")
    ap.add_argument("--max-attempts", type=int, default=3, help="attempts before a job of dead workers fails")
    return ap


def config_from_args(a: argparse.Namespace) -> MockConfig:
    cfg = MockConfig.from_env()
    for k in ("data_dir", "settle_delay_ms", "embedder", "extractor", "job_delay_ms", "redis_prefix", "lease_ms",
              "max_attempts", "host", "port", "workers", "latency_fast_ms", "latency_full_ms", "latency_sigma",
              "seed", "token_budget"):
        if hasattr(a, k):
            setattr(cfg, k, getattr(a, k))
    if a.redis_url:
        cfg.redis_url = a.redis_url
    if getattr(a, "api_keys", None) is not None:
        cfg.api_keys = _keys_from(a.api_keys)
    return cfg


def worker_argv(cfg: MockConfig, data_dir: str) -> list[str]:
    argv = [sys.executable, "-m", "services.cortex_mock.worker", "--data-dir", data_dir,
            "--redis-url", cfg.redis_url or "", "--redis-prefix", cfg.redis_prefix,
            "--settle-delay-ms", str(cfg.settle_delay_ms), "--extractor", cfg.extractor,
            "--job-delay-ms", str(cfg.job_delay_ms), "--lease-ms", str(cfg.lease_ms),
            "--max-attempts", str(cfg.max_attempts)]
    if cfg.embedder:
        argv += ["--embedder", cfg.embedder]
    return argv


def spawn_workers(cfg: MockConfig, data_dir: str, n: int, timeout_s: float = 120.0) -> list[subprocess.Popen]:
    procs = [subprocess.Popen(worker_argv(cfg, data_dir), stdout=subprocess.PIPE, text=True) for _ in range(n)]
    deadline = time.time() + timeout_s
    for p in procs:
        line = ""
        while time.time() < deadline:
            line = p.stdout.readline() if p.stdout else ""
            if line.startswith("READY") or not line and p.poll() is not None:
                break
        if not line.startswith("READY"):
            stop_workers(procs)
            raise RuntimeError(f"cortex-mock worker pid={p.pid} did not become ready")
    return procs


def stop_workers(procs: list[subprocess.Popen], grace_s: float = 10.0) -> None:
    for p in procs:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGTERM)
    deadline = time.time() + grace_s
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            os.kill(p.pid, signal.SIGKILL)
            p.wait()


async def serve(cfg: MockConfig) -> None:
    app = make_app(cfg)
    engine = app[ENGINE_KEY]
    where = f"{engine.data_dir} ({'temporary: pass --data-dir to keep it' if engine.data_dir_is_temp else 'persistent'})"
    print(f"cortex-mock: data dir {where}; jobs via {'redis' if cfg.redis_url else 'in-process queue'}; "
          f"auth {app[CONFIG_KEY].describe()['api_keys']}", file=sys.stderr, flush=True)
    procs: list[subprocess.Popen] = []
    if cfg.redis_url and cfg.workers > 0:
        procs = await asyncio.to_thread(spawn_workers, cfg, str(engine.data_dir), cfg.workers)
        app[WORKER_PIDS_KEY].extend(p.pid for p in procs)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    try:
        await runner.setup()
        site = web.TCPSite(runner, cfg.host, cfg.port)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        print(f"READY http={port} pid={os.getpid()}", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    finally:
        await runner.cleanup()
        if procs:
            await asyncio.to_thread(stop_workers, procs)


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    cfg = config_from_args(build_parser().parse_args(argv))
    asyncio.run(serve(cfg))


if __name__ == "__main__":
    main()
