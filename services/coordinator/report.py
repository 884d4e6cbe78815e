"""report.md for one run: provenance header, the suite's own tables, real peers beside their re-implementations,
what failed and why, and every backend's configuration."""

from __future__ import annotations

from collections import Counter
from typing import Any

from services.coordinator import costs
from services.coordinator.report_peers import render_configs, render_peer_pairs
from services.coordinator.suites.base import Suite


def fmt(v: Any, digits: int = 2, pct: bool = False) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v * 100:.1f}%" if pct else f"{v:.{digits}f}"
    return str(v)


def md_table(header: list[str], rows: list[list[Any]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


NATIVE_EMBEDDER_NOTE = ("The embedder is a stated variable: OpenClaw ships OpenAI text-embedding-3-small by default "
                        "(local: embeddinggemma-300m); these runs use the embedder in the Backends table, and "
                        "`memrig sensitivity openclaw` shows how the native result moves with the embedder and "
                        "minScore.")
NATIVE_STATE_NOTE = ("OpenClaw native memory is the state a real 2026.9.6 install holds, by profile: `default` (the "
                     "flush only by OpenClaw's own threshold, session-memory hook files at each /new, transcripts "
                     "indexed but not searched), `sessions` (transcripts searched too) and `flush-every-session` (an "
                     "idealisation: a flush after every session, MEMORY.md by rule). The decay clock: every question "
                     "is asked at its probe's reference time (Cortex V1 and LoCoMo: the day after the last session), "
                     "and OpenClaw halves a dated note's score every 30 days before it; `memrig sensitivity openclaw` "
                     "shows a labelled what-if without decay.")


def _model_tail(ident: dict[str, Any]) -> str:
    bits = [b for b in (ident.get("name"), ident.get("quantization"),
                        f"sha256 `{ident['sha256']}`" if ident.get("sha256") else "", ident.get("runtime")) if b]
    return f" ({', '.join(bits)})" if bits else ""


def render_header(run: dict[str, Any]) -> str:
    judge = run.get("judge") or {}
    llm = run.get("llm") or {}
    lines = [
        f"# memrig report: {run.get('suite')} ({run.get('run_id')})",
        "",
        f"{run.get('suite_description', '')}",
        "",
        f"- **Answer model:** `{llm.get('model')}`" + (" (offline llm-mock: deterministic extractive answerer, "
                                                       "not a language model)" if llm.get("offline_mock") else
                                                       _model_tail(llm)),
        f"- **Judge:** {judge.get('label', judge.get('model'))}, {judge.get('passes', 1)} pass(es), majority vote",
        f"- **Tokenizer:** {run.get('tokenizer')}",
        f"- **Seed:** {run.get('seed')}; options: `{run.get('options')}`",
        "- **Statistics:** 95% intervals by the suite's independent unit (each table says which: questions, or "
        "LoCoMo's conversations), a Wilson interval for a rate at 0 or 1, paired permutation tests; apart from "
        "latencies the tables are a function of the seed and the data alone (the order of samples.jsonl does not "
        "matter)",
        f"- **Git:** `{run.get('git_sha')}`; machine: {run.get('machine', {}).get('cores')} cores, "
        f"{(run.get('machine', {}).get('ram_bytes') or 0) / 2**30:.1f} GiB RAM",
    ]
    data = run.get("data") or {}
    if data.get("file"):  # a suite that names its data file (and variant) in its load info
        lines.append(f"- **Data:** `{data['file']}`" + (f", variant {data['variant']}" if data.get("variant") else ""))
    roles = render_llm_roles(run)
    if roles:
        lines += ["", roles]
    backends = run.get("backends") or {}
    if backends:
        lines += ["", "**Backends**", ""]
        rows = []
        for name, b in backends.items():
            d = b.get("describe") or {}
            emb = d.get("embedder") or "—"
            status = f"{b.get('status')}, reused" if b.get("reused") else b.get("status")
            rows.append([name, status, d.get("version", "—"), emb, b.get("reason", "")[:120]])
        lines.append(md_table(["backend", "status", "version", "embedder", "reason"], rows))
        reused = render_reused(run)
        if reused:
            lines += ["", reused]
        shared = render_replay_views(run)
        if shared:
            lines += ["", shared]
        if any(n.startswith("openclaw") for n in backends):
            lines += ["", f"> {NATIVE_EMBEDDER_NOTE}", "", f"> {NATIVE_STATE_NOTE}"]
        setup = render_prepare(run)
        if setup:
            lines += ["", setup]
        invalid = [n for n, b in backends.items() if "unit tests only" in ((b.get("describe") or {}).get("embedder") or "")]
        if invalid:
            lines += ["", f"> **Not a valid quality measurement:** {', '.join(invalid)} used the hash embedder "
                          "(unit tests only)."]
    return "\n".join(lines)


def render_reused(run: dict[str, Any]) -> str:
    """The backends whose result was copied from an earlier run (services/coordinator/reuse.py: nothing that
    decides it changed), each with that run and when it was measured; empty when none."""
    reused = {n: b["reused"] for n, b in (run.get("backends") or {}).items() if b.get("reused")}
    if not reused:
        return ""
    items = "; ".join(f"**{n}** reused from `{r.get('run_dir')}`, measured at {r.get('measured_at')}"
                      for n, r in reused.items())
    return (f"> **Reused results:** {items}. Nothing that decides them changed (data, seed, suite options, backend "
            "config and code, third-party code, embedder, models, grader), so these backends were not started: "
            "their samples, and so their scores, are that run's, and **their latency, setup and cost figures were "
            "measured then**, under that run's load. `--fresh` measures everything again.")


def render_replay_views(run: dict[str, Any]) -> str:
    """The backends answered from another backend's replay (run.json `replay_views`, services/coordinator/views.py);
    empty when none."""
    views = run.get("replay_views") or {}
    if not views:
        return ""
    items = "; ".join(f"**{n}** searched **{v['replay_of']}**'s replay as its `{v['view']}` view"
                      for n, v in sorted(views.items()))
    return (f"> **One replay, two backends:** {items}. They write the same state from a conversation and differ only "
            "in what they search, so the conversation was replayed once; the lists are those of the backend's own "
            "replay (tests/test_openclaw_real_views.py). Its ingest and settle figures are that replay's; its "
            "retrieve latency is its own searches'.")


def render_prepare(run: dict[str, Any]) -> str:
    """The setup each backend did in Prepare before a namespace's first timed search (run.json `prepare`), for the
    backends whose Prepare did something (a note) or that do not implement it; empty when none."""
    rows = [[name, p["namespaces"], f"{p['total_s']:.2f}", f"{p['p50_ms']:.1f}", f"{p['max_ms']:.1f}",
             "; ".join(p.get("notes") or []) if p.get("implemented", True) else "not implemented (nothing to prepare)"]
            for name, p in (run.get("prepare") or {}).items() if p.get("notes") or not p.get("implemented", True)]
    if not rows:
        return ""
    return ("**Setup before the first search** (Prepare, once per namespace right before its first timed retrieve; "
            "untimed: not in any retrieve latency)\n\n" +
            md_table(["backend", "namespaces", "total s", "p50 ms", "max ms", "what it did"], rows))


def render_failures(errors: list[dict[str, Any]], failures: dict[str, str]) -> str:
    if not errors and not failures:
        return ""
    lines = ["## Failures", ""]
    for name, reason in failures.items():
        lost = sorted({str(e.get("probe_id")) for e in errors
                       if f"backend:{name}" in (e.get("condition_context") or [])})
        what = (f"; {len(lost)} probe(s) lost: {', '.join(lost[:12])}{', …' if len(lost) > 12 else ''}"
                if lost else "")
        lines.append(f"- backend **{name}**: {reason}{what}")
    if errors:
        by = Counter((e.get("condition"), (e.get("error") or "")[:160]) for e in errors)
        lines += ["", f"{len(errors)} sample(s) did not complete (rerun the same command with the same --out to "
                      "run only these):", ""]
        lines.append(md_table(["condition", "error", "samples"], [[c, err, n] for (c, err), n in by.most_common(20)]))
    return "\n".join(lines)


def render_llm_roles(run: dict[str, Any]) -> str:
    """Which model played each LLM role, with quantisation, file digest and runtime, and the response cache."""
    roles = run.get("llm_roles") or {}
    if not roles:
        return ""
    from services.common.llm_roles import ROLES

    what = {"answerer": "answers", "judge": "judgements", "flush": "backends' memory notes (flush, extraction)",
            "compaction": "compaction summary"}
    rows = []
    for role in ROLES:
        ident = roles.get(role)
        if not ident:
            continue
        rows.append([role, what[role], f"`{ident.get('model')}`" + (" (offline llm-mock, not a model)"
                                                                   if ident.get("offline_mock") else ""),
                     ident.get("quantization") or "—", f"`{ident['sha256']}`" if ident.get("sha256") else "—",
                     ident.get("runtime") or "—", ident.get("max_tokens") or "—"])
    out = ["**Language models by role**", "",
           md_table(["role", "makes", "model", "quantisation", "file SHA-256", "runtime", "max tokens"], rows)]
    prompts_hash = run.get("prompts_hash")
    if prompts_hash:
        out += ["", f"Prompts: services/common/prompts.py (hash `{prompts_hash}`); OpenClaw's flush with the 2026.9.6 "
                    "prompts (services/adapters/openclaw/lifecycle.py); temperature 0 everywhere."]
    cache = (run.get("llm_cache") or {}).get("all_processes")
    if cache:
        out += ["", f"Response cache ({cache['mode']}): {cache['hits']} call(s) answered from the cache, "
                    f"{cache['new_entries']} new entr{'y' if cache['new_entries'] == 1 else 'ies'} (calls a model "
                    "answered) in this run, every process counted."]
    return "\n".join(out)


def render_judge_agreement(run: dict[str, Any], metrics: dict[str, Any]) -> str:
    ag = metrics.get("judge_agreement")
    if not ag:
        return ""
    from services.common.llm_roles import short_name
    from services.coordinator.judge_agreement import render

    return render(ag, short_name(run.get("judge") or {}))


def render_report(run: dict[str, Any], metrics: dict[str, Any], suite: Suite, errors: list[dict[str, Any]],
                  failures: dict[str, str], verdict_md: str = "") -> str:
    """report.md of one suite run; `verdict_md` (the suite's verdict) goes right under the title."""
    from services.coordinator.verdict import VERDICT_END

    header = render_header(run)
    if verdict_md:
        title, _, rest = header.partition("\n")
        header = "\n".join((title, "", verdict_md.rstrip(), "", VERDICT_END, rest))
    stop = run.get("interrupted")
    if stop:
        title, _, rest = header.partition("\n")
        header = "\n".join((title, "", f"> **Interrupted** (Ctrl-C at {stop.get('at')}): this report scores the "
                             f"{stop.get('samples_ok', 0)} sample(s) that finished before it; the rest never ran. "
                             "The same command with the same --out resumes the run (finished samples are kept).",
                             rest))
    parts = [header, "", suite.render(metrics)]
    sections = (render_judge_agreement(run, metrics), render_peer_pairs(metrics),
                costs.render(metrics.get("costs") or {}),
                costs.render_groups((metrics.get("costs_by_group") or {}).get("backends") or {},
                                    (metrics.get("costs_by_group") or {}).get("label") or "group",
                                    costs.cache_note(run.get("embedding_cache"))),
                render_failures(errors, failures), render_configs(run))
    parts += [x for sec in sections if sec for x in ("", sec)]
    return "\n".join(parts).rstrip() + "\n"
