"""report.html from a run directory: self-contained (inline PNGs), with the suite's tables and plots."""

import json

import pytest

from services.adapters.client import InProcessBackendClient
from services.coordinator.report_html import markdown_to_html, render_html
from services.coordinator.results import RunDir
from services.coordinator.runner import finalize
from services.coordinator.suites.octybot import OctybotSuite
from services.coordinator.suites.quaid_weeks import QuaidWeeksSuite
from tests.fixtures_suites import run_inprocess


def test_markdown_subset():
    h = markdown_to_html("## T\n\n| a | b |\n|---|---|\n| 1 | **2** |\n\n- x `y`\n> warn")
    assert '<h2 id="t">T</h2>' in h and '<td data-label="b"><b>2</b></td>' in h and "<li>x <code>y</code></li>" in h
    assert "<blockquote>warn</blockquote>" in h and "---" not in h


@pytest.mark.slow  # takes seconds (plots, a real library's model, or 1,000 rounds)
async def test_render_html_from_run_dir(tmp_path):
    suite = QuaidWeeksSuite({"weeks": 4}, seed=0)
    clients = {"full-context": InProcessBackendClient.from_spec("full-context"),
               "none": InProcessBackendClient.from_spec("none")}
    samples = await run_inprocess(suite, clients, run_dir=tmp_path)
    rd = RunDir(tmp_path)
    (tmp_path / "run.json").write_text(json.dumps({"suite": suite.name, "run_id": "t", "options": suite.options,
                                                   "judge": {"label": "offline rubric judge (llm-mock), not a model"}}))
    with open(rd.samples_path, "w") as f:
        for s in samples:
            f.write(json.dumps(s) + "\n")
    metrics, state = finalize(rd, suite)
    assert state == "succeeded"
    path = render_html(tmp_path)
    html = path.read_text()
    assert path.name == "report.html"
    assert html.count("data:image/png;base64,") >= 3  # scorecard bars, recall curve, latency CDF
    assert "Retrieval latency CDF" in html and "recall@K" in html
    assert "offline rubric judge (llm-mock), not a model" in html
    assert "<table>" in html and "http" not in html.split("<body>")[1].split("data:image")[0]


async def test_render_html_category_bars(tmp_path):
    suite = OctybotSuite()
    samples = await run_inprocess(suite, {"full-context": InProcessBackendClient.from_spec("full-context")},
                                  run_dir=tmp_path)
    (tmp_path / "metrics.json").write_text(json.dumps(suite.score(samples)))
    html = render_html(tmp_path).read_text()
    assert "by category" in html and "data:image/png;base64," in html


# ------------------------------------------------------------------------------------------------ page layout
# What a browser at 1400 px shows: every image at most the figure budget wide and scaled down by CSS, the
# "Judge:" line under the H1, legends in the tables' condition order, whisker caps only with a CI.

def _png_sizes(page: str) -> list[tuple[int, int]]:
    import base64
    import re
    import struct

    sizes = []
    for b64 in re.findall(r'src="data:image/png;base64,([^"]+)"', page):
        head = base64.b64decode(b64[:64])
        assert head[:8] == b"\x89PNG\r\n\x1a\n"
        sizes.append(struct.unpack(">II", head[16:24]))  # IHDR width, height
    return sizes


def _many_condition_metrics() -> dict:
    # 7 conditions x 9 categories (the octybot shape that was 2,890 px wide), listed in a non-alphabetical order
    conds = ["zeta-long-condition-name", "none", "full-context", "openclaw", "openclaw-2026-02", "cortex",
             "cortex-fast"]
    cats = [f"category-{i}" for i in range(9)]
    by_cat = {k: {"hit@5": {"mean": 0.1 * (j % 7), "ci": None}} for j, k in enumerate(cats)}
    return {"suite": "t", "conditions": {c: {"by_category": by_cat} for c in conds}}


def test_images_fit_the_page_and_scale_down(tmp_path):
    from services.coordinator import report_html

    (tmp_path / "metrics.json").write_text(json.dumps(_many_condition_metrics()))
    (tmp_path / "run.json").write_text(json.dumps({"suite": "t", "run_id": "r", "judge": {"label": "J"}}))
    (tmp_path / "report.md").write_text("# Suite t\n\nIntro.\n\n## Table\n\n| a |\n|---|\n| 1 |\n")
    page = render_html(tmp_path).read_text()
    sizes = _png_sizes(page)
    assert sizes and all(w <= report_html.MAX_FIG_W_IN * report_html.DPI for w, _ in sizes), sizes
    assert sizes[0][0] == report_html.MAX_FIG_W_IN * report_html.DPI  # the wide plot is capped, not 2,890 px
    assert "img{max-width:100%;height:auto}" in page and "max-width:1100px" in page
    # heading order: H1 first, then the Judge line, then the rest
    body = page.split("<body>", 1)[1]
    assert body.startswith('<h1 id="suite-t">Suite t</h1>\n<p><b>Judge:</b> J</p>')
    assert body.index('<h2 id="table">Table</h2>') < body.index("<h2>Plots</h2>")


