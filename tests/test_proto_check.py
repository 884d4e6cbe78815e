"""`make proto-check` passes on a clean checkout and fails when a .proto changed without regeneration."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
VENV = Path(sys.executable).parent.parent


@pytest.mark.skipif(shutil.which("make") is None or shutil.which("git") is None, reason="needs make and git")
def test_proto_check_detects_drift(tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    # The committed proto files and stubs of the working tree (so the test checks what is about to land).
    for p in (REPO / "proto" / "memrig" / "v1").iterdir():
        if p.is_file():
            shutil.copy2(p, clone / "proto" / "memrig" / "v1" / p.name)
    subprocess.run(["git", "-C", str(clone), "add", "-A", "proto"], check=True)
    subprocess.run(["git", "-C", str(clone), "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "wt",
                    "--allow-empty"], check=True)
    make = ["make", "-s", "-C", str(clone), "proto-check", f"VENV={VENV}"]
    ok = subprocess.run(make, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr

    proto = clone / "proto" / "memrig" / "v1" / "memory_backend.proto"
    proto.write_text(proto.read_text().replace("message StatsRequest {", "message StatsRequest {\n  bool verbose = 2;"))
    subprocess.run(["git", "-C", str(clone), "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qam", "edit"],
                   check=True)
    bad = subprocess.run(make, capture_output=True, text=True)
    assert bad.returncode != 0
    assert "stale" in (bad.stdout + bad.stderr)
