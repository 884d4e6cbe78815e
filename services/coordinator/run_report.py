"""The bench-all run's own report: report.md, report.html and verdict.json at the top of results/<run-id>/.

Order: the verdict (services/coordinator/verdict.py, one screen), the run (suites with state, time and links,
skipped backends), every suite's section as its own report.md has it (its tables, peers, failures; without the
backend configuration, which is the same in every suite), the latency and resources section, and an appendix with
each backend's configuration once for the run.

Everything is rebuilt from the run directory (report.json, each suite's run.json, metrics.json and samples), so
`memrig report RUN_DIR` re-renders a finished run without running anything.
"""

from __future__ import annotations

import contextlib
import html
import json
import re
from pathlib import Path
from typing import Any

from services.coordinator.results import RunDir
from services.coordinator.verdict import VERDICT_END, VERDICT_HEADING, write_verdict

CONFIG_HEADING = "## Backend configuration"


def strip_backend_config(md: str) -> str:
    """A suite report without its "## Backend configuration" section (the run's appendix has it once)."""
    lines = md.split("\n")
    out, skipping = [], False
    for line in lines:
        if line.strip() == CONFIG_HEADING:
            skipping = True
            continue
        if skipping and re.match(r"^#{1,2} ", line):
            skipping = False
        if not skipping:
            out.append(line)
    return "\n".join(out).rstrip() + "\n"


def strip_suite_verdict(md: str) -> str:
    """A suite report without its own verdict (from "## Verdict" to the end marker): the run's verdict above has it."""
    lines = md.split("\n")
    if VERDICT_HEADING not in lines or VERDICT_END not in lines:
        return md
    a, b = lines.index(VERDICT_HEADING), lines.index(VERDICT_END)
    if b < a:
        return md
    return "\n".join(lines[:a] + lines[b + 1:])


def backend_configs(out: Path, index: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Per backend, its distinct Describe results over the suites (usually one), each with the suites it came
    from: {backend: [{"describe": {...}, "suites": [...]}, ...]}."""
    found: dict[str, list[dict[str, Any]]] = {}
    for name, s in (index.get("suites") or {}).items():
        run_json = out / (s.get("dir") or "") / "run.json"
        if not s.get("dir") or not run_json.exists():
            continue
        try:
            backends = json.loads(run_json.read_text()).get("backends") or {}
        except json.JSONDecodeError:
            continue
        for b, info in backends.items():
            d = (info or {}).get("describe")
            if not d:
                continue
            variants = found.setdefault(b, [])
            same = next((v for v in variants if v["describe"] == d), None)
            if same:
                same["suites"].append(name)
            else:
                variants.append({"describe": d, "suites": [name]})
    return found


def render_config_appendix(out: Path, index: dict[str, Any]) -> str:
    configs = backend_configs(out, index)
    if not configs:
        return ""
    n_suites = len([s for s in (index.get("suites") or {}).values() if s.get("dir")])
    lines = ["# Appendix: backend configuration", "",
             "Every value each backend's Describe reported, once for the run (the suites share the backend "
             "processes); a backend whose configuration differed between suites is listed once per variant, with "
             "the suites it ran in."]
    for b, variants in configs.items():
        for v in variants:
            d = v["describe"]
            where = "every suite" if len(v["suites"]) == n_suites and len(variants) == 1 else ", ".join(v["suites"])
            emb = f", embedder {d.get('embedder')}" if d.get("embedder") else ""
            lines += ["", f"**{b}**: {d.get('name', b)} {d.get('version', '')}{emb} ({where})", "", "```json",
                      json.dumps(d.get("config") or {}, indent=1, sort_keys=True, default=str), "```"]
    return "\n".join(lines)


def _backend_notes(suites: dict[str, Any]) -> list[str]:
    """One line per suite and reason for the run's backends a suite left out (its entry's `backend_notes`, e.g.
    bench-all's BEAM sample), so the verdict's "—" cells say why."""
    lines = []
    for name, s in suites.items():
        by_reason: dict[str, list[str]] = {}
        for b, reason in (s.get("backend_notes") or {}).items():
            by_reason.setdefault(reason, []).append(b)
        lines += [f"> Suite **{name}**: {', '.join(bs)} {reason}" for reason, bs in by_reason.items()]
    return lines


def render_index(out: Path, index: dict[str, Any], verdict_md: str = "") -> str:
    """report.md of a bench-all run."""
    lines = [verdict_md.rstrip(), ""] if verdict_md else []
    lines += [f"# The run ({index.get('run_id', out.name)})", "",
              f"Backends: {', '.join(index.get('backends') or [])}. Git `{index.get('git_sha')}`; "
              f"{(index.get('machine') or {}).get('cores')} cores. Total {index.get('duration_s', 0) or 0:.0f} s.", "",
              *(f"> Backend **{b}** skipped: {r}" for b, r in (index.get("skipped_backends") or {}).items()),
              *_backend_notes(index.get("suites") or {}),
              *([f"> Local-model profile (answers, judgements, flush notes by a real model) skipped: "
                 f"{index['local_llm']}"] if index.get("local_llm") else []),
              "",
              "| suite | state | time | report |", "|---|---|---|---|"]
    suites = index.get("suites") or {}
    for name, s in suites.items():
        link = s.get("reason", "")[:120]
        if s.get("dir"):
            link = f"[{name}/report.md]({name}/report.md)"
            if (out / name / "report.html").exists():
                link += f" · [plots]({name}/report.html)"
        lines.append(f"| {name} | {s['state']} | {s.get('duration_s', 0) or 0:.0f} s | {link} |")
    costs = index.get("costs") or {}
    if costs:
        lines.append(f"| costs (latency, resources, drills) | {costs.get('state')} | | "
                     + ("[below](#latency-and-resources)" if costs.get("state") == "ok" else costs.get("reason", "")[:120])
                     + (f" ({costs['reused']}: its figures are from then)" if costs.get("reused") else "")
                     + " |")
    reused = [f"{name}: {', '.join(s['reused'])}" for name, s in suites.items() if s.get("reused")]
    if reused:
        lines += ["", "> Reused from earlier runs, not measured again (nothing that decides them changed; each "
                      "suite's Backends note names the run and when, and their latencies are from then): "
                  + "; ".join(reused) + "."]
    lines.append("")
    for name, s in suites.items():
        rep = out / (s.get("dir") or name) / "report.md"
        if s.get("dir") and rep.exists():
            text = rep.read_text()
            body = text.split("\n", 1)[1] if text.startswith("# ") else text
            body = strip_backend_config(strip_suite_verdict(body))
            lines += [f"# {name}", body.replace("\n## ", "\n### ").replace("\n# ", "\n## "), ""]
    if costs.get("state") == "ok":
        try:
            from services.cost_scenarios.scenarios import render_costs_markdown

            md = render_costs_markdown(costs["results"])
            # Plots live in costs/; the section's headings move up one level beside the suites'.
            md = re.sub(r"!\[([^\]]*)\]\((?!https?:|/)([^)]+)\)", r"![\1](costs/\2)", md)
            lines.append(re.sub(r"^#(#+) ", r"\1 ", md, flags=re.M))
        except Exception as e:
            lines += ["# Latency and resources", f"(could not render costs: {e})"]
    elif costs:
        lines += ["# Latency and resources", f"{costs.get('state')}: {costs.get('reason')}"]
    appendix = render_config_appendix(out, index)
    if appendix:
        lines += ["", appendix]
    return "\n".join(lines).rstrip() + "\n"


INDEX_CSS = ("body{max-width:1800px}table{display:block;overflow-x:auto;max-width:100%;font-size:12px}"
             "td{vertical-align:top}"
             "a.better{color:#137333;font-weight:bold}a.worse{color:#b3261e;font-weight:bold}")
_WORD_LINK = re.compile(r'<a href="(#[^"]+)">(better|worse)</a>')


def render_index_html(out: Path, md: str) -> Path:
    """report.html of a bench-all run: report.md as HTML, the verdict first, every heading an anchor; right under
    the verdict's title, the verdict as a picture (report_html.verdict_picture, from verdict.json)."""
    from services.coordinator import report_html as rh

    title = f"memrig bench-all {out.name}"
    body = rh.markdown_to_html(md, out).replace("<table>", '<table class="verdict">', 1)  # the first table is the verdict's
    body = _WORD_LINK.sub(r'<a class="\2" href="\1">\2</a>', body)
    picture = ""
    with contextlib.suppress(OSError, ValueError, AttributeError, KeyError, TypeError):  # never costs the report
        picture = rh.verdict_picture(json.loads((out / "verdict.json").read_text()))
    if picture and "</h1>" in body:
        end = body.index("</h1>") + len("</h1>")
        body = body[:end] + "\n" + picture + body[end:]
    doc = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
           f"<style>{rh.CSS}{INDEX_CSS}{rh.VERDICT_CSS}{rh.PICTURE_CSS}</style></head><body>" + body + "</body></html>")
    path = out / "report.html"
    path.write_text(doc)
    return path


