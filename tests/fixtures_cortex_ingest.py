"""A seeded corpus for the cortex-mock ingest equivalence test (tests/test_cortex_mock_ingest_scale.py).

`run_corpus` ingests it into a fresh engine (hash embedder, fixed clock, no settle delay) and returns what an
ingest decides, with every random node id replaced by a stable label (F<n> for the n-th FACT node in storage
order, E<n> for entities): the stored facts (content's first 80 characters, superseded_by, confidence, metadata), the edges in insertion
order, the entities and aliases, each call's IngestResponse counters, and the top-k of a fixed query set in fast
and full mode, per user. The golden file `cortex_ingest_golden.json` was written by this function from the code
as it was before ingest was made to scale (commit 2fcda59), so a rule that finds different candidates, or a
snapshot that indexes them differently, changes it. Rewritten once since, for one intended change: the switch rule
tokenizes its term like the facts ("migrated from Redis" found no stored "Redis" fact, the postings hold the stem
"redi"): the two "We use Redis ..." facts are now superseded by their user's switch, and nothing else moved.

Corpus: 400 synthetic notes (services/perf/synth.py, the bench-perf memories) shared by two users, every 7th
repeated verbatim (an exact duplicate), every 11th repeated with one word added (a near duplicate: cosine >= 0.9,
Jaccard >= 0.8), every 13th negated ("the x y never uses z"), then crafted statements that fire each rule against that
larger store: attribute supersession with antonym contradiction, "migrated from X to Y", negation conflicts,
merges, entity aliases, a batch whose later fact supersedes an earlier one of the same batch, and a conversation.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from services.cortex_mock.config import MockConfig
from services.cortex_mock.engine import CortexEngine
from services.cortex_mock.search import SearchParams
from services.perf import synth

CLOCK = 1_780_000_000.0  # fixed wall clock: created_at and edge visibility do not depend on when the test runs
REF = datetime(2026, 6, 1, tzinfo=UTC)
USERS = ("alice", "bob")

CRAFTED: list[tuple[str, str, str]] = [  # (user, date, text)
    ("alice", "2026-01-01", "The cache TTL is 300s. We use Redis for sessions on k8s. Billing runs on Postgres."),
    ("bob", "2026-01-01", "The cache TTL is 120s. We use Redis for sessions on k8s."),
    ("alice", "2026-01-03", "We deploy the billing service on Fridays at noon."),
    ("alice", "2026-01-04", "We deploy the billing service on Fridays at noon UTC."),
    ("alice", "2026-01-05", "We raised the cache TTL to 600s. We run Kubernetes (k8s) in eu-west-1."),
    ("alice", "2026-01-06", "Feature flag dark mode is enabled."),
    ("alice", "2026-01-07", "Feature flag dark mode is disabled."),
    ("bob", "2026-01-08", "We migrated from Redis to Valkey for sessions."),
    ("alice", "2026-01-09", "We use Redis for sessions on k8s. We migrated from Redis to Valkey for sessions."),
    ("alice", "2026-01-10", "We don't use Redis for sessions on k8s."),
    ("bob", "2026-01-11", "Billing runs on Postgres. The cache TTL is 120s."),
    ("alice", "2026-01-12", "The deploy window is Monday. The deploy window is Thursday. Alice owns the CI pipeline."),
    ("alice", "2026-01-13", "The API rate limit is 100 requests per minute. We store logs in S3."),
    ("alice", "2026-01-14", "The API rate limit is 250 requests per minute. We don't store logs in S3."),
    ("bob", "2026-01-15", "Orders live in MySQL. The search index lives in MySQL and Elastic."),
    ("bob", "2026-01-16", "We moved from MySQL to Postgres for orders."),
]

CONVERSATION = [
    ("user", "We switched from Jenkins to GitHub Actions for CI last week."),
    ("assistant", "Noted: CI runs on GitHub Actions now, not Jenkins."),
    ("user", "The build timeout is 30 minutes."),
    ("user", "Actually the build timeout is 45 minutes."),
]

QUERIES = [
    "cache TTL", "what do we use for sessions", "Redis", "Valkey sessions", "billing deploy day",
    "dark mode flag", "API rate limit", "logs S3", "CI pipeline Jenkins", "build timeout", "Kubernetes region",
    "orders database MySQL",
]


def synthetic_texts(n: int = 400) -> list[tuple[str, str, str]]:
    """(user, ISO date, text) for the synthetic part, with the duplicates, near duplicates and negations."""
    base = synth.memories(n, seed=3)
    out: list[tuple[str, str, str]] = []
    for i, text in enumerate(base):
        user = USERS[i % 2]
        day = (datetime(2025, 1, 1, tzinfo=UTC) + timedelta(hours=i)).isoformat()
        out.append((user, day, text))
        if i % 7 == 3:
            out.append((user, day, text))
        if i % 11 == 5:
            out.append((user, day, text.rstrip(".") + " zzextra."))
        if i % 13 == 6:
            out.append((user, day, text.replace(" uses ", " never uses ", 1)))
    return out


def _labels(engine: CortexEngine, tenant: str) -> tuple[dict[str, str], Any]:
    st = engine.store(tenant)
    rows = st.conn.execute("SELECT id, type FROM nodes ORDER BY rowid").fetchall()
    labels: dict[str, str] = {}
    counts = {"FACT": 0, "ENTITY": 0}
    for nid, typ in rows:
        labels[nid] = f"{typ[0]}{counts[typ]}"
        counts[typ] += 1
    return labels, st


def _relabel(v: Any, labels: dict[str, str]) -> Any:
    if isinstance(v, str):
        return labels.get(v, v)
    if isinstance(v, list):
        return [_relabel(x, labels) for x in v]
    if isinstance(v, dict):
        return {k: _relabel(x, labels) for k, x in v.items()}
    return v


def rank_queries(e: CortexEngine, tenant: str, labels: dict[str, str]) -> dict[str, list[list[Any]]]:
    """Top 8 (label, score) of every query, in fast and full mode, for each user and for the whole tenant."""
    rankings: dict[str, list[list[Any]]] = {}
    for mode in ("fast", "full"):
        for user in (*USERS, None):
            for q in QUERIES:
                out = e.retrieve_sync(tenant, SearchParams(query=q, top_k=8, mode=mode, reference=REF,
                                                           user_id=user))
                rankings[f"{mode}|{user}|{q}"] = [[labels[r["node_id"]], r["score"]] for r in out.results]
    return rankings


def reopened_rankings(tmp_dir: str) -> dict[str, list[list[Any]]]:
    """The rankings from a fresh engine on the same data dir: its snapshot is built from SQLite, not extended."""
    e = CortexEngine(MockConfig(data_dir=tmp_dir, embedder="hash", embed_cache=False), clock=lambda: CLOCK)
    labels, _ = _labels(e, "golden")
    out = rank_queries(e, "golden", labels)
    for st in e.open_tenants().values():
        st.close()
    return out


def keeper(responses: list[dict[str, Any]]) -> Callable[[dict[str, Any]], None]:
    """A function that appends an ingest call's counters to `responses`."""
    def keep(res: dict[str, Any]) -> None:
        responses.append({k: res[k] for k in ("nodes_created", "edges_created", "duplicates_merged",
                                              "supersessions", "contradictions", "facts_extracted")})
    return keep


