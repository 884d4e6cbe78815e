"""Cost per message as a run's memory grows: the table that says whether the rig stays flat from 1k to 100k messages.

Input: run.json's "ingest" of a namespace-scoped run (services/coordinator/runner.run_streamed). Per backend, the
namespaces in the order they were ingested, each with `messages`, `ingest_s`, `settle_s`, `rss_bytes` (the backend's
processes right after settle) and `retrieve_ms` (every probe's timed retrieve on it).

The rules:
- A namespace sits at its **midpoint** m = (messages ingested on that backend before it) + messages / 2.
- The window of a mark N (1k, 10k, 100k, 250k) holds the namespaces with N/2 <= m < 3N/2. A mark is **reached**
  when the backend ingested at least N messages and the window is not empty. The first namespace of a lane (its
  midpoint below 500 messages) is in no window: it pays the process's warm-up (model load, first index), which is
  no cost per message.
- In a window: ingest ms per message = the median over its namespaces of 1000 x (ingest_s + settle_s) / messages
  (settle is part of the price: a backend that indexes after Ingest returns pays there). The median, because one
  namespace's wait that is no cost per message would otherwise decide the verdict: the Cortex plugin retries a
  capture the API refuses (a message over 10,000 characters) for ~30 s before dropping it, and settle waits for
  that, so an S namespace holding such a message takes 5x its neighbours. What the run paid in all,
  1000 x sum(ingest_s + settle_s) / sum(messages), is kept beside it (ingest_ms_per_message_total). Query ms =
  the median of the retrieve times; RSS = the largest reading.
- Growth = the value at the largest reached mark / the value at the smallest. **Flat** = growth <= FLAT_LIMIT (1.5)
  for both ingest and query; with one mark reached there is no growth to judge (None).
"""

from __future__ import annotations

from typing import Any

import numpy as np

MARKS = (1_000, 10_000, 100_000, 250_000)
FLAT_LIMIT = 1.5


def windows(namespaces: list[dict[str, Any]], marks: tuple[int, ...] = MARKS) -> dict[int, list[dict[str, Any]]]:
    """{mark: the namespace records in its window} for the reached marks, in the order given (ingestion order)."""
    total = sum(int(r.get("messages") or 0) for r in namespaces)
    mids, before = [], 0
    for r in namespaces:
        n = int(r.get("messages") or 0)
        mids.append(before + n / 2)
        before += n
    out: dict[int, list[dict[str, Any]]] = {}
    for mark in marks:
        rows = [r for r, m in zip(namespaces, mids, strict=True) if mark / 2 <= m < 3 * mark / 2]
        if total >= mark and rows:
            out[mark] = rows
    return out


