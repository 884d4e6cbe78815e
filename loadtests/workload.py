"""What the load users send: seeded Cortex API payloads and the request mix (pure; no locust, no I/O).

The mix follows what the OpenClaw Cortex plugin does in a session (Ubundi/openclaw-cortex: src/cortex/client.ts,
src/features/recall/handler.ts, its capture at `agent_end`): a recall-hook retrieve
before most turns (`mode: fast` while the tenant is cold, `full` otherwise), an occasional `/v1/recall` tool
call, and a capture at the end of a turn submitted as an async ingest job that is polled until done.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

TOPICS = ["database migration", "auth token refresh", "flaky test", "deploy pipeline", "rate limiter",
          "cache invalidation", "logging format", "API pagination", "memory leak", "config loader",
          "retry policy", "feature flag", "schema change", "build cache", "error budget", "release notes"]
QUESTION_STARTS = ["What did we decide about", "Why did we change", "Who owns", "When did we fix", "How do we test",
                   "What broke in"]
FACT_TEMPLATES = [
    "We moved the {t} to a nightly job after it kept failing on Mondays.",
    "Alice owns the {t}; ask her before changing its defaults.",
    "The {t} regression was fixed by pinning the client library to 2.3.",
    "Decision: keep the {t} behind a flag until the March release.",
    "The {t} tests need the redis fixture, otherwise they hang.",
    "We agreed to log the {t} at debug level only.",
]


def queries(n: int = 64, seed: int = 7) -> list[str]:
    """n short developer-memory questions, deterministic for a seed."""
    rng = random.Random(seed)
    return [f"{rng.choice(QUESTION_STARTS)} the {rng.choice(TOPICS)}?" for _ in range(n)]


def fact(rng: random.Random) -> str:
    return rng.choice(FACT_TEMPLATES).format(t=rng.choice(TOPICS))


@dataclass(frozen=True)
class Mix:
    """Relative task weights of a Cortex user."""

    retrieve_fast: int = 6
    retrieve_full: int = 2
    recall: int = 2
    ingest_job: int = 1


class Payloads:
    """Seeded request bodies for one user (or one driver)."""

    def __init__(self, seed: int = 0, user_id: str = "memrig-load", top_k: int = 10):
        self.rng = random.Random(seed)
        self.user_id = user_id
        self.top_k = top_k
        self._queries = queries(64, seed + 7)
        self._n = 0

    def _q(self) -> str:
        return self.rng.choice(self._queries)

    def retrieve(self, mode: str = "fast") -> dict:
        return {"query": self._q(), "top_k": self.top_k, "mode": mode, "query_type": "combined",
                "user_id": self.user_id}

    def recall(self) -> dict:
        return {"query": self._q(), "limit": self.top_k, "user_id": self.user_id}

    def conversation(self, turns: int = 2) -> dict:
        self._n += 1
        msgs = []
        for _ in range(turns):
            msgs.append({"role": "user", "content": f"Remember this: {fact(self.rng)}"})
            msgs.append({"role": "assistant", "content": "Noted, I will keep that in mind."})
        return {"messages": msgs, "session_id": f"{self.user_id}-s{self._n}", "reference_date": "2026-03-01",
                "user_id": self.user_id, "source_origin": "openclaw", "derivation_mode": "observed",
                "source_app": "memrig-load"}

    def memory_texts(self, n: int) -> list[str]:
        """n distinct memory texts for seeding a store (see `memory_texts`)."""
        return memory_texts(n, self.rng.randrange(1 << 30))


PEOPLE = ["Priya", "Marco", "Alice", "Jonas", "Wei", "Fatima", "Diego", "Hana", "Sam", "Olga", "Kwame", "Lena"]
VERBS = ["migrated", "rewrote", "profiled", "documented", "split", "deprecated", "benchmarked", "patched",
         "reviewed", "containerised", "sharded", "instrumented"]
ADJS = ["legacy", "flaky", "nightly", "async", "shared", "internal", "critical", "experimental", "slow", "new"]
COMPONENTS = ["billing worker", "search index", "auth middleware", "payment webhook", "cache layer", "cron scheduler",
              "retry queue", "feature flag service", "log shipper", "schema migrator", "rate limiter",
              "session store", "export job", "notification fanout", "config loader", "upload handler"]
SERVICES = ["checkout-api", "orders-db", "gateway", "reporting", "mobile-backend", "ingest-pipeline", "admin-ui",
            "ledger", "identity", "analytics"]


def memory_texts(n: int, seed: int = 0) -> list[str]:
    """n distinct one-sentence memories: varied words plus a unique ticket number, so a store that merges
    near-duplicates (same words and numbers) keeps every one of them."""
    rng = random.Random(seed)
    return [f"{rng.choice(PEOPLE)} {rng.choice(VERBS)} the {rng.choice(ADJS)} {rng.choice(COMPONENTS)} in "
            f"{rng.choice(SERVICES)} for ticket {10_000 + i}." for i in range(n)]
