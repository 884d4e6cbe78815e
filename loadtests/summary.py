"""Summarise a headless locust run directory as a markdown section for the report (no locust import).

Reads what `locust --headless --csv <dir>/<prefix> --json-file <dir>/<prefix> --html <dir>/<prefix>.html`
wrote, plus the memrig extras when present (fault_timeline.json, fault_events.jsonl, requests-*.jsonl):

    from loadtests.summary import summarise_locust_run
    print(summarise_locust_run("results/load/2026-..."))

Locust users are a closed loop: a stalled target slows the senders down, so the percentiles here are
service times, "closed model, not corrected for coordinated omission". SLO numbers come from the open-loop
driver (loadtests/open_loop.py).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from loadtests.request_log import failures_by_window, read_request_log

CO_LABEL = "closed model, not corrected for coordinated omission"


def _num(x: Any) -> float | None:
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def read_stats_csv(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def read_locust_json(path: Path) -> list[dict[str, Any]]:
    return json.loads(path.read_text()) if path.exists() else []


def load_locust_run(run_dir: str | Path, prefix: str = "locust") -> dict[str, Any]:
    """The machine-readable figures of one run (also what the markdown is built from)."""
    d = Path(run_dir)
    stats = read_stats_csv(d / f"{prefix}_stats.csv")
    failures = read_stats_csv(d / f"{prefix}_failures.csv")
    history = read_stats_csv(d / f"{prefix}_stats_history.csv")
    entries = read_locust_json(d / f"{prefix}.json")
    rows = []
    total = None
    for r in stats:
        row = {
            "type": r.get("Type", ""), "name": r.get("Name", ""),
            "requests": int(_num(r.get("Request Count")) or 0), "failures": int(_num(r.get("Failure Count")) or 0),
            "rps": _num(r.get("Requests/s")), "median_ms": _num(r.get("Median Response Time")),
            "avg_ms": _num(r.get("Average Response Time")), "p95_ms": _num(r.get("95%")),
            "p99_ms": _num(r.get("99%")), "max_ms": _num(r.get("Max Response Time")),
        }
        if row["name"] == "Aggregated":
            total = row
        else:
            rows.append(row)
    start = min((e["start_time"] for e in entries), default=None)
    end = max((e["last_request_timestamp"] or e["start_time"] for e in entries), default=None)
    peak_users = max((int(_num(h.get("User Count")) or 0) for h in history), default=None)
    out: dict[str, Any] = {
        "label": CO_LABEL, "endpoints": rows, "total": total,
        "failures": [{"method": f.get("Method", ""), "name": f.get("Name", ""), "error": f.get("Error", ""),
                      "occurrences": int(_num(f.get("Occurrences")) or 0)} for f in failures],
        "start": start, "end": end, "duration_s": round(end - start, 2) if start and end else None,
        "peak_users": peak_users,
        "html": str(d / f"{prefix}.html") if (d / f"{prefix}.html").exists() else None,
    }
    tl_path, ev_path = d / "fault_timeline.json", d / "fault_events.jsonl"
    if tl_path.exists():
        out["fault_timeline"] = json.loads(tl_path.read_text())
    if ev_path.exists():
        out["fault_events"] = [json.loads(x) for x in ev_path.read_text().splitlines() if x.strip()]
    if any(d.glob("requests-*.jsonl")):
        recs = read_request_log(d)
        out["request_log"] = {"requests": len(recs), "failures": sum(not r.ok for r in recs)}
        windows = fault_windows_wall(out.get("fault_events", []))
        if windows:
            out["request_log"]["failures_vs_fault_windows"] = failures_by_window(recs, windows)
    return out


def fault_windows_wall(events: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """Wall-clock [apply start, remove end] per fault, from fault_events.jsonl (a fault never removed is open)."""
    applied: dict[str, float] = {}
    out = []
    for ev in events:
        if ev["action"] == "apply" and ev.get("ok", True):
            applied[ev["name"]] = ev["wall_start"]
        elif ev["action"] == "remove" and ev["name"] in applied:
            out.append((applied.pop(ev["name"]), ev["wall_end"]))
    out += [(s, float("inf")) for s in applied.values()]
    return sorted(out)


def _f(x: float | None, nd: int = 1) -> str:
    return "–" if x is None else f"{x:.{nd}f}"


def summarise_locust_run(run_dir: str | Path, prefix: str = "locust", title: str = "Locust load run") -> str:
    """A markdown section: per-endpoint table, failures, fault windows; labelled closed-model."""
    s = load_locust_run(run_dir, prefix)
    lines = [f"### {title} ({CO_LABEL})", ""]
    if not s["endpoints"]:
        return "\n".join(lines + [f"No locust stats found in `{run_dir}` (expected `{prefix}_stats.csv`).", ""])
    t = s["total"] or {}
    lines.append(f"Duration {_f(s['duration_s'])} s, peak users {s['peak_users']}, "
                 f"{t.get('requests', 0)} requests, {t.get('failures', 0)} failures, "
                 f"{_f(t.get('rps'), 2)} req/s overall. Percentiles are locust's (response times rounded to about "
                 "two significant digits) and measure service time only: users wait for each answer before "
                 "sending the next request.")
    lines += ["", "| type | endpoint | requests | failures | req/s | median ms | p95 ms | p99 ms | max ms |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in s["endpoints"] + ([t] if t else []):
        lines.append(f"| {r['type']} | {r['name']} | {r['requests']} | {r['failures']} | {_f(r['rps'], 2)} | "
                     f"{_f(r['median_ms'], 0)} | {_f(r['p95_ms'], 0)} | {_f(r['p99_ms'], 0)} | {_f(r['max_ms'], 0)} |")
    if any(r["type"] == "JOB" for r in s["endpoints"]):
        lines += ["", "`JOB` rows are synthetic end-to-end entries (ingest job submitted → completed, including the "
                  "polls); locust counts them in its Aggregated row too."]
    if s["failures"]:
        lines += ["", "Failures:", ""]
        for f in sorted(s["failures"], key=lambda f: -f["occurrences"])[:10]:
            lines.append(f"- {f['method']} {f['name']}: {f['error']} (x{f['occurrences']})")
    if s.get("fault_events"):
        lines += ["", "Fault timeline (applied through the fault proxy's admin API while users kept running):", ""]
        for ev in s["fault_events"]:
            lines.append(f"- {ev['rel_start_s']:.2f} s: {ev['action']} `{ev['name']}` ({ev.get('type')})"
                         + ("" if ev.get("ok", True) else f" — FAILED: {ev.get('error')}"))
        fw = s.get("request_log", {}).get("failures_vs_fault_windows")
        if fw:
            lines.append(f"- failures inside fault windows: {fw['inside']}, outside: {fw['outside']}")
    if s["html"]:
        lines += ["", f"HTML report: `{s['html']}`"]
    return "\n".join(lines) + "\n"