def write_reports(out: str | Path, index: dict[str, Any]) -> Path:
    """verdict.json, report.md and report.html of a bench-all run directory; returns report.md's path."""
    out = Path(out)
    _, verdict_md = write_verdict(out, index)
    md = render_index(out, index, verdict_md)
    path = RunDir(out).write_text("report.md", md)
    render_index_html(out, md)
    return path


def is_bench_all_dir(path: str | Path) -> bool:
    p = Path(path)
    return (p / "report.json").exists() and not (p / "run.json").exists()


def rerender(out: str | Path, rescore: bool = True) -> Path:
    """Rebuild a finished bench-all run's reports from its files: each suite re-scored from its samples (unless
    `rescore` is false) and the top report.md / report.html / verdict.json written again. A suite recorded as failed
    whose directory holds its run.json and samples (its probes ran; its scoring raised) is scored again too, and
    takes its state from that scoring; its earlier failure is kept under `rescored_after`."""
    out = Path(out)
    index_path = out / "report.json"
    if not index_path.exists():
        raise FileNotFoundError(f"{index_path}: missing (not a bench-all run directory)")
    try:
        index = json.loads(index_path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{index_path}: not valid JSON ({e})") from None
    if not isinstance(index.get("suites"), dict):
        raise ValueError(f"{index_path}: suites: missing (not a bench-all index)")
    if rescore:
        from services.coordinator.report_html import deferred_pages, render_pages
        from services.coordinator.runner import finalize

        with deferred_pages() as pages:  # the suites' report.html: drawn below, one process per core
            for name, s in index["suites"].items():
                if not s.get("dir") and s.get("state") == "failed" and (out / name / "samples.jsonl").exists():
                    s["rescored_after"] = {k: s.pop(k) for k in ("reason", "traceback") if k in s}
                    s["dir"] = name
                d = out / (s.get("dir") or "")
                if s.get("dir") and (d / "run.json").exists() and (d / "samples.jsonl").exists():
                    _, state = finalize(RunDir(d))
                    s["state"] = state
        for d, err in render_pages(pages).items():
            print(f"warning: {d / 'report.html'} not written: {err}", flush=True)
        RunDir(out).write_json("report.json", index)
    return write_reports(out, index)
