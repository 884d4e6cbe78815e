"""cortex-mock ingest made flat in the tenant's size decides exactly what it decided before: the seeded corpus of
fixtures_cortex_ingest.py gives the stored facts, edges, entities, ingest counters and top-k rankings recorded in
cortex_ingest_golden.json (written from the code before the change), and the crafted statements give the
outcomes worked out by hand below. (How fast ingest is belongs to `make bench-perf`, not here.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fixtures_cortex_ingest import assert_matches_golden, reopened_rankings, run_corpus

GOLDEN = Path(__file__).with_name("cortex_ingest_golden.json")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    import asyncio

    d = tmp_path_factory.mktemp("cortex-golden")
    out = asyncio.run(run_corpus(str(d)))
    return str(d), out


@pytest.fixture(scope="module")
def golden():
    return json.loads(GOLDEN.read_text())


@pytest.mark.parametrize("part", ["responses", "facts", "entities", "edges", "rankings"])
def test_matches_golden(corpus, golden, part):
    assert_matches_golden(corpus[1], golden, part)


def test_rebuilt_snapshot_ranks_like_the_extended_one(corpus, golden):
    """A fresh process reading the tenant from SQLite ranks exactly as the writer's extended snapshot did."""
    d, _ = corpus
    assert reopened_rankings(d) == golden["rankings"]


def _by_content(out):
    facts = {}
    for f in out["facts"]:
        facts.setdefault(f["content"], []).append(f)
    return facts


def test_crafted_outcomes_by_hand(corpus):
    _, out = corpus
    by = _by_content(out)
    one = {c: fs[0] for c, fs in by.items()}
    edges = {tuple(e) for e in out["edges"]}
    # attribute rule: alice's 300s is replaced by her 600s; bob's 120s (another user) is untouched and was stated
    # twice (merged: mention_count 2, confidence 0.85 + 0.05)
    assert one["The cache TTL is 300s."]["superseded_by"] == one["We raised the cache TTL to 600s."]["id"]
    ttl120 = one["The cache TTL is 120s."]
    assert ttl120["superseded_by"] is None
    assert ttl120["metadata"]["mention_count"] == 2 and ttl120["confidence"] == 0.9
    assert ttl120["metadata"]["user_id"] == "bob"
    # antonym values: disabled supersedes and contradicts enabled
    on, off = one["Feature flag dark mode is enabled."], one["Feature flag dark mode is disabled."]
    assert on["superseded_by"] == off["id"]
    assert ("CONTRADICTS", off["id"], on["id"]) in edges and ("SUPERSEDES", off["id"], on["id"]) in edges
    # near duplicate: "... at noon UTC." (Jaccard 5/6 >= 0.8) merged into "... at noon."
    noon = one["We deploy the billing service on Fridays at noon."]
    assert "We deploy the billing service on Fridays at noon UTC." not in by
    assert noon["metadata"]["mention_count"] == 2 and noon["metadata"]["message_ids"] == ["c2", "c3"]
    # one batch: the later value of the deploy window supersedes the earlier
    assert one["The deploy window is Monday."]["superseded_by"] == one["The deploy window is Thursday."]["id"]
    # negation: "We don't store logs in S3." contradicts and supersedes "We store logs in S3."
    s3, no_s3 = one["We store logs in S3."], one["We don't store logs in S3."]
    assert s3["superseded_by"] == no_s3["id"] and ("CONTRADICTS", no_s3["id"], s3["id"]) in edges
    # switch: moving from MySQL to Postgres supersedes bob's two MySQL facts (neither mentions Postgres)
    moved = one["We moved from MySQL to Postgres for orders."]
    assert one["Orders live in MySQL."]["superseded_by"] == moved["id"]
    assert one["The search index lives in MySQL and Elastic."]["superseded_by"] == moved["id"]
    # ... and a term the tokenizer stems ("Redis" is the token "redi"): each user's switch to Valkey supersedes that
    # user's own "We use Redis ..." (alice's, stated twice, goes before her later "We don't use Redis ...", which
    # still contradicts it)
    redis = {f["metadata"]["user_id"]: f for f in by["We use Redis for sessions on k8s."]}
    switch = {f["metadata"]["user_id"]: f for f in by["We migrated from Redis to Valkey for sessions."]}
    assert redis["bob"]["superseded_by"] == switch["bob"]["id"]
    assert redis["alice"]["superseded_by"] == switch["alice"]["id"]
    no_redis = one["We don't use Redis for sessions on k8s."]
    assert ("CONTRADICTS", no_redis["id"], redis["alice"]["id"]) in edges
    # the conversation: 45 minutes replaces 30
    assert one["The build timeout is 30 minutes."]["superseded_by"] == \
        one["Actually the build timeout is 45 minutes."]["id"]


def test_synthetic_rules_by_hand(corpus):
    """Synthetic note i (0-based, 400 of them): i % 7 == 3 repeated verbatim (merged), i % 11 == 5 repeated with
    a word added (merged), i % 13 == 6 restated with "never uses" (contradicts and supersedes the original)."""
    _, out = corpus
    synth_facts = [f for f in out["facts"] if f["content"][:4].isdigit()]
    exact = sum(1 for i in range(400) if i % 7 == 3)  # 57
    near = sum(1 for i in range(400) if i % 11 == 5)  # 36
    negated = sum(1 for i in range(400) if i % 13 == 6)  # 31
    assert (exact, near, negated) == (57, 36, 31)
    assert len(synth_facts) == 400 + negated
    merged = [f for f in synth_facts if f["metadata"]["mention_count"] > 1]
    # a note that is both i % 7 == 3 and i % 11 == 5 (i = 38, 115, 192, 269, 346) is merged twice
    both = [i for i in range(400) if i % 7 == 3 and i % 11 == 5]
    assert both == [38, 115, 192, 269, 346]
    assert len(merged) == exact + near - len(both)
    assert sum(f["metadata"]["mention_count"] - 1 for f in merged) == exact + near
    never = [f for f in synth_facts if " never uses " in f["content"]]
    assert len(never) == negated
    sup = {f["superseded_by"] for f in synth_facts if f["superseded_by"]}
    assert sup == {f["id"] for f in never}
    assert sum(r["duplicates_merged"] for r in out["responses"][:400 + exact + near + negated]) == exact + near


def test_embed_cache_only_for_embedders_slower_than_it(tmp_path, monkeypatch):
    from services.cortex_mock.config import MockConfig
    from services.cortex_mock.engine import CortexEngine

    def uses(**kw):
        return CortexEngine(MockConfig(data_dir=str(tmp_path), **kw)).uses_embed_cache()

    monkeypatch.delenv("MEMRIG_EMBEDDER", raising=False)
    assert (uses(embedder="wordllama"), uses(embedder="hash"), uses(embedder="minilm"), uses()) == \
        (False, False, True, True)  # unset: minilm (or a remote endpoint), both slower than a cache lookup
    assert uses(embedder="wordllama", embed_cache=True) and not uses(embedder="minilm", embed_cache=False)
    monkeypatch.setenv("MEMRIG_EMBEDDER", "WordLlama")
    assert not uses()