def window_costs(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures of one window (see the module docstring); a figure without data is None."""
    msgs = sum(int(r.get("messages") or 0) for r in rows)
    spent = [float(r.get("ingest_s") or 0.0) + float(r.get("settle_s") or 0.0) for r in rows]
    per_ns = [1000.0 * t / int(r["messages"]) for t, r in zip(spent, rows, strict=True) if int(r.get("messages") or 0)]
    lat = [float(x) for r in rows for x in (r.get("retrieve_ms") or [])]
    rss = [int(r["rss_bytes"]) for r in rows if r.get("rss_bytes")]
    return {"namespaces": len(rows), "messages": msgs,
            "ingest_ms_per_message": float(np.median(per_ns)) if per_ns else None,
            "ingest_ms_per_message_total": 1000.0 * sum(spent) / msgs if msgs else None,
            "query_ms": float(np.median(lat)) if lat else None, "queries": len(lat),
            "rss_mb": max(rss) / 2**20 if rss else None}


def growth(first: float | None, last: float | None) -> float | None:
    return last / first if first and last is not None else None


def cost_table(ingest: dict[str, Any], marks: tuple[int, ...] = MARKS) -> dict[str, Any]:
    """Per backend whose ingest was streamed: {"marks": {mark: window_costs}, "ingest_growth", "query_growth",
    "rss_growth", "flat"} (growth from the smallest to the largest reached mark)."""
    out: dict[str, Any] = {}
    for backend, lane in sorted((ingest or {}).items()):
        if not isinstance(lane, dict) or lane.get("mode") != "streamed":
            continue
        rows = [r for r in (lane.get("namespaces") or {}).values() if "error" not in r]
        per = {m: window_costs(w) for m, w in windows(rows, marks).items()}
        entry: dict[str, Any] = {"marks": per, "messages": sum(int(r.get("messages") or 0) for r in rows),
                                 "lanes": int(lane.get("lanes") or 1),
                                 "ingest_growth": None, "query_growth": None, "rss_growth": None, "flat": None}
        if len(per) >= 2:
            lo, hi = per[min(per)], per[max(per)]
            entry["ingest_growth"] = growth(lo["ingest_ms_per_message"], hi["ingest_ms_per_message"])
            entry["query_growth"] = growth(lo["query_ms"], hi["query_ms"])
            entry["rss_growth"] = growth(lo["rss_mb"], hi["rss_mb"])
            gs = [entry["ingest_growth"], entry["query_growth"]]
            entry["flat"] = all(g is not None and g <= FLAT_LIMIT for g in gs) if any(g is not None for g in gs) \
                else None
        out[backend] = entry
    return out


def _fmt(x: float | None, spec: str) -> str:
    return "–" if x is None else format(x, spec)


def _mark(m: int) -> str:
    return f"{m // 1000}k"


def _lanes_note(table: dict[str, Any]) -> str:
    """Which backends shared the host, by their own lane count (a resumed run can mix them)."""
    shared = sorted(b for b, e in table.items() if e.get("lanes", 1) > 1)
    if not shared:
        return ""
    lanes = max(table[b]["lanes"] for b in shared)
    who = "" if len(shared) == len(table) else f" for {', '.join(shared)}"
    return (f" Measured with {lanes} backends at a time (--lanes {lanes}){who}: each such figure includes its "
            "neighbour's contention for the cores; --lanes 1 gives each backend the host alone.")


def render(table: dict[str, Any], marks: tuple[int, ...] = MARKS) -> str:
    """The markdown section; empty when no backend streamed."""
    if not table:
        return ""
    shown = [m for m in marks if any(m in e["marks"] for e in table.values())]
    head = " | ".join(f"ingest ms/msg @{_mark(m)}" for m in shown)
    qhead = " | ".join(f"query ms @{_mark(m)}" for m in shown)
    rhead = " | ".join(f"RSS MB @{_mark(m)}" for m in shown)
    out = ["## Cost per message as memory grows", "",
           "Each backend took one namespace at a time (ingest, its questions, release). The window of a mark N is the "
           "namespaces ingested around the N-th message (midpoint within N/2 to 3N/2); ingest = the median over those "
           "namespaces of (ingest + settle time) per message (the run's total per message is in metrics.json), query = median timed retrieve, RSS = the backend's processes after settle. Growth = "
           f"largest reached mark ÷ smallest; flat = growth ≤ {FLAT_LIMIT} for ingest and query "
           "(services/coordinator/costs.py)." + _lanes_note(table), "",
           f"| backend | messages | {head} | {qhead} | {rhead} | ingest growth | query growth | flat |",
           "|---|---:|" + "---:|" * (3 * len(shown)) + "---:|---:|---|"]
    for backend, e in table.items():
        cells = [_fmt(e["marks"].get(m, {}).get("ingest_ms_per_message"), ".2f") for m in shown]
        cells += [_fmt(e["marks"].get(m, {}).get("query_ms"), ".1f") for m in shown]
        cells += [_fmt(e["marks"].get(m, {}).get("rss_mb"), ",.0f") for m in shown]
        flat = "–" if e["flat"] is None else ("yes" if e["flat"] else "**no**")
        out.append(f"| {backend} | {e['messages']:,} | " + " | ".join(cells)
                   + f" | {_fmt(e['ingest_growth'], '.2f')} | {_fmt(e['query_growth'], '.2f')} | {flat} |")
    return "\n".join(out) + "\n"
