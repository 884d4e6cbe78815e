"""Shared test fixtures: isolated state/results/cache dirs, the hash embedder, and process helpers."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# MEMRIG_REQUIRE=redis,prometheus,... (set by .ci/run): a skip whose reason carries `[requires:<name>]` for a listed
# name fails instead, so CI cannot go green over something it could have installed. On a laptop (unset) it skips.
REQUIRED = {x.strip() for x in os.environ.get("MEMRIG_REQUIRE", "").split(",") if x.strip()}
_REQUIRES_RE = re.compile(r"\[requires:([a-z0-9-]+)\]")


def required_skip_failure(reason: str, required: set[str]) -> str | None:
    """The failure message when a skip with this reason is not allowed under `required`, else None."""
    m = _REQUIRES_RE.search(reason)
    if m and (m.group(1) in required or "all" in required):
        return (f"MEMRIG_REQUIRE={','.join(sorted(required))} turns this skip into a failure "
                f"({m.group(1)} is required here): {reason}")
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if not rep.skipped or not REQUIRED or not isinstance(rep.longrepr, tuple):
        return
    msg = required_skip_failure(str(rep.longrepr[2]), REQUIRED)
    if msg is not None:
        rep.outcome, rep.longrepr = "failed", msg
DATA_DIR = Path(os.environ.get("MEMRIG_DATA_DIR", REPO.parent / "shared" / "data"))


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path, monkeypatch):
    """Every test gets its own state, results and embedding-cache dirs; unit tests embed with `hash`."""
    monkeypatch.setenv("MEMRIG_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("MEMRIG_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("MEMRIG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MEMRIG_DATA_ROOT", str(tmp_path / "data"))
    monkeypatch.setenv("MEMRIG_EMBEDDER", os.environ.get("MEMRIG_TEST_EMBEDDER", "hash"))
    monkeypatch.delenv("MEMRIG_LLM_BASE_URL", raising=False)
    # "on" is the unset default; setting it through monkeypatch means a command under test that writes the variable
    # itself (--no-llm-cache sets "refresh") cannot leak that into later tests.
    monkeypatch.setenv("MEMRIG_LLM_CACHE", "on")
    yield


@pytest.fixture
def data_dir() -> Path:
    if not DATA_DIR.exists():
        pytest.skip(f"[requires:data] real benchmark data not found at {DATA_DIR} (set MEMRIG_DATA_DIR)")
    return DATA_DIR


def have_binary(name: str) -> bool:
    return shutil.which(name) is not None
