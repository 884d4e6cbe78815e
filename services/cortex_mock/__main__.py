"""Run cortex-mock.

    python -m services.cortex_mock --port P [--host 127.0.0.1] [--data-dir DIR] [--api-keys k1,k2]
        [--settle-delay-ms N] [--workers N] [--embedder minilm|wordllama|hash] [--extractor deterministic|llm]
        [--latency-fast-ms N] [--latency-full-ms N] [--latency-sigma S] [--seed N] [--job-delay-ms N]
        [--redis-url URL] [--lease-ms N] [--max-attempts N] [--token-budget N]

Prints `READY http=<port> pid=<pid>` once serving. Keys come from --api-keys-file, --api-keys,
MEMRIG_CORTEX_API_KEYS_FILE or MEMRIG_CORTEX_API_KEYS (none = dev mode: any non-empty key is its own tenant;
a non-loopback --host in dev mode prints a loud warning). With REDIS_URL (or --redis-url) jobs go through Redis and
--workers N worker processes are spawned and supervised (respawned with backoff, stopped by PID with the
server); otherwise --workers is the number
of in-process asyncio job workers. SIGTERM/SIGINT stop it gracefully.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shutil
import signal
import sys

from aiohttp import web

from services.common import event_loop, process
from services.cortex_mock.app import CONFIG_KEY, ENGINE_KEY, WORKERS_KEY, make_app
from services.cortex_mock.config import MockConfig, _keys_from, read_keys_file
from services.cortex_mock.supervisor import WorkerSupervisor

log = logging.getLogger("cortex_mock")


def build_parser(prog: str = "python -m services.cortex_mock", worker: bool = False) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0] if not worker else None)
    if not worker:
        ap.add_argument("--host", default="127.0.0.1", help="bind address (loopback by default)")
        ap.add_argument("--port", type=int, default=0, help="HTTP port (0 = pick a free one)")
        ap.add_argument("--api-keys", default=None,
                        help="comma-separated allowed keys (visible in `ps`: prefer --api-keys-file or "
                             "MEMRIG_CORTEX_API_KEYS)")
        ap.add_argument("--api-keys-file", default=None,
                        help="file with the allowed keys, one per line or comma-separated (else "
                             "MEMRIG_CORTEX_API_KEYS_FILE, else MEMRIG_CORTEX_API_KEYS)")
        ap.add_argument("--reuse-port", action="store_true",
                        help="SO_REUSEPORT: several server processes share the port (and the data dir)")
        ap.add_argument("--processes", type=int, default=1,
                        help="server processes on the port (SO_REUSEPORT), sharing the data dir and the job table")
        ap.add_argument("--shared-jobs", action="store_true", help=argparse.SUPPRESS)  # set for --processes children
        ap.add_argument("--max-open-tenants", type=int, default=64, help="tenants kept open (LRU beyond)")
        ap.add_argument("--tenant-idle-s", type=float, default=600.0, help="close a tenant idle this long")
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
    ap.add_argument("--no-shared-arrays", dest="shared_arrays", action="store_false", default=None,
                    help="keep each process's snapshot embeddings private (default with --processes N > 1: "
                         "file-mapped, shared by the processes on the data dir)")
    return ap


def config_from_args(a: argparse.Namespace) -> MockConfig:
    cfg = MockConfig.from_env()
    for k in ("data_dir", "settle_delay_ms", "embedder", "extractor", "job_delay_ms", "redis_prefix", "lease_ms",
              "max_attempts", "host", "port", "workers", "latency_fast_ms", "latency_full_ms", "latency_sigma",
              "seed", "token_budget", "reuse_port", "max_open_tenants", "tenant_idle_s", "processes",
              "shared_jobs", "shared_arrays"):
        if hasattr(a, k):
            setattr(cfg, k, getattr(a, k))
    if a.redis_url:
        cfg.redis_url = a.redis_url
    if cfg.processes > 1:
        cfg.shared_jobs = True
    if getattr(a, "api_keys_file", None):
        cfg.api_keys = read_keys_file(a.api_keys_file)
    elif getattr(a, "api_keys", None) is not None:
        cfg.api_keys = _keys_from(a.api_keys)
    return cfg


def worker_argv(cfg: MockConfig, data_dir: str) -> list[str]:
    argv = [sys.executable, "-m", "services.cortex_mock.worker", "--data-dir", data_dir,
            "--redis-url", cfg.redis_url or "", "--redis-prefix", cfg.redis_prefix,
            "--settle-delay-ms", str(cfg.settle_delay_ms), "--extractor", cfg.extractor,
            "--job-delay-ms", str(cfg.job_delay_ms), "--lease-ms", str(cfg.lease_ms),
            "--max-attempts", str(cfg.max_attempts), "--parent-pid", str(os.getpid())]
    if cfg.embedder:
        argv += ["--embedder", cfg.embedder]
    return argv


def sibling_argv(cfg: MockConfig, data_dir: str, port: int) -> list[str]:
    """A further server process on the same port and data dir (keys travel in the environment, not argv;
    Redis workers are spawned by the first process only)."""
    argv = [sys.executable, "-m", "services.cortex_mock", "--host", cfg.host, "--port", str(port), "--reuse-port",
            "--processes", "1", "--shared-jobs", "--data-dir", data_dir,
            "--workers", "0" if cfg.redis_url else str(cfg.workers),
            "--settle-delay-ms", str(cfg.settle_delay_ms), "--extractor", cfg.extractor,
            "--job-delay-ms", str(cfg.job_delay_ms), "--latency-fast-ms", str(cfg.latency_fast_ms),
            "--latency-full-ms", str(cfg.latency_full_ms), "--latency-sigma", str(cfg.latency_sigma),
            "--seed", str(cfg.seed), "--token-budget", str(cfg.token_budget),
            "--max-open-tenants", str(cfg.max_open_tenants), "--tenant-idle-s", str(cfg.tenant_idle_s),
            "--lease-ms", str(cfg.lease_ms), "--max-attempts", str(cfg.max_attempts),
            "--redis-prefix", cfg.redis_prefix]
    if cfg.redis_url:
        argv += ["--redis-url", cfg.redis_url]
    if cfg.embedder:
        argv += ["--embedder", cfg.embedder]
    if cfg.shared_arrays is False:
        argv.append("--no-shared-arrays")
    return argv


def exposure_warning(host: str, api_keys: list[str]) -> str | None:
    """The loud warning for a server reachable beyond this machine with dev-mode auth (any key accepted)."""
    if host in ("127.0.0.1", "localhost", "::1") or api_keys:
        return None
    return (f"WARNING: cortex-mock listens on {host} in dev mode: ANY non-empty x-api-key is accepted and "
            "every key gets a tenant. Anyone who can reach this port can read and write memories. Configure "
            "keys (MEMRIG_CORTEX_API_KEYS or --api-keys-file) or bind 127.0.0.1.")


async def serve(cfg: MockConfig) -> None:
    app = make_app(cfg)
    engine = app[ENGINE_KEY]
    where = f"{engine.data_dir} ({'temporary: pass --data-dir to keep it' if engine.data_dir_is_temp else 'persistent'})"
    print(f"cortex-mock: data dir {where}; jobs via {'redis' if cfg.redis_url else 'in-process queue'}; "
          f"auth {app[CONFIG_KEY].describe()['api_keys']}", file=sys.stderr, flush=True)
    if (warning := exposure_warning(cfg.host, cfg.api_keys)) is not None:
        log.warning("%s", warning)
        print(warning, file=sys.stderr, flush=True)
    sup: WorkerSupervisor | None = None
    siblings: WorkerSupervisor | None = None
    tasks: list[asyncio.Task] = []
    if cfg.redis_url and cfg.workers > 0:
        sup = WorkerSupervisor(lambda: worker_argv(cfg, str(engine.data_dir)), cfg.workers)
        await asyncio.to_thread(sup.start)
        app[WORKERS_KEY] = sup
        tasks.append(asyncio.create_task(sup.watch(), name="cortex-worker-supervisor"))
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    try:
        await runner.setup()
        site = web.TCPSite(runner, cfg.host, cfg.port, reuse_port=(cfg.reuse_port or cfg.processes > 1) or None)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        if cfg.processes > 1:
            # The kernel spreads connections over every socket bound with SO_REUSEPORT; the siblings are
            # supervised like Redis workers (respawned if they die) and stopped by PID with this process.
            env = dict(os.environ, MEMRIG_CORTEX_API_KEYS=",".join(cfg.api_keys))
            env.pop("MEMRIG_CORTEX_API_KEYS_FILE", None)
            siblings = WorkerSupervisor(lambda: sibling_argv(cfg, str(engine.data_dir), port), cfg.processes - 1,
                                        env=env)
            await asyncio.to_thread(siblings.start)
            tasks.append(asyncio.create_task(siblings.watch(), name="cortex-sibling-supervisor"))
        if siblings is not None:
            print(f"cortex-mock: {cfg.processes} processes on port {port}; siblings {siblings.pids()}",
                  file=sys.stderr, flush=True)
        # before READY: a SIGTERM right after it would otherwise end the process without this block's cleanup
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        # `key=<digits>` pairs only: the READY pattern (services/common/process.py)
        process.announce_ready(http=port, **({"processes": cfg.processes} if siblings else {}))
        if cfg.shared_jobs and cfg.processes == 1:  # a sibling: stop with the first process, even if SIGKILLed
            tasks.append(asyncio.create_task(_stop_when_orphaned(os.getppid(), stop)))
        await stop.wait()
    finally:
        for x in (sup, siblings):
            if x is not None:
                x._stopping = True
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if siblings is not None:
            await asyncio.to_thread(siblings.stop)
        await runner.cleanup()
        if sup is not None:
            await asyncio.to_thread(sup.stop)
        if engine.data_dir_is_temp:  # every process that used it has stopped: the temporary dir goes with them
            shutil.rmtree(engine.data_dir, ignore_errors=True)  # (each bench run left one in /tmp)


async def _stop_when_orphaned(parent: int, stop: asyncio.Event) -> None:
    while os.getppid() == parent:
        await asyncio.sleep(1.0)
    log.warning("the first cortex-mock process (pid %d) is gone; stopping", parent)
    stop.set()


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    cfg = config_from_args(build_parser().parse_args(argv))
    event_loop.run(serve(cfg))


if __name__ == "__main__":
    main()
