"""cortex-mock without --data-dir works in a temporary directory and removes it when it stops (SIGTERM); a
--data-dir it was given stays."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow  # starts cortex-mock processes


def _start(extra: list[str]) -> tuple[subprocess.Popen, Path]:
    """Start cortex-mock and read its output up to READY (which it prints once SIGTERM stops it cleanly)."""
    p = subprocess.Popen([sys.executable, "-m", "services.cortex_mock", "--port", "0", "--embedder", "hash", *extra],
                         cwd=ROOT, stderr=subprocess.STDOUT, stdout=subprocess.PIPE, text=True)
    data_dir = None
    for line in p.stdout:
        if m := re.search(r"cortex-mock: data dir (\S+) ", line):
            data_dir = Path(m.group(1))
        if line.startswith("READY"):
            break
    assert data_dir is not None, "cortex-mock did not name its data dir"
    return p, data_dir


def _stop(p: subprocess.Popen) -> None:
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()


@pytest.mark.parametrize("given", [False, True])
def test_temporary_data_dir_is_removed_at_stop(tmp_path, given):
    extra = ["--data-dir", str(tmp_path / "kept")] if given else []
    p, data_dir = _start(extra)
    try:
        assert data_dir.is_dir()
        if given:
            assert data_dir == tmp_path / "kept"
        else:
            assert os.path.basename(data_dir).startswith("cortex-mock-")
    finally:
        _stop(p)
    assert p.returncode is not None
    assert data_dir.is_dir() is given
