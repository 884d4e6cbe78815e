"""report.html for a run directory: one self-contained file (no external assets) built from run.json,
metrics.json, samples.jsonl and report.md — the Markdown tables rendered as HTML, plus plots as inline
base64 PNGs made with matplotlib's Agg backend:

- bars with 95% CI whiskers per condition, from the suite's paired comparisons (scorecard metrics) and from
  per-category summaries (`by_category` / `by_type` entries that carry a mean and a CI);
- Recall@K curves for every metric family named `<name>@<k>` or `recall_at_<k>` in the per-condition
  summaries;
- retrieval latency CDFs per backend, from the raw retrieval records in samples.jsonl.

Figures are drawn for the page: at most `MAX_FIG_W_IN` × `DPI` = 1050 px wide (the body is 1100 px), legends
outside the axes (constrained layout makes room, so they never cover a bar) in the order of the report's tables,
whiskers only on bars that have a CI; the CSS scales any image down (`max-width: 100%`) instead of cutting it.
The "Judge:" line follows the page's H1.

`render_html(run_dir) -> Path` writes `<run_dir>/report.html` and returns its path. Inside `deferred_pages()` it only
notes the directory, and `render_pages(dirs)` draws the noted pages afterwards, one process per core: bench-all
draws its suites' plots once nothing is being measured, on both cores, instead of on one between the suites. A page
is the same bytes either way (tests/test_report_pages.py).
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
import functools
import hashlib
import html
import io
import json
import os
import re
import textwrap
from collections import defaultdict
from pathlib import Path
from typing import Any

_KAT = re.compile(r"^(.*?)(?:@|_at_)(\d+)$")
DPI = 100
MAX_FIG_W_IN = 10.5  # 1050 px: fits the 1100 px body with its padding
MIN_FIG_W_IN = 5.0
FIG_H_IN = 3.6


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> str:
    buf = io.BytesIO()
    # No bbox_inches="tight": it can grow the image past the figure size; constrained layout already fits.
    fig.savefig(buf, format="png", dpi=DPI)
    _plt().close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _summaries(metrics: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """{condition: {metric: summary}} from whichever key a suite uses ('overall' or 'metrics')."""
    out = {}
    for cond, c in (metrics.get("conditions") or {}).items():
        if isinstance(c, dict):
            s = c.get("overall") or c.get("metrics") or {}
            out[cond] = {k: v for k, v in s.items() if isinstance(v, dict) and "mean" in v}
    return out


def _figure(width_in: float, height_in: float = FIG_H_IN):
    plt = _plt()
    return plt.subplots(figsize=(min(MAX_FIG_W_IN, max(MIN_FIG_W_IN, width_in)), height_in), layout="constrained")


def _legend_outside(fig, ax, title: str) -> None:
    """The legend right of the axes, entries in plotting order (= the table's order), and the title over the
    axes, wrapped to the axes' width so it never runs under the legend (sizes: ~0.075 in per 10 pt character,
    ~0.055 in per 7 pt legend character)."""
    handles, labels = ax.get_legend_handles_labels()
    legend_in = (0.055 * max(len(str(x)) for x in labels) + 0.5) if labels else 0.0
    axes_in = fig.get_figwidth() - legend_in - 0.9
    ax.set_title(textwrap.fill(title, width=max(24, int(axes_in / 0.075))), fontsize=10)
    if handles:
        fig.legend(handles, labels, loc="outside right upper", fontsize=7, frameon=False)


def _plot_cache_dir() -> Path:
    return Path(os.environ.get("MEMRIG_STATE_DIR", ".memrig")) / "plot-cache"


@functools.lru_cache(maxsize=1)
def _code_digest() -> str:
    import matplotlib

    return hashlib.sha256(Path(__file__).read_bytes() + matplotlib.__version__.encode()).hexdigest()


def cached_plot(fn):
    """A plot function whose PNG is kept under .memrig/plot-cache by what it is drawn from (its arguments, this
    module's code, matplotlib's version): a rerun whose values did not change (results reused from the store) copies
    its pictures instead of drawing them again, the largest cost of a report once nothing is measured. A cache that
    cannot be read or written only costs the drawing."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            blob = json.dumps([fn.__name__, args, kwargs, DPI, _code_digest()], sort_keys=True, default=str)
        except (TypeError, ValueError):
            return fn(*args, **kwargs)
        path = _plot_cache_dir() / f"{hashlib.sha256(blob.encode()).hexdigest()}.txt"
        try:
            return path.read_text()
        except OSError:
            pass
        out = fn(*args, **kwargs)
        if out is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
                tmp.write_text(out)
                os.replace(tmp, path)
            except OSError:
                pass
        return out

    return wrapper


