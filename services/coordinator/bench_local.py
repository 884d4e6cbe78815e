"""`make bench-local` (`memrig bench-local`): the quality suites with a real language model, offline.

Every LLM role (answerer, judge, flush writer, compaction) is the rig's local model (services/local_llm:
Qwen2.5-Coder-1.5B-Instruct Q4_K_M on llama.cpp, 2 threads), so the Cortex V1 and LoCoMo tables say what a model
makes of each memory system's context, judged by a model, with OpenClaw's flush notes written by a model. The
profile is sized for 2 cores and the model's one decoding slot (each suite's time is in the run's report.md):

- Cortex V1, all 40 prompts: bare, compacted, OpenClaw native (default profile and flush-every-session, whose
  notes the model writes), compacted + cortex / bm25 / full-context;
- LoCoMo, 4 conversations × 6 questions (stratified, seeded), with the QA judge, and LongMemEval oracle, 8
  questions (stratified): hybrid, bm25, cortex and OpenClaw native (`default`, and `sessions`, which searches its
  transcripts and is native's strongest profile on LoCoMo; the port cannot stand in for it).

The report opens with the verdict on the model's answers: each backend against the strongest native profile and
BM25 on Cortex V1's judge score, LoCoMo's F1 and LongMemEval's QA accuracy.

Each suite's report carries the judge-agreement table (model judge vs the offline rubric judge vs EM/F1). Every
call goes through the response cache, so a second run costs no model time: `--compare-with DIR` then checks that
every table is identical to DIR's (timings apart) and the report says so, with the cache's hit count. Without the
model (`make setup-local-llm` not run) it says why and exits 2.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.adapters.registry import get_spec
from services.common import llm_cache
from services.common.llm_roles import ROLES
from services.common.types import ValidationError
from services.coordinator.determinism import quality_differences
from services.coordinator.plan import RunPlan, SuitePlan, run_plan, run_settings
from services.coordinator.results import RESULTS_ROOT, RunDir, new_run_id, provenance
from services.coordinator.run_report import strip_suite_verdict
from services.coordinator.runner import TerminalProgress, run_suite
from services.coordinator.verdict import write_verdict
from services.launcher import Rig

PROFILE: dict[str, dict[str, Any]] = {
    "cortex-v1": {"backends": ["none", "compacted", "openclaw-real", "openclaw-real[profile=flush-every-session]",
                               "cortex", "bm25", "full-context"], "options": {}},
    "locomo": {"backends": ["hybrid", "bm25", "cortex", "openclaw-real", "openclaw-real[profile=sessions]"],
               "options": {"conversations": 4, "questions": 6, "judge": True}},
    "longmemeval": {"backends": ["hybrid", "bm25", "cortex", "openclaw-real", "openclaw-real[profile=sessions]"],
                    "options": {"questions": 8}},
}
# When OpenClaw itself cannot run here (no Node packages), its port stands in, with the same profiles.
FALLBACK = {"openclaw-real": "openclaw"}
LOCAL_ROLES = dict.fromkeys(ROLES, "local")


def _port_cannot(name: str) -> bool:
    """A profile the port does not model (it indexes no transcripts: `sessions`), so OpenClaw has no stand-in."""
    from services.adapters.openclaw.lifecycle import resolve_profile
    from services.adapters.registry import parse_variant

    profile = parse_variant(name)[1].get("profile")
    return bool(profile) and not resolve_profile(str(profile)).port


def profile_backends(names: list[str]) -> tuple[list[str], dict[str, str]]:
    """The backends to run (unavailable ones replaced by their fallback) and {backend: why it was replaced}."""
    out, notes = [], {}
    for name in names:
        base = name.split("[", 1)[0]
        spec = get_spec(name)
        ok, reason = spec.available() if spec.available is not None else (True, "")
        if not ok and base in FALLBACK and not _port_cannot(name):
            alt = FALLBACK[base] + name[len(base):]
            notes[name] = f"replaced by {alt}: {reason}"
            name = alt
        elif not ok:
            notes[name] = f"skipped: {reason}"
            continue
        if name not in out:
            out.append(name)
    return out, notes


@dataclass
class BenchLocalPlan(RunPlan):
    """bench-local's plan: the profile's suites (each with its backends after `profile_backends`) and the previous
    run every table must match (`compare_with`), if any."""

    compare_with: Path | None = None


def plan(out: str | Path | None = None, suites: list[str] | None = None, compare_with: str | Path | None = None,
         **run: Any) -> BenchLocalPlan:
    """The plan for `memrig bench-local`: `suites` (default: every suite of PROFILE; one not in it is a
    ValidationError naming --suites), each over its profile's backends with every LLM role local; `run`: RunPlan's
    run settings (seed, resume, concurrency)."""
    names = list(suites or []) or list(PROFILE)
    unknown = [s for s in names if s not in PROFILE]
    if unknown:
        raise ValidationError("--suites", f"{', '.join(unknown)} not in the profile ({', '.join(PROFILE)})")
    plans = []
    for name in names:
        backends, notes = profile_backends(PROFILE[name]["backends"])
        plans.append(SuitePlan(name, backends, dict(PROFILE[name]["options"]), dict(LOCAL_ROLES),
                               entry={"backends": backends, "backend_notes": notes, "dir": name}))
    return BenchLocalPlan(kind="bench-local", out=Path(out) if out else RESULTS_ROOT / new_run_id("bench-local"),
                          suites=plans, compare_with=Path(compare_with) if compare_with else None,
                          run=run_settings(**run))


async def run_bench_local(p: BenchLocalPlan) -> int:
    from services.local_llm.setup import local_llm_status

    ready, why = local_llm_status()
    if not ready:
        print(f"bench-local: the local model is not set up: {why}", file=sys.stderr)
        return 2
    top = RunDir(p.out)
    index: dict[str, Any] = {"run_id": top.run_id, "profile": "local", "suites": {}, **provenance()}
    rig = Rig(p.out / "procs")
    cache = llm_cache.shared(os.environ.get("MEMRIG_LLM_CACHE_PATH") or None)  # the file every client uses
    before = cache.stats()

    def count_cache(s: SuitePlan):
        """Around each suite: the response cache's hits and new entries, and the comparison with --compare-with."""
        s_before = cache.stats()

        def after(entry: dict[str, Any]) -> None:
            entry["llm_cache"] = llm_cache.stats_delta(s_before, cache.stats())
            if p.compare_with and entry.get("dir"):
                prev = p.compare_with / s.suite
                entry["compare_with"] = str(prev)
                entry["differences"] = (quality_differences(p.out / s.suite, prev) if (prev / "metrics.json").exists()
                                        else [f"{prev}/metrics.json not found"])
        return after

    t0 = time.monotonic()
    try:
        index["suites"] = await run_plan(p, run_suite, TerminalProgress(), rig, around=count_cache)
        index["model"] = dict(rig.local_llm_identity)
    finally:
        rig.stop_all()
    index["llm_cache"] = {**llm_cache.stats_delta(before, cache.stats()), "path": str(cache.path)}
    index["duration_s"] = time.monotonic() - t0
    top.write_json("report.json", index)
    _verdict, verdict_md = write_verdict(p.out, index)  # a suite it cannot judge is named in it, not fatal
    top.write_text("report.md", render(p.out, index, verdict_md))
    print(f"\nbench-local: {p.out / 'report.md'}")
    bad = [n for n, s in index["suites"].items() if s["state"] == "failed"]
    differs = [n for n, s in index["suites"].items() if s.get("differences")]
    return 1 if bad or differs else 0


