"""The IR baseline control backends (bm25, dense, hybrid): hand-computed BM25 scores, RRF, tie-breaking by
document order, one document per message with its id as evidence, atomic ingest and the Describe parameters."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from services.adapters.client import InProcessBackendClient
from services.adapters.ir_baselines.backend import IRBaselineBackend
from services.adapters.ir_baselines.ranking import (
    OkapiBM25Index,
    official_tokens,
    ranks_of,
    rrf,
    stable_order,
    tokenise,
)
from services.adapters.registry import default_backends, get_spec
from services.common.types import Document, IngestBatch, Message, RetrieveQuery, Session

T0 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def cats() -> IngestBatch:
    return IngestBatch(sessions=(Session("S1", T0, (Message("D1:1", "user", "cat sat mat"),
                                                    Message("D1:2", "assistant", "dog sat"),
                                                    Message("D1:3", "user", "cat cat runs"))),))


async def test_bm25_scores_match_hand_computed_okapi():
    b = IRBaselineBackend({"method": "bm25"})
    await b.ingest("ns", cats())
    res = await b.retrieve("ns", RetrieveQuery("cat", top_k=10))
    # N=3, n(cat)=2 -> idf = ln(1 + 1.5/2.5) = ln 1.6; avgdl = 8/3; k1 1.2, b 0.75
    idf = math.log(1.6)
    norm = lambda dl: 1.2 * (0.25 + 0.75 * dl / (8 / 3))  # noqa: E731
    expect = {"D1:3": idf * 2 / (2 + norm(3)), "D1:1": idf * 1 / (1 + norm(3))}
    assert [m.id for m in res.memories] == ["D1:3", "D1:1"]  # D1:2 shares no term: not a match
    for m in res.memories:
        assert m.score == pytest.approx(expect[m.id], rel=1e-6)  # 0.28378, 0.20324
        assert m.evidence_ids == [m.id] and m.source == "session:S1"
        assert m.channel_scores["bm25"] == pytest.approx(expect[m.id], rel=1e-6)


def test_tokeniser_lowercases_drops_single_chars_and_stopwords():
    assert tokenise("The CAT's a 2nd-hand pet, isn't it?") == ["cat", "2nd", "hand", "pet", "isn"]
    assert tokenise("The cat", stopwords="none") == ["the", "cat"]


def test_rrf_hand_computed():
    # channel A ranks d0 1st, d1 2nd, d2 not at all; channel B ranks d2 1st, d0 2nd
    fused = rrf([np.array([1, 2, 0]), np.array([2, 0, 1])], k=60)
    assert fused.tolist() == pytest.approx([1 / 61 + 1 / 62, 1 / 62, 1 / 61])
    assert stable_order(fused).tolist() == [0, 2, 1]


def test_ties_keep_document_order_and_ranks_skip_unkept():
    scores = np.array([0.5, 0.9, 0.5, 0.0, 0.9])
    order = stable_order(scores)
    assert order.tolist() == [1, 4, 0, 2, 3]
    assert ranks_of(order, scores > 0).tolist() == [3, 1, 4, 0, 2]


async def test_ties_broken_by_session_time_not_arrival():
    later = Session("S2", T0 + timedelta(days=3), (Message("D2:1", "user", "the port is 3001"),))
    earlier = Session("S1", T0, (Message("D1:1", "user", "the port is 3001"),))
    for order in ((later, earlier), (earlier, later)):
        b = IRBaselineBackend({"method": "bm25"})
        for s in order:  # two ingests in either order
            await b.ingest("ns", IngestBatch(sessions=(s,)))
        res = await b.retrieve("ns", RetrieveQuery("port", top_k=5))
        assert [m.id for m in res.memories] == ["D1:1", "D2:1"]
        assert res.memories[0].score == res.memories[1].score


async def test_dense_ranks_by_cosine_of_dated_text():
    b = IRBaselineBackend({"method": "dense"})
    await b.ingest("ns", cats())
    res = await b.retrieve("ns", RetrieveQuery("dog", top_k=3))
    emb = b.context.embedder
    texts = ["[08 May 2023] cat sat mat", "[08 May 2023] dog sat", "[08 May 2023] cat cat runs"]
    sims = emb.encode(texts).astype(np.float64) @ emb.encode(["dog"])[0].astype(np.float64)
    want = [["D1:1", "D1:2", "D1:3"][i] for i in np.lexsort((np.arange(3), -sims))]
    assert [m.id for m in res.memories] == want
    assert [m.score for m in res.memories] == pytest.approx(sorted(sims, reverse=True), abs=1e-6)
    assert "[08 May 2023] dog sat" in res.formatted_context


async def test_hybrid_is_rrf_of_both_channels():
    b = IRBaselineBackend({"method": "hybrid"})
    await b.ingest("ns", cats())
    res = await b.retrieve("ns", RetrieveQuery("cat", top_k=3))
    by = {m.id: m for m in res.memories}
    bm = np.array([by[i].channel_scores["bm25"] for i in ("D1:1", "D1:2", "D1:3")])
    de = np.array([by[i].channel_scores["dense"] for i in ("D1:1", "D1:2", "D1:3")])
    expect = rrf([ranks_of(stable_order(bm), bm > 0), ranks_of(stable_order(de), np.ones(3, bool))], 60)
    for j, i in enumerate(("D1:1", "D1:2", "D1:3")):
        assert by[i].score == pytest.approx(expect[j])
    # D1:3 is BM25's first; whatever dense says it gets at least 1/61 + 1/63
    assert by["D1:3"].score >= 1 / 61 + 1 / 63 - 1e-12


async def test_documents_are_searched_as_given():
    b = IRBaselineBackend({"method": "bm25"})
    await b.ingest("ns", IngestBatch(documents=(Document("MEMORY.md", "deploy with blue green switch",
                                                         evidence_ids=("f1", "f2")),)))
    res = await b.retrieve("ns", RetrieveQuery("green deploy", top_k=3))
    assert [(m.id, m.evidence_ids, m.kind) for m in res.memories] == [("MEMORY.md", ["f1", "f2"], "document")]


async def test_failed_ingest_changes_nothing(monkeypatch):
    b = IRBaselineBackend({"method": "dense"})
    await b.ingest("ns", cats())
    before = await b.retrieve("ns", RetrieveQuery("dog", top_k=5))

    async def boom(texts):
        raise RuntimeError("embedder down")

    monkeypatch.setattr(b.context.embedder, "aencode", boom)
    more = IngestBatch(sessions=(Session("S2", T0 + timedelta(days=1), (Message("D2:1", "user", "dog dog"),)),))
    with pytest.raises(RuntimeError):
        await b.ingest("ns", more)
    monkeypatch.undo()
    after = await b.retrieve("ns", RetrieveQuery("dog", top_k=5))
    assert [m.id for m in after.memories] == [m.id for m in before.memories]
    assert (await b.namespace_stats("ns")).messages == 3


async def test_describe_names_every_parameter():
    for method in ("bm25", "dense", "hybrid"):
        spec = get_spec(method)
        assert method in default_backends()
        c = InProcessBackendClient.from_spec(method)
        d = await c.describe()
        assert d["name"] == method
        cfg = d["config"]
        assert cfg["k1"] == 1.2 and cfg["b"] == 0.75 and cfg["rrf_k"] == 60, cfg
        assert "\\w\\w+" in cfg["tokeniser"] and cfg["dense_template"] == "[{date}] {text}"
        assert spec.config == {"method": method}


def test_bad_config_names_the_field():
    with pytest.raises(ValueError, match="method"):
        IRBaselineBackend({"method": "splade"})
    with pytest.raises(ValueError, match="rrf_k"):
        IRBaselineBackend({"method": "hybrid", "rrf_k": 0})


@pytest.mark.parametrize("method", ["bm25", "dense", "hybrid"])
async def test_conformance_in_process(method):
    from tests.fixtures_conformance import conformance_in_process

    results = await conformance_in_process(IRBaselineBackend({"method": method}))
    failed = [r for r in results if r.status == "FAIL"]
    assert not failed, [(r.name, r.detail) for r in failed]
    assert not [r for r in results if r.status == "N/A"]


@pytest.mark.slow
def test_hybrid_serves_as_a_process(tmp_path):
    """Started the way `memrig up` and bench-all start it (registry config {"method": "hybrid"} over --config)."""
    import asyncio

    from services.adapters.client import GrpcBackendClient
    from services.launcher import Rig

    async def go():
        rig = Rig(tmp_path / "procs")
        try:
            proc = await rig.start_backend("hybrid", embedder="hash")
            c = GrpcBackendClient(proc.url, name="hybrid")
            try:
                d = await c.describe()
                await c.ingest("ns", cats())
                res, _ = await c.retrieve("ns", RetrieveQuery("cat", top_k=2))
                return d, res
            finally:
                await c.close()
        finally:
            rig.stop_all()

    d, res = asyncio.run(go())
    assert d["name"] == "hybrid" and d["config"]["rrf_k"] == 60
    by = {m.id: m for m in res.memories}
    # D1:3 is BM25's first (>= 1/61 + 1/63 whatever dense says); D1:2 shares no term (<= 1/61): D1:3 is in the top 2
    assert "D1:3" in by and by["D1:3"].score >= 1 / 61 + 1 / 63 - 1e-12
    assert set(by["D1:3"].channel_scores) == {"bm25", "dense", "rrf"}


@pytest.mark.slow
@pytest.mark.needs_data
async def test_bm25_reproduces_locomo_dev(data_dir):
    """The README's figure: LoCoMo dev, categories 1-4, one turn = one document, turn recall_any@10 = 593/1032
    (0.575; issue 13 measured ≈ 0.57 with a plain Okapi BM25)."""
    from services.coordinator.suites.locomo import LocomoSuite
    from tests.fixtures_suites import run_inprocess

    if not (data_dir / "locomo" / "locomo10_dev.json").exists():
        pytest.skip("[requires:data] LoCoMo dev file not found")
    suite = LocomoSuite({"data_dir": str(data_dir), "full": True, "categories": "1234", "answer": False})
    samples = await run_inprocess(suite, {"bm25": InProcessBackendClient.from_spec("bm25")})
    o = suite.score(samples)["conditions"]["bm25"]["overall"]["turn_recall_any@10"]
    assert o["n"] == 1032 and o["units"] == 7
    assert o["mean"] == pytest.approx(593 / 1032, abs=1e-12)


# -- BM25 as LongMemEval's own code runs it (bm25-official) ----------------------------------------------------------
def test_official_tokens_split_on_single_spaces_and_keep_case():
    assert official_tokens("I moved to  Paris.") == ["I", "moved", "to", "", "Paris."]


def test_okapi_index_is_rank_bm25_bm25okapi_by_hand():
    docs = [["a", "b"], ["a", "c", "c"], ["a"]]
    idx = OkapiBM25Index(docs, k1=1.5, b=0.75, epsilon=0.25)
    # N 3; n(a) 3 -> ln(0.5) - ln(3.5) < 0; n(b) = n(c) = 1 -> ln(2.5) - ln(1.5); mean of the three is the floor base
    idf_bc = math.log(2.5) - math.log(1.5)
    idf_a = 0.25 * (math.log(0.5) - math.log(3.5) + 2 * idf_bc) / 3
    assert idx.idf == pytest.approx({"a": idf_a, "b": idf_bc, "c": idf_bc})
    avgdl = 6 / 3
    part = lambda tf, dl: tf * 2.5 / (tf + 1.5 * (0.25 + 0.75 * dl / avgdl))  # noqa: E731
    got = idx.scores(["c", "a", "zzz", "c"])  # a repeated query token counts twice; an unknown one adds nothing
    want = [idf_a * part(1, 2), 2 * idf_bc * part(2, 3) + idf_a * part(1, 3), idf_a * part(1, 1)]
    assert got.tolist() == pytest.approx(want)


async def test_bm25_official_indexes_user_turns_with_case_kept_and_ranks_every_one():
    spec = get_spec("bm25-official")
    assert spec.role == "ir-baseline" and "bm25-official" not in default_backends()
    b = IRBaselineBackend(spec.config)
    await b.ingest("ns", IngestBatch(sessions=(Session("S1", T0, (
        Message("D1:1", "user", "Cat sat"), Message("D1:2", "assistant", "cat cat cat"),
        Message("D1:3", "user", "the cat ran"), Message("D1:4", "user", "nothing here"))),)))
    res = await b.retrieve("ns", RetrieveQuery("cat", top_k=10))
    # the assistant turn is not indexed; "Cat" is not "cat"; the two turns without "cat" are still ranked (score 0)
    assert [m.id for m in res.memories] == ["D1:3", "D1:1", "D1:4"]
    assert res.memories[0].score > 0 and res.memories[1].score == res.memories[2].score == 0.0
    assert (await b.namespace_stats("ns")).items == 3
    d = await InProcessBackendClient(IRBaselineBackend(spec.config)).describe()
    assert d["config"]["tokeniser"].startswith('official: text.split(" ")')
    assert d["config"]["bm25_implementation"].startswith("rank_bm25 0.2.2 BM25Okapi")
    with pytest.raises(ValueError, match="'bm25_tokens' must be one of"):
        IRBaselineBackend({"method": "bm25", "bm25_tokens": "nltk"})


async def test_session_granularity_indexes_one_document_per_session_of_its_user_turns():
    """LongMemEval's session granularity: a session's user turns joined by one space are one document (id = the
    session id, evidence = its user turns); the assistant turn is not in it."""
    b = IRBaselineBackend({**get_spec("bm25-official").config, "granularity": "session"})
    t1 = T0 + timedelta(days=1)
    await b.ingest("ns", IngestBatch(sessions=(
        Session("S1", T0, (Message("D1:1", "user", "my cat"), Message("D1:2", "assistant", "cat cat cat"),
                           Message("D1:3", "user", "sat down"))),
        Session("S2", t1, (Message("D2:1", "user", "a dog barked"), Message("D2:2", "assistant", "ok"))))))
    res = await b.retrieve("ns", RetrieveQuery("cat", top_k=10))
    assert [m.id for m in res.memories] == ["S1", "S2"]  # every session ranked (rank_all), S2 at score 0
    assert res.memories[0].text == "my cat sat down" and res.memories[0].evidence_ids == ["D1:1", "D1:3"]
    assert res.memories[1].evidence_ids == ["D2:1"] and res.memories[1].score == 0.0
    assert res.memories[0].created_at == T0 and res.memories[0].source == "session:S1"
    assert (await b.namespace_stats("ns")).items == 2
    d = await InProcessBackendClient(b).describe()
    assert d["config"]["documents"].startswith("one per session: its user messages joined by ' '")
    with pytest.raises(ValueError, match="'granularity' must be one of"):
        IRBaselineBackend({"method": "dense", "granularity": "turn"})


async def test_session_granularity_indexes_a_session_without_user_turns_as_an_empty_document():
    """LongMemEval's session corpus joins a session's user turns with one space, so a session with none is the
    empty document "" (`"".split(" ")` = one empty token): it counts in N and the average length, and is ranked."""
    b = IRBaselineBackend({**get_spec("bm25-official").config, "granularity": "session"})
    await b.ingest("ns", IngestBatch(sessions=(
        Session("S1", T0, (Message("D1:1", "user", "my cat"), Message("D1:2", "assistant", "cat cat cat"),
                           Message("D1:3", "user", "sat down"))),
        Session("S2", T0 + timedelta(days=1), (Message("D2:1", "assistant", "cat"),)),  # no user turn
        Session("S3", T0 + timedelta(days=2), (Message("D3:1", "user", "a dog barked"),)))))
    res = await b.retrieve("ns", RetrieveQuery("cat", top_k=10))
    assert [m.id for m in res.memories] == ["S1", "S2", "S3"] and (await b.namespace_stats("ns")).items == 3
    assert res.memories[1].text == "" and res.memories[1].evidence_ids == [] and res.memories[1].score == 0.0
    # N = 3, lengths 4, 1, 3 (avgdl 8/3): idf(cat) = ln(3 - 1 + 0.5) - ln(1 + 0.5) = ln(5/3);
    # S1: idf * 1 * 2.5 / (1 + 1.5 * (0.25 + 0.75 * 4 / (8/3))) = 0.417001. Without the empty document N = 2
    # and idf(cat) = ln(1.5) - ln(1.5) = 0: every session would score 0.
    assert res.memories[0].score == pytest.approx(math.log(5 / 3) * 2.5 / (1 + 1.5 * (0.25 + 0.75 * 4 / (8 / 3))))
    # the rig's BM25 (regex tokens: the empty document has none) indexes and ranks it too
    b = IRBaselineBackend({"method": "bm25", "index_roles": "user", "granularity": "session", "rank_all": True})
    await b.ingest("ns", IngestBatch(sessions=(Session("S2", T0, (Message("D2:1", "assistant", "cat"),)),
                                               Session("S3", T0, (Message("D3:1", "user", "cat"),)))))
    assert [m.id for m in (await b.retrieve("ns", RetrieveQuery("cat", top_k=10))).memories] == ["S3", "S2"]
