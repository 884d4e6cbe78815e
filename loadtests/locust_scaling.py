"""The generator side of `make load-bench`'s scaling: locust in its own distributed mode (one master, W worker
processes on this host) against loadtests/trivial_target.py, for each W of --locust-workers, with the same
closed-loop users (loadtests/trivial_locustfile.py: no think time) and the same duration. Per W: the requests/s
achieved, p50/p99 (from locust's response-time histogram, whole ms below 100 ms; closed model, service time),
failures, and
the rate as a ratio to 1 worker. The target does no work, so the rate is what W locust workers can send on this
machine, which is what sizes the worker pods of a distributed run (README "Beyond one machine").

On 2 cores the target, the master and the workers share the same two cores, so the curve flattens early: the
ratio to 1 worker is the honest figure, and the machine's load average is recorded beside every run.

No locust import here: locust patches the process it runs in, so it only ever runs in its own processes.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from loadtests import trivial_target
from loadtests.run import free_port
from loadtests.summary import load_locust_run, read_locust_json
from services.common import process

ROOT = Path(__file__).resolve().parent.parent
LOCUSTFILE = ROOT / "loadtests" / "trivial_locustfile.py"


def master_argv(host: str, workers: int, users: int, duration_s: int, out: Path, port: int) -> list[str]:
    return [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--host", host,
            "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
            "--expect-workers", str(workers), "--expect-workers-max-wait", "60",
            "-u", str(users), "-r", str(users), "-t", f"{duration_s}s", "--stop-timeout", "2",
            "--csv", str(out / "locust"), "--json-file", str(out / "locust"), "--only-summary",
            "--loglevel", "WARNING"]


def worker_argv(port: int) -> list[str]:
    return [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--worker", "--master-host", "127.0.0.1",
            "--master-port", str(port), "--loglevel", "WARNING"]


def run_once(host: str, workers: int, users: int, duration_s: int, out: Path) -> dict[str, Any]:
    """One distributed run: the master and `workers` workers, to completion; the master's merged stats."""
    out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = dict(os.environ, PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    load0 = os.getloadavg()[0]
    master = process.spawn(master_argv(host, workers, users, duration_s, out, port), out / "locust_master.log",
                           env=env, cwd=ROOT)
    procs: list[subprocess.Popen] = []
    try:
        for i in range(workers):
            procs.append(process.spawn(worker_argv(port), out / f"locust_worker{i}.log", env=env, cwd=ROOT))
        code = master.wait(duration_s + 120)
        deadline = time.monotonic() + 15
        for w in procs:  # workers quit when the master tells them to
            try:
                w.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.stop(w)
    finally:
        process.stop(master, *procs)
    run = load_locust_run(out)
    counts: dict[float, int] = {}
    for e in read_locust_json(out / "locust.json"):
        for k, c in (e.get("response_times") or {}).items():
            counts[float(k)] = counts.get(float(k), 0) + int(c)
    return summarise_run(workers, users, run.get("total") or {}, run.get("duration_s"), counts, code,
                         (load0, os.getloadavg()[0]))


def percentile_ms(counts: dict[float, int], q: float) -> float | None:
    """Nearest-rank percentile q (0-100) of locust's response-time histogram {rounded ms: requests}: the
    smallest time with at least q% of the requests at or below it. Both p50 and p99 come from this one
    histogram (locust's own median column is clamped to the exact minimum when the rounded one is below it,
    so beside its rounded 99% column the two could disagree)."""
    total = sum(counts.values())
    if total == 0:
        return None
    need = math.ceil(q / 100.0 * total - 1e-9)
    seen = 0
    for t in sorted(counts):
        seen += counts[t]
        if seen >= need:
            return t
    return max(counts)


def summarise_run(workers: int, users: int, total: dict[str, Any], duration_s: float | None,
                  counts: dict[float, int], exit_code: int, load: tuple[float, float]) -> dict[str, Any]:
    """One worker count's figures: requests (the master's Aggregated row) over the run's own span (first
    request to last) give the achieved rate; p50/p99 from the merged response-time histogram."""
    n = int(total.get("requests") or 0)
    return {"workers": workers, "users": users, "requests": n, "failures": int(total.get("failures") or 0),
            "duration_s": duration_s, "rps": round(n / duration_s, 1) if n and duration_s else None,
            "p50_ms": percentile_ms(counts, 50), "p99_ms": percentile_ms(counts, 99), "exit_code": exit_code,
            "load_avg_1m": [round(x, 2) for x in load]}


def with_ratios(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each run with its rate as a ratio to the 1-worker run's (`ratio_to_1`) and that ratio per worker
    (`per_worker_efficiency`: 1.0 = every added worker sends as much as the first)."""
    one = next((r["rps"] for r in runs if r["workers"] == 1), None)
    out = []
    for r in runs:
        ratio = round(r["rps"] / one, 2) if one and r["rps"] is not None else None
        out.append({**r, "ratio_to_1": ratio,
                    "per_worker_efficiency": round(ratio / r["workers"], 2) if ratio is not None else None})
    return out


def processes_for(rate: float, per_process_rps: float | None) -> int | None:
    """Processes (one core each) that sustain `rate` at `per_process_rps` apiece, rounded up."""
    if not per_process_rps or per_process_rps <= 0:
        return None
    return max(1, math.ceil(rate / per_process_rps - 1e-9))


def measure(worker_counts: list[int], users: int, duration_s: int, out: Path) -> dict[str, Any]:
    """Start the trivial target, run every worker count against it, stop the target (by its PID). Blocking."""
    out.mkdir(parents=True, exist_ok=True)
    target, port = trivial_target.start(out / "trivial_target.log")
    runs = []
    try:
        for w in worker_counts:
            print(f"  locust: {w} worker(s), {users} users, {duration_s}s against the trivial target", flush=True)
            r = run_once(f"http://127.0.0.1:{port}", w, users, duration_s, out / f"workers-{w}")
            print(f"    {r['rps']} req/s, p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms, {r['failures']} failed, "
                  f"load {r['load_avg_1m']}", flush=True)
            runs.append(r)
    finally:
        process.stop(target)
    return {"target": "loadtests/trivial_target.py", "locustfile": "loadtests/trivial_locustfile.py",
            "mode": "locust distributed (1 master + W workers, this host)", "cpu_count": os.cpu_count(),
            "users": users, "duration_s": duration_s, "runs": with_ratios(runs),
            "label": "closed model: locust users send back to back; percentiles are service times rounded by locust"}
