"""`make bench-all`: every default suite over the default backends, then the cost scenarios, into one
results directory with an index report.

Layout: results/<run-id>/{report.md, report.html, verdict.json, report.json, <suite>/ (a full run dir each),
costs/}; the top reports are services/coordinator/run_report.py's (the verdict first). Backends are started
once and shared by the suites; everything started is stopped by PID at the end. Re-running with the same
--out resumes each suite (only missing samples run).

Suite options are the suites' own defaults except `BENCH_ALL_OPTIONS`: LoCoMo runs every conversation in its file
(the 7 of LoCoMo dev, 30 questions each), because its statistical unit is the conversation and the verdict can only
say better or worse with enough of them (a permutation test over 4 cannot go below p = 0.125; over 7, 0.016).
`--option suite.key=value` overrides either.
"""

from __future__ import annotations

import json
import time
import traceback
from pathlib import Path
from typing import Any

from services.adapters.registry import default_backends, get_spec, split_names
from services.coordinator.results import RESULTS_ROOT, RunDir, new_run_id, provenance
from services.coordinator.run_report import write_reports
from services.coordinator.runner import RunConfig, TerminalProgress, run_suite
from services.coordinator.suites.base import SuiteUnavailable
from services.coordinator.suites.registry import all_suites
from services.launcher import Rig

BENCH_ALL_OPTIONS: dict[str, dict[str, Any]] = {"locomo": {"conversations": 0}}  # 0 = every conversation
DEFAULT_SUITES = ("cortex-v1", "arclight", "octybot", "quaid-weeks", "poisoned-memory", "locomo", "longmemeval",
                  "madial")


def _csv(s: str) -> list[str]:
    return [x.strip() for x in (s or "").split(",") if x.strip()]


async def run_bench_all(args) -> int:
    out = Path(args.out) if args.out else RESULTS_ROOT / new_run_id("bench-all")
    top = RunDir(out)
    from services.cli import parse_targets

    targets = parse_targets(getattr(args, "target", None))
    backends = split_names(args.backends) or list(targets) or default_backends()
    unavailable: dict[str, str] = {}
    for b in backends:
        spec = get_spec(b)
        if b in targets:  # running elsewhere (e.g. a Kubernetes Service): its own host decides what it needs
            continue
        if spec.available is not None:
            ok, reason = spec.available()
            if not ok:
                unavailable[b] = reason
                print(f"[bench-all] backend {b} skipped: {reason}", flush=True)
    backends = [b for b in backends if b not in unavailable]
    registered = all_suites()
    suites = _csv(args.suites) or [s for s in DEFAULT_SUITES if s in registered]
    index: dict[str, Any] = {"run_id": top.run_id, "backends": backends, "skipped_backends": unavailable,
                             "local_llm": _local_llm_note(),
                             "suites": {}, **provenance()}
    await _wait_for_targets(targets, float(getattr(args, "target_wait_s", 0) or 0))
    rig = Rig(out / "procs")
    progress = TerminalProgress()
    t0 = time.monotonic()
    try:
        for name in suites:
            ts = time.monotonic()
            opts = {k: v for k, v in _options(args.option).items() if k.startswith(name + ".")}
            opts = {**BENCH_ALL_OPTIONS.get(name, {}), **{k.split(".", 1)[1]: v for k, v in opts.items()}}
            cfg = RunConfig(suite=name, backends=backends, out_dir=str(out / name), seed=args.seed, options=opts,
                            resume=not args.fresh, concurrency=args.concurrency, judge_passes=args.judge_passes,
                            embedder=args.embedder, targets=targets, in_process=args.in_process,
                            llm_roles=dict(getattr(args, "llm_roles", None) or {}))
            try:
                outcome = await run_suite(cfg, progress, rig=None if args.in_process else rig)
                index["suites"][name] = {"state": outcome.state, "dir": name, "failures": outcome.failures,
                                         "duration_s": time.monotonic() - ts}
            except SuiteUnavailable as e:
                index["suites"][name] = {"state": "skipped", "reason": str(e)}
                print(f"[bench-all] {name} skipped: {e}", flush=True)
            except Exception as e:  # one suite failing must not sink the others
                index["suites"][name] = {"state": "failed", "reason": f"{type(e).__name__}: {e}",
                                         "traceback": traceback.format_exc()[-2000:]}
                print(f"[bench-all] {name} failed: {e}", flush=True)
        if not args.no_costs:
            index["costs"] = await _run_costs(out / "costs")
    finally:
        rig.stop_all()
    index["duration_s"] = time.monotonic() - t0
    top.write_json("report.json", index)
    write_reports(out, index)  # verdict.json, report.md (verdict first), report.html
    print(f"\nbench-all: {out / 'report.md'}")
    bad = [n for n, s in index["suites"].items() if s["state"] == "failed"]
    return 1 if bad else 0


async def _wait_for_targets(targets: dict[str, str], timeout_s: float) -> None:
    """Wait (up to timeout_s each) until every --target answers SERVING on the gRPC health service: a bench Job
    started with its adapters (deploy/k8s) must not mark them failed while they are still starting. A target that
    stays down is left to the suites, which report it as that backend's start failure."""
    if timeout_s <= 0:
        return
    from services.common.grpc_util import wait_healthy

    for name, addr in targets.items():
        try:
            await wait_healthy(addr, timeout=timeout_s)
        except TimeoutError as e:
            print(f"[bench-all] target {name}: {e}", flush=True)


async def _run_costs(out: Path) -> dict[str, Any]:
    try:
        from services.turn_sim.bench import run_costs
    except ModuleNotFoundError as e:
        return {"state": "skipped", "reason": f"cost scenarios not available in this checkout ({e.name})"}
    try:
        res = await run_costs(out, quick=True, metrics_port=0)  # /metrics + a file_sd target while it runs
        return {"state": "ok", "dir": "costs", "results": res}
    except Exception as e:
        return {"state": "failed", "reason": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-2000:]}


def _local_llm_note() -> str:
    """Why the local-model profile is not in this run (it never is: `make bench-local` runs it)."""
    try:
        from services.local_llm.setup import local_llm_status

        ok, reason = local_llm_status()
    except Exception as e:  # a note must never sink the run
        ok, reason = False, f"{type(e).__name__}: {e}"
    return (f"not part of bench-all; the local model is set up ({reason}): run `make bench-local`" if ok
            else f"not part of bench-all, and the local model is not set up ({reason})")


def _options(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p in pairs or []:
        k, _, v = p.partition("=")
        try:
            out[k] = json.loads(v)
        except json.JSONDecodeError:
            out[k] = v
    return out
