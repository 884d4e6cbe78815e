"""OpenClaw 2026.9.6's ranking after both legs (services/adapters/openclaw/ranking_2609.py), one crafted row of
each kind, every figure computed by hand: the keyword score a row contributes, content = 0.7·v + 0.3·k, the
lexical rank of body rows without a text score, exact-path rows first at score 1 ((1 + content)/2 under
decay), the decay of a dated path and the importance multiplier; then the keyword-only finish of FTS-only
mode. MMR is off where the arithmetic is the point (its own cases are in tests/test_openclaw_mmr_matrix.py)."""

from __future__ import annotations

import pytest

from services.adapters.openclaw.hybrid import DAY_MS, VectorHit
from services.adapters.openclaw.keyword_search import KeywordRow
from services.adapters.openclaw.presets import PRESETS
from services.adapters.openclaw.ranking_2609 import (
    Decay,
    exact_tie_score,
    finalize_keyword_only_2609,
    importance_multiplier,
    merge_hybrid_2609,
)

P = PRESETS["openclaw-2026-09"]
NOW = 1_767_225_600_000 + 30 * DAY_MS  # 2026-01-31 00:00 UTC: memory/2026-01-01.md is 30 days old


def _decay(enabled: bool) -> Decay:
    return Decay(enabled, NOW, 30.0, P["dated_path_regex"], P["evergreen_paths"], {})


def test_importance_and_exact_tie_tables():
    assert importance_multiplier(None) == 1.0
    assert importance_multiplier(0.5) == pytest.approx(0.80)  # floor 0, clamped up to 1
    assert importance_multiplier(3.7) == pytest.approx(0.90)  # floor 3
    assert importance_multiplier(10) == pytest.approx(1.25)
    assert importance_multiplier(12) == pytest.approx(1.25)  # clamped down to 10
    assert exact_tie_score(0.2) == pytest.approx(0.6)
    assert exact_tie_score(-0.5) == 0.5 and exact_tie_score(1.5) == 1.0  # content clamped to [0, 1]


def _inputs():
    vector = [VectorHit("v1", "memory/a.md", 1, 2, "alpha", 0.8),
              VectorHit("v2", "memory/b.md", 1, 2, "beta", 0.5),
              VectorHit("e", "memory/e.md", 1, 2, "exact", 0.3),
              VectorHit("d", "memory/2026-01-01.md", 1, 2, "dated", 0.9)]
    keyword = [KeywordRow("v2", "memory/b.md", "memory", 1, 2, "beta body", 0.4, 0.6, has_body=True),
               KeywordRow("k3", "memory/c.md", "memory", 1, 2, "gamma", 0.3, 0.5, has_body=True),
               KeywordRow("k4", "memory/cache.md", "memory", 1, 2, "", 0.0, 0.2, path_score=0.2, has_body=False),
               KeywordRow("k5", "memory/f.md", "memory", 1, 2, "phi", 0.0, 0.25, has_body=True)]
    return vector, keyword


def _table(rows):
    return {r.id: (round(r.score, 9), round(r.extra["ranking"], 9), round(r.extra["content"], 9),
                   r.extra["lexical"], round(r.extra["keyword"], 9), r.decay) for r in rows}


def test_merge_without_decay():
    vector, keyword = _inputs()
    out = merge_hybrid_2609("memory/e.md", vector, keyword, _decay(False), mmr_enabled=False)
    # id: (score, ranking, content, lexical, keyword score, decay)
    assert _table(out) == {
        "e": (1.0, 0.21, 0.21, 0.0, 0.0, 1.0),  # the exact path: first, score 1, ranking = content 0.7·0.3
        "d": (0.63, 0.63, 0.63, 0.0, 0.0, 1.0),  # 0.7·0.9, no decay
        "v1": (0.56, 0.56, 0.56, 0.0, 0.0, 1.0),  # 0.7·0.8
        "v2": (0.53, 0.53, 0.53, 0.0, 0.6, 1.0),  # 0.7·0.5 + 0.3·0.6 (the boosted body score, not 0.4)
        "k3": (0.15, 0.15, 0.15, 0.0, 0.5, 1.0),  # 0.3·0.5
        "k4": (0.06, 0.06, 0.06, 0.0, 0.2, 1.0),  # filename-only: the path score 0.2
        "k5": (0.0, 0.25, 0.0, 0.25, 0.0, 1.0),  # a body row without a text score: ranked by its lexical rank
    }
    assert [r.id for r in out] == ["e", "d", "v1", "v2", "k3", "k4", "k5"]


