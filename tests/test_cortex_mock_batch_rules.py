"""cortex-mock's rules reach the earlier facts of their own batch through lookups (ingest._BatchWriter._remember and
the three `_batch_*_candidates`) instead of a pass over the whole batch per fact, and decide exactly what the pass
decided: large batches (tests/fixtures_cortex_batch.py) give the stored facts, entities, edges, counters and
rankings of cortex_batch_golden.json, written by the code before the lookups; the crafted batches give the outcomes
worked out by hand below; and random batches give what a writer that scans the whole batch gives."""

from __future__ import annotations

import asyncio
import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from services.cortex_mock import ingest
from services.cortex_mock.config import MockConfig
from services.cortex_mock.engine import CortexEngine
from tests.fixtures_cortex_batch import run_batched
from tests.fixtures_cortex_ingest import CLOCK, _labels, assert_matches_golden

GOLDEN = Path(__file__).with_name("cortex_batch_golden.json")


@pytest.fixture(scope="module")
def batched(tmp_path_factory):
    return asyncio.run(run_batched(str(tmp_path_factory.mktemp("cortex-batch"))))


@pytest.mark.parametrize("part", ["responses", "facts", "entities", "edges", "rankings"])
def test_matches_golden(batched, part):
    assert_matches_golden(batched, json.loads(GOLDEN.read_text()), part)


def test_golden_batches_exercise_the_batch_rules(batched):
    """The corpus is one where the rules fire inside batches: 40 notes a call put most of the seeded duplicates
    (every 7th note, every 11th with a word added) and negations (every 13th) in the batch of their original."""
    r = batched["responses"]
    assert len(r) == 17  # 7 calls per user (262 notes each, 40 a call), 2 crafted batches, 1 conversation
    assert sum(x["duplicates_merged"] for x in r) == 110
    assert sum(x["contradictions"] for x in r) == 34


def _facts(batched, user):
    return {f["content"]: f for f in batched["facts"] if f["metadata"].get("user_id") == user
            and f["metadata"]["session_id"].startswith(f"{user}:cb")}


def test_crafted_batches_by_hand(batched):
    """Each pair below is two facts of one ingest call, the later stated after the earlier."""
    a, b = _facts(batched, "alice"), _facts(batched, "bob")
    edges = {tuple(e) for e in batched["edges"]}
    # attribute: 600s supersedes 300s; the second "TTL is 600s" is an exact duplicate (0.85 + 0.05, two mentions)
    ttl = a["The cache TTL is 600s."]
    assert a["The cache TTL is 300s."]["superseded_by"] == ttl["id"]
    assert ttl["metadata"]["mention_count"] == 2 and ttl["confidence"] == 0.9
    # negation: "don't use Redis" contradicts and supersedes "use Redis" (and is superseded by the migration)
    use, dont = a["We use Redis for sessions on k8s."], a["We don't use Redis for sessions on k8s."]
    assert use["superseded_by"] == dont["id"] and ("CONTRADICTS", dont["id"], use["id"]) in edges
    assert dont["superseded_by"] == a["We migrated from Redis to Valkey for sessions."]["id"]
    # antonym values: disabled contradicts and supersedes enabled
    on, off = a["Feature flag dark mode is enabled."], a["Feature flag dark mode is disabled."]
    assert on["superseded_by"] == off["id"] and ("CONTRADICTS", off["id"], on["id"]) in edges
    # near duplicate (Jaccard 5/6): "... noon UTC." merged into "... noon."
    assert "We deploy the billing service on Fridays at noon UTC." not in a
    assert a["We deploy the billing service on Fridays at noon."]["metadata"]["mention_count"] == 2
    # bob: 250 supersedes 100 and is stated twice; "don't store logs" contradicts the first "store logs", and the
    # third statement "We store logs in S3." is its exact duplicate (merged into it, not a new fact)
    assert b["The API rate limit is 100 requests per minute."]["superseded_by"] == \
        b["The API rate limit is 250 requests per minute."]["id"]
    assert b["The API rate limit is 250 requests per minute."]["metadata"]["mention_count"] == 2
    store, nostore = b["We store logs in S3."], b["We don't store logs in S3."]
    assert store["superseded_by"] == nostore["id"] and ("CONTRADICTS", nostore["id"], store["id"]) in edges
    assert store["metadata"]["mention_count"] == 2
    assert b["Orders live in MySQL."]["superseded_by"] == b["We moved from MySQL to Postgres for orders."]["id"]


