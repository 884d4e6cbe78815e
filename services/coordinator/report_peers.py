"""Report sections about the backends themselves: each one's full Describe config, and the real peers beside
their re-implementations (`mem0-oss` beside `mem0`, `quaid-real` beside `quaid`, `http:cortex-mock` beside `cortex`) with the per-metric
difference, whatever the suite.

Pairs are found by condition name: a condition naming the re-implementation (`mem0`, `compacted + mem0`) pairs
with the same name naming the real peer, so answer conditions pair as well as retrieval ones.
"""

from __future__ import annotations

import json
import re
from typing import Any

# (re-implementation or plugin client, the real thing / generic client) pairs the report sets side by side
PEER_PAIRS = (("mem0", "mem0-oss"), ("quaid", "quaid-real"), ("cortex", "http:cortex-mock"))


def _md_table(header: list[str], rows: list[list[Any]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return "\n".join(out + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows])


def _swap(cond: str, a: str, b: str) -> str | None:
    pat = re.compile(rf"(?<![\w:-]){re.escape(a)}(?![\w:-])")
    return pat.sub(b, cond) if pat.search(cond) else None


def _fmt(v: Any) -> str:
    return "—" if not isinstance(v, int | float) else f"{v:.3f}" if abs(v) < 100 else f"{v:.0f}"


def render_peer_pairs(metrics: dict[str, Any]) -> str:
    conds = metrics.get("conditions") or {}
    blocks = []
    for a, b in PEER_PAIRS:
        for ca in sorted(conds):
            cb = _swap(ca, a, b)
            if cb is None or cb not in conds:
                continue
            oa, ob = conds[ca].get("overall") or {}, conds[cb].get("overall") or {}
            rows = []
            for metric in [m for m in oa if m in ob]:
                va, vb = (oa[metric] or {}).get("mean"), (ob[metric] or {}).get("mean")
                if isinstance(va, int | float) and isinstance(vb, int | float):
                    rows.append([metric, _fmt(va), _fmt(vb), _fmt(vb - va)])
            if rows:
                blocks.append(f"**{cb}** beside **{ca}**\n\n" + _md_table(["metric", ca, cb, "Δ"], rows))
    if not blocks:
        return ""
    return "\n\n".join(["## Real peers beside their re-implementations",
                        "Means over the same probes (the suite's own tables above give CIs and tests; the configuration "
                        "section below says how each was set up, e.g. whether Mem0 extracted facts).", *blocks])


def render_configs(run: dict[str, Any]) -> str:
    backends = run.get("backends") or {}
    if not backends:
        return ""
    out = ["## Backend configuration", "", "Every value each backend's Describe reported (what produced the numbers "
           "above)."]
    for name, b in backends.items():
        d = b.get("describe") or {}
        out += ["", f"**{name}** — {d.get('name', name)} {d.get('version', '')}", "",
                "```json", json.dumps(d.get("config") or {}, indent=1, sort_keys=True, default=str), "```"]
    return "\n".join(out)
