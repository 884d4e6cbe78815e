"""The append-only containers a cortex-mock snapshot grows by (services/cortex_mock/growth.py) and the writer's
candidate lookups (ingest.RuleIndex): an older snapshot keeps seeing exactly its own prefix while the newest one
grows in place, an extension from an older snapshot copies instead of writing into shared rows, and the
duplicate lookup returns every stored fact the Jaccard rule can accept. Expectations worked out by hand."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from services.cortex_mock.config import MockConfig
from services.cortex_mock.engine import CortexEngine
from services.cortex_mock.growth import CHUNK, CowList, GrowBuf, Postings, PrefixMap
from services.cortex_mock.ingest import RuleIndex, _Cand
from services.cortex_mock.snapshot import TenantIndex


def test_growbuf_grows_in_place_and_older_views_keep_their_rows():
    g = GrowBuf(np.array([1, 2, 3], np.int64))
    v3 = g.view()
    g2 = g.append(3, [4])  # 3 rows, 1 more: no room -> a buffer of 4 + 4 // 2 = 6 rows
    assert g2 is g and g.n == 4 and g.buf.shape == (6,)
    v4 = g.view()
    assert g.append(4, [5, 6]) is g and g.buf.shape == (6,)  # fits: same buffer, written past row 4
    assert v3.tolist() == [1, 2, 3] and v4.tolist() == [1, 2, 3, 4] and g.view().tolist() == [1, 2, 3, 4, 5, 6]
    # appending to the 4-row view (an older snapshot) must not overwrite rows 4 and 5: a copy
    fork = g.append(4, [9])
    assert fork is not g and fork.view().tolist() == [1, 2, 3, 4, 9]
    assert g.view().tolist() == [1, 2, 3, 4, 5, 6]


def test_growbuf_matrix_takes_its_width_from_the_first_rows():
    g = GrowBuf(np.zeros((0, 0), np.float32))
    g = g.append(0, np.ones((2, 3), np.float32))
    assert g.view().shape == (2, 3) and g.view().dtype == np.float32
    g = g.append(2, np.full((1, 3), 2.0, np.float32))
    assert g.view()[:, 0].tolist() == [1.0, 1.0, 2.0]
    with pytest.raises(ValueError):
        g.append(3, np.ones((1, 4), np.float32))


def test_cowlist_shares_unchanged_chunks_and_never_changes_the_old_list():
    items = list(range(CHUNK + 5))  # two chunks: 1024 items and 5
    a = CowList(items)
    b = a.evolved({3: "x"}, ["y", "z"])
    assert len(a) == CHUNK + 5 and len(b) == CHUNK + 7
    assert a[3] == 3 and b[3] == "x" and b[-1] == "z" and b[CHUNK + 5] == "y"
    assert list(a) == items and list(b) == [0, 1, 2, "x", *range(4, CHUNK + 5), "y", "z"]
    assert a._chunks[0] is not b._chunks[0]  # the chunk holding item 3 was copied
    c = b.evolved({}, ["w"])
    assert c._chunks[0] is b._chunks[0] and c._chunks[1] is not b._chunks[1]  # only the appended-to chunk
    assert a == items and b != items and a[10:13] == [10, 11, 12]
    with pytest.raises(IndexError):
        a[CHUNK + 5]


def test_cowlist_opens_a_new_chunk_at_a_chunk_boundary():
    a = CowList(range(CHUNK))
    b = a.evolved({}, ["next"])
    assert len(b._chunks) == 2 and b._chunks[0] is a._chunks[0] and b[CHUNK] == "next"


def test_prefixmap_views_see_only_their_positions():
    m0 = PrefixMap.of({"a": 0, "b": 1}, 2)
    m1 = m0.evolved([("c", 2)], 3)
    assert "c" not in m0 and m1["c"] == 2 and m0.get("c") is None and sorted(m1) == ["a", "b", "c"]
    assert len(m0) == 2 and len(m1) == 3
    # first_wins (norm -> first position): an existing key keeps its position
    m2 = m1.evolved([("a", 3), ("d", 3)], 4, first_wins=True)
    assert m2["a"] == 0 and m2["d"] == 3
    # replacing a key's position copies the dict: older views keep the old one
    m3 = m2.evolved([("a", 4)], 5)
    assert m3["a"] == 4 and m2["a"] == 0 and m1["a"] == 0
    # extending an older view (m1, 3 items) copies its part: m2's "d" at 3 is not inherited
    fork = m1.evolved([("e", 3)], 4)
    assert fork.get("d") is None and fork["e"] == 3 and m2.get("e") is None


def test_postings_views_see_only_their_facts():
    p0 = Postings.of({"cache": (np.array([0, 1]), np.array([1.0, 2.0]))}, 2)
    p1 = p0.evolved({"cache": {2: 3}, "ttl": {2: 1}}, 3)
    i0, tf0 = p0["cache"]
    i1, tf1 = p1["cache"]
    assert i0.tolist() == [0, 1] and tf0.tolist() == [1.0, 2.0]
    assert i1.tolist() == [0, 1, 2] and tf1.tolist() == [1.0, 2.0, 3.0]
    assert "ttl" not in p0 and p1["ttl"][0].tolist() == [2] and sorted(p1) == ["cache", "ttl"]
    assert dict((t, v[0].tolist()) for t, v in p0.items()) == {"cache": [0, 1]}
    p2 = p1.evolved({"cache": {3: 1, 4: 1}}, 5)  # grows "cache"'s buffers past their first capacity
    assert p2["cache"][0].tolist() == [0, 1, 2, 3, 4] and p1["cache"][0].tolist() == [0, 1, 2]
    fork = p1.evolved({"redis": {3: 1}}, 4)  # from the older view: its own copy
    assert fork["cache"][0].tolist() == [0, 1, 2] and "redis" not in p2


def _cand(tokens: set[str], norm: str) -> _Cand:
    return _Cand(id="new", tokens=frozenset(tokens), nums=frozenset(), neg=False, emb=np.zeros(2, np.float32),
                 attr_key="", attr_value="", occurred_at=None, entity_keys=frozenset(), superseded_by=None,
                 metadata={}, confidence=0.8, norm=norm)


def test_dup_candidates_probe_the_rarest_tokens():
    """New fact A = {a, b, c, d, e}: Jaccard >= 0.8 needs |A & B| >= ceil(0.8 * 5) = 4, so B holds at least one
    of any 5 - 4 + 1 = 2 of A's tokens; the two rarest are e (in no fact) and b (only in fact 2). Fact 2 = {a, b,
    c, d} has Jaccard 4/5 with A: it must be a candidate, and nothing else (facts 0, 1, 3 lack b)."""
    postings = {"a": (np.array([0, 1, 2]), np.ones(3)), "b": (np.array([2]), np.ones(1)),
                "c": (np.array([1, 2]), np.ones(2)), "d": (np.array([0, 1, 2, 3]), np.ones(4))}
    idx = TenantIndex(rev=1, facts=[None] * 4, postings=postings)  # type: ignore[list-item]
    r = RuleIndex()
    r.n = 4
    assert r.dup_candidates(idx, _cand({"a", "b", "c", "d", "e"}, "n")).tolist() == [2]
    # a stored fact with the same normalised text is a candidate whatever its tokens
    r.norms["same text"] = 3
    assert r.dup_candidates(idx, _cand({"a", "b", "c", "d", "e"}, "same text")).tolist() == [2, 3]
    # A = {a, d} (2 tokens): need ceil(1.6) = 2, probe 1 token, the rarer: a (3 facts) over d (4)
    assert r.dup_candidates(idx, _cand({"a", "d"}, "n")).tolist() == [0, 1, 2]
    # no content token: only facts without one (Jaccard 1.0), kept by the index
    r.no_tokens = [1]
    assert r.dup_candidates(idx, _cand(set(), "n")).tolist() == [1]


async def test_an_older_snapshot_is_unchanged_by_later_ingests(tmp_path):
    """A search holding a snapshot must keep its facts, arrays, postings and entities while the writer grows
    the next one in place; the one later statement supersedes a fact the old snapshot holds."""
    e = CortexEngine(MockConfig(data_dir=str(tmp_path), embedder="hash"))

    async def say(text, day):
        await e.ingest_text("t", {"text": text, "reference_date": datetime(2026, 1, day, tzinfo=UTC),
                                  "user_id": "u"})

    await say("The cache TTL is 300s. We run Kubernetes (k8s) in eu-west-1.", 1)
    await say("We use Redis for sessions.", 2)
    st = e.store("t")
    old = st.index(e.embedder)
    facts = [(f.id, f.superseded_by) for f in old.facts]
    emb = old.emb.copy()
    post = {t: v[0].tolist() for t, v in old.postings.items()}
    ents = [(x.key, list(x.aliases)) for x in old.entities]
    await say("We raised the cache TTL to 600s. K8s runs in us-east-1 too.", 3)
    await say("Sessions moved to Valkey.", 4)
    new = st.index(e.embedder)
    assert new.rev == old.rev + 2 and st.index_builds == 1  # extended twice, never rebuilt
    assert [(f.id, f.superseded_by) for f in old.facts] == facts
    assert np.array_equal(old.emb, emb) and {t: v[0].tolist() for t, v in old.postings.items()} == post
    assert [(x.key, list(x.aliases)) for x in old.entities] == ents
    assert len(new.facts) == len(old.facts) + 3 and new.facts[0].superseded_by == new.facts[3].id
    assert old.facts[0].superseded_by is None
    assert isinstance(new.writer_aux, RuleIndex) and new.writer_aux.n == len(new.facts)
    await e.close()


async def test_forget_lets_go_of_the_snapshot_and_the_next_read_rebuilds_without_the_facts(tmp_path):
    """A forgotten tenant must not keep its snapshot (facts, matrices) in memory: a LongMemEval S run releases
    each namespace with forget-session, and the mock's RSS grew by every released namespace's index."""
    e = CortexEngine(MockConfig(data_dir=str(tmp_path), embedder="hash"))
    day = datetime(2026, 1, 1, tzinfo=UTC)
    await e.ingest_text("t", {"text": "We use Redis for sessions.", "session_id": "s0", "reference_date": day})
    await e.ingest_text("t", {"text": "The cache TTL is 300s.", "session_id": "s1", "reference_date": day})
    st = e.store("t")
    before = st.index(e.embedder)
    assert st.warm and sorted(f.session_id for f in before.facts) == ["s0", "s1"]
    assert await e.forget_session("t", "nothing-here") == {"memories_removed": 0}
    assert st.warm  # nothing removed: nothing dropped
    assert (await e.forget_session("t", "s0"))["memories_removed"] == 1
    assert not st.warm  # dropped at once, not at the next read
    after = st.index(e.embedder)
    assert [f.session_id for f in after.facts] == ["s1"] and after.emb.shape[0] == 1
    assert "t" in e.open_tenants() and e.tenants_released == 0  # s1 is still stored: the tenant stays open
    assert (await e.forget_session("t", "s1"))["memories_removed"] == 1
    # nothing left (entities go with their last mention): the tenant is closed, and reopens empty on demand
    assert "t" not in e.open_tenants() and e.tenants_released == 1 and not st.warm
    assert (await e.knowledge("t"))["total_memories"] == 0 and e.store("t").index(e.embedder).facts == []
    await e.ingest_text("t", {"text": "Deploys go out on Thursdays.", "session_id": "s2", "reference_date": day})
    assert [f.session_id for f in e.store("t").index(e.embedder).facts] == ["s2"]
    await e.close()


async def test_a_tenant_emptied_by_forget_gives_its_pages_back_to_the_disk(tmp_path):
    e = CortexEngine(MockConfig(data_dir=str(tmp_path), embedder="hash"))
    day = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(60):  # enough rows that deleting them frees whole pages
        await e.ingest_text("t", {"text": f"Service number {i} runs on port {8000 + i} in region eu-west-{i}.",
                                  "session_id": f"s{i}", "reference_date": day})

    def free_pages() -> int:
        import sqlite3

        with sqlite3.connect(e.tenant_path("t")) as c:
            return c.execute("PRAGMA freelist_count").fetchone()[0]

    for i in range(59):
        await e.forget_session("t", f"s{i}")
    assert free_pages() > 0 and "t" in e.open_tenants()  # one fact left: open, nothing compacted
    await e.forget_session("t", "s59")
    assert "t" not in e.open_tenants() and free_pages() == 0
    await e.close()
