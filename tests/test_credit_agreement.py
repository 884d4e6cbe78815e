"""memrig credit-agreement: candidate credit rules against blind labels (services/coordinator/credit_agreement.py).

Hand-computed kappas on made-up items; the labels file's checks; the reader never sees a backend's name."""

from __future__ import annotations

import asyncio
import json

import pytest

from services.common.llm_client import ChatResult
from services.coordinator import credit_agreement as CA
from services.coordinator import credit_record
from services.coordinator.metrics import budget


def shown(pid: str, backend: str, cov: dict[str, float], answer_share: float | None, claimed: list[str],
          gold=("a", "b"), text: str = "t") -> CA.Shown:
    return CA.Shown("locomo", pid, backend, "1", "q?", "ans", "", text, list(gold), True, claimed, cov, answer_share)


def test_rule_values_and_ordinals_by_hand():
    s = shown("p", "x", {"a": 0.5, "b": 0.49}, 0.5, ["a", "b"])
    assert s.rule_values() == {"message": 0.5, "answer": 0.5, "claimed": 1.0}
    assert s.ordinals() == {"message": 1, "answer": 1, "message-or-answer": 1, "claimed": 2}
    s = shown("p", "x", {"a": 1.0, "b": 0.9}, 0.4, [])
    assert s.ordinals() == {"message": 2, "answer": 0, "message-or-answer": 2, "claimed": 0}
    assert [CA.ordinal_share(x) for x in (None, 0.0, 0.49, 0.5, 0.99, 1.0)] == [None, 0, 0, 1, 1, 2]
    assert [CA.ordinal_recall(x) for x in (None, 0.0, 0.01, 1.0)] == [None, 0, 1, 2]
    # an unanswerable probe has no answer rule; message-or-answer falls back to message
    s = CA.Shown("locomo", "p", "x", "5", "q", "", "", "t", ["a"], False, [], {"a": 1.0}, None)
    assert s.ordinals()["answer"] is None and s.ordinals()["message-or-answer"] == 2


def test_agreement_weighted_kappa_by_hand():
    # message rule: 2, 2, 0, 0; labels 2, 0, 2, 0 -> quadratic weighted kappa 0 (observed weighted disagreement
    # 0.5 = expected 0.5); claimed: 2, 0, 2, 0 -> kappa 1
    items = [
        ({"label": 2}, shown("p1", "x", {"a": 1, "b": 1}, 1.0, ["a", "b"])),
        ({"label": 0}, shown("p2", "x", {"a": 1, "b": 1}, 0.0, [])),
        ({"label": 2}, shown("p3", "y", {}, 0.0, ["a", "b"])),
        ({"label": 0}, shown("p4", "y", {}, 0.0, [])),
    ]
    res = CA.agreement(items, n_resamples=200)
    assert res["rules"]["message"]["kappa_weighted"] == pytest.approx(0.0)
    assert res["rules"]["claimed"]["kappa_weighted"] == pytest.approx(1.0)
    assert res["best"] == "claimed"
    assert res["rules"]["message"]["confusion"] == [[1, 0, 1], [0, 0, 0], [1, 0, 1]]
    # per backend, on [0, 1]: labels x = (1 + 0) / 2, message rule x = (1 + 1) / 2
    assert res["rules"]["message"]["per_backend"]["x"] == {"n": 2, "labels": 0.5, "rule": 1.0}
    assert res["rules"]["answer"]["per_backend"]["y"] == {"n": 2, "labels": 0.5, "rule": 0.0}
    assert res["items"] == 4 and res["questions"] == 4 and res["backends"] == ["x", "y"]


def test_labels_file_is_checked_line_by_line(tmp_path):
    good = {"id": "K001", "suite": "locomo", "probe_id": "conv-26:q1", "backend": "bm25", "sha256": "0" * 64,
            "label": 2}
    p = tmp_path / "l.jsonl"
    p.write_text(json.dumps(good) + "\n")
    assert CA.read_labels(p)[0]["label"] == 2
    for bad, field in (({**good, "label": 3}, "l.jsonl:1.label"), ({**good, "sha256": "x"}, "l.jsonl:1.sha256"),
                       ({k: v for k, v in good.items() if k != "backend"}, "l.jsonl:1.backend")):
        p.write_text(json.dumps(bad) + "\n")
        with pytest.raises(CA.CreditLabelError) as e:
            CA.read_labels(p)
        assert e.value.field == field
    p.write_text(json.dumps(good) + "\n" + json.dumps(good) + "\n")
    with pytest.raises(CA.CreditLabelError, match="K001 appears twice"):
        CA.read_labels(p)


