"""Run directories written by hand for the verdict, report and compare tests: samples as the runner appends them,
run.json as it writes it, then the runner's own `finalize` (metrics.json, report.md, report.html), so everything
downstream reads what a real run leaves behind. The numbers are chosen so every figure can be worked out on paper.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from services.coordinator.results import RunDir
from services.coordinator.runner import finalize

MOCK = {"model": "memrig-llm-mock", "base_url": "http://127.0.0.1:40000/v1", "offline_mock": True}


def describe(name: str, **config: Any) -> dict[str, Any]:
    return {"name": name, "version": "0.1.0", "config": {"k": 1, **config}, "capabilities": [], "embedder": "",
            "embedding_dim": 0}


def write_suite_run(path: Path, suite: str, samples: list[dict[str, Any]], backends: dict[str, dict[str, Any]],
                    llm: dict[str, Any] | None = None, judge: dict[str, Any] | None = None, seed: int = 0,
                    git_sha: str = "aaaa", extra: dict[str, Any] | None = None, html: bool = False) -> Path:
    """html: also report.html, whose plots (matplotlib) cost ~3 s a run; only the tests that read it ask."""
    rd = RunDir(path)
    run = {"run_id": path.name, "suite": suite, "options": {}, "seed": seed, "llm": llm or MOCK,
           "judge": {**(judge or MOCK), "passes": 1}, "embedder": "minilm", "tokenizer": "cl100k_base",
           "prompts_hash": "p1", "git_sha": git_sha, "packages": {"memrig": "0.1.0", "numpy": "2.0"},
           "machine": {"cores": 2, "ram_bytes": 2**33, "platform": "Linux", "python": "3.11.7"},
           "started_at": "2026-01-01T00:00:00+00:00",
           "backends": {b: {"describe": d, "status": "ok", "reason": ""} for b, d in backends.items()},
           "failures": {}, **(extra or {})}
    rd.write_run(run)
    rd.samples_path.write_text("".join(json.dumps(s) + "\n" for s in samples))
    finalize(rd, html=html)
    return path


def madial_sample(backend: str, i: int, hit: bool, tokens: float = 100.0, latency: float = 1.0,
                  claimed: bool | None = None) -> dict[str, Any]:
    """MADial probe d<i> (gold mem-<i>) answered by `backend`: the gold memory at rank 1 (shown whole at every context
    budget), or an unrelated one."""
    ev = f"mem-{i}" if hit else f"mem-9{i:02d}"
    return {"key": f"{backend}|d{i}", "suite": "madial", "condition": backend, "condition_context": [f"backend:{backend}"],
            "probe_id": f"d{i:02d}", "category": "user-1", "question": "q", "ground_truth": "", "expected": [],
            "evidence_ids": [f"mem-{i}"], "namespace": "archive", "meta": {"primary": f"mem-{i}"},
            "retrievals": {backend: {"memories": [{"id": ev, "score": 1.0, "evidence_ids": [ev], "text": "t"}],
                                     "latency_ms": latency, "server_ms": latency / 2, "degraded": False,
                                     "context_tokens": tokens,
                                     # the one memory shown whole at every budget (metrics/budget.account)
                                     "budget": {"tokens": int(tokens), "unlocated": 0, "grader": 2,
                                                "shown": {str(b): [ev] for b in (250, 500, 1000, 2000, 4000)},
                                                # what the backend claims: the gold id when `claimed`, else the same
                                                "claimed": {str(b): [f"mem-{i}" if claimed else ev]
                                                            for b in (250, 500, 1000, 2000, 4000)}}}},
            "context_tokens": tokens, "status": "ok"}


def madial_run(path: Path, hits: dict[str, set[int]], n: int = 10, tokens: dict[str, float] | None = None,
               latencies: dict[str, list[float]] | None = None, configs: dict[str, dict[str, Any]] | None = None,
               claims: dict[str, bool] | None = None, **kw: Any) -> Path:
    """A MADial run of n probes: backend b finds the gold memory on the probes in hits[b]; a backend in `claims`
    claims the gold id on every probe whatever it showed."""
    samples = [madial_sample(b, i, i in hs, (tokens or {}).get(b, 100.0),
                             ((latencies or {}).get(b) or [1.0] * n)[i], (claims or {}).get(b))
               for b, hs in hits.items() for i in range(n)]
    backends = {b: describe(b, **((configs or {}).get(b) or {})) for b in hits}
    return write_suite_run(path, "madial", samples, backends, **kw)


def cortex_sample(cond: str, context: list[str], i: int, hit: bool | None, score: int, tokens: float = 50.0,
                  latency: float = 2.0) -> dict[str, Any]:
    backend = next((c.split(":", 1)[1] for c in reversed(context) if c.startswith("backend:")), None)
    cat = "ABCD"[i % 4]
    rec = {backend: {"memories": [{"id": "m", "text": "x", "score": 1.0}], "formatted_context": "x",
                     "latency_ms": latency, "server_ms": 1.0, "degraded": False, "hit": hit}} if backend else {}
    return {"key": f"{cond}|{cat}{i}", "suite": "cortex-v1", "condition": cond, "condition_context": context,
            "probe_id": f"{cat}{i}", "category": cat, "question": "q", "ground_truth": "g", "expected": ["g"],
            "evidence_ids": [], "namespace": "project", "meta": {"compaction_retains": "yes"}, "retrievals": rec,
            "context_tokens": tokens, "answer": "a", "judge": {"score": score, "passes": [score]}, "status": "ok"}


def bench_all_dir(path: Path, suites: dict[str, str], backends: list[str], **index: Any) -> dict[str, Any]:
    """report.json of a bench-all run whose suite directories (already written under `path`) are `suites`
    (name -> state)."""
    idx = {"run_id": path.name, "backends": backends, "skipped_backends": {}, "git_sha": "aaaa",
           "machine": {"cores": 2}, "duration_s": 12.0,
           "suites": {n: ({"state": st, "dir": n, "failures": {}, "duration_s": 1.0} if st != "skipped"
                          else {"state": "skipped", "reason": "data not found"}) for n, st in suites.items()},
           **index}
    RunDir(path).write_json("report.json", idx)
    return idx
