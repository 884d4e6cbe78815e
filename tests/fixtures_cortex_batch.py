"""Large ingest batches for the cortex-mock batch-rule equivalence test (tests/test_cortex_mock_batch_rules.py).

BEAM's capture windows reach cortex-mock as batches of a few hundred facts each (20 long messages), so the rules'
comparisons of a new fact with the earlier facts of its own batch (near duplicate, negation, attribute) run
hundreds of times per fact. `run_batched` ingests the seeded corpus of fixtures_cortex_ingest.py (its duplicates,
near duplicates and negations) as such batches: each user's notes in calls of `per_call` texts joined into one
text, so most duplicates meet their original inside one batch; then crafted batches where every rule fires
between facts of the same batch; then one conversation of 24 messages. It returns what fixtures_cortex_ingest's
`run_corpus` returns (stable labels F<n>/E<n>): the stored facts, entities, edges in insertion order, each call's
counters and the top-8 rankings of its queries. `cortex_batch_golden.json` was written by this function from the
code before the batch's facts were looked up by key (commit a298413), so a rule that finds another candidate, or
the same candidates in another order, changes it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from services.cortex_mock.config import MockConfig
from services.cortex_mock.engine import CortexEngine
from tests.fixtures_cortex_ingest import (
    CLOCK,
    USERS,
    ingest_crafted_and_conversation,
    keeper,
    snapshot,
    synthetic_texts,
)

# One text each: every fact below meets its counterpart inside the same batch.
CRAFTED_BATCHES: list[tuple[str, str, str]] = [  # (user, date, text)
    ("alice", "2026-03-01",
     "The cache TTL is 300s. We use Redis for sessions on k8s. The cache TTL is 600s. "
     "We don't use Redis for sessions on k8s. Feature flag dark mode is enabled. Feature flag dark mode is disabled. "
     "We deploy the billing service on Fridays at noon. We deploy the billing service on Fridays at noon UTC. "
     "The cache TTL is 600s. We migrated from Redis to Valkey for sessions."),
    ("bob", "2026-03-02",
     "Orders live in MySQL. The API rate limit is 100 requests per minute. We store logs in S3. "
     "The API rate limit is 250 requests per minute. We don't store logs in S3. We store logs in S3. "
     "We moved from MySQL to Postgres for orders. The API rate limit is 250 requests per minute."),
]

CONVERSATION = [
    ("user", "We switched from Jenkins to GitHub Actions for CI last week."),
    ("assistant", "Noted: CI runs on GitHub Actions now, not Jenkins."),
    ("user", "The build timeout is 30 minutes."),
    ("assistant", "The build timeout is 30 minutes, understood."),
    ("user", "Actually the build timeout is 45 minutes."),
    ("assistant", "The build timeout is 45 minutes from now on."),
    ("user", "The staging cluster is enabled on weekends."),
    ("assistant", "The staging cluster is disabled on weekends, then."),
    ("user", "We do not run migrations on Fridays."),
    ("assistant", "We run migrations on Fridays, noted."),
    ("user", "We do not run migrations on Fridays."),
    ("assistant", "Understood: no migrations on Fridays."),
] * 2


async def run_batched(tmp_dir: str, per_call: int = 40) -> dict[str, Any]:
    e = CortexEngine(MockConfig(data_dir=tmp_dir, embedder="hash", embed_cache=False), clock=lambda: CLOCK)
    tenant = "golden"
    responses: list[dict[str, Any]] = []
    keep = keeper(responses)

    by_user: dict[str, list[tuple[str, str]]] = {u: [] for u in USERS}
    for user, day, text in synthetic_texts(400):
        by_user[user].append((day, text))
    for user, notes in by_user.items():
        for c in range(0, len(notes), per_call):
            chunk = notes[c:c + per_call]
            keep(await e.ingest_text(tenant, {"text": " ".join(t for _, t in chunk), "session_id": f"{user}:b{c}",
                                              "reference_date": datetime.fromisoformat(chunk[0][0]),
                                              "message_ids": [f"{user}-m{c}"], "user_id": user}))
    await ingest_crafted_and_conversation(e, tenant, keep, CRAFTED_BATCHES, "cb", CONVERSATION,
                                          datetime(2026, 4, 1, 9, tzinfo=UTC), "w")

    return await snapshot(e, tenant, responses)
