"""Cortex V1 around its scoring maths (tests/test_golden_suites.py): what load() makes of the shipped prompt set,
gold evidence, condition names and labels, the retrieval mode, score's filters and defaults, and every rendered
row, hand-checked."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from services.common.types import Message, Session
from services.coordinator.suites import cortex_v1 as V
from services.coordinator.suites.cortex_v1 import CortexV1Suite, condition_label, evidence_for
from tests.fixtures_golden import cv1_samples


def test_defaults_and_registration():
    from services.coordinator.suites.registry import get_suite

    assert CortexV1Suite.defaults == {"top_k": 6, "mode": "full", "limit": 0, "categories": "ABCD"}
    assert get_suite("cortex-v1") is CortexV1Suite


def test_load_the_shipped_prompt_set():
    data = CortexV1Suite().load()
    assert len(data.probes) == 40
    assert [sum(p.category == c for p in data.probes) for c in "ABCD"] == [15, 10, 10, 5]
    last = max(s.started_at for s in data.corpora["project"].sessions)
    assert last == datetime(2026, 2, 13, 9, 0, tzinfo=UTC)
    assert {p.reference_time for p in data.probes} == {last + timedelta(days=1)}  # asked the day after
    a1 = data.probes[0]
    assert (a1.id, a1.category, a1.expected, a1.namespace) == ("A1", "A", ["3001"], "project")
    s1 = next(s for s in data.corpora["project"].sessions if s.session_id == "v1-s1")
    assert a1.evidence_ids == [m.id for m in s1.messages if "3001" in m.content] != []
    assert a1.meta == {"source_sessions": ["v1-s1"], "compaction_retains": "no"}
    assert data.info == {"source": "services/coordinator/suites/data/cortex_v1.json (written for memrig after seed 000)",
                         "sessions": 8, "prompts": 40}


def test_categories_and_limit_options():
    only = CortexV1Suite({"categories": "CD"}).load().probes
    assert [p.category for p in only] == ["C"] * 10 + ["D"] * 5  # every prompt of C and D, in file order
    assert [p.id for p in CortexV1Suite({"limit": 3}).load().probes] == ["A1", "A2", "A3"]


def _session(sid, *texts):
    return Session(session_id=sid, started_at=datetime(2026, 1, 1, tzinfo=UTC),
                   messages=tuple(Message(id=f"{sid}-{i}", role="user", content=t) for i, t in enumerate(texts)))


def test_evidence_is_the_source_messages_holding_an_expected_string_else_all_of_them():
    sessions = {"s1": _session("s1", "Port is 3001", "nothing here"), "s2": _session("s2", "PORT 3001 again", "x")}
    assert evidence_for({"source_sessions": ["s1", "s2"], "expected": ["port 3001"]}, sessions) == ["s2-0"]
    assert evidence_for({"source_sessions": ["s1", "s2"], "expected": ["3001"]}, sessions) == ["s1-0", "s2-0"]
    assert evidence_for({"source_sessions": ["s2"], "expected": ["zod"]}, sessions) == ["s2-0", "s2-1"]


def test_condition_labels_and_retrieve_mode():
    assert condition_label("openclaw-real") == "OpenClaw native"
    assert condition_label("openclaw") == "OpenClaw native (port)"
    assert condition_label("openclaw-real[min_score=0.25]") == "OpenClaw native [min_score=0.25]"
    assert condition_label("cortex") == "compacted + cortex"
    assert condition_label("cortex[mode=fast]") == "compacted + cortex[mode=fast]"
    s = CortexV1Suite()
    assert (s.retrieve_mode("cortex-fast"), s.retrieve_mode("cortex")) == ("fast", "full")
    assert CortexV1Suite({"mode": "fast"}).retrieve_mode("cortex") == "fast"


def test_conditions_follow_the_backends_in_the_run():
    got = CortexV1Suite().conditions(["none", "compacted", "cortex", "openclaw-real"], {})
    assert [(c.name, c.context) for c in got] == [
        ("bare", ("backend:none",)), ("compacted", ("backend:compacted",)),
        ("compacted + cortex", ("compaction", "backend:cortex")),
        ("OpenClaw native", ("compaction", "backend:openclaw-real"))]
    got = CortexV1Suite().conditions(["cortex"], {})
    assert [(c.name, c.context) for c in got] == [
        ("bare", ()), ("compacted", ("compaction",)), ("compacted + cortex", ("compaction", "backend:cortex"))]


def _json_samples():
    """The golden samples as a run file gives them back (strings built by json, not literals)."""
    return json.loads(json.dumps(cv1_samples()))


def test_score_filters_on_values_read_from_json():
    rows = _json_samples()
    rows[0]["meta"]["compaction_retains"] = "maybe"  # A01 compacted (score 3) is no longer a dropped prompt
    for r in rows:
        if r["condition"] == "compacted":
            r.pop("context_tokens")
    m = CortexV1Suite().score(rows)
    comp = m["conditions"]["compacted"]
    # dropped prompts: A02 (1) and C01 (0) -> 0.5; without the change A01's 3 would not count either ("yes")
    assert comp["compaction_drops_mean"] == pytest.approx(0.5)
    assert comp["context_tokens_mean"] == 0.0  # missing context tokens count as none
    assert comp["by_category"]["A"]["n"] == 2 and comp["by_category"]["A"]["mean"] == pytest.approx(2.0)


def test_no_compacted_condition_means_no_deltas():
    rows = [r for r in _json_samples() if r["condition"] != "compacted"]
    m = CortexV1Suite().score(rows)
    assert m["delta_vs_compacted"] == {"OpenClaw native": None}


def test_render_rows():
    m = CortexV1Suite().score(cv1_samples())
    md = CortexV1Suite().render(m)
    assert "| Metric | compacted | OpenClaw native |" in md
    assert "| Grounded correct (3) | 40.0% | 40.0% |" in md
    assert "| Generic correct (2) | 20.0% | 40.0% |" in md
    assert "| Abstained (1) | 20.0% | 20.0% |" in md
    assert "| Hallucinated (0) | 20.0% | 0.0% |" in md
    assert "| Δ mean vs compacted | 0.00 | 0.40 |" in md
    assert "| A: Specific detail (2) | 2.00 | 3.00 |" in md
    assert "| Prompts compaction drops (mean) | 0.50 | 2.50 |" in md
    assert "| Context tokens / prompt (cl100k) | 100 | 302 |" in md
    assert "*OpenClaw native* = compaction summary" in md
    m2 = json.loads(json.dumps(m))
    m2["conditions"] = {"compacted + cortex": m2["conditions"]["OpenClaw native"], "compacted": m2["conditions"]["compacted"]}
    assert "*OpenClaw native* =" not in CortexV1Suite().render(m2)


def test_render_with_nothing_scored():
    md = CortexV1Suite().render({"conditions": {}, "retrieval": {}, "delta_vs_compacted": {}})
    assert "| A: Specific detail (0) |" in md and "### Retrieval" not in md
    assert V.is_native_label("OpenClaw native (port)") and not V.is_native_label("compacted + openclaw")
