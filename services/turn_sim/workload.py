"""The turn simulator's workload: a small coding project (a caching layer for an API) told over sessions.

`FACTS` are the decisions and specific values the user states; every fact carries the question a later session
asks about it and the keys a reply must contain to count as retaining it. `seed_history()` is the project history
ingested before the overhead runs (so recall has something to find); `turn_prompts()` is a seeded stream of
prompts for the latency states.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from services.common.types import IngestBatch, Message, Session


@dataclass(frozen=True)
class Fact:
    id: str
    session: int  # 1-based session in which the user states it
    kind: str  # "decision" (what was chosen) | "detail" (a specific value, format or threshold)
    statement: str  # what the user says
    probe: str  # what a later session asks
    keys: tuple[str, ...]  # every key must appear in a reply (case-insensitive) for the fact to count as retained


FACTS: tuple[Fact, ...] = (
    # Session 1: design
    Fact("store", 1, "decision", "We decided to use Redis as the cache store for the API, not Memcached, because we "
         "need TTL per key and pub/sub invalidation.", "Which cache store did we pick for the API?", ("redis",)),
    Fact("ttl", 1, "detail", "The cache TTL for product responses is 300 seconds.",
         "What is the cache TTL for product responses?", ("300",)),
    Fact("keyfmt", 1, "detail", "Cache keys use the format api:v2:{route}:{sha1 of query}.",
         "What format do the cache keys use?", ("api:v2",)),
    Fact("pattern", 1, "decision", "We chose the cache-aside pattern so the API reads through the cache and "
         "falls back to Postgres.", "Which caching pattern did we choose?", ("cache-aside",)),
    # Session 2: implement
    Fact("module", 2, "decision", "The cache client lives in the module src/cache/redis_cache.py.",
         "Which module holds the cache client?", ("redis_cache.py",)),
    Fact("pool", 2, "detail", "The Redis connection pool size is 32 connections.",
         "What is the Redis connection pool size?", ("32",)),
    Fact("serializer", 2, "decision", "Cached values are serialised with msgpack instead of JSON to save space.",
         "How are cached values serialised?", ("msgpack",)),
    # Session 3: test
    Fact("testlib", 3, "decision", "The cache tests use fakeredis so they run without a Redis server.",
         "Which library do the cache tests use instead of a Redis server?", ("fakeredis",)),
    Fact("hitrate", 3, "detail", "The load test requires a cache hit rate of at least 85 percent.",
         "What cache hit rate does the load test require?", ("85",)),
    # Session 4: debug
    Fact("stale", 4, "decision", "The stale data came from missing invalidation on the PATCH /products handler; "
         "we now publish on the channel cache-invalidate after every write.",
         "Where did the stale cache data come from?", ("patch",)),
    Fact("swr", 4, "detail", "Stale-while-revalidate is limited to 30 seconds after expiry.",
         "How long is stale-while-revalidate allowed after expiry?", ("30",)),
    # Session 5: refactor (stated, probed by nothing later: the arc ends)
    Fact("decorator", 5, "decision", "The refactor wraps cache reads in a @cached decorator.",
         "What wraps the cache reads after the refactor?", ("@cached",)),
)

SESSION_OPENERS: tuple[str, ...] = (
    "Let's plan a caching layer for the API.",
    "Start building what we designed.",
    "Write tests for the caching layer.",
    "The cache is returning stale data, help me fix it.",
    "Clean up the caching implementation.",
)
SESSION_NAMES = ("design", "implement", "test", "debug", "refactor")

# Generic prompts a developer types during a turn (no dependence on memory): the latency states mix them with probes.
GENERIC_PROMPTS: tuple[str, ...] = (
    "Add a docstring to the cache module.",
    "Rename the helper get_or_set to fetch_or_store.",
    "Explain what a cache stampede is.",
    "Show me how to log cache misses.",
    "Run the linter on the caching package.",
    "Summarise the open TODOs in the cache code.",
)

BASE_TIME = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def facts_of_session(n: int) -> list[Fact]:
    return [f for f in FACTS if f.session == n]


def seed_history(sessions: int = 5, prefix: str = "hist") -> IngestBatch:
    """The project history as ingestible sessions: the user states each fact, the agent acknowledges it."""
    out = []
    for n in range(1, sessions + 1):
        sid = f"{prefix}-s{n}"
        msgs = [Message(f"{sid}-m0", "user", SESSION_OPENERS[n - 1])]
        for i, f in enumerate(facts_of_session(n), start=1):
            msgs.append(Message(f"{sid}-m{2 * i - 1}", "user", f.statement))
            msgs.append(Message(f"{sid}-m{2 * i}", "assistant", f"Noted: {f.statement}"))
        out.append(Session(sid, BASE_TIME + timedelta(days=n - 1), tuple(msgs)))
    return IngestBatch(sessions=tuple(out), batch_id=f"{prefix}-history")


def turn_prompts(n: int, seed: int = 0) -> list[str]:
    """n prompts: fact probes and generic prompts in a seeded order (half and half on average)."""
    rng = random.Random(seed)
    pool = [f.probe for f in FACTS] + list(GENERIC_PROMPTS)
    return [rng.choice(pool) for _ in range(n)]


def key_hit(reply: str, keys: tuple[str, ...]) -> bool:
    low = reply.lower()
    return all(k.lower() in low for k in keys)
