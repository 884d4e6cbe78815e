"""A snapshot extended after a search carries its per-fact lookups (tie order, user masks, token counts, event
times) forward instead of rebuilding them; each must equal what the successor would build from scratch."""

from __future__ import annotations

import dataclasses
import random
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from services.cortex_mock.snapshot import Fact, IndexDelta, TenantIndex

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def _fact(i: int, content: str, user: str | None, when: datetime | None, n_tokens: int = -1) -> Fact:
    return Fact(id=f"f{i:04d}", content=content, source="s", confidence=0.8, session_id=None, speaker="user",
                fact_type="fact", occurred_at=when, occurred_iso=None, attr_key="", attr_value="", superseded_by=None,
                metadata={"user_id": user} if user is not None else {}, tokens=content.lower().split(),
                norm=content.lower(), created_at=float(i), n_tokens=n_tokens)


def _index(facts: list[Fact]) -> TenantIndex:
    return TenantIndex(rev=1, facts=facts, fact_pos={f.id: i for i, f in enumerate(facts)},
                       emb=np.zeros((len(facts), 2), np.float32), doc_len=np.ones(len(facts)))


def _delta(facts: list[Fact], updates: dict[str, Fact] | None = None) -> IndexDelta:
    return IndexDelta(new_facts=facts, new_emb=np.zeros((len(facts), 2), np.float32), fact_updates=updates or {})


def _warm(idx: TenantIndex, users: list[str]) -> None:
    idx.tie_rank()
    idx.token_counts()
    idx.occurred_us()
    for u in users:
        idx.user_mask(u)


def _fresh(idx: TenantIndex) -> TenantIndex:
    return dataclasses.replace(idx, _user_masks={}, _tie_rank=None, _tie_order=None, _token_counts=None,
                               _occurred_us=None)


def test_tie_rank_by_hand():
    # contents sort as: apple(f0) < cherry(f1); then banana(f2) and aardvark(f3) arrive
    idx = _index([_fact(0, "apple", "u", None), _fact(1, "cherry", "u", None)])
    assert idx.tie_rank().tolist() == [0, 1]
    new = idx.extended(_delta([_fact(2, "banana", "u", None), _fact(3, "aardvark", "u", None)]), 2)
    assert new._tie_rank is not None  # carried, not left for a rebuild
    # aardvark 0, apple 1, banana 2, cherry 3
    assert new._tie_rank.tolist() == [1, 3, 2, 0] and new._tie_order.tolist() == [3, 0, 2, 1]
    # an equal content is ordered by user, then id
    new2 = new.extended(_delta([_fact(4, "apple", "a", None)]), 3)
    assert new2._tie_rank.tolist() == [2, 4, 3, 0, 1]


def test_nothing_is_carried_when_no_search_built_it():
    idx = _index([_fact(0, "apple", "u", None)])
    new = idx.extended(_delta([_fact(1, "pear", "u", None)]), 2)
    assert new._tie_rank is None and new._token_counts is None and new._occurred_us is None and not new._user_masks


@pytest.mark.parametrize("seed", range(6))
def test_carried_lookups_equal_a_rebuild(seed):
    rng = random.Random(seed)
    words = ["redis", "valkey", "cache", "ttl", "deploy", "friday", "postgres"]
    users = ["alice", "bob", None]
    i = 0

    def some(n: int) -> list[Fact]:
        nonlocal i
        out = []
        for _ in range(n):
            when = T0 + timedelta(days=rng.randint(0, 40)) if rng.random() < 0.7 else None
            out.append(_fact(i, " ".join(rng.choices(words, k=rng.randint(1, 3))), rng.choice(users), when,
                             n_tokens=rng.choice([-1, rng.randint(1, 9)])))
            i += 1
        return out

    idx = _index(some(40))
    for rev in range(2, 7):
        _warm(idx, ["alice", "bob"])
        updates = {}
        for pos in rng.sample(range(len(idx.facts)), 3):  # what ingest updates: supersession, confidence, metadata
            old = idx.facts[pos]
            updates[old.id] = dataclasses.replace(old, superseded_by="f9999", confidence=0.95,
                                                  metadata={**old.metadata, "mention_count": 2})
        if rev == 4:
            users.append("carol")  # a user first seen in a delta
        idx = idx.extended(_delta(some(rng.randint(0, 12)), updates), rev)
        ref = _fresh(idx)
        assert idx._tie_rank is not None
        assert idx._tie_rank.tolist() == ref.tie_rank().tolist()
        assert idx._tie_order.tolist() == ref._tie_order.tolist()
        assert idx.token_counts().tolist() == ref.token_counts().tolist()
        us, has = idx.occurred_us()
        rus, rhas = ref.occurred_us()
        assert us.tolist() == rus.tolist() and has.tolist() == rhas.tolist()
        for u in ["alice", "bob", "carol", "nobody"]:
            assert idx.user_mask(u).tolist() == ref.user_mask(u).tolist(), u


def test_an_update_that_moves_a_fact_to_another_user_leaves_the_lookups_to_a_rebuild():
    idx = _index([_fact(0, "apple", "u", None), _fact(1, "pear", "v", None)])
    _warm(idx, ["u"])
    moved = dataclasses.replace(idx.facts[0], metadata={"user_id": "v"})
    new = idx.extended(_delta([], {"f0000": moved}), 2)
    assert not new._user_masks and new._tie_rank is None
    assert new.user_mask("v").tolist() == [True, True]
