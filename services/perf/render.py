"""report.md and the plots of a bench-perf run, rendered from results.json alone (pure functions of it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def fmt(v: Any, digits: int = 2, unit: str = "") -> str:
    """A number for a table cell: '—' for missing, thousands separators for large values."""
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}{unit}"
    if isinstance(v, float):
        if abs(v) >= 1000:
            return f"{v:,.0f}{unit}"
        return f"{v:.{digits}f}{unit}"
    return str(v)


def fmt_bytes(v: float | None) -> str:
    if v is None:
        return "—"
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if abs(v) >= scale:
            return f"{v / scale:.1f} {unit}"
    return f"{v:.0f} B"


def fmt_ratio(v: float | None) -> str:
    return "—" if v is None else f"{v:.1f}×"


def backend_rows(backends: list[dict[str, Any]]) -> list[str]:
    head = ("| backend | memories | ingest mem/s | retrieve in-process p50 / p99 ms | retrieve gRPC p50 / p99 ms "
            "| floor p50 ms | gRPC ÷ floor (p50) | gRPC hop p50 ms | RSS / memory | disk / memory |")
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for b in backends:
        name = b["backend"] + (" (reference)" if b.get("reference") else "")
        if b.get("status") == "error":
            lines.append(f"| {name} | — | error: {b.get('reason', '')} | | | | | | | |")
            continue
        gname, iname = b["paths"]["grpc"], b["paths"]["in_process"]
        for s in b["sizes"]:
            if s.get("status") != "ok":
                lines.append(f"| {name} | {s['n']:,} | {s.get('reason', s.get('status'))} | | | | | | | |")
                continue
            g, i = s["retrieve"].get(gname, {}), s["retrieve"].get(iname, {})
            ing = s.get("ingest_items_per_s_grpc") or s.get("ingest_items_per_s_in_process")
            # a step whose ingest did not settle in time: its rate counts only what was done, not a real rate
            unsettled = " (not settled)" if s.get("settled") is False else ""
            lines.append(
                f"| {name} | {s['n']:,} | {fmt(ing, 0)}{unsettled} | {fmt(i.get('p50'))} / {fmt(i.get('p99'))} "
                f"| {fmt(g.get('p50'))} / {fmt(g.get('p99'))} | {fmt(s.get('floor_p50_ms'), 3)} "
                f"| {fmt_ratio(s.get('ratio_grpc_to_floor_p50'))} | {fmt(s.get('grpc_hop_p50_ms'), 3)} "
                f"| {fmt_bytes(s.get('rss_per_memory_bytes'))} | {fmt_bytes(s.get('disk_per_memory_bytes'))} |")
    return lines


def cortex_path_rows(backends: list[dict[str, Any]]) -> list[str]:
    rows = []
    for b in backends:
        for s in b.get("sizes", []):
            if s.get("status") != "ok" or "proxy_added_p50_ms" not in s:
                continue
            r = s["retrieve"]
            rows.append(f"| {b['backend']} | {s['n']:,} | {fmt(r.get('in-process direct', {}).get('p50'))} "
                        f"| {fmt(r.get('in-process via proxy', {}).get('p50'))} "
                        f"| {fmt(r.get('gRPC via proxy', {}).get('p50'))} | {fmt(s.get('proxy_added_p50_ms'), 3)} "
                        f"| {fmt(s.get('grpc_hop_p50_ms'), 3)} | {fmt(s.get('facts'))} |")
    if not rows:
        return []
    return ["| backend | memories | in-process direct p50 ms | in-process via proxy p50 ms | gRPC via proxy p50 ms "
            "| proxy adds (p50) ms | gRPC hop (p50) ms | facts extracted |",
            "|---|---:|---:|---:|---:|---:|---:|---:|", *rows]


def target_rows(targets: dict[str, dict[str, Any]]) -> list[str]:
    lines = ["| target | status | measured | limit |", "|---|---|---|---|"]
    for name, t in targets.items():
        measured = t.get("measured_ms")
        if "measured_fraction" in t:
            m = f"{t['measured_fraction'] * 100:.2f}% ({fmt(t.get('measured_ms'), 4)} ms of {fmt(t.get('fastest_retrieve_ms'), 3)} ms)"
            lim = f"{t['limit_fraction'] * 100:.0f}%"
        elif "growth_exponent" in t:
            m = f"exponent {t['growth_exponent']:.2f}, recall@10 {t['recall_at_10']:.3f}"
            lim = t["limit"]
        else:
            m = f"{fmt(measured, 3)} ms" if measured is not None else ""
            lim = f"{fmt(t.get('limit_ms'), 3)} ms" if t.get("limit_ms") is not None else ""
        note = f" — {t['note']}" if t.get("note") else ""
        status = t["status"] + (" (under load)" if t.get("under_load") else "")
        lines.append(f"| {name} | **{status}**{note} | {m} | {lim} |")
    return lines


def load_rows(backends: list[dict[str, Any]]) -> list[str]:
    """Machine load per measured step; steps over the limit are flagged."""
    rows = []
    for b in backends:
        for s in b.get("sizes", []):
            ld = s.get("load")
            if s.get("status") != "ok" or not ld:
                continue
            rows.append(f"| {b['backend']} | {s['n']:,} | {s.get('passes', '—')} | {ld['load1_start']} → "
                        f"{ld['load1_end']} | {ld['load_per_core']} | {fmt(ld.get('cpu_percent'), 0)}% "
                        f"| {'**under load**' if ld['under_load'] else 'ok'} |")
    if not rows:
        return []
    return ["| backend | memories | passes | load average (1 min) start → end | per core | CPU use | verdict |",
            "|---|---:|---:|---|---:|---:|---|", *rows]


def markdown(res: dict[str, Any]) -> str:
    m = res["machine"]
    lines = [
        f"# bench-perf {res['run_id']}",
        "",
        f"Command: `{res['command']}`  ",
        f"Machine: {m.get('cores')} cores, {fmt_bytes(m.get('ram_bytes'))} RAM, load average at start "
        f"{res.get('load_average_start')}, at end {res.get('load_average_end')} (shared machine: absolute times are "
        f"noisy; the ratios are measured side by side in this run). Git {res.get('git_sha', '?')}.  ",
        f"Memories are **synthetic** (seeded generator, seed {res['seed']}; services/perf/synth.py). Embedder "
        f"`{res['embedder']}` for every backend and the floor{'' if res.get('embedder_valid_for_reports') else ' (hash: not a real model; the vector dimension (384) and so the search cost match minilm; see the embedder table for the ingest cost of a real model)'}. "
        f"{res['queries']} queries per size, top_k 6; percentiles exact (numpy) over client-observed latencies.",
        "",
        "## Targets",
        "",
        *target_rows(res["targets"]),
        "",
        "## Backends by memory count",
        "",
        "Floor = numpy brute-force top-24 over the same vectors, timed in the same loop over the same queries "
        "(excludes query embedding). Every latency figure is the median over the interleaved passes of each "
        "pass's figure; the floor is the minimum of its passes' p50s; gRPC hop = median of paired differences "
        "gRPC − in-process for the same query back to back (Cortex: both through the proxy). "
        "RSS / memory = (RSS after − RSS after start) ÷ memories, of the backend process (Cortex: of the cortex-mock).",
        "",
        *backend_rows(res["backends"]),
        "",
    ]
    lr = load_rows(res["backends"])
    if lr:
        lines += ["## Machine load per step", "",
                  "A step whose 1-minute load average per core exceeded the limit at its start or end is flagged; "
                  "a target judged from it says so.", "", *lr, ""]
    cp = cortex_path_rows(res["backends"])
    if cp:
        lines += ["## Cortex: direct, through the fault proxy, through gRPC", "", *cp, ""]
    bd = [(b["backend"], s) for b in res["backends"] for s in b.get("sizes", []) if s.get("breakdown")]
    if bd:
        lines += ["## OpenClaw in-process search breakdown (p50 ms)", "",
                  "| backend | chunks | vector side | FTS side | whole search | retrieve's chunk-row map |",
                  "|---|---:|---:|---:|---:|---:|"]
        for name, s in bd:
            d = s["breakdown"]
            lines.append(f"| {name} | {s['n']:,} | {fmt(d['vector'].get('p50'), 3)} | {fmt(d['fts'].get('p50'), 3)} "
                         f"| {fmt(d['search'].get('p50'), 3)} | {fmt(d['chunk_rows'].get('p50'), 3)} |")
        lines.append("")
    ov = res.get("overhead", {})
    pp = ov.get("proxy_passthrough") or {}
    if pp:
        lines += ["## Rig overhead", "", "Added = percentile of the paired differences (the same request direct "
                  "and proxied, back to back), not a difference of two p50s.", "",
                  "| what | direct / in-process p50 ms | through the rig p50 ms | added p50 ms "
                  "| added p99 ms |", "|---|---:|---:|---:|---:|"]
        for label in ("health", "retrieve_fast"):
            if label in pp:
                x = pp[label]
                lines.append(f"| fault proxy passthrough, {label} | {fmt(x['direct'].get('p50'), 3)} "
                             f"| {fmt(x['proxied'].get('p50'), 3)} | {fmt(x['added_p50_ms'], 3)} | {fmt(x['added_p99_ms'], 3)} |")
    co = ov.get("coordinator")
    if co:
        if not pp:
            lines += ["## Rig overhead", ""]
        lines += ["", f"Coordinator per probe ({co['samples']} samples; {co['what']}): total p50 "
                  f"{fmt(co['total'].get('p50'), 4)} ms, backend's own {fmt(co['backend_own'].get('p50'), 4)} ms, "
                  f"**overhead p50 {fmt(co['per_probe_overhead'].get('p50'), 4)} ms** (p99 "
                  f"{fmt(co['per_probe_overhead'].get('p99'), 4)} ms); of which host validation + client "
                  f"{fmt(co['host_and_client'].get('p50'), 4)} ms.", ""]
    emb = res.get("embedders") or []
    if emb:
        lines += ["## Embedders", "", "| embedder | model | dim | batch sentences/s | single sentences/s | single p50 ms | load s |",
                  "|---|---|---:|---:|---:|---:|---:|"]
        for e in emb:
            if e.get("status") != "ok":
                lines.append(f"| {e['embedder']} | {e.get('reason', '')} | | | | | |")
                continue
            lines.append(f"| {e['embedder']} | {e['model']} | {e['dim']} | {fmt(e['batch_sentences_per_s'], 0)} "
                         f"| {fmt(e['single_sentences_per_s'], 0)} | {fmt(e['single_p50_ms'], 3)} | {fmt(e['load_s'], 1)} |")
        lines.append("")
    ann = res.get("ann") or {}
    if ann.get("sizes"):
        lines += ["## ANN option (usearch HNSW) against exact search", "",
                  f"{ann.get('note', '')}", "",
                  "| vectors | build s | expansion_search | ANN p50 ms | exact floor p50 ms | recall@10 |",
                  "|---:|---:|---:|---:|---:|---:|"]
        for a in ann["sizes"]:
            if a.get("status") != "ok":
                lines.append(f"| {a['n']:,} | {a.get('reason', '')} | | | | |")
                continue
            for p in a["points"]:
                lines.append(f"| {a['n']:,} | {fmt(a['build_s'], 1)} | {p['expansion_search']} "
                             f"| {fmt(p['latency'].get('p50'), 3)} | {fmt(a.get('floor_p50_ms'), 3)} "
                             f"| {p['recall_at_10']:.3f} |")
        lines.append("")
    if res.get("notes"):
        lines += ["## Notes", "", *[f"- {n}" for n in res["notes"]], ""]
    lines += ["Plots: " + ", ".join(f"`{p}`" for p in res.get("plots", [])), ""]
    ocr = res.get("openclaw_real") or {}
    if ocr.get("status") == "ok":
        lines += ["", "#" + ocr["markdown"].strip()]  # its "# ..." heading becomes a section
    elif ocr:
        lines += ["", f"## openclaw-real vs port: {ocr.get('status')} ({ocr.get('reason', '')})"]
    return "\n".join(lines)


def plots(res: dict[str, Any], out: Path) -> list[str]:
    """Log-log latency vs memory count (and RSS per memory); matplotlib Agg PNGs. Returns the file names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    fig, ax = plt.subplots(figsize=(8, 5.5))
    floor_pts: dict[int, float] = {}
    for b in res["backends"]:
        ok = [s for s in b.get("sizes", []) if s.get("status") == "ok"]
        if not ok:
            continue
        xs = [s["n"] for s in ok]
        g = [s["retrieve"].get(b["paths"]["grpc"], {}).get("p50") for s in ok]
        i = [s["retrieve"].get(b["paths"]["in_process"], {}).get("p50") for s in ok]
        line = ax.plot(xs, g, marker="o", label=f"{b['backend']} gRPC p50")[0]
        ax.plot(xs, i, marker="x", linestyle="--", color=line.get_color(), label=f"{b['backend']} in-process p50")
        for s in ok:
            if s.get("floor_p50_ms"):
                floor_pts.setdefault(s["n"], s["floor_p50_ms"])
    if floor_pts:
        xs = sorted(floor_pts)
        ax.plot(xs, [floor_pts[x] for x in xs], color="black", linewidth=2.5, label="numpy floor p50")
    ann = res.get("ann") or {}
    ann_pts = [(a["n"], a["best"]["latency"]["p50"]) for a in ann.get("sizes", []) if a.get("status") == "ok" and a.get("best")]
    if ann_pts:
        ax.plot([p[0] for p in ann_pts], [p[1] for p in ann_pts], color="grey", marker="s", linestyle=":",
                label="usearch HNSW p50 (recall@10 ≥ 0.95 point)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("memories (synthetic)")
    ax.set_ylabel("retrieve latency, ms (log)")
    ax.set_title("Retrieve latency against memory count")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(out / "latency_vs_memories.png", dpi=110)
    plt.close(fig)
    made.append("latency_vs_memories.png")

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for b in res["backends"]:
        ok = [s for s in b.get("sizes", []) if s.get("status") == "ok" and (s.get("rss_per_memory_bytes") or 0) > 0]
        if ok:
            ax.plot([s["n"] for s in ok], [s["rss_per_memory_bytes"] for s in ok], marker="o", label=f"{b['backend']} RSS")
        okd = [s for s in b.get("sizes", []) if s.get("status") == "ok" and (s.get("disk_per_memory_bytes") or 0) > 0]
        if okd:
            ax.plot([s["n"] for s in okd], [s["disk_per_memory_bytes"] for s in okd], marker="x", linestyle="--",
                    label=f"{b['backend']} disk")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("memories (synthetic)")
    ax.set_ylabel("bytes per memory (log)")
    ax.set_title("RSS and disk per memory")
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "bytes_per_memory.png", dpi=110)
    plt.close(fig)
    made.append("bytes_per_memory.png")
    return made
