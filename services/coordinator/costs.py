"""Cost per message as a run's memory grows: the table that says whether the rig stays flat from 1k to 100k messages.

Input: run.json's "ingest" of a namespace-scoped run (services/coordinator/runner.run_streamed). Per backend, the
namespaces in the order they were ingested, each with `messages`, `ingest_s`, `settle_s`, `rss_bytes` (the backend's
processes right after settle) and `retrieve_ms` (every probe's timed retrieve on it).

The rules:
- A namespace sits at its **midpoint** m = (messages ingested on that backend before it in the same pass) +
  messages / 2. A pass is one invocation of the run: a resumed run (the same --out again) starts new backend
  processes whose memory starts empty, so each record carries its pass and its lanes (runner.run_streamed) and a
  pass counts from 0. Before, a resumed run's namespaces were placed after the earlier passes' and its figures
  were labelled with the last pass's lanes.
- The window of a mark N (1k, 10k, 100k, 250k) holds the namespaces with N/2 <= m < 3N/2. A mark is **reached**
  when one pass ingested at least N messages on the backend and the window is not empty. The first namespace of a
  pass (its midpoint below 500 messages) is in no window: it pays the process's warm-up (model load, first index),
  which is no cost per message.
- In a window: ingest ms per message = the median over its namespaces of 1000 x (ingest_s + settle_s) / messages
  (settle is part of the price: a backend that indexes after Ingest returns pays there). The median, because one
  namespace's wait that is no cost per message would otherwise decide the verdict: the Cortex plugin retries a
  capture the API refuses (a message over 10,000 characters) for ~30 s before dropping it, and settle waits for
  that, so an S namespace holding such a message takes 5x its neighbours. What the run paid in all,
  1000 x sum(ingest_s + settle_s) / sum(messages), is kept beside it (ingest_ms_per_message_total). Query ms =
  the median of the retrieve times; RSS = the largest reading.
- Growth = the value at the largest reached mark / the value at the smallest. **Flat** = growth <= FLAT_LIMIT (1.5)
  for both ingest and query; with one mark reached there is no growth to judge (None).
- How sure: each growth has a 95% interval (stats.median_ratio_ci: the two windows' namespaces, or retrieve times,
  resampled on their own, 2,000 times, seed 0). The verdict is **settled** when the intervals agree with it: flat
  with every interval at or below FLAT_LIMIT, or not flat with an interval wholly above it. An S haystack holds
  ~490 messages, so the 1k window holds two namespaces: a verdict resting on two values says so. The interval is
  the spread between namespaces only; a host that runs faster or slower for the few seconds of a window moves
  every namespace in it together, which no resampling sees (a rerun does: README, "Cost per message").
"""

from __future__ import annotations

from typing import Any

import numpy as np

from services.coordinator.stats import median_ratio_ci

MARKS = (1_000, 10_000, 100_000, 250_000)
FLAT_LIMIT = 1.5


def windows(namespaces: list[dict[str, Any]], marks: tuple[int, ...] = MARKS) -> dict[int, list[dict[str, Any]]]:
    """{mark: the namespace records in its window} for the reached marks, in the order given (ingestion order).
    Messages are counted from the start of each record's pass (its "pass"; none = pass 0): a resumed run's backend
    processes start empty, so its first namespace is at the start of their memory, not after the earlier passes'."""
    mids: list[float] = []
    before: dict[int, int] = {}
    for r in namespaces:
        n, p = int(r.get("messages") or 0), pass_of(r)
        mids.append(before.get(p, 0) + n / 2)
        before[p] = before.get(p, 0) + n
    longest = max(before.values(), default=0)
    out: dict[int, list[dict[str, Any]]] = {}
    for mark in marks:
        rows = [r for r, m in zip(namespaces, mids, strict=True) if mark / 2 <= m < 3 * mark / 2]
        if longest >= mark and rows:
            out[mark] = rows
    return out


