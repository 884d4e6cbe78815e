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

BEAM (`BENCH_ALL_OPTIONS["beam"]`, docs/results/beam.md) is a sample: six of the 16 100K-token dev conversations (the
fewest whose whole-conversation permutation test can reach p < 0.05: 2 / 2^6 = 0.031), retrieval only, and, when
the backends are the defaults (no --backends, no --target), only the backends of `SUITE_BACKENDS["beam"]`: those
that ingest and answer a 100K conversation in well under a minute here. Cortex (both profiles, about 3 minutes a
conversation: every capture window extracted and embedded) and openclaw-real (2 to 4 minutes a replay) would add
over half an hour for six conversations; the index report names them as not run there, and `make bench-beam`
runs them. Given backends (--backends, --target) run on every suite, BEAM included.
"""

from __future__ import annotations

import asyncio
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.adapters.registry import default_backends, get_spec
from services.coordinator import reuse as reuse_mod
from services.coordinator.plan import RunPlan, SuitePlan, run_plan, run_settings, suite_options
from services.coordinator.report_html import deferred_pages, render_pages
from services.coordinator.results import RESULTS_ROOT, RunDir, new_run_id, provenance
from services.coordinator.run_report import write_reports
from services.coordinator.runner import TerminalProgress, run_suite
from services.coordinator.suites.registry import all_suites
from services.launcher import Rig

BENCH_ALL_OPTIONS: dict[str, dict[str, Any]] = {
    "locomo": {"conversations": 0},  # 0 = every conversation
    "beam": {"sizes": "100K", "conversations": 6, "answer": False},  # the power table's floor: docs/results/beam.md
}
DEFAULT_SUITES = ("cortex-v1", "arclight", "octybot", "quaid-weeks", "poisoned-memory", "locomo", "longmemeval",
                  "madial", "beam")
# suite -> the only default backends it runs in bench-all (the module docstring says why); given backends run everywhere
SUITE_BACKENDS: dict[str, tuple[str, ...]] = {
    "beam": ("none", "full-context", "compacted", "bm25", "dense", "hybrid", "openclaw"),
}
SUITE_BACKENDS_WHY = {
    "beam": "not run on BEAM in bench-all: a 100K conversation costs it minutes here (six would add over half an "
            "hour); `make bench-beam` runs it",
}


@dataclass
class BenchAllPlan(RunPlan):
    """bench-all's plan: the suites' plan, the backends every suite runs, those left out before the run (unavailable here, with why), the
    cost scenarios on or off, and how long to wait for --target backends to serve."""

    backends: list[str] = field(default_factory=list)
    skipped_backends: dict[str, str] = field(default_factory=dict)
    costs: bool = True
    target_wait_s: float = 0.0


def plan(out: str | Path | None = None, suites: list[str] | None = None, backends: list[str] | None = None,
         options: dict[str, Any] | None = None, targets: dict[str, str] | None = None,
         llm_roles: dict[str, str] | None = None, costs: bool = True, target_wait_s: float = 0.0,
         **run: Any) -> BenchAllPlan:
    """The plan for `memrig bench-all`: `suites` (default DEFAULT_SUITES, those registered) over `backends`
    (default: the --target backends, else the default backends) less those unavailable here (a --target's own
    host decides what it needs); `options` as `suite.key` = value over BENCH_ALL_OPTIONS; `run`: RunPlan's run
    settings (seed, resume, concurrency, judge_passes, embedder, in_process). Prints each backend it leaves out."""
    targets = dict(targets or {})
    given = bool(backends or targets)
    backends = list(backends or []) or list(targets) or default_backends()
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
    names = list(suites or []) or [s for s in DEFAULT_SUITES if s in registered]
    options = options or {}
    plans = []
    for n in names:
        mine = backends if given or n not in SUITE_BACKENDS else [b for b in backends if b in SUITE_BACKENDS[n]]
        notes = {b: SUITE_BACKENDS_WHY[n] for b in backends if b not in mine}
        plans.append(SuitePlan(n, mine, {**BENCH_ALL_OPTIONS.get(n, {}), **suite_options(options, n)},
                               dict(llm_roles or {}), entry={"backend_notes": notes} if notes else {}))
    return BenchAllPlan(
        kind="bench-all", out=Path(out) if out else RESULTS_ROOT / new_run_id("bench-all"),
        suites=plans,
        run=run_settings(targets=targets, **run), backends=backends, skipped_backends=unavailable, costs=costs,
        target_wait_s=target_wait_s)


async def run_bench_all(p: BenchAllPlan) -> int:
    top = RunDir(p.out)
    index: dict[str, Any] = {"run_id": top.run_id, "backends": p.backends, "skipped_backends": p.skipped_backends,
                             "local_llm": _local_llm_note(),
                             "suites": {}, **provenance()}
    await _wait_for_targets(p.run.targets, p.target_wait_s)
    rig = Rig(p.out / "procs")
    t0 = time.monotonic()
    # Each suite's report.html (its plots: most of the time between two suites) is drawn at the end, on every core,
    # once nothing is measured; a run stopped before then has its report.md, and `memrig report` draws the rest.
    with deferred_pages() as pages:
        try:
            index["suites"] = await run_plan(p, run_suite, TerminalProgress(), None if p.run.in_process else rig)
            if p.costs:
                index["costs"] = await _run_costs(p.out / "costs", rig, getattr(p.run, "reuse", "off"))
        finally:
            rig.stop_all()
    await asyncio.to_thread(draw_suite_pages, p.out, index, pages)
    index["duration_s"] = time.monotonic() - t0
    top.write_json("report.json", index)
    write_reports(p.out, index)  # verdict.json, report.md (verdict first), report.html
    print(f"\nbench-all: {p.out / 'report.md'}")
    bad = [n for n, s in index["suites"].items() if s["state"] == "failed"]
    return 1 if bad else 0


def draw_suite_pages(out: Path, index: dict[str, Any], pages: list[Path]) -> None:
    """The suites' report.html pages noted in `pages` (report_html.render_pages); a suite whose page failed is
    marked failed with the reason, as it was when its page was drawn inside the suite."""
    by_dir = {(out / s["dir"]).resolve(): s for s in (index.get("suites") or {}).values() if s.get("dir")}
    for d, err in render_pages(pages).items():
        print(f"[bench-all] {d / 'report.html'} failed: {err}", flush=True)
        entry = by_dir.get(Path(d).resolve())
        if entry is not None:
            entry.update(state="failed", reason=f"report.html: {err}")


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


# What decides the cost scenarios' figures (services/cost_scenarios): the turn simulator, the drills they run, the
# collectors, the Cortex plugin client and the services it talks to, the offline model and the shared code.
COSTS_CODE = ("services/cost_scenarios", "services/turn_sim", "services/drills/base.py", "services/drills/catalog.py",
              "services/drills/runner.py", "collectors", "services/adapters/cortex", "services/cortex_mock",
              "services/fault_proxy", "services/llm_mock", "services/common", "services/launcher.py",
              *reuse_mod.FRAMEWORK)


def costs_key() -> tuple[str, dict[str, Any]]:
    """(key, its parts) of the quick cost scenarios: their code and the installed packages."""
    from services.coordinator.results import package_versions

    files: set[Path] = set()
    for rel in COSTS_CODE:
        files |= reuse_mod.tree_files(rel)
    parts = {"format": reuse_mod.REUSE_FORMAT, "what": "cost scenarios (quick)",
             "code": reuse_mod.files_digest(files), "packages": package_versions()}
    return reuse_mod.digest(parts), parts


def _stored_costs(key: str) -> dict[str, Any] | None:
    """The stored cost scenarios under `key` (their directory and meta), or None (absent or torn)."""
    import json

    d = reuse_mod.cache_root() / "costs" / key
    try:
        meta = json.loads((d / "meta.json").read_text())
    except (OSError, ValueError):
        return None
    if meta.get("key") != key or not (d / "files" / "costs.json").exists():
        return None
    return {"dir": d, "meta": meta}


def _store_costs(key: str, parts: dict[str, Any], out: Path, results: dict[str, Any]) -> None:
    """Copy a finished cost-scenario directory into the store (a temporary directory, renamed into place; meta.json
    written last inside it)."""
    import json
    import os
    import shutil
    from datetime import UTC, datetime

    root = reuse_mod.cache_root() / "costs"
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".{key}.{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(out, tmp / "files", ignore=shutil.ignore_patterns(".run"))
    (tmp / "meta.json").write_text(json.dumps({"key": key, "parts": parts, "run_dir": str(out),
                                               "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
                                               "results": results}, default=str))
    shutil.rmtree(root / key, ignore_errors=True)
    os.replace(tmp, root / key)


async def _run_costs(out: Path, rig: Rig, reuse: str = "off") -> dict[str, Any]:
    """The quick cost scenarios into `out`, their services started in the run's `rig`. With `reuse` "on" (bench-all
    without --fresh) a stored run of them under an unchanged key (costs_key: their code and packages) is copied
    instead of measured, and the entry says from which run and when (its latency and resource figures are from
    then); "store" measures and stores."""
    import shutil

    try:
        from services.cost_scenarios.scenarios import run_costs
    except ModuleNotFoundError as e:
        return {"state": "skipped", "reason": f"cost scenarios not available in this checkout ({e.name})"}
    key, parts = costs_key() if reuse != "off" else (None, None)
    if reuse == "on" and key and (hit := _stored_costs(key)):
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(hit["dir"] / "files", out)
        meta = hit["meta"]
        return {"state": "ok", "dir": "costs", "results": meta["results"],
                "reused": f"reused from {meta['run_dir']}, measured at {meta['measured_at']}"}
    try:
        res = await run_costs(out, rig, quick=True, metrics_port=0)  # /metrics + a file_sd target while it runs
    except Exception as e:
        return {"state": "failed", "reason": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-2000:]}
    entry: dict[str, Any] = {"state": "ok", "dir": "costs", "results": res}
    if key and parts and costs_key()[0] == key:  # not when the code changed while they ran
        try:
            _store_costs(key, parts, out, res)
        except OSError as e:  # a full disk costs the next run time, never this one
            entry["store_error"] = f"{type(e).__name__}: {e}"[:300]
    return entry


def _local_llm_note() -> str:
    """Why the local-model profile is not in this run (it never is: `make bench-local` runs it)."""
    try:
        from services.local_llm.setup import local_llm_status

        ok, reason = local_llm_status()
    except Exception as e:  # a note must never sink the run
        ok, reason = False, f"{type(e).__name__}: {e}"
    return (f"not part of bench-all; the local model is set up ({reason}): run `make bench-local`" if ok
            else f"not part of bench-all, and the local model is not set up ({reason})")