class _ScanningWriter(ingest._BatchWriter):
    """The batch side as it was: every earlier fact of the batch is a candidate of every rule."""

    def _batch_dup_candidates(self, new):
        return list(range(len(self.batch)))

    def _batch_attr_candidates(self, attr_key):
        return [j for j, c in enumerate(self.batch) if c.attr_key]

    def _batch_neg_candidates(self, key):
        return list(range(len(self.batch)))


WORDS = ["cache", "ttl", "redis", "queue", "worker", "deploy", "billing", "service", "region", "limit", "timeout",
         "build", "logs", "index", "shard"]
ATTRIBUTES = ["cache ttl", "build timeout", "deploy region", "worker queue limit"]
VALUES = ["300s", "600s", "enabled", "disabled", "eu-west-1", "us-east-1", "on", "off", "30 minutes", "45 minutes"]


def _random_text(rng: random.Random) -> str:
    out = []
    for _ in range(rng.randint(20, 60)):
        w = rng.sample(WORDS, rng.randint(3, 4))
        kind = rng.random()
        if kind < 0.4:
            out.append(f"The {rng.choice(ATTRIBUTES)} is {rng.choice(VALUES)}.")
        elif kind < 0.6:
            out.append(f"We {'do not ' if rng.random() < 0.5 else ''}use {' '.join(w)} for {rng.choice(WORDS)}.")
        elif kind < 0.7 and out:
            out.append(out[rng.randrange(len(out))])  # an exact duplicate inside the batch
        elif kind < 0.8 and out:
            out.append(out[rng.randrange(len(out))].rstrip(".") + " today.")  # a near duplicate
        elif kind < 0.85 and out:  # an earlier statement with the opposite polarity
            t = out[rng.randrange(len(out))]
            out.append(t.replace("We do not use", "We use") if "We do not use" in t else t.replace("We use",
                                                                                                   "We do not use"))
        elif kind < 0.9:
            out.append(f"We migrated from {w[0].title()} to {w[1].title()} for {w[2]}.")
        else:
            out.append(f"The {w[0]} {w[1]} runs {' '.join(rng.sample(WORDS, 3))} every week.")
    return " ".join(out)


async def _ingest(tmp: Path, texts: list[str]):
    e = CortexEngine(MockConfig(data_dir=str(tmp), embedder="hash", embed_cache=False), clock=lambda: CLOCK)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    res = [await e.ingest_text("t", {"text": t, "session_id": f"s{i}", "reference_date": t0 + timedelta(days=i),
                                     "message_ids": [f"m{i}"], "user_id": "u"}) for i, t in enumerate(texts)]
    labels, st = _labels(e, "t")
    rows = [tuple(labels.get(x, x) if isinstance(x, str) else x for x in r) for r in st.conn.execute(
        "SELECT id, content, superseded_by, confidence, metadata FROM nodes ORDER BY rowid")]
    edges = [tuple(labels[x] if x in labels else x for x in r) for r in st.conn.execute(
        "SELECT type, src, dst FROM edges ORDER BY id")]
    counters = [{k: r[k] for k in ("nodes_created", "edges_created", "duplicates_merged", "supersessions",
                                    "contradictions")} for r in res]
    await e.close()
    return rows, edges, counters


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_batches_decide_as_a_full_scan(tmp_path, monkeypatch, seed):
    rng = random.Random(seed)
    texts = [_random_text(rng) for _ in range(4)]
    looked_up = asyncio.run(_ingest(tmp_path / "lookup", texts))
    monkeypatch.setattr(ingest, "_BatchWriter", _ScanningWriter)
    scanned = asyncio.run(_ingest(tmp_path / "scan", texts))
    # the random batches reach every rule inside a batch
    assert sum(c["duplicates_merged"] for c in scanned[2]) > 0
    assert sum(c["supersessions"] for c in scanned[2]) > 0
    assert sum(c["contradictions"] for c in scanned[2]) > 0
    assert looked_up[2] == scanned[2]
    assert looked_up[1] == scanned[1]
    assert looked_up[0] == scanned[0]