@cached_plot
def bars_with_ci(title: str, groups: list[str], series: dict[str, list[tuple[float | None, float | None, float | None]]],
                 ylabel: str = "") -> str | None:
    """Grouped bars: x = groups, one bar per series in the given order, whiskers from (mean, lo, hi) on the bars
    that have both CI bounds (none, and no cap, on the others; a missing mean draws no bar)."""
    if not groups or not series:
        return None
    import numpy as np

    n = max(1, len(series))
    longest = max(len(str(k)) for k in series)
    fig, ax = _figure(0.28 * len(groups) * n + 0.35 * len(groups) + 1.5 + 0.06 * min(40, longest))
    width = 0.8 / n
    x = np.arange(len(groups))
    for i, (name, vals) in enumerate(series.items()):
        xs = x + i * width - 0.4 + width / 2
        means = np.array([v[0] if v and v[0] is not None else np.nan for v in vals], dtype=float)
        ci = np.array([bool(v) and None not in v[:3] for v in vals])
        ax.bar(xs, np.nan_to_num(means, nan=0.0), width, label=name)
        if ci.any():
            lo = np.array([max(0.0, v[0] - v[1]) if c else 0.0 for v, c in zip(vals, ci, strict=True)])
            hi = np.array([max(0.0, v[2] - v[0]) if c else 0.0 for v, c in zip(vals, ci, strict=True)])
            ax.errorbar(xs[ci], means[ci], yerr=[lo[ci], hi[ci]], fmt="none", ecolor="#333", elinewidth=1, capsize=3)
    ax.set_xticks(x)
    slant = len(groups) > 4 and max(len(str(g)) for g in groups) > 3  # long labels side by side would collide
    ax.set_xticklabels(groups, rotation=30 if slant else 0, ha="right" if slant else "center", fontsize=8)
    ax.set_ylabel(ylabel)
    _legend_outside(fig, ax, title)
    return _png(fig)


def _md_tables(md: str) -> list[list[list[str]]]:
    """The Markdown tables of report.md as rows of cells (separator rows dropped)."""
    tables, cur = [], []
    for line in md.splitlines() + [""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= set("-: ") for c in cells):
                cur.append(cells)
        elif cur:
            tables.append(cur)
            cur = []
    return tables


def table_order(md: str, names: list[str]) -> list[str]:
    """`names` in the order report.md's tables show them, so a legend reads like the table beside it: the first
    table whose header row holds every name (conditions as columns), else the first whose first column does
    (conditions as rows); the given order when no table holds them all."""
    want = set(names)
    tables = _md_tables(md)
    for cells in [t[0] for t in tables] + [[r[0] for r in t if r] for t in tables]:
        if want <= set(cells):
            return [c for c in dict.fromkeys(cells) if c in want]
    return list(names)


def category_plots(metrics: dict[str, Any], md: str = "") -> list[tuple[str, str]]:
    """One bar chart per per-category metric found in the conditions (summaries with a CI, or plain means)."""
    conds = metrics.get("conditions") or {}
    found: dict[str, dict[str, dict[str, tuple]]] = defaultdict(lambda: defaultdict(dict))  # metric -> cat -> cond
    for cond, c in conds.items():
        if not isinstance(c, dict):
            continue
        for key in ("by_category", "by_type"):
            for cat, v in (c.get(key) or {}).items():
                if not isinstance(v, dict):
                    continue
                if "mean" in v:  # a summary or a judge distribution
                    ci = v.get("ci") or [None, None]
                    found["score" if "grounded" in v else "value"][cat][cond] = (v["mean"], ci[0], ci[1])
                else:
                    for m, s in v.items():
                        if isinstance(s, dict) and "mean" in s:
                            ci = s.get("ci") or [None, None]
                            found[m][cat][cond] = (s["mean"], ci[0], ci[1])
    out = []
    for m, cats in found.items():
        groups = sorted(cats)
        present = {c for cat in cats.values() for c in cat}
        names = table_order(md, [c for c in conds if c in present])  # the legend reads like the table
        img = bars_with_ci(f"{m} by category", groups, {n: [cats[g].get(n) for g in groups] for n in names}, m)
        if img:
            out.append((f"{m} by category", img))
    return out