def test_only_items_whose_text_is_the_labelled_one_are_scored():
    s = shown("p1", "x", {}, None, [], text="the labelled text")
    rows = [{"suite": "locomo", "probe_id": "p1", "backend": "x", "sha256": CA.sha256("the labelled text"), "label": 1},
            {"suite": "locomo", "probe_id": "p1", "backend": "y", "sha256": "0" * 64, "label": 1}]
    pairs, left = CA.match(rows, {s.key: s})
    assert [p[0]["backend"] for p in pairs] == ["x"] and left == {"not_in_runs": 1, "text_changed": 0}
    changed = shown("p1", "x", {}, None, [], text="another text")
    assert CA.match(rows[:1], {changed.key: changed})[1] == {"not_in_runs": 0, "text_changed": 1}


def test_draw_is_seeded_blind_and_shows_each_question_under_every_backend():
    graded = {}
    for i in range(6):
        for b in ("bm25", "cortex"):
            s = CA.Shown("locomo", f"c:q{i}", b, str(1 + i % 2), f"q{i}", "a", "", f"{b} text {i}", ["D1:1"], True,
                         [], {}, None)
            graded[s.key] = s
    a = CA.draw(graded, ["bm25", "cortex"], {"locomo": 4}, seed=3)
    assert [x.key for x in a] == [x.key for x in CA.draw(graded, ["bm25", "cortex"], {"locomo": 4}, seed=3)]
    assert len(a) == 8 and len({x.probe_id for x in a}) == 4
    assert {x.category for x in a} == {"1", "2"}  # spread over the categories
    view = CA.reader_view("K001", a[0])
    assert set(view) == {"id", "question", "gold_answer", "question_date", "context"}


def test_model_judge_is_rated_against_the_same_labels():
    class Fake:
        def __init__(self):
            self.seen = []

        async def chat(self, messages, temperature=0.0):
            self.seen.append(messages)
            return ChatResult('{"label": 2}' if "good" in messages[-1]["content"] else "I think 0.")

    items = [({"label": 2}, shown("p1", "x", {}, None, [], text="good")),
             ({"label": 0}, shown("p2", "x", {}, None, [], text="bad")),
             ({"label": 2}, shown("p3", "x", {}, None, [], text="good too"))]
    fake = Fake()
    ratings = asyncio.run(CA.model_ratings(items, fake))
    assert ratings == [2, 0, 2]
    assert fake.seen[0][0]["content"].startswith("You are deciding whether")
    res = CA.model_agreement(items, ratings, n_resamples=100)
    assert res["kappa_weighted"] == pytest.approx(1.0) and res["n"] == 3 and res["unparsed"] == 0
    assert [CA.parse_label(x) for x in ('{"label": 1}', '{"label":"0"}', "2", "no idea")] == [1, 0, 2, None]


def test_the_headline_rule_is_the_one_the_recorded_measurement_found_best():
    """HEADLINE_RULE follows the committed measurement (suites/data/credit_labels.agreement.json)."""
    if not CA.RECORD.exists():
        pytest.skip("no credit-agreement measurement recorded yet")
    rec = json.loads(CA.RECORD.read_text())
    assert rec["result"]["best"] == budget.HEADLINE_RULE
    assert rec["labels_sha256"] == CA.labels_digest(CA.LABELS)
    a = credit_record.headline_agreement()
    assert a is not None and a["kappa_weighted"] == rec["result"]["rules"][budget.HEADLINE_RULE]["kappa_weighted"]
    assert f"{a['kappa_weighted']:.2f}" in credit_record.headline_note()


def test_before_after_sets_the_claimed_verdict_beside_the_shown_one(tmp_path):
    """A backend that shows nothing but claims every gold id: 'better' than native under its own claims, 'worse'
    under what it showed; the others' cells do not move."""
    from tests.run_fixtures import madial_run

    d = madial_run(tmp_path / "m", {"openclaw-real": set(range(10)), "bm25": set(range(10)), "liar": set()},
                   n=20, claims={"liar": True})
    rows = {(r["backend"], r["vs"]): r for r in CA.before_after(d)}
    liar = rows[("liar", "vs_native")]
    assert (liar["before"]["word"], liar["after"]["word"]) == ("better", "worse")
    assert liar["before"]["delta"] == pytest.approx(0.5) and liar["after"]["delta"] == pytest.approx(-0.5)
    assert (liar["value_before"], liar["value_after"]) == (1.0, 0.0)
    bm = rows[("bm25", "vs_native")]
    assert bm["before"] == bm["after"]
    table = CA.render_before_after(list(rows.values()))
    assert "| madial | liar | native | better +50.0 | worse -50.0 | **yes** |" in table
