"""`make bench-local` (`memrig bench-local`): the quality suites with a real language model, offline.

Every LLM role (answerer, judge, flush writer, compaction) is the rig's local model (services/local_llm:
Qwen2.5-Coder-1.5B-Instruct Q4_K_M on llama.cpp, 2 threads), so the Cortex V1 and LoCoMo tables say what a model
makes of each memory system's context, judged by a model, with OpenClaw's flush notes written by a model. The
profile is sized to finish in about an hour on 2 cores (one decoding slot; a 1.9k-token LoCoMo prompt is ~14 s):

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

import argparse
import asyncio
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from services.adapters.registry import get_spec
from services.common import llm_cache
from services.common.llm_roles import ROLES
from services.coordinator.determinism import compare_runs
from services.coordinator.results import RESULTS_ROOT, RunDir, new_run_id, provenance
from services.coordinator.run_report import strip_suite_verdict
from services.coordinator.runner import RunConfig, TerminalProgress, run_suite
from services.coordinator.suites.base import SuiteUnavailable
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


async def run_bench_local(args: argparse.Namespace) -> int:
    from services.local_llm.setup import local_llm_status

    suites = [s.strip() for s in (args.suites or ",".join(PROFILE)).split(",") if s.strip()]
    unknown = [s for s in suites if s not in PROFILE]
    if unknown:
        print(f"bench-local: --suites: {', '.join(unknown)} not in the profile ({', '.join(PROFILE)})", file=sys.stderr)
        return 2
    ready, why = local_llm_status()
    if not ready:
        print(f"bench-local: the local model is not set up: {why}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else RESULTS_ROOT / new_run_id("bench-local")
    top = RunDir(out)
    index: dict[str, Any] = {"run_id": top.run_id, "profile": "local", "suites": {}, **provenance()}
    rig = Rig(out / "procs")
    progress = TerminalProgress()
    cache = llm_cache.shared(os.environ.get("MEMRIG_LLM_CACHE_PATH") or None)  # the file every client uses
    before = cache.stats()
    t0 = time.monotonic()
    try:
        for name in suites:
            prof = PROFILE[name]
            backends, notes = profile_backends(prof["backends"])
            ts = time.monotonic()
            cfg = RunConfig(suite=name, backends=backends, out_dir=str(out / name), seed=args.seed,
                            options=dict(prof["options"]), resume=not args.fresh, concurrency=args.concurrency,
                            llm_roles=dict(LOCAL_ROLES))
            s_before = cache.stats()
            entry: dict[str, Any] = {"backends": backends, "backend_notes": notes, "dir": name}
            try:
                outcome = await run_suite(cfg, progress, rig=rig)
                entry.update(state=outcome.state, failures=outcome.failures)
            except SuiteUnavailable as e:
                entry.update(state="skipped", reason=str(e))
                entry.pop("dir")
                print(f"[bench-local] {name} skipped: {e}", flush=True)
            except Exception as e:  # one suite failing must not sink the others
                entry.update(state="failed", reason=f"{type(e).__name__}: {e}", traceback=traceback.format_exc()[-2000:])
                print(f"[bench-local] {name} failed: {e}", flush=True)
            entry["duration_s"] = time.monotonic() - ts
            entry["llm_cache"] = llm_cache.stats_delta(s_before, cache.stats())
            if args.compare_with and entry.get("dir"):
                prev = Path(args.compare_with) / name
                entry["compare_with"] = str(prev)
                entry["differences"] = (compare_runs(out / name, prev) if (prev / "metrics.json").exists()
                                        else [f"{prev}/metrics.json not found"])
            index["suites"][name] = entry
        index["model"] = dict(rig.local_llm_identity)
    finally:
        rig.stop_all()
    index["llm_cache"] = {**llm_cache.stats_delta(before, cache.stats()), "path": str(cache.path)}
    index["duration_s"] = time.monotonic() - t0
    top.write_json("report.json", index)
    _verdict, verdict_md = write_verdict(out, index)  # a suite it cannot judge is named in it, not fatal
    top.write_text("report.md", render(out, index, verdict_md))
    print(f"\nbench-local: {out / 'report.md'}")
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="memrig bench-local", description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=None, help="results directory (default results/bench-local-<time>)")
    ap.add_argument("--suites", default="", help=f"comma-separated subset of {', '.join(PROFILE)}")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--concurrency", type=int, default=2,
                    help="probes in flight (the model decodes one request at a time; 2 keeps it busy)")
    ap.add_argument("--fresh", action="store_true", help="discard samples already in --out instead of resuming")
    ap.add_argument("--compare-with", default=None,
                    help="a previous bench-local directory: every table must be identical (timings apart)")
    ap.add_argument("--no-llm-cache", action="store_true", help="call the model for every request (refresh the cache)")
    args = ap.parse_args(argv)
    if args.no_llm_cache:
        os.environ["MEMRIG_LLM_CACHE"] = "refresh"
    return asyncio.run(run_bench_local(args))


if __name__ == "__main__":
    sys.exit(main())