def comparison_plots(metrics: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for cond, c in (metrics.get("comparisons") or {}).items():
        comps = [x for x in c.get("comparisons", []) if x.get("threshold", 0) < 1]  # rates/scores share an axis
        if not comps:
            continue
        groups = [x["metric"] for x in comps]
        series = {c["baseline"]: [(x["mean_a"], *x["ci_a"]) for x in comps],
                  cond: [(x["mean_b"], *x["ci_b"]) for x in comps]}
        img = bars_with_ci(f"{cond} vs {c['baseline']} (95% CI)", groups, series)
        if img:
            out.append((f"{cond} vs {c['baseline']}", img))
    return out


def recall_curves(metrics: dict[str, Any], md: str = "") -> list[tuple[str, str]]:
    fams: dict[str, dict[str, list[tuple[int, float]]]] = defaultdict(lambda: defaultdict(list))
    for cond, s in _summaries(metrics).items():
        for name, v in s.items():
            m = _KAT.match(name)
            if m and v.get("mean") is not None and ("recall" in m.group(1) or "hit" in m.group(1)
                                                     or "ndcg" in m.group(1)):
                fams[m.group(1)][cond].append((int(m.group(2)), float(v["mean"])))
    out = []
    for fam, curves in sorted(fams.items()):
        if not any(len(p) > 1 for p in curves.values()):
            continue
        fig, ax = _figure(7.0)
        for cond in table_order(md, list(curves)):  # the legend reads like the table
            pts = curves[cond]
            pts.sort()
            ax.plot([k for k, _ in pts], [v for _, v in pts], marker="o", label=cond)
        ax.set_xscale("log")
        ks = sorted({k for pts in curves.values() for k, _ in pts})
        ax.set_xticks(ks, [str(k) for k in ks])  # the K values themselves, not 2×10⁰-style log ticks
        ax.minorticks_off()
        budgeted = fam.startswith("budget_")  # metrics/budget.py: the x axis is a context budget, not a rank
        ax.set_xlabel("context budget, cl100k tokens of what the backend injects" if budgeted else "K")
        ax.set_ylim(0, 1.02)
        title = "Recall at a context budget (share of gold evidence shown)" if budgeted else f"{fam}@K"
        _legend_outside(fig, ax, title)
        out.append((title, _png(fig)))
    return out


def latency_cdf(samples: list[dict[str, Any]], md: str = "") -> list[tuple[str, str]]:
    lat: dict[str, list[float]] = defaultdict(list)
    seen: set[tuple[str, str]] = set()
    for s in samples:
        for b, rec in (s.get("retrievals") or {}).items():
            key = (b, s.get("probe_id", ""))
            if key in seen or not isinstance(rec, dict) or rec.get("latency_ms") is None:
                continue  # conditions sharing a backend share one (cached) retrieval
            seen.add(key)
            lat[b].append(float(rec["latency_ms"]))
    if not lat:
        return []
    import numpy as np

    fig, ax = _figure(7.5)
    for b in table_order(md, list(lat)):  # the legend reads like the backends table
        xs = lat[b]
        x = np.sort(np.asarray(xs))
        ax.step(x, np.arange(1, x.size + 1) / x.size, where="post", label=f"{b} (n={x.size})")
    ax.set_xscale("log")
    ax.set_xlabel("retrieve latency, ms (client-observed)")
    ax.set_ylabel("fraction ≤ x")
    _legend_outside(fig, ax, "Retrieval latency CDF")
    return [("Retrieval latency CDF", _png(fig))]


# ------------------------------------------------------------------------------------------------------
_LINK = re.compile(r"\[([^\[\]]+)\]\(([^()\s]+)\)")
_IMAGE = re.compile(r"!\[([^\[\]]*)\]\(([^()\s]+)\)")
_MIME = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".svg": "image/svg+xml",
         ".webp": "image/webp"}


