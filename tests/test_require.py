"""MEMRIG_REQUIRE: a skip tagged `[requires:<name>]` fails when <name> is required (CI sets it in .ci/run)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, required_skip_failure


def test_required_skip_failure_by_hand():
    assert required_skip_failure("[requires:redis] redis-server not installed", {"redis"}).startswith(
        "MEMRIG_REQUIRE=redis turns this skip into a failure (redis is required here)")
    assert required_skip_failure("[requires:redis] x", {"prometheus"}) is None
    assert required_skip_failure("[requires:redis] x", {"all"}) is not None
    assert required_skip_failure("no tag here", {"all"}) is None
    assert required_skip_failure("[requires:plugin-client] y", {"plugin-client", "redis"}) is not None


@pytest.mark.slow  # two pytest processes
def test_a_required_skip_fails_a_real_run(tmp_path: Path):
    t = tmp_path / "test_probe.py"
    t.write_text("import pytest\n\n"
                 "def test_needs_x():\n    pytest.skip('[requires:thing-x] not here')\n\n"
                 "@pytest.mark.skipif(True, reason='[requires:thing-y] absent')\ndef test_needs_y():\n    pass\n\n"
                 "def test_other():\n    pytest.skip('[requires:thing-z] absent')\n")

    def run(require: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "MEMRIG_REQUIRE": require}
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider",
                               "--rootdir", str(tmp_path), "-c", os.devnull, str(t)],
                              cwd=REPO, env=env, capture_output=True, text=True, timeout=120)

    strict = run("thing-x,thing-y")
    assert strict.returncode == 1, strict.stdout
    # The skipif mark fails in setup, which pytest counts as an error: either way the run fails.
    assert "1 failed, 1 skipped, 1 error" in strict.stdout and "turns this skip into a failure" in strict.stdout
    relaxed = run("")
    assert relaxed.returncode == 0 and "3 skipped" in relaxed.stdout, relaxed.stdout
