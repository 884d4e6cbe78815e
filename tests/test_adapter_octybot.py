"""`octybot`: the Octybot-like graph memory (seed 003) — typed nodes, entity edges, supersede on correction,
entity-scoped retrieval, the <memory> block, atomic ingest, conformance."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.adapters.octybot.backend import OctybotBackend
from services.adapters.octybot.graph import entity_names, is_correction, node_type, split_sentences
from services.common.types import IngestBatch, Message, RetrieveQuery, Session
from tests.fixtures_conformance import conformance_in_process

T0 = datetime(2026, 2, 2, 9, 0, tzinfo=UTC)


def session(sid: str, day: int, *texts: str) -> Session:
    msgs = []
    for i, t in enumerate(texts):
        msgs.append(Message(f"{sid}-u{i}", "user", t))
        msgs.append(Message(f"{sid}-a{i}", "assistant", "Noted."))
    return Session(sid, T0 + timedelta(days=day), tuple(msgs))


def test_sentence_typing_and_entities():
    assert split_sentences("Peter Hale runs SEO. He joined in 2021!  Ok") == ["Peter Hale runs SEO.", "He joined in 2021!",
                                                                              "Ok"]
    assert node_type("Never publish client articles on a Friday.") == "instruction"
    assert node_type("Peter thinks AI-written content is fine only as a first draft.") == "opinion"
    assert node_type("The Brightwell audit was completed on 3 February.") == "event"
    assert node_type("Brightwell pays a £2,500 monthly retainer.") == "fact"
    assert entity_names("Brightwell's main contact is Sarah Linton, their marketing director.") == [
        "Brightwell", "Sarah Linton"]
    assert entity_names("The Northgate Legal campaign is paused on Monday.") == ["Northgate Legal"]
    assert entity_names("We keep the calendar in Airtable.") == ["Airtable"]
    assert is_correction("Actually, Brightwell now pays £3,000.") and not is_correction("Brightwell pays £2,500.")


async def test_graph_built_from_sessions():
    b = OctybotBackend()
    await b.ingest("ns", IngestBatch((
        session("s1", 0, "Priya Natarajan manages Brightwell and Northgate Legal.", "Tom writes blog posts."),)))
    g = b.graphs["ns"]
    ents = {n.content: n for n in g.nodes.values() if n.type == "entity"}
    assert sorted(ents) == ["Brightwell", "Northgate Legal", "Priya Natarajan", "Tom"]
    facts = [n for n in g.nodes.values() if n.type != "entity"]
    # assistant "Noted." is below min_sentence_words: two nodes, one per user sentence
    assert [(n.type, n.content, n.evidence_ids) for n in facts] == [
        ("fact", "Priya Natarajan manages Brightwell and Northgate Legal.", ["s1-u0"]),
        ("fact", "Tom writes blog posts.", ["s1-u1"])]
    edges = {(e.src, e.dst, e.type) for e in g.edges}
    p, bw, ng = ents["Priya Natarajan"].id, ents["Brightwell"].id, ents["Northgate Legal"].id
    assert (p, facts[0].id, "about") in edges and (p, bw, "related_to") in edges and (bw, ng, "related_to") in edges
    assert len(g.edges) == 3 + 3 + 1  # 3 about + 3 related_to among the three co-mentioned + Tom's about
    assert (await b.namespace_stats("ns")).items == 2 and g.vectors.shape == (6, b.context.embedder.dim)


async def test_correction_supersedes_the_old_value():
    b = OctybotBackend()
    await b.ingest("ns", IngestBatch((session("s1", 0, "Brightwell pays a £2,500 monthly retainer for SEO."),)))
    await b.ingest("ns", IngestBatch((session("s2", 5, "Actually, Brightwell now pays a £3,000 monthly retainer for SEO."),)))
    g = b.graphs["ns"]
    old = next(n for n in g.nodes.values() if "2,500" in n.content)
    new = next(n for n in g.nodes.values() if "3,000" in n.content)
    assert old.superseded_by == new.id and b.counters()["superseded"] == 1
    r = await b.retrieve("ns", RetrieveQuery("What retainer does Brightwell pay?", 5))
    texts = [m.text for m in r.memories]
    assert any("3,000" in t for t in texts) and not any("2,500" in t for t in texts)


async def test_entity_scoped_score_and_memory_block():
    b = OctybotBackend()
    await b.ingest("ns", IngestBatch((session(
        "s1", 0, "Marcus Webb approves holidays.", "Never publish client articles on a Friday.",
        "The Brightwell audit was completed on 3 February."),)))
    q = "Who approves holidays for Marcus Webb?"
    r = await b.retrieve("ns", RetrieveQuery(q, 3))
    emb = b.context.embedder
    qv = emb.encode([q])[0]
    cos = {t: float(emb.encode([t])[0] @ qv) for t in ("Marcus Webb approves holidays.",
                                                        "Never publish client articles on a Friday.",
                                                        "The Brightwell audit was completed on 3 February.")}
    got = {m.text: m.score for m in r.memories}
    # "Marcus Webb" is named in the query: the node about him gets the entity-link bonus (0.15), others none
    assert got["Marcus Webb approves holidays."] == pytest.approx(cos["Marcus Webb approves holidays."] + 0.15)
    assert got["Never publish client articles on a Friday."] == pytest.approx(
        cos["Never publish client articles on a Friday."])
    assert r.memories[0].text == "Marcus Webb approves holidays." and r.memories[0].evidence_ids == ["s1-u0"]
    assert [m.kind for m in r.memories].count("event") == 1
    assert r.formatted_context.splitlines()[:3] == ["<memory>", "## Entities", "- Marcus Webb"]
    assert "## Instructions\n- Never publish client articles on a Friday." in r.formatted_context
    assert "## Events\n- The Brightwell audit was completed on 3 February. [2026-02-02]" in r.formatted_context
    # a rules question boosts instructions by 0.1 (get_instructions)
    r2 = await b.retrieve("ns", RetrieveQuery("What are the rules for publishing articles?", 3))
    qv2 = emb.encode(["What are the rules for publishing articles?"])[0]
    ins = next(m for m in r2.memories if m.kind == "instruction")
    assert ins.score == pytest.approx(float(emb.encode([ins.text])[0] @ qv2) + 0.1)


async def test_section_caps_limit_what_is_returned():
    b = OctybotBackend({"max_events": 1})
    await b.ingest("ns", IngestBatch((session("s1", 0, "The launch happened yesterday for Halden.",
                                              "The audit happened yesterday for Brightwell.",
                                              "Halden Bakery sells bread."),)))
    r = await b.retrieve("ns", RetrieveQuery("what happened yesterday", 5))
    assert [m.kind for m in r.memories].count("event") == 1 and len(r.memories) == 2


async def test_failed_embedding_changes_nothing(monkeypatch):
    b = OctybotBackend()
    await b.ingest("ns", IngestBatch((session("s1", 0, "Peter Hale runs SEO audits."),)))
    before = (len(b.graphs["ns"].nodes), len(b.graphs["ns"].edges), (await b.namespace_stats("ns")).items)

    def boom(texts):
        raise RuntimeError("embedder down")

    monkeypatch.setattr(b.context.embedder, "encode", boom)
    with pytest.raises(RuntimeError):
        await b.ingest("ns", IngestBatch((session("s2", 1, "Dana Okafor designs brand kits."),)))
    assert (len(b.graphs["ns"].nodes), len(b.graphs["ns"].edges), (await b.namespace_stats("ns")).items) == before


async def test_unknown_namespace_and_reset():
    b = OctybotBackend()
    assert (await b.retrieve("nope", RetrieveQuery("anything at all", 3))).memories == []
    await b.ingest("ns", IngestBatch((session("s1", 0, "Peter Hale runs SEO audits."),)))
    assert await b.reset("ns") == 1 and "ns" not in b.graphs


async def test_conformance_passes():
    from services.conformance import render

    results = await conformance_in_process(OctybotBackend())
    assert not [r for r in results if r.status == "FAIL"], render(results, "octybot")
    assert sum(r.status == "PASS" for r in results) >= 12


async def test_memory_block_lists_at_most_max_related_shown_relations():
    batch = IngestBatch((session("s1", 0, "Priya Natarajan manages Brightwell and Northgate Legal."),))
    for cap, line in ((5, "- Priya Natarajan (related: Brightwell, Northgate Legal)"),
                      (1, "- Priya Natarajan (related: Brightwell)")):
        b = OctybotBackend({"max_related_shown": cap})
        await b.ingest("ns", batch)
        r = await b.retrieve("ns", RetrieveQuery("What does Priya Natarajan manage?", 3))
        assert line in r.formatted_context.splitlines()