async def ingest_crafted_and_conversation(e: CortexEngine, tenant: str, keep: Callable[[dict[str, Any]], None],
                                          crafted: list[tuple[str, str, str]], tag: str,
                                          conversation: list[tuple[str, str]], t0: datetime, msg: str) -> None:
    """Each crafted (user, date, text) as one ingest call (session `<user>:<tag><i>`), then `conversation` as one
    conversation of alice's from t0, a minute a message (ids `<msg><j>`)."""
    for i, (user, day, text) in enumerate(crafted):
        keep(await e.ingest_text(tenant, {"text": text, "session_id": f"{user}:{tag}{i}",
                                          "reference_date": datetime.fromisoformat(day).replace(tzinfo=UTC),
                                          "message_ids": [f"{tag}{i}"], "user_id": user}))
    keep(await e.ingest_conversation(tenant, {
        "messages": [{"role": r, "content": c, "id": f"{msg}{j}", "timestamp": t0 + timedelta(minutes=j)}
                     for j, (r, c) in enumerate(conversation)],
        "session_id": "alice:conv", "reference_date": t0, "user_id": "alice"}))


async def run_corpus(tmp_dir: str, n_synth: int = 400) -> dict[str, Any]:
    e = CortexEngine(MockConfig(data_dir=tmp_dir, embedder="hash", embed_cache=False), clock=lambda: CLOCK)
    tenant = "golden"
    responses: list[dict[str, Any]] = []
    keep = keeper(responses)

    for i, (user, day, text) in enumerate(synthetic_texts(n_synth)):
        keep(await e.ingest_text(tenant, {"text": text, "session_id": f"{user}:s{i // 10}",
                                          "reference_date": datetime.fromisoformat(day),
                                          "message_ids": [f"m{i}"], "user_id": user}))
    await ingest_crafted_and_conversation(e, tenant, keep, CRAFTED, "c", CONVERSATION,
                                          datetime(2026, 2, 1, 9, tzinfo=UTC), "v")

    return await snapshot(e, tenant, responses)


async def snapshot(e: CortexEngine, tenant: str, responses: list[dict[str, Any]]) -> dict[str, Any]:
    """What a golden file holds of a tenant, with stable labels: each call's counters (`responses`), the stored
    facts, entities and edges in insertion order, and the rankings of `rank_queries`. Closes the engine."""
    labels, st = _labels(e, tenant)
    facts = []
    for fid, content, sup, conf, meta in st.conn.execute(
            "SELECT id, content, superseded_by, confidence, metadata FROM nodes WHERE type='FACT' ORDER BY rowid"):
        facts.append({"id": labels[fid], "content": content[:80], "superseded_by": labels.get(sup) if sup else None,
                      "confidence": round(conf, 6), "metadata": _relabel(json.loads(meta), labels)})
    entities = [{"id": labels[eid], "name": name, "key": norm, "metadata": meta} for eid, name, norm, meta in
                st.conn.execute("SELECT id, content, norm, metadata FROM nodes WHERE type='ENTITY' ORDER BY rowid")]
    edges = [[typ, labels[src], labels[dst]] for typ, src, dst in
             st.conn.execute("SELECT type, src, dst FROM edges ORDER BY id")]
    rankings = rank_queries(e, tenant, labels)
    await e.close()
    return {"responses": responses, "facts": facts, "entities": entities, "edges": edges, "rankings": rankings}


def assert_matches_golden(got: dict[str, Any], want: dict[str, Any], part: str) -> None:
    """One part of a `snapshot` against the golden's, item by item (a failure names the item)."""
    g_part, w_part = got[part], want[part]
    if isinstance(w_part, list):
        assert len(g_part) == len(w_part)
        for i, (g, w) in enumerate(zip(g_part, w_part, strict=True)):
            assert g == w, f"{part}[{i}]"
    else:
        assert g_part.keys() == w_part.keys()
        for k in w_part:
            assert g_part[k] == w_part[k], f"{part}[{k!r}]"
