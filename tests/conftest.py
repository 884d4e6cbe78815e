"""Shared test fixtures: isolated state/results/cache dirs, the hash embedder, and process helpers."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
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
    yield


@pytest.fixture
def data_dir() -> Path:
    if not DATA_DIR.exists():
        pytest.skip(f"real benchmark data not found at {DATA_DIR} (set MEMRIG_DATA_DIR)")
    return DATA_DIR


def have_binary(name: str) -> bool:
    return shutil.which(name) is not None
