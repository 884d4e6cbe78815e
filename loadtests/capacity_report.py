"""The load benchmark's report (loadtests/capacity.py runs the measurements): the headline figures, the two scaling
curves (server processes, locust workers), the machine it ran on, and report.md."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Any

from loadtests.cpu_meter import cores_needed
from services.common import event_loop

ROOT = Path(__file__).resolve().parent.parent


def headline(result: dict[str, Any]) -> dict[str, Any]:
    """The best sustained mock rate over the process counts, its ratio to the generator's ceiling, and the
    engine's one-core rate (all from this run)."""
    scaling = result.get("scaling") or {}
    rates = {int(k): v["max_sustained_rps"] for k, v in scaling.items() if v.get("max_sustained_rps") is not None}
    best_p = max(rates, key=lambda k: (rates[k], -k)) if rates else None
    best = rates.get(best_p) if best_p is not None else None
    ceiling = (result.get("generator_ceiling") or {}).get("max_sustained_rps")
    eng = result.get("engine_cost") or {}
    end = result.get("engine_cost_end") or {}
    cpu = (scaling.get(best_p) or scaling.get(str(best_p)) or {}).get("cpu_at_best") if best_p is not None else None
    return {"best_rps": best, "best_processes": best_p, "generator_ceiling_rps": ceiling,
            "ratio_to_generator": round(best / ceiling, 4) if best and ceiling else None,
            "engine_one_core_rps": eng.get("one_core_rps"),
            "ratio_to_engine_one_core": round(best / eng["one_core_rps"], 3) if best and eng.get("one_core_rps") else None,
            "meets_target": bool(best is not None and best >= 1000.0),
            # the engine's CPU a retrieve after the climbs over the same before them: > 1 = the machine slowed
            "engine_drift": round(end["cpu_mean_ms"] / eng["cpu_mean_ms"], 3)
            if end.get("cpu_mean_ms") and eng.get("cpu_mean_ms") else None,
            # issue 14's arithmetic from this run's own CPU readings: what 1,000 req/s would take at this cost
            "cpu_at_best": cpu,
            "cores_for_1000_rps": cores_needed(1000.0, cpu["server_ms_per_req"], cpu["generator_ms_per_req"])
            if cpu else None}


# ------------------------------------------------------------------------------------------------- report
def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {"python": platform.python_version(), "platform": platform.platform(),
                            "cpu_count": os.cpu_count(), "loadavg_at_start": os.getloadavg()}
    try:
        import psutil

        info["ram_bytes"] = psutil.virtual_memory().total
    except Exception:  # pragma: no cover
        pass
    try:
        info["git_sha"] = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                         timeout=5).stdout.strip()
    except Exception:  # pragma: no cover
        pass
    from importlib.metadata import version

    info["packages"] = {p: version(p) for p in ("aiohttp", "hdrhistogram", "numpy")}
    # The services started here inherit this process's environment, so they run on the same loop.
    info["event_loop"] = event_loop.describe()
    return info


def strip_blobs(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: strip_blobs(v) for k, v in obj.items() if k != "histoblobs"}
    if isinstance(obj, list):
        return [strip_blobs(x) for x in obj]
    return obj


