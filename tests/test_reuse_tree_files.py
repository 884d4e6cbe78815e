"""reuse.tree_files walks a code tree without entering node_modules / __pycache__ / .pytest_cache (an installed
OpenClaw sidecar holds ~38,000 files there, walked and dropped twice per suite and profile before); the files it
returns must be exactly those the rglob expression it replaced returned, symlinks included."""

from __future__ import annotations

import os

import pytest

from services.coordinator import reuse


def _rglob_files(p):
    """tree_files' directory case as it was written before."""
    return {f for f in p.rglob("*") if f.is_file() and not reuse._SKIP_DIRS & set(f.relative_to(p).parts)
            and f.suffix != ".pyc"}


@pytest.fixture
def tree(tmp_path, monkeypatch):
    root = tmp_path / "proj"
    files = ["services/adapters/x/adapter.py", "services/adapters/x/sidecar/sidecar.mjs",
             "services/adapters/x/sidecar/package-lock.json", "services/adapters/x/sidecar/node_modules/a/index.js",
             "services/adapters/x/sidecar/node_modules/.bin/tool", "services/adapters/x/deep/node_modules/b/c.js",
             "services/adapters/x/__pycache__/adapter.cpython-311.pyc", "services/adapters/x/stray.pyc",
             "services/adapters/x/.pytest_cache/v/cache", "services/adapters/x/sub/__pycache__/m.py",
             "services/adapters/x/sub/m.py", "services/adapters/x/sub/node_modules",  # a file named like a skipped dir
             "elsewhere/target.txt", "elsewhere/dir/inside.txt"]
    for rel in files:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(rel)
    x = root / "services/adapters/x"
    os.symlink(root / "elsewhere/target.txt", x / "link_to_file.txt")  # counts, as rglob + is_file had it
    os.symlink(root / "elsewhere/dir", x / "link_to_dir")  # not followed
    os.symlink(root / "elsewhere/missing.txt", x / "dangling.txt")  # not a file
    monkeypatch.setattr(reuse, "PROJECT_ROOT", root)
    return root


def test_tree_files_is_the_rglob_it_replaced(tree):
    x = tree / "services/adapters/x"
    got = reuse.tree_files("services/adapters/x")
    assert got == _rglob_files(x)
    # by hand: the adapter's own files, the file symlink; nothing under a skipped directory, no .pyc, no file named
    # node_modules, no directory symlink's contents, no dangling link
    assert {f.relative_to(x).as_posix() for f in got} == {
        "adapter.py", "sidecar/sidecar.mjs", "sidecar/package-lock.json", "sub/m.py", "link_to_file.txt"}
    assert reuse.tree_files("services") == _rglob_files(tree / "services")
    assert reuse.tree_files("services/adapters/x/adapter.py") == {x / "adapter.py"}  # a file: itself
    assert reuse.tree_files("services/nothing-here") == set()
