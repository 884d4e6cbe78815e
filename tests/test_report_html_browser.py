"""report.html as a browser shows it (issue 37): Markdown images render (inlined, so the page stays one file) on
the bench-all page and on a suite's page, and the verdict of eight suites stays readable at 1,400 px: every cell
inside the window, none cut off or scrolled out of view. The layout checks load the pages in headless Chromium
(tests/headless_browser.py)."""

from __future__ import annotations

import base64
import struct
import zlib

import pytest

from services.coordinator.report_html import markdown_to_html
from services.coordinator.run_report import write_reports
from tests.headless_browser import measure
from tests.run_fixtures import bench_all_dir, madial_run

HITS = {"openclaw-real": {0, 1}, "bm25": set(range(5)), "mine": set(range(10)), "other": {3, 4, 5, 6}}
SUITES = ["madial"] + [f"madial-{i}" for i in range(2, 9)]


def png(w: int, h: int) -> bytes:
    """A w × h grey PNG, written by hand (8-bit greyscale, filter 0 per row)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    raw = b"".join(b"\x00" + b"\x80" * w for _ in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def test_images_are_inlined_and_cells_carry_their_column():
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "costs").mkdir()
        (Path(d) / "costs" / "a.png").write_bytes(png(3, 2))
        h = markdown_to_html("![turn latency](costs/a.png) ![gone](costs/none.png) [link](x.md)", d)
    assert f'<img src="data:image/png;base64,{base64.b64encode(png(3, 2)).decode()}" alt="turn latency">' in h
    assert '<img src="costs/none.png" alt="gone">' in h and '<a href="x.md">link</a>' in h  # missing: kept as is
    assert "!<a" not in markdown_to_html("![p](p.png)")  # the old rendering: "!" and a link
    assert '<img src="p.png" alt="p">' in markdown_to_html("![p](p.png)")
    assert '<img src="/etc/passwd"' in markdown_to_html("![x](/etc/passwd)", "/")  # absolute: never read
    t = markdown_to_html("| backend | [s1](#s1): recall@5 |\n|---|---|\n| **mine** | a<br>b |")
    assert '<td data-label="s1: recall@5">a<br>b</td>' in t and '<td data-label="backend"><b>mine</b></td>' in t


@pytest.fixture(scope="module")
def eight_suite_run(tmp_path_factory):
    # Built once for the module (eight suite reports with their plots, ~9 s): the tests only load its pages. The
    # state dirs are its own, as tests/conftest.py's per-test ones are not set up yet for a module fixture.
    base = tmp_path_factory.mktemp("eight-suites")
    out = base / "run"
    with pytest.MonkeyPatch.context() as mp:
        for var, sub in (("MEMRIG_STATE_DIR", "state"), ("MEMRIG_RESULTS_DIR", "results"),
                         ("MEMRIG_CACHE_DIR", "cache"), ("MEMRIG_DATA_ROOT", "data")):
            mp.setenv(var, str(base / sub))
        for name in SUITES:
            madial_run(out / name, HITS, html=True)
        (out / "costs").mkdir()
        for p, (w, h) in {"turn_latency.png": (640, 300), "rss.png": (500, 260)}.items():
            (out / "costs" / p).write_bytes(png(w, h))
        index = bench_all_dir(out, {n: "succeeded" for n in SUITES}, list(HITS),
                              costs={"state": "ok", "dir": "costs", "results": {"backend": "mine",
                                                                               "plots": ["turn_latency.png", "rss.png"]}})
        write_reports(out, index)
    return out


IMAGES = "[...document.images].map(i => [i.alt, i.complete, i.naturalWidth, Math.round(i.getBoundingClientRect().width)])"
VERDICT = """(() => { const t = document.querySelector('table.verdict');
  const cells = [...t.querySelectorAll('td')].map(td => { const r = td.getBoundingClientRect();
    return [td.dataset.label, Math.round(r.left), Math.round(r.right), Math.round(r.width), Math.round(r.height)]; });
  return {inner: innerWidth, scroll: document.documentElement.scrollWidth, table_scroll: t.scrollWidth,
          table_client: t.clientWidth, rows: t.querySelectorAll('tr').length, cells}; })()"""


@pytest.mark.slow
def test_bench_all_page_shows_its_plots_and_the_whole_verdict_at_1400px(eight_suite_run):
    page = eight_suite_run / "report.html"
    got = measure(page, f"{{images: {IMAGES}, verdict: {VERDICT}}}", width=1400)
    imgs = {alt: (done, nw, w) for alt, done, nw, w in got["images"]}
    assert imgs["turn_latency.png"][:2] == (True, 640) and imgs["rss.png"][:2] == (True, 500)
    assert all(done and nw > 0 for done, nw, _ in imgs.values())
    v = got["verdict"]
    assert v["inner"] == 1400 and v["scroll"] <= 1400, v  # no horizontal scroll on the page
    assert v["table_scroll"] <= v["table_client"], v  # nor inside the table
    assert len(v["cells"]) == len(HITS) * (2 + len(SUITES))  # backend, summary, one cell per suite
    for label, left, right, width, height in v["cells"]:
        assert 0 <= left and right <= 1400 and width >= 150 and height > 0, (label, left, right, width)
    labels = {c[0] for c in v["cells"]}
    assert all(any(x.startswith(f"{s}: ") for x in labels) for s in SUITES), labels  # each box names its suite


@pytest.mark.slow
def test_a_suite_page_shows_its_plots(eight_suite_run):
    page = eight_suite_run / "madial" / "report.html"
    got = measure(page, f"{{images: {IMAGES}, inner: innerWidth, scroll: document.documentElement.scrollWidth}}")
    assert len(got["images"]) >= 2 and all(done and nw > 0 and w <= 1400 for _, done, nw, w in got["images"])
    assert got["scroll"] <= got["inner"]