def scaling_curves(r: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Both scaling curves of the run as rows with the ratio to one: server processes (max sustained req/s of
    each rate search) and locust workers (req/s achieved against the trivial target)."""
    server = {int(k): v.get("max_sustained_rps") for k, v in (r.get("scaling") or {}).items()}
    one = server.get(1)
    srows = [{"processes": k, "rps": v, "ratio_to_1": round(v / one, 2) if one and v is not None else None}
             for k, v in sorted(server.items())]
    return {"server_processes": srows, "locust_workers": (r.get("generator_scaling") or {}).get("runs", [])}


def render_generator_scaling(r: dict[str, Any]) -> list[str]:
    gs = r.get("generator_scaling")
    if not gs:
        return []
    curves = scaling_curves(r)
    lines = ["", "### Generator scaling: locust workers (distributed mode) against the trivial target", "",
             f"One locust master and W worker processes on this host ({gs['cpu_count']} cores, shared with the "
             f"target), {gs['users']} users sending back to back, {gs['duration_s']} s each ({gs['label']}).", "",
             "| locust workers | req/s | ratio to 1 worker | per-worker efficiency | p50 ms | p99 ms | failed | "
             "load avg (1 min) start → end |", "|---:|---:|---:|---:|---:|---:|---:|---|"]
    for x in curves["locust_workers"]:
        la = x.get("load_avg_1m") or ["?", "?"]
        lines.append(f"| {x['workers']} | {x['rps']} | {x['ratio_to_1']} | {x['per_worker_efficiency']} | "
                     f"{x['p50_ms']} | {x['p99_ms']} | {x['failures']} | {la[0]} → {la[1]} |")
    lines += ["", "Beside it, the server side of the same run (max sustained retrieve rate per cortex-mock process "
              "count):", "", "| server processes | max sustained req/s | ratio to 1 process |", "|---:|---:|---:|"]
    lines += [f"| {x['processes']} | {x['rps']} | {x['ratio_to_1']} |" for x in curves["server_processes"]]
    return lines


def render_markdown(r: dict[str, Any]) -> str:
    c = r["config"]
    s = r["rate_search"]
    lines = ["## Load benchmark: cortex-mock retrieve rate and fault-proxy overhead (open loop)", "",
             f"Cortex-mock with {r['seeding']['total_memories']} memories (embedder `{c['embedder']}`), "
             f"`POST /v1/retrieve` mode `{c['mode']}`, top_k {c['top_k']}, {c['arrival']} arrivals, "
             f"{c['concurrency']} connections, steps of {c['step_s']:g} s. Latency is measured from the intended "
             "send time (corrected for coordinated omission); service time beside it. "
             f"Machine: {r['machine']['cpu_count']} cores shared by generator, mock and proxy (load average at start "
             f"{', '.join(f'{x:.2f}' for x in r['machine']['loadavg_at_start'])}).", "",
             f"Seeding: {r['seeding']['requested']} memories in {r['seeding']['seconds']} s "
             f"({r['seeding']['batch']} per request). Idle sequential latency (median of 20): "
             f"direct {r['idle_latency_ms']['direct']} ms, via proxy {r['idle_latency_ms']['proxied']} ms. "
             f"BLAS threads of the services: {c['blas_threads'] or 'the launcher default (OPENBLAS_NUM_THREADS=' + os.environ.get('OPENBLAS_NUM_THREADS', '1') + ')'}. "
             f"Event loop of the generator and the services: {r['machine'].get('event_loop', 'asyncio')} "
             f"(`{event_loop.ENV}`).", ""]
    best = s["max_sustained_rps"]
    if best is None:
        lines.append(f"**Highest sustained retrieve rate at p99 < {c['slo_p99_ms']:g} ms: none** (the first step "
                     f"at {c['start_rate']:g}/s already failed).")
    else:
        tail = " (reached --max-rate without failing)" if s["hit_max_rate"] else \
            f"; {s['first_failing_rps']:g}/s failed"
        lines.append(f"**Highest sustained retrieve rate at p99 < {c['slo_p99_ms']:g} ms: {best:g} req/s**{tail}.")
    lines += ["", "| step | rate/s | ok | failed | dropped | achieved/s | corrected p50 | corrected p99 | service p99 | "
              "lag p99 | verdict | drain s | server CPU ms/req | generator CPU ms/req |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for st in s["steps"]:
        cpu = st.get("cpu") or {}
        lines.append(f"| {st['phase']} | {st['rate']:g} | {st['ok']} | {st['failed']} | {st['dropped']} | "
                     f"{st['achieved_rps']} | {st['corrected']['p50_ms']} | {st['corrected']['p99_ms']} | "
                     f"{st['service']['p99_ms']} | {st['schedule_lag']['p99_ms']} | "
                     f"{'pass' if st['pass'] else st['why']} | {st.get('drain_s', '')} | "
                     f"{cpu.get('server_ms_per_req')} | {cpu.get('generator_ms_per_req')} |")
    lines.append(f"\nThe climb ended by: **{s.get('ended_by', '?')}** ({s.get('ended_by_detail', '')}).")
    h = r.get("headline")
    if h:
        ec = r.get("engine_cost") or {}
        gc = r.get("generator_ceiling") or {}
        lines += ["", "### Against the generator's ceiling and the engine's cost", "",
                  f"**Best sustained: {h['best_rps']} req/s** ({h['best_processes']} process(es)); generator "
                  f"ceiling on this machine (trivial aiohttp target, same driver): {h['generator_ceiling_rps']} "
                  f"req/s (ended by {gc.get('ended_by', '?')}); **ratio {h['ratio_to_generator']}**. Engine "
                  f"single-thread cost over {ec.get('facts')} facts: mean {ec.get('mean_ms')} ms, p50 "
                  f"{ec.get('p50_ms')} ms, p99 {ec.get('p99_ms')} ms per retrieve (CPU {ec.get('cpu_mean_ms')} ms) = "
                  f"{h['engine_one_core_rps']} req/s on one core (best sustained / that: "
                  f"{h['ratio_to_engine_one_core']}). Target >= 1000 req/s: {'met' if h['meets_target'] else 'not met'}.",
                  ""]
        if h.get("engine_drift") is not None:
            lines += [f"The same engine measurement after the process-count runs: CPU "
                      f"{r['engine_cost_end']['cpu_mean_ms']} ms a retrieve, x{h['engine_drift']} the first reading "
                      f"(the machine's own speed moved that much during this run: compare rates within one climb, "
                      f"or runs made back to back).", ""]
        cb, gcpu = h.get("cpu_at_best"), gc.get("cpu_at_best")
        if cb:
            lines += [f"CPU per request at the best step (psutil over the server processes; this generator's own "
                      f"process time): server {cb['server_ms_per_req']} ms + generator {cb['generator_ms_per_req']} "
                      f"ms, {cb['cores_needed']} cores at {cb['rate']:g} req/s of {r['machine']['cpu_count']}; "
                      f"at that cost 1,000 req/s would need **{h['cores_for_1000_rps']} cores**."
                      + (" The server's share by thread: event loops {loop} ms, search threads (the engine) "
                         "{search} ms, other threads {other} ms.".format(**cb["server_ms_per_req_by_thread"])
                         if cb.get("server_ms_per_req_by_thread") else "")
                      + (f" Against the trivial target: server {gcpu['server_ms_per_req']} ms + generator "
                         f"{gcpu['generator_ms_per_req']} ms a request." if gcpu else ""), ""]
        lines += ["| server processes | max sustained req/s | first failing | ended by | server + generator CPU ms/req "
                  "at the best step |", "|---|---|---|---|---|"]
        for procs, sc in sorted((r.get("scaling") or {}).items(), key=lambda kv: int(kv[0])):
            c = sc.get("cpu_at_best") or {}
            lines.append(f"| {procs} | {sc['max_sustained_rps']} | {sc['first_failing_rps']} | "
                         f"{sc['ended_by']}: {sc['ended_by_detail']} | {c.get('server_ms_per_req')} + "
                         f"{c.get('generator_ms_per_req')} |")
    lines += render_generator_scaling(r)
    po = r.get("proxy_overhead")
    if po:
        pd, pp = po["pooled"]["direct"], po["pooled"]["proxied"]
        sd = po["pooled"]["service_diff"]
        lines += ["", f"### Fault proxy overhead (no faults), {po['rate']:g} req/s, {len(po['rounds'])} alternating "
                  "rounds each", "",
                  "| path | service p50 ms | service p90 ms | service p99 ms | corrected p99 ms | failed |",
                  "|---|---|---|---|---|---|",
                  f"| direct | {pd['service']['p50_ms']} | {pd['service']['p90_ms']} | {pd['service']['p99_ms']} | "
                  f"{pd['corrected']['p99_ms']} | {pd['failed']} |",
                  f"| via proxy | {pp['service']['p50_ms']} | {pp['service']['p90_ms']} | {pp['service']['p99_ms']} | "
                  f"{pp['corrected']['p99_ms']} | {pp['failed']} |", "",
                  f"Added by the proxy (pooled): p50 {sd.get('added_p50_ms')} ms (x{sd.get('ratio_p50')}), "
                  f"p99 {sd.get('added_p99_ms')} ms (x{sd.get('ratio_p99')}); median of per-round p50 differences "
                  f"{po['median_round_added_p50_ms']} ms."]
    lines += ["", f"Command: `{r['command']}`", ""]
    return "\n".join(lines)
