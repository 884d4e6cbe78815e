"""LongMemEval S on the shared 24-question sample (../shared/data/longmemeval/longmemeval_s_sample24.json.gz): the
suite loads it as the S variant, every question one of the 400 dev ids, and the dev-id list the repo records is
exactly the question ids of the shared oracle dev file. Skips with the reason when the shared data is absent."""

from __future__ import annotations

import json

import pytest

from services.coordinator.suites import longmemeval as L
from services.coordinator.suites.common import default_data_dir

DATA = default_data_dir()
SAMPLE = "longmemeval/longmemeval_s_sample24.json.gz"
ORACLE = "longmemeval/longmemeval_oracle_dev.json"

pytestmark = pytest.mark.needs_data


@pytest.mark.skipif(not DATA.joinpath(SAMPLE).exists(), reason=f"[requires:data] {SAMPLE} not found under {DATA}")
def test_the_s_sample_loads_as_the_s_variant():
    suite = L.LongMemEvalSuite({"file": SAMPLE, "full": True}, seed=0)
    data = suite.load()
    assert data.info["variant"] == "s" and data.info["file"] == SAMPLE
    assert data.info["held_out_left_out"] == 0 and data.info["questions"] == 24
    assert {p.id for p in data.probes} <= L.dev_question_ids()
    # 4 questions per type, no abstention; the 4 single-session-assistant ones have their gold on the assistant
    # side, so retrieval (user-turn gold, as upstream) skips them
    assert sorted({p.category for p in data.probes}) == sorted(L.TYPES)
    assert data.info["retrieval_skipped"] == {"abstention": 0, "no_user_gold": 4}
    assert {p.category for p in data.probes if not p.evidence_ids} == {"single-session-assistant"}
    # S haystacks: ~48 sessions a question, far beyond the evidence sessions
    sessions = [len(b.sessions) for b in data.corpora.values()]
    assert min(sessions) > 30 and all(len(p.meta["gold_sessions"]) < 10 for p in data.probes)
    assert L.LongMemEvalSuite({"file": SAMPLE, "variant": "s", "questions": 6}, seed=0).load().info["questions"] == 6
    assert suite.render({"conditions": {}, "data": data.info}).startswith(
        f"## LongMemEval (S)\n\nData: `{SAMPLE}` (LongMemEval S)")


@pytest.mark.skipif(not DATA.joinpath(ORACLE).exists(), reason=f"[requires:data] {ORACLE} not found under {DATA}")
def test_the_recorded_dev_ids_are_the_oracle_dev_files():
    ids = {q["question_id"] for q in json.loads(DATA.joinpath(ORACLE).read_text())}
    assert len(ids) == 400 and L.dev_question_ids() == ids