def test_judge_line_follows_a_generated_h1_when_report_md_is_missing(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"suite": "s", "run_id": "r", "judge": {"label": "J"}}))
    body = render_html(tmp_path).read_text().split("<body>", 1)[1]
    assert body.startswith("<h1>memrig report: s (r)</h1>\n<p><b>Judge:</b> J</p>")


def test_legend_order_and_whiskers_only_with_ci(monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from services.coordinator import report_html

    legends, errorbars = [], []
    real_legend, real_errorbar = Figure.legend, Axes.errorbar

    def spy_legend(self, handles=None, labels=None, *a, **kw):
        legends.append((list(labels), kw.get("loc")))
        return real_legend(self, handles, labels, *a, **kw)

    def spy_errorbar(self, x, y, *a, **kw):
        errorbars.append((list(x), kw.get("capsize")))
        return real_errorbar(self, x, y, *a, **kw)

    monkeypatch.setattr(Figure, "legend", spy_legend)
    monkeypatch.setattr(Axes, "errorbar", spy_errorbar)
    m = _many_condition_metrics()
    report_html.category_plots(m)
    assert legends == [(list(m["conditions"]), "outside right upper")]  # table order, outside the axes
    assert errorbars == []  # no CI anywhere: no whiskers, no caps
    legends.clear()
    img = report_html.bars_with_ci("t", ["a", "b"], {"s1": [(0.5, 0.4, 0.6), (0.3, None, None)],
                                                     "s2": [None, (0.2, 0.1, 0.3)]})
    assert img and legends == [(["s1", "s2"], "outside right upper")]
    # s1: only group a has a CI (bar at x=-0.2); s2: only group b (bar at x=1.2)
    assert [(round(x[0], 3), c) for x, c in errorbars] == [(-0.2, 3), (1.2, 3)]


def test_table_order_follows_report_md():
    from services.coordinator.report_html import table_order

    md = ("| backend | status |\n|---|---|\n| b | ok |\n| a | ok |\n| c | ok |\n\n"
          "| category | c | a | b |\n|---|---|---|---|\n| x | 1 | 2 | 3 |\n")
    assert table_order(md, ["a", "b", "c"]) == ["c", "a", "b"]  # a header holding them all wins
    assert table_order(md.split("\n\n")[0], ["a", "b", "c"]) == ["b", "a", "c"]  # else the first column
    assert table_order("", ["z", "y"]) == ["z", "y"]  # no table: as given


def test_category_legend_follows_the_category_table(monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from services.coordinator import report_html

    legends = []
    real_legend = Figure.legend

    def spy_legend(self, handles=None, labels=None, *a, **kw):
        legends.append(list(labels))
        return real_legend(self, handles, labels, *a, **kw)

    monkeypatch.setattr(Figure, "legend", spy_legend)
    m = _many_condition_metrics()
    alphabetical = sorted(m["conditions"])
    md = "| category | " + " | ".join(alphabetical) + " |\n|" + "---|" * 8 + "\n"
    report_html.category_plots(m, md)
    assert legends == [alphabetical]


def test_markdown_links_line_breaks_anchors_and_code():
    md = ("# locomo\n\n| a |\n|---|\n| [better](#locomo) +1 [0, 2]<br>x<script> |\n\n## LoCoMo\n\n# cortex-v1\n\n"
          "```json\n{\"k\": \"<v>\"}\n```\nafter")
    h = markdown_to_html(md)
    # a link; the bracketed interval after it stays text; <br> is kept, any other tag escaped
    assert '<td data-label="a"><a href="#locomo">better</a> +1 [0, 2]<br>x&lt;script&gt;</td>' in h
    # GitHub's anchors: the second heading with the same slug gets -1
    assert '<h1 id="locomo">locomo</h1>' in h and '<h2 id="locomo-1">LoCoMo</h2>' in h
    assert '<h1 id="cortex-v1">cortex-v1</h1>' in h
    assert '<pre><code>{&quot;k&quot;: &quot;&lt;v&gt;&quot;}</code></pre>' in h and "<p>after</p>" in h


def test_a_comment_line_is_a_marker_not_text():
    got = markdown_to_html("## Verdict\n\ntext\n\n<!-- end of verdict -->\nmore")
    assert got == '<h2 id="verdict">Verdict</h2>\n<p>text</p>\n<p>more</p>'
