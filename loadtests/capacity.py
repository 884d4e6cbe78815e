"""`make load-bench`: the highest sustained retrieve rate of cortex-mock with 10k memories at p99 < 250 ms,
beside the load generator's own ceiling on this machine, the engine's single-thread cost, the scaling over
1/2/4 server processes, and the fault proxy's added latency against a direct call, all in one run (open loop).

    python -m loadtests.capacity --out DIR [--memories 10000] [--embedder minilm] [--slo-p99-ms 250]
                              [--start-rate 10] [--factor 1.5] [--step-s 10] [--refine 2] [--proxy-rounds 3]
                              [--processes 1,2,4] [--scale-step-s 5] [--gen-start-rate 200]
                              [--locust-workers 1,2,4] [--locust-users 32] [--locust-step-s 15]

1. Start cortex-mock and the fault proxy in front of it (services/launcher.py; stopped by PID at the end).
2. Seed N distinct one-sentence memories through the mock's ingest API (`/v1/ingest/conversation`, 250
   messages a request, two requests in flight) into one tenant, and check `/v1/knowledge` counts them.
3. Rate search, direct to the mock: open-loop steps at start_rate, x factor, ... each `step_s` long with a
   fresh seeded schedule; a step passes when the run is valid (schedule kept, nothing dropped), no request
   failed, and the corrected p99 (from the intended send time) is under the SLO. The first failing step ends
   the climb; `refine` bisection steps between the last pass and the first failure sharpen the answer.
4. Proxy overhead: at a fixed rate (a quarter of the sustained rate, at most 50/s) alternate direct and proxied runs
   (`proxy_rounds` each, same schedule) and report the p50/p99 differences and ratios, per round and pooled.

5. Engine single-thread cost: the mock's engine in this process over the seeded data dir, `retrieve` called
   back to back on one thread (no HTTP, no event loop): mean/median ms per request and the rate one core
   could give at that cost.
6. Scaling: the mock restarted with `--processes P` (SO_REUSEPORT, same data dir) for each P of
   --processes; a rate search each (steps of --scale-step-s). Then step 5 once more: the ratio of the two
   readings (`engine_drift`) is how far this shared machine's own speed moved during the run.
7. Generator ceiling: the same driver and climb against a trivial aiohttp server (loadtests/trivial_target.py,
   its own process): the most this generator can drive here. The headline is the best sustained mock rate
   and its ratio to that ceiling.
8. Generator scaling: locust in its distributed mode, one master and W workers for each W of
   --locust-workers (1,2,4), against the trivial target with the same closed-loop users
   (loadtests/locust_scaling.py): requests/s, p50/p99 and the ratio to 1 worker, the generator's curve beside
   the server processes' of step 6.
Every climb says which rule ended it: schedule lag (the generator fell behind: the run is invalid), dropped
or unfinished arrivals, failed requests, the p99 SLO, or --max-rate.

Absolute numbers depend on the machine (2 shared cores here; generator, mock and proxy share them); the
proxied-vs-direct comparison is side by side in one run, which is the figure to trust (a ratio measured in one run
on one machine, where absolute times on a shared machine are not).
Writes bench.json and bench.md into --out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
from hdrh.histogram import HdrHistogram

from loadtests import locust_scaling, trivial_target
from loadtests.capacity_report import headline, machine_info, render_markdown, strip_blobs
from loadtests.cpu_meter import StepCpu, cores_needed
from loadtests.open_loop import (
    DriverConfig,
    HttpRetrieveTarget,
    Phase,
    Records,
    Validity,
    build_schedule,
    drive,
    hdr_summary_ms,
    summarise,
)
from loadtests.workload import memory_texts
from services.common import event_loop, process, subcommand
from services.common.errors import DependencyError

ROOT = Path(__file__).resolve().parent.parent
API_KEY = "memrig-bench"


# ------------------------------------------------------------------------------------------------- seeding
async def seed_memories(url: str, n: int, seed: int, batch: int = 250, parallel: int = 2,
                        user_id: str = "bench", api_key: str = API_KEY) -> dict[str, Any]:
    texts = memory_texts(n, seed)
    batches = [texts[i:i + batch] for i in range(0, n, batch)]
    sem = asyncio.Semaphore(parallel)
    t0 = time.perf_counter()
    async with aiohttp.ClientSession(headers={"x-api-key": api_key},
                                     timeout=aiohttp.ClientTimeout(total=600)) as s:
        async def one(k: int, msgs: list[str]) -> int:
            body = {"messages": [{"role": "user", "content": t} for t in msgs], "session_id": f"bench-seed-{k}",
                    "reference_date": "2026-03-01", "user_id": user_id, "source_origin": "memrig-bench",
                    "derivation_mode": "observed", "source_app": "memrig-bench"}
            async with sem, s.post(f"{url}/v1/ingest/conversation", json=body) as r:
                data = await r.json()
                if r.status != 200:
                    raise DependencyError(f"seeding batch {k}: HTTP {r.status} {str(data)[:300]}", r.status)
                return int(data.get("nodes_created", 0))

        created = sum(await asyncio.gather(*(one(k, b) for k, b in enumerate(batches))))
        async with s.get(f"{url}/v1/knowledge") as r:
            knowledge = await r.json()
    return {"requested": n, "nodes_created": created, "total_memories": knowledge.get("total_memories"),
            "seconds": round(time.perf_counter() - t0, 2), "batch": batch, "parallel": parallel}


# ------------------------------------------------------------------------------------------------- steps
def completed_requests(rec: Records) -> int:
    """Requests that got an answer or an error (`ok` + `failed` of the summary): every arrival with a done
    stamp; dropped and unfinished arrivals have none."""
    return int(np.count_nonzero(rec.done > 0))


async def open_loop_step(target: HttpRetrieveTarget, rate: float, duration_s: float, seed: int,
                         cfg: DriverConfig, arrival: str, server_pid: int | None = None) -> dict[str, Any]:
    """One open-loop step; `cpu` holds the CPU ms a request cost the server's process tree (`server_pid`)
    and this generator process over the step (loadtests/cpu_meter.py)."""
    phases = [Phase(rate, duration_s, arrival, f"{rate:g}/s")]
    offs, idx = build_schedule(phases, seed)
    meter = StepCpu(server_pid).start()
    rec = await drive(target, offs, idx, cfg)
    # Read the CPU as soon as the requests are done: summarising the step (HdrHistogram iterations, in Python)
    # is not load, and counted it added ~0.04 ms a request to the generator's figure at a few hundred req/s.
    cpu = meter.stop(completed_requests(rec))
    res = summarise(rec, phases, cfg.validity, {"target": target.name, "rate": rate, "seed": seed})
    res["cpu"] = cpu
    res.pop("per_phase", None)
    return res


async def drain(target: HttpRetrieveTarget, baseline_ms: float, max_wait_s: float = 60.0) -> float:
    """Wait until the target answers a lone request about as fast as when idle (an overloaded step leaves
    abandoned requests queued in the server); returns the seconds waited."""
    t0 = time.perf_counter()
    good, i = 0, 0
    while time.perf_counter() - t0 < max_wait_s and good < 3:
        s = time.perf_counter()
        try:
            await asyncio.wait_for(target.call(i), 10.0)
            ms = (time.perf_counter() - s) * 1000
        except Exception:  # still overloaded
            ms = float("inf")
        good = good + 1 if ms <= max(3 * baseline_ms, baseline_ms + 20) else 0
        i += 1
        await asyncio.sleep(0.2)
    return round(time.perf_counter() - t0, 2)


async def warm_every_process(url: str, processes: int, queries: Sequence[str], top_k: int, mode: str,
                             api_key: str = API_KEY, share_wait_s: float = 1.5,
                             max_attempts: int | None = None) -> dict[str, Any]:
    """Make every server process on the port answer the whole query set before a climb: its snapshot (a 10k
    memory rebuild from SQLite), its query-embedding cache, and (a second pass once the snapshot is older than
    cortex-mock's share_after_s) the swap to the shared matrices. Otherwise a process that the warm-up never
    reached does all that inside the first measured step. SO_REUSEPORT hands each new connection to one
    process, so every attempt pins one connection, asks it `GET /health` which process it is, and warms that
    process over the same connection if it is new. Returns the processes reached and the attempts taken."""
    warmed: dict[int, float] = {}
    reshared: set[int] = set()
    attempts = 0
    max_attempts = max_attempts or 50 * processes

    async def one_connection(second_pass: bool) -> None:
        conn = aiohttp.TCPConnector(limit=1)  # one keep-alive connection: every call below reaches one process
        async with aiohttp.ClientSession(connector=conn, headers={"x-api-key": api_key},
                                         timeout=aiohttp.ClientTimeout(total=300)) as s:
            async with s.get(f"{url}/health") as r:
                pid = int((await r.json())["pid"])
            if pid in (reshared if second_pass else warmed):
                return
            t0 = time.perf_counter()
            async with s.post(f"{url}/v1/warmup", json={}) as r:
                await r.read()
            if second_pass:
                reshared.add(pid)
                return
            for q in queries:
                async with s.post(f"{url}/v1/retrieve", json={"query": q, "top_k": top_k, "mode": mode}) as r:
                    await r.read()
            warmed[pid] = round(time.perf_counter() - t0, 3)

    for second_pass in (False, True):
        if second_pass:
            await asyncio.sleep(share_wait_s)
        while len(reshared if second_pass else warmed) < processes and attempts < max_attempts:
            attempts += 1
            await one_connection(second_pass)
    return {"processes": processes, "warmed": len(warmed), "reshared": len(reshared), "attempts": attempts,
            "seconds_per_process": {str(k): v for k, v in sorted(warmed.items())}}


async def idle_latency_ms(target: HttpRetrieveTarget, n: int = 20) -> float:
    """Median latency of n sequential requests (the idle baseline for `drain`)."""
    xs = []
    for i in range(n):
        s = time.perf_counter()
        await target.call(i)
        xs.append((time.perf_counter() - s) * 1000)
    return sorted(xs)[len(xs) // 2]


def step_passes(res: dict[str, Any], slo_p99_ms: float) -> tuple[bool, str]:
    if not res["valid"]:
        return False, "invalid: " + "; ".join(res["invalid_reasons"])
    if res["failed"]:
        return False, f"{res['failed']} failed requests ({res['errors']})"
    p99 = res["corrected"]["p99_ms"]
    if p99 is None or p99 >= slo_p99_ms:
        return False, f"corrected p99 {p99} ms >= {slo_p99_ms:g} ms"
    return True, "ok"


def stop_rule(why: str) -> str:
    """The rule a failing step broke, from `step_passes`'s reason."""
    if why.startswith("invalid"):
        if "schedule lag" in why:
            return "schedule lag"
        if "dropped" in why:
            return "dropped arrivals"
        return "unfinished requests"
    if "failed requests" in why:
        return "failed requests"
    if "p99" in why:
        return "p99"
    return "other"


def _brief(res: dict[str, Any]) -> dict[str, Any]:
    return {"rate": res["rate"], "scheduled": res["scheduled"], "ok": res["ok"], "failed": res["failed"],
            "dropped": res["dropped"], "achieved_rps": res["achieved_rps"], "valid": res["valid"],
            "invalid_reasons": res["invalid_reasons"], "corrected": res["corrected"], "service": res["service"],
            "schedule_lag": res["schedule_lag"], "queue_wait": res["queue_wait"], "errors": res["errors"],
            "cpu": res.get("cpu"), "histoblobs": res["histoblobs"]}


async def rate_search(target: HttpRetrieveTarget, a: argparse.Namespace, cfg: DriverConfig,
                      baseline_ms: float, start_rate: float | None = None, step_s: float | None = None,
                      max_rate: float | None = None, server_pid: int | None = None) -> dict[str, Any]:
    steps: list[dict[str, Any]] = []
    best, worst = None, None
    step_s = step_s or a.step_s
    max_rate = max_rate or a.max_rate
    rate, k = start_rate or a.start_rate, 0
    while rate <= max_rate:
        res = await open_loop_step(target, rate, step_s, a.seed + k, cfg, a.arrival, server_pid)
        ok, why = step_passes(res, a.slo_p99_ms)
        steps.append({**_brief(res), "phase": "climb", "pass": ok, "why": why,
                      "drain_s": await drain(target, baseline_ms)})
        _progress(steps[-1])
        k += 1
        if not ok:
            worst = rate
            break
        best = rate
        rate = round(rate * a.factor, 1)
        await asyncio.sleep(a.pause_s)
    for _ in range(a.refine if best is not None and worst is not None else 0):
        mid = round((best + worst) / 2, 1)
        if mid - best < 1 or worst - mid < 1:
            break
        await asyncio.sleep(a.pause_s)
        res = await open_loop_step(target, mid, step_s, a.seed + k, cfg, a.arrival, server_pid)
        ok, why = step_passes(res, a.slo_p99_ms)
        steps.append({**_brief(res), "phase": "refine", "pass": ok, "why": why,
                      "drain_s": await drain(target, baseline_ms)})
        _progress(steps[-1])
        k += 1
        best, worst = (mid, worst) if ok else (best, mid)
    failing = [st for st in steps if not st["pass"]]
    ended_by = stop_rule(failing[0]["why"]) if failing else "max rate"
    return {"max_sustained_rps": best, "first_failing_rps": worst, "steps": steps,
            "hit_max_rate": worst is None and best is not None, "ended_by": ended_by,
            "ended_by_detail": failing[0]["why"] if failing else f"reached --max-rate {max_rate:g}",
            "cpu_at_best": cpu_at_best(steps, best)}


def cpu_at_best(steps: list[dict[str, Any]], best: float | None) -> dict[str, Any] | None:
    """CPU per request at the highest passing step (the last one at the sustained rate) and the cores that
    rate takes at that cost, server + generator."""
    at = [st for st in steps if st["pass"] and st["rate"] == best and st.get("cpu")]
    if not at:
        return None
    c = at[-1]["cpu"]
    return {"rate": best, "server_ms_per_req": c["server_ms_per_req"],
            "generator_ms_per_req": c["generator_ms_per_req"], "server_cores": c["server_cores"],
            "generator_cores": c["generator_cores"],
            "server_ms_per_req_by_thread": c.get("server_ms_per_req_by_thread"),
            "cores_needed": cores_needed(best, c["server_ms_per_req"], c["generator_ms_per_req"])}


def _progress(step: dict[str, Any]) -> None:
    cpu = step.get("cpu") or {}
    print(f"  {step['phase']:6s} {step['rate']:8.1f}/s  ok={step['ok']:6d} corrected p99={step['corrected']['p99_ms']} ms"
          f" service p99={step['service']['p99_ms']} ms lag p99={step['schedule_lag']['p99_ms']} ms"
          f" cpu/req server={cpu.get('server_ms_per_req')} gen={cpu.get('generator_ms_per_req')} ms -> "
          f"{'pass' if step['pass'] else 'FAIL: ' + step['why']} (drained {step['drain_s']} s)", flush=True)


def _merge(blobs: list[str]) -> HdrHistogram:
    h = HdrHistogram(1, 3_600_000_000, 3)
    for b in blobs:
        if b:
            h.add(HdrHistogram.decode(b))
    return h


def _diff(p: dict[str, Any], d: dict[str, Any], key: str) -> dict[str, Any]:
    out = {}
    for q in ("p50_ms", "p90_ms", "p99_ms"):
        if p[key][q] is not None and d[key][q] is not None:
            out[f"added_{q}"] = round(p[key][q] - d[key][q], 3)
            out[f"ratio_{q[:-3]}"] = round(p[key][q] / d[key][q], 3) if d[key][q] > 0 else None
    return out


async def proxy_overhead(direct: HttpRetrieveTarget, proxied: HttpRetrieveTarget, rate: float,
                         a: argparse.Namespace, cfg: DriverConfig, baseline_ms: float) -> dict[str, Any]:
    rounds = []
    for r in range(a.proxy_rounds):
        pair = {}
        # Alternate which goes first so drift on the shared box does not favour one side.
        order = [("direct", direct), ("proxied", proxied)] if r % 2 == 0 else [("proxied", proxied), ("direct", direct)]
        for label, tgt in order:
            res = await open_loop_step(tgt, rate, a.proxy_step_s, a.seed + 1000 + r, cfg, a.arrival)
            pair[label] = _brief(res)
            await drain(direct, baseline_ms)
            await asyncio.sleep(a.pause_s)
        pair["service_diff"] = _diff(pair["proxied"], pair["direct"], "service")
        pair["corrected_diff"] = _diff(pair["proxied"], pair["direct"], "corrected")
        print(f"  proxy round {r + 1}: direct service p50={pair['direct']['service']['p50_ms']} "
              f"p99={pair['direct']['service']['p99_ms']} | proxied p50={pair['proxied']['service']['p50_ms']} "
              f"p99={pair['proxied']['service']['p99_ms']} ms", flush=True)
        rounds.append(pair)
    pooled = {}
    for label in ("direct", "proxied"):
        pooled[label] = {
            "service": hdr_summary_ms(_merge([x[label]["histoblobs"]["service_us"] for x in rounds])),
            "corrected": hdr_summary_ms(_merge([x[label]["histoblobs"]["corrected_us"] for x in rounds])),
            "failed": sum(x[label]["failed"] for x in rounds), "valid": all(x[label]["valid"] for x in rounds)}
    pooled["service_diff"] = _diff(pooled["proxied"], pooled["direct"], "service")
    pooled["corrected_diff"] = _diff(pooled["proxied"], pooled["direct"], "corrected")
    p50_diffs = sorted(x["service_diff"].get("added_p50_ms", 0.0) for x in rounds)
    return {"rate": rate, "rounds": rounds, "pooled": pooled,
            "median_round_added_p50_ms": p50_diffs[len(p50_diffs) // 2] if p50_diffs else None}


# ------------------------------------------------------------------------------------------------- context
def engine_cost(data_dir: str, embedder: str, queries: Sequence[str], n: int, top_k: int, mode: str,
                api_key: str = API_KEY) -> dict[str, Any]:
    """The mock's engine in this process over the seeded data dir: `n` retrieves back to back on one thread
    (no HTTP, no event loop, no hand-off), after one warm pass over the queries. Blocking."""
    from services.cortex_mock.config import MockConfig
    from services.cortex_mock.engine import CortexEngine
    from services.cortex_mock.search import SearchParams
    from services.cortex_mock.store import tenant_id_for_key

    engine = CortexEngine(MockConfig(data_dir=data_dir, embedder=embedder))
    tenant = tenant_id_for_key(api_key)
    try:
        for q in queries:  # warm: the snapshot, the query-embedding cache, the derived per-snapshot lookups
            engine.retrieve_sync(tenant, SearchParams(query=q, top_k=top_k, mode=mode))
        times = []
        cpu0 = time.process_time()
        for i in range(n):
            t0 = time.perf_counter()
            engine.retrieve_sync(tenant, SearchParams(query=queries[i % len(queries)], top_k=top_k, mode=mode))
            times.append((time.perf_counter() - t0) * 1000.0)
        cpu_mean = (time.process_time() - cpu0) * 1000.0 / n
        facts = len(engine.store(tenant).index(engine.embedder).facts)
    finally:
        for st in engine.open_tenants().values():
            st.close()
    times.sort()
    mean = sum(times) / len(times)
    # Wall time moves with the machine's other load (the semantic product streams a 15 MB matrix, so a busy
    # neighbour evicting the L3 nearly doubles it); the CPU time beside it is this process's own.
    return {"calls": n, "facts": facts, "mean_ms": round(mean, 3), "p50_ms": round(times[len(times) // 2], 3),
            "p99_ms": round(times[min(len(times) - 1, int(len(times) * 0.99))], 3),
            "cpu_mean_ms": round(cpu_mean, 3),
            "one_core_rps": round(1000.0 / mean, 1) if mean > 0 else None}


def engine_cost_in_subprocess(args: list[Any], blas_threads: int) -> dict[str, Any]:
    """`engine_cost` in a fresh interpreter with the services' BLAS thread setting (this process imported
    numpy before it could be set), so the figure is the engine's own single-thread cost. Blocking."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "proto"),
                                                        os.environ.get("PYTHONPATH", "")]))
    n = str(blas_threads) if blas_threads > 0 else os.environ.get("OPENBLAS_NUM_THREADS", "1")
    env.update(OPENBLAS_NUM_THREADS=n, OMP_NUM_THREADS=n, MKL_NUM_THREADS=n)
    code = ("import json, sys; from loadtests.capacity import engine_cost; "
            "print(json.dumps(engine_cost(*json.loads(sys.argv[1]))))")
    out = subprocess.run([sys.executable, "-c", code, json.dumps(args)], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=1800)
    if out.returncode != 0:
        # RuntimeError, no MemrigError branch: the child runs the rig's own engine on generated data, with no
        # input and no service; its failure is a bug (the traceback is in the message)
        raise RuntimeError(f"engine cost run failed: {out.stderr[-2000:]}")
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["blas_threads"] = int(n)
    return res


async def generator_ceiling(a: argparse.Namespace, cfg: DriverConfig, rig_dir: Path) -> dict[str, Any]:
    """The same driver and climb against a trivial server in its own process: what the generator can drive
    on this machine (the ceiling the mock's rate is compared to)."""
    p, port = await asyncio.to_thread(trivial_target.start, rig_dir / "trivial_target.log")
    try:
        target = HttpRetrieveTarget(f"http://127.0.0.1:{port}", API_KEY, a.concurrency, top_k=a.top_k, mode=a.mode,
                                    name="trivial")
        await target.start()
        try:
            baseline = await idle_latency_ms(target)
            print("generator ceiling (trivial aiohttp target):", flush=True)
            start = a.gen_start_rate
            while True:  # a first step that already fails says nothing: start lower (a busy machine)
                out = await rate_search(target, a, cfg, baseline, start_rate=start, step_s=a.scale_step_s,
                                        max_rate=a.gen_max_rate, server_pid=p.pid)
                if out["max_sustained_rps"] is not None or start / 4 < 5:
                    break
                start = round(start / 4, 1)
            out["start_rate"] = start
        finally:
            await target.close()
    finally:
        process.stop(p, grace_s=10.0)
    return out


# ------------------------------------------------------------------------------------------------- main
async def measure(a: argparse.Namespace) -> dict[str, Any]:
    from services.launcher import Rig

    out = Path(a.out)
    env = None
    if a.blas_threads > 0:
        env = dict(os.environ, **{k: str(a.blas_threads) for k in
                                  ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")})
    rig = Rig(out / "rig", env=env)
    result: dict[str, Any] = {"command": "python -m loadtests.capacity " + " ".join(a.argv),
                              "config": subcommand.flags(a), "machine": machine_info()}
    data_dir = out / "rig" / "cortex-data"
    mock_args = ["--embedder", a.embedder, "--seed", str(a.seed), "--data-dir", str(data_dir)]
    try:
        mock = await rig.start_service("cortex-mock", extra=mock_args)
        proxy = await rig.start_service("fault-proxy", extra=["--upstream", mock.url, "--seed", str(a.seed)])
        result["services"] = {"cortex_mock": mock.url, "fault_proxy": proxy.url}
        print(f"cortex-mock {mock.url}, fault-proxy {proxy.url}; seeding {a.memories} memories ...", flush=True)
        result["seeding"] = await seed_memories(mock.url, a.memories, a.seed)
        print(f"  seeded: {result['seeding']}", flush=True)
        cfg = DriverConfig(concurrency=a.concurrency, max_pending=a.max_pending, timeout_s=a.timeout_s,
                           validity=Validity(a.lag_threshold_ms))
        direct = HttpRetrieveTarget(mock.url, API_KEY, a.concurrency, top_k=a.top_k, mode=a.mode, name="direct")
        proxied = HttpRetrieveTarget(proxy.url, API_KEY, a.concurrency, top_k=a.top_k, mode=a.mode, name="proxied")
        await direct.start()
        await proxied.start()
        try:
            # Warm-up: every query once (query-embedding cache), then a short low-rate run per path.
            for i in range(len(direct.queries)):
                await direct.call(i)
            for t in (direct, proxied):
                await open_loop_step(t, min(a.start_rate, 20), 2.0, a.seed + 999, cfg, a.arrival)
            baseline = await idle_latency_ms(direct)
            result["idle_latency_ms"] = {"direct": round(baseline, 3),
                                         "proxied": round(await idle_latency_ms(proxied), 3)}
            print(f"idle sequential latency: {result['idle_latency_ms']}", flush=True)
            print("rate search (direct to cortex-mock):", flush=True)
            result["rate_search"] = await rate_search(direct, a, cfg, baseline, server_pid=mock.pid)
            best = result["rate_search"]["max_sustained_rps"]
            # Well below saturation, so the comparison shows the extra hop rather than queueing differences.
            prate = a.proxy_rate or max(5.0, min(50.0, round((best or a.start_rate) / 4, 1)))
            print(f"proxy overhead at {prate:g}/s:", flush=True)
            await drain(direct, baseline, max_wait_s=120)
            result["proxy_overhead"] = await proxy_overhead(direct, proxied, prate, a, cfg, baseline)
        finally:
            await direct.close()
            await proxied.close()
        result["scaling"] = {1: {k: result["rate_search"][k] for k in
                                 ("max_sustained_rps", "first_failing_rps", "ended_by", "ended_by_detail",
                                  "cpu_at_best")}}
        rig.stop_all()
        print("engine single-thread cost:", flush=True)
        result["engine_cost"] = await asyncio.to_thread(
            engine_cost_in_subprocess, [str(data_dir), a.embedder, direct.queries, a.engine_calls, a.top_k, a.mode],
            a.blas_threads)
        print(f"  {result['engine_cost']}", flush=True)
        for procs in [p for p in a.processes if p != 1]:
            mock = await rig.start_service("cortex-mock", extra=[*mock_args, "--processes", str(procs)])
            tgt = HttpRetrieveTarget(mock.url, API_KEY, a.concurrency, top_k=a.top_k, mode=a.mode,
                                     name=f"direct x{procs}")
            await tgt.start()
            try:
                warm = await warm_every_process(mock.url, procs, tgt.queries, a.top_k, a.mode)
                print(f"  warmed: {warm}", flush=True)
                await open_loop_step(tgt, min(a.start_rate, 20), 2.0, a.seed + 999, cfg, a.arrival)
                base = await idle_latency_ms(tgt)
                print(f"rate search with {procs} server processes:", flush=True)
                best1 = result["rate_search"]["max_sustained_rps"] or a.start_rate
                rs = await rate_search(tgt, a, cfg, base, start_rate=max(a.start_rate, round(best1 / 2, 1)),
                                       step_s=a.scale_step_s, server_pid=mock.pid)
            finally:
                await tgt.close()
                rig.stop_all()
            result["scaling"][procs] = {k: rs[k] for k in ("max_sustained_rps", "first_failing_rps", "ended_by",
                                                           "ended_by_detail", "cpu_at_best")}
            result["scaling"][procs]["steps"] = rs["steps"]
            result["scaling"][procs]["warm"] = warm
        # The same engine measurement once more, after the climbs: this machine's own speed drifts (a shared
        # host), and the ratio of the two readings says how far rates from different phases of the run compare.
        print("engine single-thread cost again (drift):", flush=True)
        result["engine_cost_end"] = await asyncio.to_thread(
            engine_cost_in_subprocess, [str(data_dir), a.embedder, direct.queries, a.engine_calls, a.top_k, a.mode],
            a.blas_threads)
        print(f"  {result['engine_cost_end']}", flush=True)
        result["generator_ceiling"] = await generator_ceiling(a, cfg, out / "rig")
        if a.locust_workers:
            print("generator scaling (locust master + workers against the trivial target):", flush=True)
            result["generator_scaling"] = await asyncio.to_thread(
                locust_scaling.measure, a.locust_workers, a.locust_users, a.locust_step_s, out / "rig" / "locust")
        result["headline"] = headline(result)
    finally:
        rig.stop_all()
    return result


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """`memrig load-bench`'s flags, also `python -m loadtests.capacity`'s (services/common/subcommand.py)."""
    ap.description = __doc__.split("\n\n")[0]
    ap.add_argument("--out", required=True, help="output directory (bench.json, bench.md)")
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--embedder", default="minilm", help="cortex-mock embedder (minilm, wordllama, hash)")
    ap.add_argument("--mode", choices=["fast", "full"], default="fast")
    ap.add_argument("--top-k", type=int, default=10)
    ap.add_argument("--slo-p99-ms", type=float, default=250.0)
    ap.add_argument("--start-rate", type=float, default=10.0)
    ap.add_argument("--factor", type=float, default=1.5, help="rate multiplier per climb step")
    ap.add_argument("--max-rate", type=float, default=5000.0)
    ap.add_argument("--refine", type=int, default=2, help="bisection steps after the first failure")
    ap.add_argument("--step-s", type=float, default=10.0)
    ap.add_argument("--pause-s", type=float, default=1.0, help="idle time between steps (drain)")
    ap.add_argument("--arrival", choices=["constant", "poisson"], default="poisson")
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--max-pending", type=int, default=2048)
    ap.add_argument("--timeout-s", type=float, default=10.0)
    ap.add_argument("--lag-threshold-ms", type=float, default=20.0)
    ap.add_argument("--proxy-rate", type=float, default=0.0, help="rate of the overhead runs (0 = auto: sustained/4, <= 50)")
    ap.add_argument("--proxy-rounds", type=int, default=3)
    ap.add_argument("--proxy-step-s", type=float, default=6.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--processes", type=lambda v: [int(x) for x in v.split(",") if x.strip()], default=[1, 2, 4],
                    help="server process counts to measure (comma-separated; 1 is the main search)")
    ap.add_argument("--scale-step-s", type=float, default=5.0, help="step length of the scaling and ceiling climbs")
    ap.add_argument("--gen-start-rate", type=float, default=200.0, help="first rate of the generator-ceiling climb")
    ap.add_argument("--gen-max-rate", type=float, default=50_000.0)
    ap.add_argument("--locust-workers", type=lambda v: [int(x) for x in v.split(",") if x.strip()], default=[1, 2, 4],
                    help="locust worker counts of the generator-scaling runs ('' = skip them)")
    ap.add_argument("--locust-users", type=int, default=32, help="locust users of each generator-scaling run")
    ap.add_argument("--locust-step-s", type=int, default=15, help="seconds of each generator-scaling run")
    ap.add_argument("--engine-calls", type=int, default=500, help="retrieves timed for the engine's cost")
    ap.add_argument("--blas-threads", type=int, default=0,
                    help="OPENBLAS/OMP/MKL_NUM_THREADS for the started services (0 = the launcher's default: "
                         "OPENBLAS_NUM_THREADS=1 unless set in the environment)")


def run(a: argparse.Namespace) -> int:
    """The whole measurement, bench.json and bench.md; locust's generator-scaling runs are processes of their own
    (loadtests/locust_scaling.py)."""
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    result = event_loop.run(measure(a))
    result["wall_seconds"] = round(time.time() - t0, 1)
    (out / "bench.json").write_text(json.dumps(result, indent=2, default=str))
    md = render_markdown(strip_blobs(result))
    (out / "bench.md").write_text(md)
    print(md)
    h = result.get("headline") or {}
    print(f"load-bench: best {h.get('best_rps')} req/s = {h.get('ratio_to_generator')} of the generator's ceiling "
          f"({h.get('generator_ceiling_rps')} req/s); engine one core {h.get('engine_one_core_rps')} req/s", flush=True)
    runs = (result.get("generator_scaling") or {}).get("runs") or []
    if runs:
        print("load-bench: locust workers " + ", ".join(f"{x['workers']}: {x['rps']} req/s (x{x['ratio_to_1']})"
                                                        for x in runs), flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return subcommand.main(sys.modules[__name__], argv, "python -m loadtests.capacity")


if __name__ == "__main__":
    sys.exit(main())
