"""The default OpenClaw port (`openclaw` = the 2026.9.6 search path, ranking_2609) through its real search path:
temporal decay and MMR each change the order it returns, so a search path that skips either stage fails here.
(tests/test_pipeline_ranking.py pins the same stages on the older `openclaw-late` path.) Each case is run with
the stage on (the release's default) and off (the config knob), and the two orders differ as computed below."""

from __future__ import annotations

import pytest

from services.adapters.base import BackendContext
from services.adapters.client import InProcessBackendClient
from services.adapters.openclaw.backend import OpenClawBackend
from services.common.types import Document, IngestBatch, RetrieveQuery
from tests.fixtures_ranking import REF, MarkerEmbedder


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMRIG_CACHE_DIR", str(tmp_path / "cache"))


async def _search(docs, vectors, **config) -> list:
    # no onboarding files: the hand-built workspaces hold exactly the documents below
    b = OpenClawBackend({"bootstrap": False, **config}, BackendContext(embedder_name="hash"))
    b._embedder = MarkerEmbedder(vectors)
    c = InProcessBackendClient(b)
    await c.ingest("ns", IngestBatch(documents=tuple(docs)))
    res, _ = await c.retrieve("ns", RetrieveQuery("alpha", top_k=6, reference_time=REF))
    return res.memories


async def test_decay_puts_a_month_old_dated_note_below_an_evergreen_one():
    """Same words but the marker; the dated note (30 days old at REF: multiplier exactly 0.5) has cos 1, the
    evergreen one cos 0.8, so undecayed the dated note leads; halved, it falls below."""
    docs = [Document("old", "alpha deploy one", path="memory/2026-01-03.md"),
            Document("ever", "alpha deploy two", path="memory/notes.md")]
    ever, old = await _search(docs, {"one": (1.0, 0.0, 0.0), "two": (0.8, 0.6, 0.0)})
    assert (ever.attributes["path"], old.attributes["path"]) == ("memory/notes.md", "memory/2026-01-03.md")
    assert (old.attributes["decay"], ever.attributes["decay"]) == ("0.500000", "1.000000")
    assert old.channel_scores["vector"] == pytest.approx(1.0) and ever.channel_scores["vector"] == pytest.approx(0.8)
    assert old.channel_scores["text"] == pytest.approx(ever.channel_scores["text"])
    # undecayed (twice the decayed score) the dated note would lead: the order above is decay's doing
    assert 2 * old.channel_scores["hybrid"] > ever.channel_scores["hybrid"] > old.channel_scores["hybrid"]


async def test_mmr_moves_a_near_duplicate_below_a_diverse_hit():
    """a and b are the same text (b second by path) and score the same; c differs, with a lower vector score
    (cos 0.8); d anchors the low end. By score alone: a, b, c. MMR (λ 0.7) charges b its full overlap with a,
    more than c's lower relevance costs: a, c, b."""
    import numpy as np

    docs = [Document("a", "alpha port one", path="memory/a.md"),
            Document("b", "alpha port one", path="memory/b.md"),
            Document("c", "alpha cache two", path="memory/c.md"),
            Document("d", "zulu yankee three", path="memory/d.md")]
    mems = await _search(docs, {"one": (1.0, 0.0, 0.0), "two": (0.8, 0.6, 0.0),
                                "three": (0.1, 0.0, float(np.sqrt(0.99)))})
    a, c, b = mems[:3]
    assert [m.attributes["path"] for m in (a, c, b)] == ["memory/a.md", "memory/c.md", "memory/b.md"]
    assert b.channel_scores["hybrid"] == pytest.approx(a.channel_scores["hybrid"])
    assert c.channel_scores["hybrid"] < b.channel_scores["hybrid"]  # by score alone b would come second
