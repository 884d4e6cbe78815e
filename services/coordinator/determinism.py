"""What must not change between two runs with the same seed and data: everything in metrics.json and the report
tables except wall-clock timings.

`quality_view(metrics)` blanks the timing figures (latency summaries, per-probe latency metrics and their
comparisons, durations) and the addresses of the services a run started and recomputes each scorecard without the timing comparisons, so two runs can be compared
byte for byte: `json.dumps(quality_view(m), sort_keys=True)` and `suite.render(quality_view(m))` must be equal.
`quality_differences(a, b)` does that for two run directories and lists the first differences (`memrig compare`,
services/coordinator/compare.py `compare_runs`, is the other comparison: which figures moved beyond their
intervals).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

# Keys whose values are wall-clock measurements (metric names, summary keys, sample/run fields).
TIMING_KEYS = frozenset({"latency", "latency_ms", "server_ms", "duration_s", "duration_ms", "p50_ms", "p95_ms",
                         "p99_ms", "mean_ms", "max_ms"})
# Addresses of the services a run started (their ports are picked free each time).
ADDRESS_KEYS = frozenset({"base_url"})


def _blank(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _blank(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_blank(v) for v in x]
    return None if isinstance(x, int | float) and not isinstance(x, bool) else x


def _strip(x: Any) -> Any:
    if isinstance(x, dict):
        out: dict[str, Any] = {}
        for k, v in x.items():
            if k in TIMING_KEYS:
                out[k] = _blank(v)
            elif k in ADDRESS_KEYS:
                out[k] = None
            elif k == "comparisons" and isinstance(v, dict):
                out[k] = {cond: _strip_comparison(c) for cond, c in v.items()}
            else:
                out[k] = _strip(v)
        return out
    if isinstance(x, list):
        return [_strip(v) for v in x]
    return x


def _strip_comparison(c: Any) -> Any:
    if not isinstance(c, dict) or "comparisons" not in c or not isinstance(c["comparisons"], list):
        return _strip(c)
    kept = [x for x in c["comparisons"] if x.get("metric") not in TIMING_KEYS]
    winners = [x.get("winner") for x in kept]
    wins, losses = winners.count("b"), winners.count("a")
    sc = {"wins": wins, "losses": losses, "ties": winners.count("tie"), "n/a": winners.count("n/a"),
          "metrics": len(kept), "verdict": "b" if wins > losses else "a" if losses > wins else "tie"}
    return {**_strip({k: v for k, v in c.items() if k not in ("comparisons", "scorecard")}),
            "comparisons": _strip(kept), "scorecard": sc}


def quality_view(metrics: dict[str, Any]) -> dict[str, Any]:
    """A copy of `metrics` with every timing figure None and scorecards counted over quality metrics only."""
    return _strip(copy.deepcopy(metrics))


def tree_differences(x: Any, y: Any, root: str, limit: int = 10) -> list[str]:
    """Where two JSON-like trees differ, as `path: a != b` lines, at most `limit`: dicts by key, lists of one
    length by index, anything else by equality (a list that changed length is one difference)."""
    diffs: list[str] = []

    def walk(x: Any, y: Any, path: str) -> None:
        if len(diffs) >= limit:
            return
        if isinstance(x, dict) and isinstance(y, dict):
            for k in sorted(set(x) | set(y)):
                walk(x.get(k), y.get(k), f"{path}.{k}")
        elif isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
            for i, (u, v) in enumerate(zip(x, y, strict=True)):
                walk(u, v, f"{path}[{i}]")
        elif x != y:
            diffs.append(f"{path}: {x!r} != {y!r}")

    walk(x, y, root)
    return diffs


def quality_differences(a: str | Path, b: str | Path, limit: int = 10) -> list[str]:
    """Differences between two runs' metrics.json quality views ([] when identical)."""
    ma = quality_view(json.loads((Path(a) / "metrics.json").read_text()))
    mb = quality_view(json.loads((Path(b) / "metrics.json").read_text()))
    return tree_differences(ma, mb, "metrics", limit)
