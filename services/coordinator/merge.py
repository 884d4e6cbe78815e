"""One suite's runs measured apart, as one run directory: `memrig report OUT --merge DIR --merge DIR ...`.

A long suite (BEAM's whole dev split: hours per backend here) is measured backend by backend, in several sittings,
sometimes at different commits; the verdict compares backends, so they must meet in one report. The stored-results
store (services/coordinator/reuse.py) joins runs only of one checkout of one commit, since its keys hold the rig's
code. A merge joins runs whose samples were made the same way on the same questions, and says which run, commit
and time each backend's figures come from.

What must agree (else an error names the field and both directories): the suite, the data it loaded (`data`,
`probes`, `namespaces`), the suite options, the seed, the tokenizer, the embedder, the prompts, the answerer's and
the judge's model (not their loopback URLs), and the grader version each sample's budget account was computed with.
A backend may come from one directory only, and a sample key may appear once. Only finished runs merge: one
interrupted (`interrupted` in its run.json) or not yet finished (no `duration_s`) is refused, since its verdict
would rest on the conversations it happened to reach. The merged run.json is the first directory's, with the
backends, their cost records (`ingest`, `prepare`), failures and replay views of all, and `merged_from`: per
directory its run id, commit, start, duration (of its last sitting, and over all its sittings: `duration_all_s`,
also summed over the runs when every one is known), embedding cache and backends. Its `git_sha` names each commit
once, with the backends measured at it. The report is then made from these files as for any run (runner.finalize).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from services.common.types import ValidationError

SAME = ("suite", "options", "seed", "tokenizer", "embedder", "prompts_hash", "data", "probes", "namespaces")
MODEL_FIELDS = ("model", "offline_mock", "passes")  # an LLM's identity; its base_url is a per-run loopback port
UNION = ("ingest", "prepare", "failures", "replay_views")


class MergeError(ValidationError):
    """Runs that cannot be merged: the field says what differs."""


def _run(d: Path) -> dict[str, Any]:
    path = d / "run.json"
    if not path.is_file() or not (d / "samples.jsonl").is_file():
        raise MergeError(str(d), "not a suite run directory (run.json and samples.jsonl)")
    try:
        run = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise MergeError(str(path), f"not valid JSON ({e})") from None
    if not isinstance(run, dict) or not isinstance(run.get("backends"), dict):
        raise MergeError(str(path), "backends: missing")
    if stop := run.get("interrupted"):
        at = stop.get("at") if isinstance(stop, dict) else stop
        raise MergeError(f"{path}: interrupted", f"the run was interrupted at {at} with part of its samples: resume "
                         "it (the same command and --out) before merging")
    if run.get("duration_s") is None:
        raise MergeError(f"{path}: duration_s", "missing: the run has not finished (still running, or killed before it "
                         "could say so): let it finish, or resume it, before merging")
    return run


def _all_sittings(run: dict[str, Any]) -> float | None:
    """A finished run's time over all its sittings: `duration_all_s` for a resumed run (None when a sitting's length
    is unknown, as for a run resumed before run.json kept sittings), its `duration_s` for one measured in one
    sitting."""
    if run.get("sittings_s") or run.get("resumed"):
        return run.get("duration_all_s")
    return float(run["duration_s"])


def _model(ident: Any) -> dict[str, Any]:
    return {k: ident.get(k) for k in MODEL_FIELDS} if isinstance(ident, dict) else {"value": ident}


def _graders(samples: list[dict[str, Any]]) -> set[Any]:
    return {acc.get("grader") for s in samples for r in (s.get("retrievals") or {}).values()
            if isinstance(r, dict) and isinstance(acc := r.get("budget"), dict)}


def _samples(d: Path) -> list[dict[str, Any]]:
    out = []
    for n, line in enumerate((d / "samples.jsonl").read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            raise MergeError(f"{d / 'samples.jsonl'}:{n}", "not valid JSON") from None
    return out


def merge_runs(dirs: list[str | Path], out: str | Path) -> Path:
    """Write the merged run directory `out` (which must not exist, or be empty) from `dirs`; return it."""
    from services.coordinator.results import RunDir
    from services.coordinator.runner import finalize

    dirs = [Path(d) for d in dirs]
    out = Path(out)
    if len(dirs) < 2:
        raise MergeError("--merge", "give at least two run directories")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise MergeError(str(out), "exists and is not an empty directory")
    runs = [_run(d) for d in dirs]
    samples = [_samples(d) for d in dirs]
    base = runs[0]
    for d, run in zip(dirs[1:], runs[1:], strict=True):
        for k in SAME:
            if json.dumps(run.get(k), sort_keys=True) != json.dumps(base.get(k), sort_keys=True):
                raise MergeError(f"{d}/run.json: {k}", f"{run.get(k)!r:.200} differs from {dirs[0]}'s {base.get(k)!r:.200}")
        for role in ("llm", "judge"):
            if _model(run.get(role)) != _model(base.get(role)):
                raise MergeError(f"{d}/run.json: {role}", f"{_model(run.get(role))} differs from {dirs[0]}'s "
                                 f"{_model(base.get(role))}")
    graders = [_graders(s) for s in samples]
    if len(set().union(*graders)) > 1:
        raise MergeError("samples: budget.grader", "the samples were graded by different grader versions: "
                         + "; ".join(f"{d}: {sorted(g, key=str)}" for d, g in zip(dirs, graders, strict=True)))
    owner: dict[str, Path] = {}
    for d, run in zip(dirs, runs, strict=True):
        for b in run["backends"]:
            if b in owner:
                raise MergeError(f"backends: {b}", f"measured in both {owner[b]} and {d}")
            owner[b] = d
    seen: dict[str, Path] = {}
    for d, ss in zip(dirs, samples, strict=True):
        for s in ss:
            key = str(s.get("key"))
            if key in seen:
                raise MergeError(f"samples: {key}", f"in both {seen[key]} and {d}")
            seen[key] = d
    merged = dict(base)
    merged["run_id"] = out.name
    merged["backends"] = {b: r for run in runs for b, r in run["backends"].items()}
    merged["backends_requested"] = [b for run in runs for b in (run.get("backends_requested") or run["backends"])]
    for k in UNION:
        merged[k] = {b: v for run in runs for b, v in (run.get(k) or {}).items()}
    merged["merged_from"] = [{"dir": str(d), "run_id": run.get("run_id"), "git_sha": run.get("git_sha"),
                              "started_at": run.get("started_at"), "duration_s": run.get("duration_s"),
                              "duration_all_s": _all_sittings(run),
                              "embedding_cache": run.get("embedding_cache"), "backends": list(run["backends"])}
                             for d, run in zip(dirs, runs, strict=True)]
    by_commit: dict[Any, list[str]] = {}  # runs at one commit named once, in the order of the directories
    for m in merged["merged_from"]:
        by_commit.setdefault(m["git_sha"], []).extend(m["backends"])
    merged["git_sha"] = "; ".join(f"{sha} ({', '.join(bs)})" for sha, bs in by_commit.items())
    merged["embedding_cache"] = {}  # each run's own is in merged_from
    merged["duration_s"] = sum(float(m["duration_s"] or 0) for m in merged["merged_from"])
    merged.pop("sittings_s", None)  # the first run's; each run's total is in merged_from
    merged.pop("duration_all_s", None)
    if all(m["duration_all_s"] is not None for m in merged["merged_from"]):
        merged["duration_all_s"] = sum(m["duration_all_s"] for m in merged["merged_from"])
    out.mkdir(parents=True, exist_ok=True)
    rd = RunDir(out)
    try:
        rd.write_run(merged)
        rd.samples_path.write_text("".join(json.dumps(s) + "\n" for ss in samples for s in ss))
        finalize(rd)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)  # no half-made merge left to be read as a run
        raise
    return out