def test_merge_with_decay_and_importance():
    vector, keyword = _inputs()
    out = merge_hybrid_2609("memory/e.md", vector, keyword, _decay(True), mmr_enabled=False,
                            importance={"v1": 10, "k3": 1})
    t = _table(out)
    assert t["e"] == (1.0, 0.605, 0.21, 0.0, 0.0, 1.0)  # (1 + 0.21) / 2; undated memory/ files do not decay
    assert t["d"] == (0.315, 0.315, 0.63, 0.0, 0.0, 0.5)  # 30 days at a 30-day half-life: × 0.5
    assert t["v1"] == (0.7, 0.7, 0.56, 0.0, 0.0, 1.0)  # importance 10: × 1.25
    assert t["k3"] == (0.12, 0.12, 0.15, 0.0, 0.5, 1.0)  # importance 1: × 0.8
    assert [r.id for r in out] == ["e", "v1", "v2", "d", "k3", "k4", "k5"]


def test_exact_tiers_come_in_order_full_path_basename_stem():
    vector = [VectorHit("stem", "x/notes", 1, 1, "a", 0.9), VectorHit("base", "y/notes.md", 1, 1, "b", 0.1),
              VectorHit("full", "notes.md", 1, 1, "c", 0.05), VectorHit("other", "z/other.md", 1, 1, "d", 0.99)]
    out = merge_hybrid_2609("notes.md", vector, [], _decay(False), mmr_enabled=False)
    assert [(r.id, r.extra["exact"], r.score) for r in out] == [
        ("full", 3, 1.0), ("base", 2, 1.0), ("other", 0, pytest.approx(0.693)), ("stem", 0, pytest.approx(0.63))]


def test_keyword_only_finish():
    rows = [KeywordRow("a", "memory/a.md", "memory", 1, 1, "a", 0.4, 0.4),
            KeywordRow("x", "memory/x.md", "memory", 1, 1, "x", 0.6, 0.6, exact=3, has_body=True),
            KeywordRow("d", "memory/2026-01-01.md", "memory", 1, 1, "d", 0.8, 0.8),
            KeywordRow("p", "memory/p.md", "memory", 1, 1, "", 0.0, 0.3, path_score=0.3, has_body=False)]
    out = finalize_keyword_only_2609(rows, _decay(True), 10, 0.35)
    # exact row first at score 1 (ranked on (1 + 0.6)/2 = 0.8); d decays to 0.4 and ties with a, and the higher
    # text score (0.8 against 0.4) goes first; p (0.3) is under minScore
    assert [(r.id, round(r.score, 9), r.decay) for r in out] == [("x", 1.0, 1.0), ("d", 0.4, 0.5), ("a", 0.4, 1.0)]
    assert out[0].extra["keyword"] == pytest.approx(0.8)
    # nothing reaches minScore: every row comes back, best first
    out = finalize_keyword_only_2609(rows, _decay(False), 10, 2.0, importance={"p": 10})
    assert [(r.id, round(r.score, 9)) for r in out] == [("x", 1.0), ("d", 0.8), ("a", 0.4), ("p", 0.375)]
    assert [r.id for r in finalize_keyword_only_2609(rows, _decay(False), 2, 0.0)] == ["x", "d"]