def pass_of(record: dict[str, Any]) -> int:
    """The pass a cost record was measured in (runner.run_streamed writes it; a record from before passes were
    kept is pass 0)."""
    return int(record.get("pass") or 0)


def passes(namespaces: list[dict[str, Any]]) -> int:
    return len({pass_of(r) for r in namespaces})


def _spent(r: dict[str, Any]) -> float:
    return float(r.get("ingest_s") or 0.0) + float(r.get("settle_s") or 0.0)


def ingest_per_message(rows: list[dict[str, Any]]) -> list[float]:
    """1000 x (ingest_s + settle_s) / messages of each namespace with messages: the values a window's median is of."""
    return [1000.0 * _spent(r) / int(r["messages"]) for r in rows if int(r.get("messages") or 0)]


def retrieve_times(rows: list[dict[str, Any]]) -> list[float]:
    return [float(x) for r in rows for x in (r.get("retrieve_ms") or [])]


def window_costs(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures of one window (see the module docstring); a figure without data is None."""
    msgs = sum(int(r.get("messages") or 0) for r in rows)
    spent = [_spent(r) for r in rows]
    per_ns = ingest_per_message(rows)
    lat = retrieve_times(rows)
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
        wins = windows(rows, marks)
        per = {m: window_costs(w) for m, w in wins.items()}
        # each record's own lanes; a record written before they were kept has its lane's (the last pass's)
        per_record = {int(r.get("lanes") or lane.get("lanes") or 1) for r in rows}
        lanes = max(per_record, default=int(lane.get("lanes") or 1))
        entry: dict[str, Any] = {"marks": per, "messages": sum(int(r.get("messages") or 0) for r in rows),
                                 "lanes": lanes, "lanes_mixed": len(per_record) > 1, "passes": passes(rows),
                                 "ingest_growth": None, "query_growth": None, "rss_growth": None,
                                 "ingest_growth_ci": None, "query_growth_ci": None, "flat": None, "settled": None}
        if len(per) >= 2:
            first, last = min(per), max(per)
            lo, hi = per[first], per[last]
            entry["ingest_growth"] = growth(lo["ingest_ms_per_message"], hi["ingest_ms_per_message"])
            entry["query_growth"] = growth(lo["query_ms"], hi["query_ms"])
            entry["rss_growth"] = growth(lo["rss_mb"], hi["rss_mb"])
            entry["ingest_growth_ci"] = median_ratio_ci(ingest_per_message(wins[first]), ingest_per_message(wins[last]))
            entry["query_growth_ci"] = median_ratio_ci(retrieve_times(wins[first]), retrieve_times(wins[last]))
            judge(entry)
        out[backend] = entry
    return out


def judge(entry: dict[str, Any]) -> None:
    """Set an entry's `flat` (growth <= FLAT_LIMIT for ingest and query) and `settled` from its growths, when it
    has at least one."""
    gs = [entry["ingest_growth"], entry["query_growth"]]
    if any(g is not None for g in gs):
        entry["flat"] = all(g is not None and g <= FLAT_LIMIT for g in gs)
        entry["settled"] = settled(entry)


def settled(entry: dict[str, Any]) -> bool:
    """Whether the growth intervals agree with the flat verdict (module docstring): flat, and every measured growth's
    interval at or below FLAT_LIMIT; or not flat, and some growth's interval wholly above it. A growth without an
    interval (a window of one namespace or one retrieve) leaves a flat verdict unsettled."""
    pairs = [(entry[f"{k}_growth"], entry[f"{k}_growth_ci"]) for k in ("ingest", "query")]
    if entry["flat"]:
        return all(ci is not None and ci[1] <= FLAT_LIMIT for g, ci in pairs if g is not None)
    return any(ci is not None and ci[0] > FLAT_LIMIT for g, ci in pairs if g is not None)


def _fmt(x: float | None, spec: str) -> str:
    return "–" if x is None else format(x, spec)


def _growth(g: float | None, ci: list[float] | tuple[float, float] | None) -> str:
    if g is None:
        return "–"
    return f"{g:.2f}" if ci is None else f"{g:.2f} [{ci[0]:.2f}, {ci[1]:.2f}]"


def _verdict(e: dict[str, Any]) -> str:
    if e["flat"] is None:
        return "–"
    word = "yes" if e["flat"] else "**no**"
    return word if e.get("settled") else f"{word} (unsettled)"


def _mark(m: int) -> str:
    return f"{m // 1000}k"


def _lanes_note(table: dict[str, Any]) -> str:
    """Which backends shared the host, by their own lane count (a resumed run can mix them)."""
    shared = sorted(b for b, e in table.items() if e.get("lanes", 1) > 1)
    if not shared:
        return ""
    lanes = max(table[b]["lanes"] for b in shared)
    named = [f"{b} (part of its namespaces)" if table[b].get("lanes_mixed") else b for b in shared]
    who = "" if len(shared) == len(table) and not any(table[b].get("lanes_mixed") for b in shared) \
        else f" for {', '.join(named)}"
    return (f" Measured with {lanes} backends at a time (--lanes {lanes}){who}: each such figure includes its "
            "neighbour's contention for the cores; --lanes 1 gives each backend the host alone.")


def _passes_note(table: dict[str, Any]) -> str:
    """Which backends a resumed run measured over more than one pass."""
    many = [f"{b} ({e['passes']})" for b, e in table.items() if e.get("passes", 1) > 1]
    if not many:
        return ""
    return (f" Measured over more than one pass of a resumed run: {', '.join(many)}; each pass started new "
            "processes, so its messages are counted from its own start.")


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
           "namespaces ingested around the N-th message of the backend's processes (midpoint within N/2 to 3N/2; "
           "a resumed run's pass counts from its own start); ingest = the median over those "
           "namespaces of (ingest + settle time) per message (the run's total per message is in metrics.json), query = median timed retrieve, RSS = the backend's processes after settle. Growth = "
           f"largest reached mark ÷ smallest [95% bootstrap interval over the two windows]; flat = growth ≤ {FLAT_LIMIT} "
           "for ingest and query; \"unsettled\": an interval crosses the limit, so this run alone cannot tell "
           "(a window of few namespaces). The interval does not see a host that ran faster or slower for a whole "
           "window: a rerun does (services/coordinator/costs.py)." + _lanes_note(table) + _passes_note(table),
           "",
           f"| backend | messages | {head} | {qhead} | {rhead} | ingest growth | query growth | flat |",
           "|---|---:|" + "---:|" * (3 * len(shown)) + "---:|---:|---|"]
    for backend, e in table.items():
        cells = [_fmt(e["marks"].get(m, {}).get("ingest_ms_per_message"), ".2f") for m in shown]
        cells += [_fmt(e["marks"].get(m, {}).get("query_ms"), ".1f") for m in shown]
        cells += [_fmt(e["marks"].get(m, {}).get("rss_mb"), ",.0f") for m in shown]
        out.append(f"| {backend} | {e['messages']:,} | " + " | ".join(cells)
                   + f" | {_growth(e['ingest_growth'], e.get('ingest_growth_ci'))}"
                   + f" | {_growth(e['query_growth'], e.get('query_growth_ci'))} | {_verdict(e)} |")
    return "\n".join(out) + "\n"


def group_table(ingest: dict[str, Any], group_of: dict[str, str], order: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """What one namespace of each group cost, per backend whose ingest was streamed: the table for a suite whose
    namespaces come in sizes (BEAM's 100K / 500K / 1M conversations). A streamed backend releases each namespace
    before the next, so the memory a namespace was searched in is its own; its group says how large that memory
    was, where the marks above count the messages a process has taken in over the run.

    Per group (in `order`; a namespace not in `group_of`, or one whose ingest failed, is left out):
    - `namespaces`, `messages` (all of them) and `messages_median` (one namespace's);
    - `ingest_ms_per_message`: the median over the group's namespaces of 1000 x (ingest_s + settle_s) / messages,
      leaving out the first namespace of each pass (it pays the process's warm-up, as in `windows`);
      `warmup_left_out` counts those; None when nothing is left;
    - `query_ms` / `query_p95_ms`: the median and the 95th percentile of the group's timed retrieves;
    - `rss_mb` / `rss_max_mb`: the median and the largest reading of the backend's processes after settle;
    - `embedded_share`: of the texts the group's ingests embedded or found in the shared embedding cache
      (`texts_embedded`, `texts_cached`, recorded where the backend reports its embedder), the share embedded
      here; None when no namespace recorded them or there was nothing to embed. 1 = a cold cache, 0 = an earlier
      run paid for every vector, and its ingest figure leaves that out.
    `ingest_growth` / `query_growth`: the figures of the last group in `order` that has both ÷ those of the first,
    each with its bootstrap interval (stats.median_ratio_ci over the two groups' values); `flat` and `settled` by
    the rules of `cost_table` (`judge`); `groups_compared` names the two groups, None when fewer than two have both
    figures."""
    out: dict[str, Any] = {}
    for backend, lane in sorted((ingest or {}).items()):
        if not isinstance(lane, dict) or lane.get("mode") != "streamed":
            continue
        firsts: set[int] = set()
        by: dict[str, list[dict[str, Any]]] = {}
        warm: dict[str, int] = {}
        for ns, r in (lane.get("namespaces") or {}).items():  # in the order ingested
            p = pass_of(r)
            first = p not in firsts
            firsts.add(p)
            g = group_of.get(ns)
            if g is None or "error" in r:
                continue
            by.setdefault(g, []).append({**r, "_warmup": first})
            warm[g] = warm.get(g, 0) + int(first)
        if not by:
            continue
        groups: dict[str, Any] = {}
        values: dict[str, tuple[list[float], list[float]]] = {}
        for g in [x for x in order if x in by]:
            rows = by[g]
            counted = [r for r in rows if not r["_warmup"]]
            per = ingest_per_message(counted)
            lat = retrieve_times(rows)
            rss = [int(r["rss_bytes"]) / 2**20 for r in rows if r.get("rss_bytes")]
            msgs = [int(r.get("messages") or 0) for r in rows]
            groups[g] = {"namespaces": len(rows), "messages": sum(msgs), "messages_median": float(np.median(msgs)),
                         "warmup_left_out": warm.get(g, 0),
                         "ingest_ms_per_message": float(np.median(per)) if per else None,
                         "query_ms": float(np.median(lat)) if lat else None,
                         "query_p95_ms": float(np.percentile(lat, 95)) if lat else None, "queries": len(lat),
                         "rss_mb": float(np.median(rss)) if rss else None, "rss_max_mb": max(rss) if rss else None,
                         "embedded_share": embedded_share(rows)}
            values[g] = (per, lat)
        rows_all = [r for rows in by.values() for r in rows]
        per_record = {int(r.get("lanes") or lane.get("lanes") or 1) for r in rows_all}
        entry: dict[str, Any] = {"groups": groups, "groups_compared": None, "ingest_growth": None,
                                 "lanes": max(per_record), "lanes_mixed": len(per_record) > 1,
                                 "passes": passes(rows_all),
                                 "query_growth": None, "ingest_growth_ci": None, "query_growth_ci": None,
                                 "flat": None, "settled": None}
        # the same two groups for both: the first and the last with an ingest and a query figure
        have = [g for g in groups if groups[g]["ingest_ms_per_message"] is not None and groups[g]["query_ms"] is not None]
        if len(have) >= 2:
            lo, hi = have[0], have[-1]
            entry["groups_compared"] = [lo, hi]
            for kind, idx, key in (("ingest", 0, "ingest_ms_per_message"), ("query", 1, "query_ms")):
                entry[f"{kind}_growth"] = growth(groups[lo][key], groups[hi][key])
                entry[f"{kind}_growth_ci"] = median_ratio_ci(values[lo][idx], values[hi][idx])
            judge(entry)
        out[backend] = entry
    return out


def embedded_share(rows: list[dict[str, Any]]) -> float | None:
    """Texts embedded ÷ (embedded + found in the cache) over the namespaces that recorded both; None without any."""
    have = [r for r in rows if "texts_embedded" in r and "texts_cached" in r]
    embedded = sum(int(r["texts_embedded"]) for r in have)
    total = embedded + sum(int(r["texts_cached"]) for r in have)
    return embedded / total if total else None


def cache_note(embedding_cache: dict[str, Any] | None) -> str:
    """A warning for the ingest figures when the embedding cache (run.json's `embedding_cache`: its vectors at the
    end and those this run added) already held vectors when the run started: a namespace embedded by an earlier run
    pays no embedding in this one, so two groups' ingest can differ by the cache, not by their size."""
    ec = embedding_cache or {}
    held = int(ec.get("vectors") or 0) - sum(int(v) for v in (ec.get("vectors_added") or {}).values())
    if held <= 0:
        return ""
    return (f" The embedding cache held {held:,} vectors when this run started: a namespace whose texts an earlier run "
            "embedded paid no embedding here, so an ingest figure, and its growth, can differ by what was cached "
            "rather than by size (an empty MEMRIG_CACHE_DIR gives every namespace a cold cache).")


def render_groups(table: dict[str, Any], label: str, note: str = "") -> str:
    """The markdown section of `group_table` (`label` names the groups, e.g. "size bucket"; `note` ends its
    paragraph, e.g. `cache_note`); empty without rows."""
    if not table:
        return ""
    out = [f"## Cost by {label}", "",
           f"What one namespace of each {label} cost, per backend. Each backend took one namespace at a time and "
           f"released it before the next, so the {label} is how large the memory it searched was. Ingest = the median "
           "over the namespaces of (ingest + settle time) per message, leaving out the first namespace of each pass "
           "(it pays the process's warm-up; `warm-up left out` counts them); query = the median and 95th percentile "
           "of the timed retrieves; RSS = the backend's processes right after settle, median and largest; embedded = "
           "of the texts its ingest needed vectors for, the share it embedded rather than found in the shared embedding "
           "cache (– where the backend does not report it or embeds nothing). Growth = "
           f"the last {label}'s figure ÷ the first's [95% bootstrap interval]; flat = growth ≤ {FLAT_LIMIT} for "
           "ingest and query (services/coordinator/costs.py `group_table`)." + _lanes_note(table)
           + _passes_note(table) + note,
           "",
           f"| backend | {label} | namespaces | messages each (median) | warm-up left out | ingest ms/msg | "
           "query ms p50 | query ms p95 | RSS MB median | RSS MB max | embedded |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for backend, e in table.items():
        for g, c in e["groups"].items():
            out.append(f"| {backend} | {g} | {c['namespaces']} | {c['messages_median']:,.0f} | {c['warmup_left_out']} "
                       f"| {_fmt(c['ingest_ms_per_message'], '.2f')} | {_fmt(c['query_ms'], '.1f')} "
                       f"| {_fmt(c['query_p95_ms'], '.1f')} | {_fmt(c['rss_mb'], ',.0f')} "
                       f"| {_fmt(c['rss_max_mb'], ',.0f')} | {_fmt(c.get('embedded_share'), '.0%')} |")
    compared = [(b, e) for b, e in table.items() if e["groups_compared"]]
    if compared:
        out += ["", f"| backend | {label}s compared | ingest growth | query growth | flat |", "|---|---|---:|---:|---|"]
        for b, e in compared:
            lo, hi = e["groups_compared"]
            out.append(f"| {b} | {hi} ÷ {lo} | {_growth(e['ingest_growth'], e.get('ingest_growth_ci'))} "
                       f"| {_growth(e['query_growth'], e.get('query_growth_ci'))} | {_verdict(e)} |")
    return "\n".join(out) + "\n"
