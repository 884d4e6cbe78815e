"""`make load`: a bounded headless locust run, local or distributed (one master + N workers on this host).

    python -m loadtests.run [--workers N] [--target cortex|grpc] [--users 10] [--spawn-rate 5] [--duration 30]
                            [--shape none|step|spike|soak] [--shape-params JSON] [--faults none|seeded:SEED|FILE]
                            [--host URL] [--out DIR] [--metrics-port 0]

Without --host it starts what it targets with services/launcher.py (cortex: cortex-mock behind the fault
proxy; grpc: the `--backend` adapter) and stops exactly those processes afterwards. With --workers N > 0 the
master binds 127.0.0.1 on a free port and N worker processes join it with --master-host 127.0.0.1; with 0
it is one local process. The master serves Prometheus metrics (--metrics-port, default any free port) and
writes a file_sd target for it, so `memrig observe` scrapes it with no configuration. Locust's CSV/JSON/HTML, the per-request log, the fault events and a markdown summary
(`locust_summary.md`, closed model) land in the output directory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from loadtests.summary import load_locust_run, summarise_locust_run
from services.common import process, subcommand
from services.common.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
LOCUSTFILES = {"cortex": ROOT / "loadtests" / "cortex_locustfile.py", "grpc": ROOT / "loadtests" / "grpc_locustfile.py"}


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def locust_argv(a: argparse.Namespace, out: Path, host: str) -> list[str]:
    """The master/local command line (workers get theirs from `worker_argv`)."""
    argv = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILES[a.target]), "--headless", "--host", host,
            "--csv", str(out / "locust"), "--csv-full-history", "--html", str(out / "locust.html"),
            "--json-file", str(out / "locust"), "--run-dir", str(out), "--request-log", "--only-summary",
            "--stop-timeout", "5", "--metrics-port", str(a.metrics_port), "--loglevel", "INFO"]
    if a.shape == "none":
        argv += ["-u", str(a.users), "-r", str(a.spawn_rate), "-t", f"{a.duration}s"]
    if a.faults and a.faults != "none":
        argv += ["--fault-timeline", a.faults]
    return argv


def worker_argv(a: argparse.Namespace, master_port: int) -> list[str]:
    return [sys.executable, "-m", "locust", "-f", str(LOCUSTFILES[a.target]), "--worker", "--master-host",
            "127.0.0.1", "--master-port", str(master_port), "--loglevel", "INFO"]


def run_locust(a: argparse.Namespace, out: Path, host: str, env: dict[str, str]) -> int:
    """Run master (+ workers) to completion; return the master's exit code."""
    argv = locust_argv(a, out, host)
    workers: list[subprocess.Popen] = []
    if a.workers > 0:
        port = free_port()
        argv += ["--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
                 "--expect-workers", str(a.workers), "--expect-workers-max-wait", "60"]
    budget = (a.duration if a.shape == "none" else a.max_duration) + 90
    (out / "locust_command.json").write_text(json.dumps({"master": argv, "workers": a.workers}, indent=2))
    master = process.spawn(argv, out / "locust_master.log", env=env, cwd=ROOT)
    try:
        for i in range(a.workers):
            workers.append(process.spawn(worker_argv(a, port), out / f"locust_worker{i}.log", env=env, cwd=ROOT))
        try:
            code = master.wait(budget)
        except subprocess.TimeoutExpired:
            print(f"locust master still running after {budget}s; stopping it", file=sys.stderr)
            process.stop(master)
            code = -1
        deadline = time.monotonic() + 15
        for w in workers:  # workers quit when the master tells them; give them a moment, then stop them
            try:
                w.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.stop(w)
    finally:
        process.stop(master, *workers)
    return code


async def _start_target(rig, a: argparse.Namespace) -> str:
    if a.target == "cortex":
        mock = await rig.start_service("cortex-mock", extra=["--embedder", a.embedder])
        return (await rig.start_service("fault-proxy", extra=["--upstream", mock.url, "--seed", str(a.seed)])).url
    return (await rig.start_backend(a.backend, embedder=a.embedder)).url


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """`memrig load`'s flags, also `python -m loadtests.run`'s (services/common/subcommand.py)."""
    ap.description = __doc__.split("\n\n")[0]
    ap.add_argument("--target", choices=list(LOCUSTFILES), default="cortex")
    ap.add_argument("--workers", type=int, default=0, help="locust worker processes (0 = one local process)")
    ap.add_argument("--users", type=int, default=10)
    ap.add_argument("--spawn-rate", type=float, default=5.0)
    ap.add_argument("--duration", type=int, default=30, help="seconds (ignored with a --shape)")
    ap.add_argument("--shape", choices=["none", "step", "spike", "soak"], default="none")
    ap.add_argument("--shape-params", default="", help='JSON, e.g. \'{"users": 5, "step_s": 10, "steps": 3}\'')
    ap.add_argument("--max-duration", type=int, default=600, help="hard bound for shape runs, seconds")
    ap.add_argument("--faults", default="none", help="fault timeline: none | seeded:SEED[:DUR[:N]] | FILE | JSON")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--host", default="", help="target URL/address; when empty the rig starts one")
    ap.add_argument("--backend", default="full-context", help="adapter for --target grpc")
    ap.add_argument("--embedder", default="hash", help="embedder of a started cortex-mock or adapter")
    ap.add_argument("--metrics-port", type=int, default=0,
                    help="Prometheus exporter on the master (-1 off; default 0 = any free port, announced to "
                    "Prometheus through a file_sd target)")
    ap.add_argument("--out", default="", help="output directory (default results/load/<utc time>)")


def check(a: argparse.Namespace) -> None:
    if a.workers < 0:
        raise InputError("--workers", "must be >= 0", text="--workers must be >= 0")


def run(a: argparse.Namespace) -> int:
    """Locust runs in its own processes (the master and workers below): its gevent monkey-patching never reaches
    this one."""
    out = Path(a.out or ROOT / "results" / "load" / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())).resolve()
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1", MEMRIG_LOAD_SEED=str(a.seed))
    # The master runs with cwd=ROOT: hand it the absolute targets directory this shell's rig uses.
    from services.common.prom_targets import targets_dir

    env["MEMRIG_TARGETS_DIR"] = str(targets_dir())
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), str(ROOT / "proto"), env.get("PYTHONPATH", "")) if p)
    if a.shape != "none":
        env["MEMRIG_LOAD_SHAPE"] = a.shape
        env["MEMRIG_LOAD_SHAPE_PARAMS"] = a.shape_params
    rig = None
    try:
        host = a.host
        if not host:
            from services.launcher import Rig

            rig = Rig(out / "rig")
            host = asyncio.run(_start_target(rig, a))
        code = run_locust(a, out, host, env)
    finally:
        if rig is not None:
            rig.stop_all()
    md = summarise_locust_run(out, title=f"Locust {a.target} load, {a.workers} worker(s)")
    (out / "locust_summary.md").write_text(md)
    (out / "locust_summary.json").write_text(json.dumps(load_locust_run(out), indent=2, default=str))
    print(md)
    print(f"outputs in {out} (locust exit code {code})")
    # Locust exits 1 when any request failed; with a fault timeline that is expected, so only a crash fails here.
    return 0 if code in (0, 1) else 2


def main(argv: Sequence[str] | None = None) -> int:
    return subcommand.main(sys.modules[__name__], argv, "python -m loadtests.run")


if __name__ == "__main__":
    sys.exit(main())
