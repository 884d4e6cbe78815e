"""The verdict as a picture at the top of a bench-all run's report.html (issue 48): backends × suites, each cell the
backend minus OpenClaw native with its interval, coloured better / worse / no detectable difference, its MDD in the
cell and the whole comparison on hover; the baseline's cell and cells with no native comparison say so. The layout
check loads the page in headless Chromium at 1,400 px, as tests/test_report_html_browser.py does."""

from __future__ import annotations

import html
import json
import re

import pytest

from services.coordinator.report_html import verdict_picture
from services.coordinator.run_report import write_reports
from tests.headless_browser import measure
from tests.run_fixtures import bench_all_dir, madial_run

# MADial, 10 probes: OpenClaw native finds 6; `mine` all 10 (+40 points, 4 probes differ: p 0.125, not detectable);
# `strong` all 10 over a native of 2 on the second suite; `weak` none (−60 points, 6 differ: p 0.031, worse).
HITS = {"openclaw-real": set(range(6)), "bm25": set(range(5)), "mine": set(range(10)), "weak": set()}
HITS_2 = {"openclaw-real": {0, 1}, "bm25": set(range(5)), "mine": set(range(10))}
NO_NATIVE = {"bm25": set(range(5)), "mine": set(range(10))}
BACKENDS = ["mine", "weak", "bm25", "openclaw-real"]


@pytest.fixture
def run(tmp_path):
    out = tmp_path / "run"
    madial_run(out / "madial", HITS)
    madial_run(out / "madial-2", HITS_2)
    madial_run(out / "madial-3", NO_NATIVE)
    index = bench_all_dir(out, {"madial": "succeeded", "madial-2": "succeeded", "madial-3": "succeeded"}, BACKENDS)
    write_reports(out, index)
    return out


def cells(page: str) -> dict[tuple[str, str], tuple[str, str, str]]:
    """{(backend, suite): (class, title, text)} of the picture."""
    pic = page.split("<table class='vpic'>", 1)[1].split("</table>", 1)[0]
    out = {}
    for row in re.findall(r"<tr><th>([^<]+)</th>(.*?)</tr>", pic):
        for cls, title, suite, inner in re.findall(r"<td class='([\w-]+)' title=\"([^\"]*)\" data-suite='([^']+)'>(.*?)</td>",
                                                   row[1]):
            out[(html.unescape(row[0]), suite)] = (cls, html.unescape(title), re.sub(r"<[^>]+>", " ", inner))
    return out


def test_the_picture_opens_the_page_with_every_backend_and_suite(run):
    page = (run / "report.html").read_text()
    body = page.split("<body>", 1)[1]
    assert body.startswith('<h1 id="verdict-run">Verdict (run)</h1>\n<div class=\'vpic-wrap\'>')
    assert body.index("<table class='vpic'>") < body.index('<table class="verdict">')
    got = cells(page)
    v = json.loads((run / "verdict.json").read_text())
    assert {b for b, _ in got} == set(v["backends"]) and {s for _, s in got} == {"madial", "madial-2", "madial-3"}
    # better: the difference, its interval and the MDD in the cell, p and the comparison on hover
    c = v["suites"]["madial-2"]["backends"]["mine"]["vs_native"]
    cls, title, text = got[("mine", "madial-2")]
    assert cls == "v-better" and c["word"] == "better"
    assert "+80.0" in text and f"[{c['ci'][0] * 100:+.1f}, {c['ci'][1] * 100:+.1f}]".replace("-", "−") in text
    assert f"MDD {c['mdd'] * 100:.1f} points" in text and "better" in text
    assert "p=" in title and "OpenClaw native" in title and "mine vs OpenClaw native on madial-2" in title
    # worse and not detectable
    assert got[("weak", "madial")][0] == "v-worse" and "−60.0" in got[("weak", "madial")][2]
    cls, title, text = got[("mine", "madial")]
    assert cls == "v-same" and "+40.0" in text and "not detectable" in text
    assert v["suites"]["madial"]["backends"]["mine"]["vs_native"]["word"] == "no detectable difference"
    assert "could not detect a difference below" in title or "no detectable difference" in title
    # the baseline's own cell, a suite without native, a backend that did not run on a suite
    assert got[("openclaw-real", "madial")][0] == "v-base" and "60.0%" in got[("openclaw-real", "madial")][2]
    assert got[("mine", "madial-3")] [0] == "v-none" and "no native comparison" in got[("mine", "madial-3")][2]
    assert got[("weak", "madial-2")][0] == "v-none" and "not run" in got[("weak", "madial-2")][2]
    assert "<a href='#madial-2'>madial-2</a>" in page  # each column links to its suite's section


def test_a_verdict_without_suites_draws_nothing():
    assert verdict_picture({"suites": {}, "backends": ["mine"]}) == ""


PICTURE = """(() => { const t = document.querySelector('table.vpic'), v = document.querySelector('table.verdict');
  const tds = [...t.querySelectorAll('td')].map(td => { const r = td.getBoundingClientRect();
    return [td.parentElement.firstElementChild.textContent, td.dataset.suite, td.className, Math.round(r.left),
            Math.round(r.right), Math.round(r.width), Math.round(r.height), getComputedStyle(td).backgroundColor,
            td.title]; });
  return {inner: innerWidth, scroll: document.documentElement.scrollWidth, table_scroll: t.scrollWidth,
          table_client: t.clientWidth, top: Math.round(t.getBoundingClientRect().top),
          verdict_top: Math.round(v.getBoundingClientRect().top), cells: tds}; })()"""


@pytest.mark.slow
def test_the_picture_at_1400px(run):
    got = measure(run / "report.html", PICTURE, width=1400)
    assert got["inner"] == 1400 and got["scroll"] <= 1400, got  # no horizontal scroll on the page
    assert got["table_scroll"] <= got["table_client"], got
    assert got["top"] < got["verdict_top"] and got["top"] < 300, got  # first thing under the title
    assert len(got["cells"]) == len(BACKENDS) * 3
    colours = {}
    for backend, suite, cls, left, right, width, height, bg, title in got["cells"]:
        assert 0 <= left and right <= 1400 and width >= 60 and height > 0, (backend, suite, left, right, width)
        colours.setdefault(cls, set()).add(bg)
        assert title, (backend, suite)
    assert colours["v-better"] == {"rgb(205, 235, 211)"} and colours["v-worse"] == {"rgb(246, 205, 201)"}
    assert colours["v-same"] == {"rgb(230, 230, 230)"} and len({*colours["v-base"], *colours["v-none"]}) == 2
