"""Issue 48: a `raise RuntimeError` in the rig's code is only where no MemrigError branch fits, and the comment
right above it says why (bad input is an InputError naming the field, a failed service a DependencyError, ...)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RAISE = re.compile(r"^\s*raise RuntimeError\b")


def unexplained(root: Path) -> list[str]:
    out = []
    for tree in ("services", "loadtests", "collectors"):
        for path in sorted((root / tree).rglob("*.py")):
            if "node_modules" in path.parts:  # third-party code a setup installed, not the rig's
                continue
            lines = path.read_text().splitlines()
            for i, line in enumerate(lines):
                if RAISE.match(line) and not (i and lines[i - 1].strip().startswith("#")):
                    out.append(f"{path.relative_to(root)}:{i + 1}")
    return out


def test_every_runtime_error_has_a_comment_above_it_saying_why():
    assert unexplained(ROOT) == []


def test_the_check_finds_a_bare_one_and_skips_installed_code(tmp_path):
    (tmp_path / "services" / "x").mkdir(parents=True)
    (tmp_path / "loadtests").mkdir()
    (tmp_path / "collectors" / "node_modules").mkdir(parents=True)
    (tmp_path / "services" / "x" / "a.py").write_text("def f():\n    raise RuntimeError('bare')\n")
    (tmp_path / "loadtests" / "b.py").write_text("def g():\n    # no MemrigError fits: a bug\n"
                                                 "    raise RuntimeError('explained')\n")
    (tmp_path / "collectors" / "node_modules" / "c.py").write_text("raise RuntimeError('theirs')\n")
    assert unexplained(tmp_path) == ["services/x/a.py:2"]