def image_src(src: str, base: Path | None) -> str:
    """An image's src for the page: a relative path to a file under `base` (the page's directory) inlined as a data
    URI, so the page stays one self-contained file; anything else (an absolute URL, a file not there) as written."""
    if base is None or re.match(r"^[a-z][a-z0-9+.-]*:|^/", src, re.I):
        return src
    f = (base / src).resolve()
    mime = _MIME.get(f.suffix.lower())
    if not mime or not f.is_file() or not f.is_relative_to(base.resolve()):
        return src
    return f"data:{mime};base64," + base64.b64encode(f.read_bytes()).decode()


def _inline(text: str, base: Path | None = None) -> str:
    t = html.escape(text)
    t = t.replace("&lt;br&gt;", "<br>")  # the one tag report.md uses: a line break inside a table cell
    t = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", t)
    t = re.sub(r"`([^`]+)`", r"<code>\1</code>", t)
    # images before links: `![alt](src)` holds a link's syntax
    t = _IMAGE.sub(lambda m: f'<img src="{html.escape(image_src(html.unescape(m.group(2)), base))}" '
                   f'alt="{m.group(1)}">', t)
    t = _LINK.sub(lambda m: f'<a href="{m.group(2)}">{m.group(1)}</a>', t)
    return re.sub(r"(?<![\w*])\*(?!\s)(.+?)\*(?!\w)", r"<i>\1</i>", t)