def render(out: Path, index: dict[str, Any], verdict_md: str = "") -> str:
    """report.md of a bench-local run: the verdict (answers and judgements by the model), then the run."""
    m = index.get("model") or {}
    c = index["llm_cache"]
    lines = [verdict_md.rstrip(), ""] if verdict_md else []
    lines += [f"# memrig bench-local ({index['run_id']})", "",
             f"Every LLM role (answers, judgements, OpenClaw's flush notes and other memory writing, compaction) is "
             f"**{m.get('name', m.get('model'))} {m.get('quantization', '')}** (`{m.get('file')}`, SHA-256 "
             f"`{m.get('sha256')}`, {m.get('licence')}, as published by {m.get('source')}) on "
             f"{m.get('runtime')}, context {m.get('n_ctx')} tokens, {m.get('threads')} threads, temperature 0. "
             f"Git `{index.get('git_sha')}`; {index.get('machine', {}).get('cores')} cores. "
             f"Total {index.get('duration_s', 0):.0f} s.", "",
             f"Response cache: {c['hits']} call(s) answered from the cache, {c['new_entries']} made by the model "
             f"in this run (every process counted).", "",
             "| suite | state | backends | time | LLM calls from cache / by the model | tables vs previous run | report |",
             "|---|---|---|---|---|---|---|"]
    for name, s in index["suites"].items():
        link = s.get("reason", "")[:120]
        if s.get("dir") and (out / name / "report.md").exists():
            link = f"[{name}/report.md]({name}/report.md)"
        cmp = "—"
        if "differences" in s:
            cmp = "identical to " + f"`{s['compare_with']}`" if not s["differences"] else \
                f"{len(s['differences'])} difference(s): " + "; ".join(s["differences"][:3])[:200]
        lc = s.get("llm_cache") or {}
        lines.append(f"| {name} | {s['state']} | {', '.join(s.get('backends', []))} | {s.get('duration_s', 0):.0f} s | "
                     f"{lc.get('hits', 0)} / {lc.get('new_entries', 0)} | {cmp} | {link} |")
    notes = [(n, b, r) for n, s in index["suites"].items() for b, r in (s.get("backend_notes") or {}).items()]
    if notes:
        lines += [""] + [f"> {n}: backend **{b}** {r}" for n, b, r in notes]
    lines.append("")
    for name, s in index["suites"].items():
        rep = out / name / "report.md"
        if s.get("dir") and rep.exists():
            text = rep.read_text()
            body = text.split("\n", 1)[1] if text.startswith("# ") else text
            body = strip_suite_verdict(body)  # the run's verdict above has it
            lines += [f"# {name}", body.replace("\n## ", "\n### ").replace("\n# ", "\n## "), ""]
    return "\n".join(lines) + "\n"

