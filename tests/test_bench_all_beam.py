"""BEAM in bench-all (services/coordinator/bench_all.py): the sample the power table chose (six 100K conversations,
retrieval only) over the default backends that ingest a 100K conversation cheaply; the others named as not run there
in the index report; given backends run on BEAM too."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from services.adapters.registry import get_spec
from services.coordinator import bench_all
from services.coordinator.run_report import render_index

DEFAULTS = ["none", "full-context", "compacted", "bm25", "dense", "hybrid", "openclaw", "openclaw-2026-02",
            "openclaw-real", "openclaw-real[profile=sessions]", "openclaw-real[profile=flush-every-session]", "cortex",
            "cortex-fast"]
CHEAP = ["none", "full-context", "compacted", "bm25", "dense", "hybrid", "openclaw"]
COSTLY = ["openclaw-2026-02", "openclaw-real", "openclaw-real[profile=sessions]",
          "openclaw-real[profile=flush-every-session]", "cortex", "cortex-fast"]


def _plan(monkeypatch, tmp_path, **kw):
    monkeypatch.setattr(bench_all, "get_spec", lambda n: replace(get_spec(n), available=None))
    monkeypatch.setattr(bench_all, "default_backends", lambda: list(DEFAULTS))
    return bench_all.plan(out=tmp_path / "r", **kw)


def test_the_default_plan_ends_with_the_beam_sample_over_the_cheap_backends(monkeypatch, tmp_path):
    p = _plan(monkeypatch, tmp_path)
    names = [s.suite for s in p.suites]
    # the eight suites of before, then BEAM
    assert names == ["cortex-v1", "arclight", "octybot", "quaid-weeks", "poisoned-memory", "locomo", "longmemeval",
                     "madial", "beam"]
    beam = p.suites[-1]
    assert beam.options == {"sizes": "100K", "conversations": 6, "answer": False}
    assert beam.backends == CHEAP
    assert sorted(beam.entry["backend_notes"]) == sorted(COSTLY)
    assert all("make bench-beam" in why for why in beam.entry["backend_notes"].values())
    for s in p.suites[:-1]:  # every other suite keeps the run's backends and has nothing to say about them
        assert s.backends == DEFAULTS and s.entry == {}
    assert p.backends == DEFAULTS  # the run starts them all; BEAM runs its share
    cfg = p.run_config(beam)
    assert cfg.backends == CHEAP and cfg.out_dir == str(tmp_path / "r" / "beam")


def test_an_option_overrides_the_beam_sample(monkeypatch, tmp_path):
    p = _plan(monkeypatch, tmp_path, suites=["beam"], options={"beam.conversations": 8, "beam.sizes": "100K,500K"})
    (beam,) = p.suites
    assert beam.options == {"sizes": "100K,500K", "conversations": 8, "answer": False}


def test_given_backends_run_on_beam_too(monkeypatch, tmp_path):
    p = _plan(monkeypatch, tmp_path, suites=["beam", "madial"], backends=["cortex", "bm25"])
    assert [(s.suite, s.backends, s.entry) for s in p.suites] == [
        ("beam", ["cortex", "bm25"], {}), ("madial", ["cortex", "bm25"], {})]
    p = _plan(monkeypatch, tmp_path, suites=["beam"], targets={"cortex": "127.0.0.1:1"})
    assert p.suites[0].backends == ["cortex"] and p.suites[0].entry == {}


def test_the_index_report_names_the_backends_a_suite_left_out(tmp_path: Path):
    index = {"run_id": "r", "backends": ["bm25", "cortex", "cortex-fast"], "suites": {
        "madial": {"state": "ok", "duration_s": 3.0},
        "beam": {"state": "ok", "duration_s": 5.0, "backend_notes": {
            "cortex": "not run on BEAM: slow", "cortex-fast": "not run on BEAM: slow", "x": "other reason"}}}}
    md = render_index(tmp_path, index)
    assert "> Suite **beam**: cortex, cortex-fast not run on BEAM: slow" in md
    assert "> Suite **beam**: x other reason" in md
    assert "Suite **madial**" not in md
