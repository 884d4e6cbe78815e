"""A real browser for page-layout tests: Debian's headless Chromium (`apt-get install chromium`; .ci/run installs
it), driven from the command line: the page is copied beside itself with a probe script appended, loaded at a given
window size, and `--dump-dom` returns the DOM after the load event, where the probe left its measurements as JSON.
No test-only package, no browser download: a machine without Chromium skips with the reason ([requires:chromium],
which MEMRIG_REQUIRE turns into a failure on CI).
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

SKIP_REASON = "no headless Chromium on this machine (apt-get install chromium) [requires:chromium]"
_PROBE = re.compile(r'<pre id="memrig-probe">(.*?)</pre>', re.S)


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def need_chromium() -> str:
    path = chromium()
    if path is None:
        pytest.skip(SKIP_REASON)
    return path


def measure(page: Path, probe_js: str, width: int = 1400, height: int = 900, timeout_s: float = 90) -> Any:
    """Load `page` (file:// from its own directory, so relative links resolve) in headless Chromium at width ×
    height and return what `probe_js` (a JS expression) evaluates to after the load event, as JSON."""
    exe = need_chromium()
    script = ("<script>addEventListener('load',()=>{const p=document.createElement('pre');p.id='memrig-probe';"
              f"p.textContent=JSON.stringify(({probe_js}));document.body.appendChild(p)}})</script>")
    text = page.read_text()
    probe_page = page.with_name(f".probe-{page.name}")
    probe_page.write_text(text.replace("</body>", script + "</body>") if "</body>" in text else text + script)
    with tempfile.TemporaryDirectory() as profile:
        try:
            r = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                f"--user-data-dir={profile}", f"--window-size={width},{height}",
                                "--virtual-time-budget=10000", "--dump-dom", probe_page.resolve().as_uri()],
                               capture_output=True, text=True, timeout=timeout_s, env={**os.environ, "LANG": "C.UTF-8"})
        finally:
            probe_page.unlink(missing_ok=True)
    m = _PROBE.search(r.stdout)
    assert m, f"chromium returned no probe (exit {r.returncode}): {r.stderr[-1500:]}"
    return json.loads(html.unescape(m.group(1)))
