"""Study (not a test): where openclaw-real's ingest time goes, by sidecar route and by Node thread (issue 46).

    python -m services.studies.openclaw_profile [--suite longmemeval] [--option KEY=VALUE ...] [--profile default]
                                                 [--cpu-prof] [--out FILE.json]

Runs one suite with the openclaw-real backend alone, in this process (its Node sidecar, the rig's embedder behind
OpenClaw's embeddings endpoint, the offline llm-mock for the flush), as `memrig bench --in-process` does, and
reports:
- per sidecar route (/sync, /session/append, /session/new, /search, ...): calls, total and mean time, timed in the
  adapter around each HTTP call (what the route costs the run, OpenClaw's work and the hop together);
- with --cpu-prof, Node's own CPU profiles (`--cpu-prof`, one file per thread: the sidecar's main thread and every
  Worker thread OpenClaw starts): how many Workers ran, by their entry script, and the CPU each kind used, against
  the main thread's busy and idle time. OpenClaw runs its SQLite work (the memory index's publication, the session
  store's mutations, archive and reclamation) in Worker threads, each of which loads OpenClaw's modules anew.

Prints a table and writes everything to --out (JSON). The figures depend on the host's speed and load; compare the
shares, not the seconds, across hosts.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def route_timer() -> tuple[dict[str, list[float]], Any]:
    """Wrap the adapter's sidecar call so every route's calls and seconds are counted; returns (counts, undo)."""
    from services.adapters.openclaw_real import backend as B

    stats: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    orig = B.OpenClawRealBackend._call

    async def timed(self, method, route, body=None):
        t0 = time.perf_counter()
        try:
            return await orig(self, method, route, body)
        finally:
            s = stats[route]
            s[0] += 1
            s[1] += time.perf_counter() - t0

    B.OpenClawRealBackend._call = timed

    def undo() -> None:
        B.OpenClawRealBackend._call = orig

    return stats, undo


def read_cpu_profiles(directory: Path) -> dict[str, Any]:
    """Node --cpu-prof files of one process: the main thread (the first file, thread 0) and each Worker, grouped by
    the OpenClaw worker entry scripts its profile contains. CPU = sampled time outside (idle) and (program)."""
    files = sorted(directory.glob("*.cpuprofile"), key=lambda p: int(p.name.split(".")[-3]))
    out: dict[str, Any] = {"threads": len(files), "main": {}, "workers": {}}
    kinds: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    for i, f in enumerate(files):
        prof = json.loads(f.read_text())
        nodes = {n["id"]: n for n in prof["nodes"]}
        busy = idle = 0.0
        for sid, dt in zip(prof["samples"], prof["timeDeltas"], strict=False):
            name = nodes[sid]["callFrame"]["functionName"]
            if name == "(idle)":
                idle += dt / 1e6
            elif name != "(program)":
                busy += dt / 1e6
        if i == 0:
            out["main"] = {"wall_s": (prof["endTime"] - prof["startTime"]) / 1e6, "busy_s": busy, "idle_s": idle}
            continue
        scripts = sorted({u.split("node_modules/")[-1] for n in prof["nodes"]
                          if "worker" in (u := n["callFrame"]["url"]).rsplit("/", 1)[-1].lower()
                          and "openclaw/dist" in u})
        kind = scripts[0] if scripts else "(other)"
        kinds[kind][0] += 1
        kinds[kind][1] += busy
    out["workers"] = {k: {"count": int(n), "busy_s": round(s, 2)} for k, (n, s) in
                      sorted(kinds.items(), key=lambda kv: -kv[1][1])}
    return out


async def run(suite: str, options: dict[str, Any], profile: str, out_dir: Path) -> dict[str, Any]:
    from services.coordinator.runner import RunConfig, run_suite

    name = "openclaw-real" if profile == "default" else f"openclaw-real[profile={profile}]"
    roles = {"answerer": "mock", "judge": "mock", "flush": "mock", "compaction": "mock"}
    cfg = RunConfig(suite=suite, backends=[name], out_dir=str(out_dir), options=options, in_process=True,
                    llm_roles=roles, resume=False)
    t0 = time.perf_counter()
    outcome = await run_suite(cfg)
    wall = time.perf_counter() - t0
    if outcome.failures:
        raise SystemExit(f"openclaw_profile: {name} failed: {outcome.failures}")
    run_json = json.loads((outcome.run_dir / "run.json").read_text())
    lane = (run_json.get("ingest") or {}).get(name) or {}
    namespaces = lane.get("namespaces") or {}
    return {"backend": name, "suite": suite, "options": options, "wall_s": round(wall, 2),
            "namespaces": len(namespaces), "messages": sum(r.get("messages", 0) for r in namespaces.values()),
            "ingest_s": round(sum(r.get("ingest_s", 0) + r.get("settle_s", 0) for r in namespaces.values()), 2)}


def main(argv: list[str] | None = None) -> int:
    from services.coordinator.plan import parse_options

    ap = argparse.ArgumentParser(prog="python -m services.studies.openclaw_profile",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--suite", default="longmemeval")
    ap.add_argument("--option", action="append", default=[], help="suite option KEY=VALUE (repeatable)")
    ap.add_argument("--profile", default="default", choices=("default", "sessions", "flush-every-session"))
    ap.add_argument("--cpu-prof", action="store_true", help="also read Node's CPU profile of every thread")
    ap.add_argument("--out", help="write the figures here (JSON)")
    args = ap.parse_args(argv)
    options = parse_options(args.option)
    stats, undo = route_timer()
    with tempfile.TemporaryDirectory(prefix="memrig-ocprof-") as tmp:
        prof_dir = Path(tmp) / "cpu"
        if args.cpu_prof:
            prof_dir.mkdir()
            os.environ["NODE_OPTIONS"] = (os.environ.get("NODE_OPTIONS", "") +
                                          f" --cpu-prof --cpu-prof-dir={prof_dir}").strip()
        try:
            res = asyncio.run(run(args.suite, options, args.profile, Path(tmp) / "run"))
        finally:
            undo()
        res["routes"] = {r: {"calls": int(n), "total_s": round(s, 2), "mean_ms": round(1000 * s / max(n, 1), 1)}
                         for r, (n, s) in sorted(stats.items(), key=lambda kv: -kv[1][1])}
        if args.cpu_prof:
            res["node"] = read_cpu_profiles(prof_dir)
    total = sum(r["total_s"] for r in res["routes"].values()) or 1.0
    print(f"{res['backend']} on {res['suite']}: {res['namespaces']} namespaces, {res['messages']} messages, "
          f"ingest+settle {res['ingest_s']} s, run {res['wall_s']} s")
    print(f"{'route':<20} {'calls':>6} {'total s':>9} {'mean ms':>9} {'share':>6}")
    for r, v in res["routes"].items():
        print(f"{r:<20} {v['calls']:>6} {v['total_s']:>9.2f} {v['mean_ms']:>9.1f} {v['total_s'] / total:>6.0%}")
    if "node" in res:
        m, w = res["node"]["main"], res["node"]["workers"]
        print(f"node main thread: busy {m.get('busy_s', 0):.1f} s, idle {m.get('idle_s', 0):.1f} s of "
              f"{m.get('wall_s', 0):.1f} s; {sum(v['count'] for v in w.values())} Worker threads, busy "
              f"{sum(v['busy_s'] for v in w.values()):.1f} s:")
        for k, v in w.items():
            print(f"  {v['count']:>4} x {k}: {v['busy_s']:.1f} s")
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