def slug(text: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens."""
    t = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text).strip().lower()
    t = re.sub(r"[^\w\- ]", "", t)
    return t.replace(" ", "-")


def markdown_to_html(md: str, base: str | Path | None = None) -> str:
    """The subset report.md uses: headings (with GitHub's anchors as ids), tables, bullet lists, block quotes,
    fenced code, links, images (a relative one under `base`, the page's directory, inlined: see `image_src`),
    paragraphs; a line that is one HTML comment (a section marker) renders as nothing, as in Markdown. Each table
    cell carries its column's header as `data-label`, so a stylesheet can lay a wide table out as one card per
    row (VERDICT_CSS)."""
    base = Path(base) if base is not None else None
    inline = lambda t: _inline(t, base)  # noqa: E731
    out: list[str] = []
    lines = md.splitlines()
    ids: dict[str, int] = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            out.append("<pre><code>" + html.escape("\n".join(lines[i + 1:j])) + "</code></pre>")
            i = j + 1
            continue
        if line.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                rows.append([c.strip() for c in lines[i].strip().strip("|").split("|")])
                i += 1
            body = [r for r in rows[1:] if not all(set(c) <= set("-: ") for c in r)]
            labels = [html.escape(re.sub(r"<[^>]+>", "", html.unescape(inline(c))), quote=True) for c in rows[0]]
            out.append("<table><tr>" + "".join(f"<th>{inline(c)}</th>" for c in rows[0]) + "</tr>"
                       + "".join("<tr>" + "".join(f'<td data-label="{labels[k] if k < len(labels) else ""}">'
                                                  f"{inline(c)}</td>" for k, c in enumerate(r)) + "</tr>"
                                 for r in body)
                       + "</table>")
            continue
        if re.fullmatch(r"\s*<!--.*-->\s*", line):
            i += 1
            continue
        m = re.match(r"^(#{1,6})\s+(.*)$", line)
        if m:
            n = len(m.group(1))
            anchor = slug(m.group(2))
            seen = ids.get(anchor, 0)
            ids[anchor] = seen + 1
            anchor = anchor if not seen else f"{anchor}-{seen}"
            out.append(f'<h{n} id="{html.escape(anchor)}">{inline(m.group(2))}</h{n}>')
        elif line.startswith("- "):
            items = []
            while i < len(lines) and lines[i].startswith("- "):
                items.append(f"<li>{inline(lines[i][2:])}</li>")
                i += 1
            out.append("<ul>" + "".join(items) + "</ul>")
            continue
        elif line.startswith(">"):
            out.append(f"<blockquote>{inline(line.lstrip('> '))}</blockquote>")
        elif line.strip():
            out.append(f"<p>{inline(line)}</p>")
        i += 1
    return "\n".join(out)


CSS = ("body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}"
       "table{border-collapse:collapse;margin:.6em 0;font-size:13px}td,th{border:1px solid #ccc;padding:3px 7px}"
       "th{background:#f3f3f3}code{background:#f5f5f5;padding:0 3px}blockquote{border-left:4px solid #d33;"
       "margin:0;padding:.3em 1em;background:#fff4f4}figure{display:inline-block;margin:.5em 0;max-width:100%}"
       "img{max-width:100%;height:auto}figcaption{font-size:12px;color:#555}")
# The verdict (backends × suites, three lines a cell) as one card per backend: the backend's name and summary
# across the top, then one box per suite, as many side by side as fit at 16em each, each headed by its column's
# label (the cell's data-label). Every suite stays in view at any page width, however many suites run; the header
# row is hidden since each box carries its label.
VERDICT_CSS = ("table.verdict{display:block;border:0;overflow:visible;max-width:100%}"
               "table.verdict>tbody{display:block}"
               "table.verdict tr:first-child{display:none}"
               "table.verdict tr{display:grid;grid-template-columns:repeat(auto-fill,minmax(16em,1fr));gap:4px;"
               "margin:0 0 10px;padding:6px;border:1px solid #bbb;border-radius:4px;background:#fafafa}"
               "table.verdict td{display:block;min-width:0;background:#fff;border:1px solid #ddd;"
               "overflow-wrap:anywhere}"
               "table.verdict td::before{content:attr(data-label);display:block;font-size:11px;color:#555;"
               "font-weight:600;margin-bottom:2px}"
               "table.verdict td:first-child{grid-column:1/-1;border:0;background:none;font-size:14px}"
               "table.verdict td:first-child::before{content:none}")


# ------------------------------------------------------------------------------------------------------
# The verdict as a picture: backends × suites, each cell the backend minus OpenClaw native on the suite's headline,
# coloured by the verdict's word. Drawn from verdict.json (services/coordinator/verdict.py), so the picture and the
# verdict table below it print the same numbers.

PICTURE_CLASSES = {"better": "v-better", "worse": "v-worse", "no detectable difference": "v-same"}
PICTURE_CSS = (
    ".vpic-wrap{margin:.4em 0 1.2em}"
    "table.vpic{table-layout:fixed;width:100%;border-collapse:separate;border-spacing:3px;font-size:12px;margin:0}"
    "table.vpic th,table.vpic td{border:0;padding:4px 5px;vertical-align:top;overflow-wrap:anywhere;min-width:0}"
    "table.vpic thead th{background:none;font-weight:600;text-align:left;font-size:11px;color:#333}"
    "table.vpic thead th a{font-size:12px}table.vpic th.vpic-corner{width:11em}"
    "table.vpic tbody th{background:none;text-align:left;font-size:12px}"
    "table.vpic td{border-radius:3px;line-height:1.3}"
    "table.vpic td b{display:block;font-size:14px}table.vpic td span{display:block}"
    "table.vpic td .vpic-word{font-size:11px}"
    ".v-better{background:#cdebd3;color:#0d4f1c}.v-worse{background:#f6cdc9;color:#7a1a12}"
    ".v-same{background:#e6e6e6;color:#333}.v-base{background:#dfe7f7;color:#1c3566}"
    ".v-none{background:#fafafa;color:#888;border:1px dashed #ccc}"
    ".vpic-key span{display:inline-block;padding:0 6px;margin:0 4px 0 0;border-radius:3px}"
    ".vpic-key{font-size:12px;color:#444;margin:.2em 0}")


def _picture_cell(v: dict[str, Any], backend: str, suite: str) -> tuple[str, str, str]:
    """(css class, inner HTML, hover text) of one backend on one suite (`suite`: its name in the run)."""
    from services.coordinator import verdict as vd

    row = (v.get("backends") or {}).get(backend)
    head = v.get("headline") or {}
    unit = head.get("unit") or ""
    base = v.get("baseline") or {}
    who = vd._short(base.get("backend"))
    if row is None:
        return "v-none", "<span>not run</span>", f"{backend} did not run on {suite}"
    if base.get("condition") is None:
        why = f"no OpenClaw native (`openclaw-real` or the port `openclaw`) ran on {suite}: nothing to compare"
        return "v-none", "<span>no native comparison</span>", why
    if row.get("condition") == base.get("condition"):
        mean = (row.get("value") or {}).get("mean")
        pct = "%" if unit == "rate" else ""
        return ("v-base", f"<b>{html.escape(vd._num(mean, unit))}{pct}</b><span class='vpic-word'>the baseline</span>",
                f"{who}: the baseline of {suite} ({head.get('label', '')} {vd._num(mean, unit)}{pct})")
    c = row.get("vs_native")
    if not c:
        return "v-none", "<span>no native comparison</span>", f"no comparison with {who} for {backend}"
    cls = PICTURE_CLASSES.get(c.get("word"), "v-same")
    lo, hi = (list(c.get("ci") or []) + [None, None])[:2]
    interval = f"[{vd._num(lo, unit, True)}, {vd._num(hi, unit, True)}]"
    if c.get("mdd") is not None:
        tail = f"MDD {vd._mdd(c['mdd'], unit)}"
    else:
        st = v.get("statistics") or {}
        tail = (f"p ≥ {st['min_p']:.3f}: cannot be detected" if (st.get("min_p") or 0) >= vd.ALPHA
                else "no MDD")
    word = c.get("word") if c.get("word") in (vd.BETTER, vd.WORSE) else "not detectable"
    inner = (f"<b>{html.escape(vd._num(c.get('delta'), unit, True))}</b><span>{html.escape(interval)}</span>"
             f"<span class='vpic-word'>{html.escape(word)} · {html.escape(tail)}</span>")
    hover = (f"{backend} vs {who} on {suite} ({head.get('label', '')}): {vd.word_text(c, unit)}; "
             f"{vd._diff(c, unit)}" + (f"; MDD {vd._mdd(c['mdd'], unit)}" if c.get("mdd") is not None else "")
             + (f"; {c['mdd_why']}" if c.get("mdd_why") else ""))
    return cls, inner, hover


def verdict_picture(verdict: dict[str, Any]) -> str:
    """The verdict of a bench-all (or bench-local) run as one picture: a row per backend, a column per suite, each
    cell the backend minus OpenClaw native on the suite's headline with its 95% interval, coloured better (green) /
    worse (red) / no detectable difference (grey), its minimum detectable difference in the cell and the whole
    comparison on hover. The baseline's own cell shows its value; a cell with no native comparison says so. Empty
    when the verdict has no suite."""
    from services.coordinator import verdict as vd

    suites = verdict.get("suites") or {}
    if not suites:
        return ""
    names = list(suites)
    unit_note = (" (rates in percentage points)"
                 if any((v.get("headline") or {}).get("unit") == "rate" for v in suites.values()) else "")
    head = ["<tr><th class='vpic-corner'>backend \\ suite</th>"]
    for n in names:
        h = suites[n].get("headline") or {}
        arrow = " (lower is better)" if h.get("higher_is_better") is False else ""
        mock = " (llm-mock)" if h.get("mocked") else ""
        base = (suites[n].get("baseline") or {}).get("backend")
        against = f"vs {vd._short(base)}" if base else "no OpenClaw native in this run"
        head.append(f"<th><a href='#{html.escape(slug(n))}'>{html.escape(n)}</a><br>{html.escape(h.get('label', ''))}"
                    f"{arrow}{mock}<br>{html.escape(against)}</th>")
    head.append("</tr>")
    rows = []
    for b in verdict.get("backends") or []:
        cells = []
        for n in names:
            cls, inner, hover = _picture_cell(suites[n], b, n)
            cells.append(f"<td class='{cls}' title=\"{html.escape(hover, quote=True)}\" data-suite='{html.escape(n)}'>"
                         f"{inner}</td>")
        rows.append(f"<tr><th>{html.escape(b)}</th>{''.join(cells)}</tr>")
    key = ("<p class='vpic-key'>Each cell: the backend minus OpenClaw native on the suite's headline, Δ and its 95% "
           f"interval{unit_note}, and the minimum detectable difference (MDD); hover for p and the whole comparison. "
           "<span class='v-better'>better</span><span class='v-worse'>worse</span>"
           "<span class='v-same'>no detectable difference</span><span class='v-base'>the baseline</span>"
           "<span class='v-none'>no comparison</span></p>")
    return (f"<div class='vpic-wrap'>{key}<table class='vpic'><thead>{''.join(head)}</thead>"
            f"<tbody>{''.join(rows)}</tbody></table></div>")


# The run directories whose report.html waits for render_pages (inside deferred_pages()), else None
_DEFERRED: contextvars.ContextVar[list[Path] | None] = contextvars.ContextVar("memrig_deferred_pages", default=None)


@contextlib.contextmanager
def deferred_pages():
    """Inside, render_html writes nothing: it notes its run directory in the list this yields (once each, in order),
    for the caller to draw with render_pages when nothing is being measured."""
    pending: list[Path] = []
    token = _DEFERRED.set(pending)
    try:
        yield pending
    finally:
        _DEFERRED.reset(token)


def _render_page(run_dir: str) -> str:
    """A worker's job: one page, its error as text (an exception from a child process may not pickle)."""
    try:
        render_html(run_dir)
    except ModuleNotFoundError:  # no matplotlib here: no page, as finalize has it
        return ""
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return ""


def render_pages(run_dirs: list[str | Path], workers: int | None = None) -> dict[Path, str]:
    """report.html of each run directory, `workers` pages at a time (default one per core) in processes of their own
    (spawned: the caller may hold gRPC channels, which do not survive a fork; spawn imports the caller's __main__
    again, which memrig's entry points allow), the largest samples.jsonl first so the long pages do not finish
    last. Each page is what render_html writes on its own, byte for byte: it reads only its directory's files.
    Returns {run_dir: error} for the pages that failed (empty: every page written)."""
    dirs = list(dict.fromkeys(Path(d) for d in run_dirs))

    def size(d: Path) -> int:
        try:
            return (d / "samples.jsonl").stat().st_size
        except OSError:
            return 0

    dirs.sort(key=size, reverse=True)
    n = min(len(dirs), workers or os.cpu_count() or 1)
    if n <= 1:
        errors = {d: _render_page(str(d)) for d in dirs}
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        from services.coordinator.guard import unmarked

        errors = {}
        # the workers and the resource tracker that spawning starts end with this process (end of their pipes)
        with unmarked(), ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = {d: pool.submit(_render_page, str(d)) for d in dirs}
            for d, f in futures.items():
                try:
                    errors[d] = f.result()
                except BrokenProcessPool as e:  # a worker died (killed, Ctrl-C): the page is not written
                    errors[d] = f"{type(e).__name__}: {e}"
    return {d: e for d, e in errors.items() if e}


def render_html(run_dir: str | Path) -> Path:
    run_dir = Path(run_dir)
    pending = _DEFERRED.get()
    if pending is not None:  # deferred_pages(): render_pages draws it later
        if run_dir not in pending:
            pending.append(run_dir)
        return run_dir / "report.html"
    metrics = json.loads((run_dir / "metrics.json").read_text()) if (run_dir / "metrics.json").exists() else {}
    run = json.loads((run_dir / "run.json").read_text()) if (run_dir / "run.json").exists() else {}
    samples = []
    sp = run_dir / "samples.jsonl"
    if sp.exists():
        for line in sp.read_text().splitlines():
            if line.strip():
                try:
                    samples.append(json.loads(line))
                except json.JSONDecodeError:
                    continue  # a torn last line from an interrupted run
    md = (run_dir / "report.md").read_text() if (run_dir / "report.md").exists() else ""
    plots: list[tuple[str, str]] = []
    for fn in (comparison_plots, lambda m: category_plots(m, md), lambda m: recall_curves(m, md)):
        try:
            plots += fn(metrics)
        except (KeyError, TypeError, ValueError) as e:  # a plot must never cost the report
            plots.append((f"{getattr(fn, '__name__', 'plot')} failed: {e}", ""))
    plots += latency_cdf([s for s in samples if s.get("status", "ok") == "ok"], md)
    judge = metrics.get("judge") or run.get("judge") or {}
    jl = judge.get("label") if isinstance(judge, dict) else judge
    figs = "".join(f'<figure><img src="{src}" alt="{html.escape(t)}"><figcaption>{html.escape(t)}</figcaption></figure>'
                   if src else f"<p><i>{html.escape(t)}</i></p>" for t, src in plots)
    title = f"memrig report: {run.get('suite', metrics.get('suite', ''))} ({run.get('run_id', run_dir.name)})"
    body = markdown_to_html(md, run_dir) if md else ""
    if not body.lstrip().startswith("<h1"):
        body = f"<h1>{html.escape(title)}</h1>\n" + body
    if jl:  # right below the H1, so the page opens with what it is about
        end = body.index("</h1>") + len("</h1>")
        body = body[:end] + f"\n<p><b>Judge:</b> {html.escape(str(jl))}</p>" + body[end:]
    doc = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
           f"<style>{CSS}</style></head><body>" + body
           + ("<h2>Plots</h2>" + figs if figs else "") + "</body></html>")
    path = run_dir / "report.html"
    path.write_text(doc)
    return path
