"""report.html from a run directory: self-contained (inline PNGs), with the suite's tables and plots."""

import json

from services.adapters.client import InProcessBackendClient
from services.coordinator.report_html import markdown_to_html, render_html
from services.coordinator.results import RunDir
from services.coordinator.runner import finalize
from services.coordinator.suites.octybot import OctybotSuite
from services.coordinator.suites.quaid_weeks import QuaidWeeksSuite
from services.coordinator.suites.testing import run_inprocess


def test_markdown_subset():
    h = markdown_to_html("## T\n\n| a | b |\n|---|---|\n| 1 | **2** |\n\n- x `y`\n> warn")
    assert "<h2>T</h2>" in h and "<td><b>2</b></td>" in h and "<li>x <code>y</code></li>" in h
    assert "<blockquote>warn</blockquote>" in h and "---" not in h


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
