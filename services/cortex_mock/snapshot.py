"""A tenant's searchable state as immutable snapshots (`TenantIndex`), the rows they hold (`Fact`, `EntityRow`) and
what one ingest adds to them (`IndexDelta`).

store.TenantStore builds a snapshot from SQLite, or extends the writer's own by its committed delta
(`TenantIndex.extended`: growth.py's shared append-only containers, so the cost is the delta's size); searches
(search.py) read a snapshot without any lock. Per-fact lookups a search needs (tie order, user masks, token
counts, event times, int8 codes) are built on first use and carried to the successor where they exist.
"""

from __future__ import annotations

import bisect
import dataclasses
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from services.cortex_mock.growth import CowList, GrowBuf, Postings, PrefixMap
from services.cortex_mock.quantized import QuantizedRows, QuestionRows
from services.cortex_mock.temporal import micros


@dataclass
class Fact:
    """One FACT node as the index sees it."""

    id: str
    content: str
    source: str
    confidence: float
    session_id: str | None
    speaker: str | None
    fact_type: str
    occurred_at: datetime | None
    occurred_iso: str | None
    attr_key: str
    attr_value: str
    superseded_by: str | None
    metadata: dict[str, Any]
    tokens: list[str]
    norm: str
    created_at: float
    n_tokens: int = -1  # cl100k tokens of `content`, counted once at ingest (-1: not stored)
    # The retrieve result's metadata object, built on first use (search._result). A Fact never changes once a
    # snapshot holds it (an update replaces it: dataclasses.replace, which leaves this at None).
    result_meta: dict[str, Any] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def entity_refs(self) -> list[str]:
        return list(self.metadata.get("entity_refs", []))


@dataclass
class EntityRow:
    id: str
    name: str
    key: str
    etype: str
    aliases: list[str]


def _tie_key(f: Fact) -> tuple[str, str, str, str]:
    """The order equal scores are ranked in (TenantIndex.tie_rank)."""
    return (f.norm, f.content, str(f.metadata.get("user_id")), f.id)


@dataclass
class TenantIndex:
    """Immutable snapshot of one tenant's searchable state at `rev`."""

    rev: int
    facts: list[Fact] = field(default_factory=list)
    fact_pos: dict[str, int] = field(default_factory=dict)
    emb: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    q_emb: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    q_owner: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    q_text: list[str] = field(default_factory=list)
    postings: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    doc_len: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))
    entities: list[EntityRow] = field(default_factory=list)
    entity_by_key: dict[str, int] = field(default_factory=dict)
    entity_by_id: dict[str, int] = field(default_factory=dict)
    # MENTIONS edges fact -> entity as parallel arrays (visibility is time-based: filter at query time).
    m_fact: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    m_ent: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    m_visible: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))
    norm_pos: dict[str, int] = field(default_factory=dict)
    built_at: float = 0.0
    # Derived lookups, computed on first use and kept for the snapshot's life (never shared with a successor:
    # `extended` resets them). A racing first use computes the same value twice, harmlessly.
    _user_masks: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    _tie_rank: np.ndarray | None = field(default=None, repr=False)
    _tie_order: np.ndarray | None = field(default=None, repr=False)  # positions in tie order (argsort of _tie_rank)
    _token_counts: np.ndarray | None = field(default=None, repr=False)
    _q_groups: tuple[np.ndarray, np.ndarray, np.ndarray] | None = field(default=None, repr=False)
    # True once `emb`/`q_emb` were swapped for their file-mapped twins (TenantStore.index, shared_arrays.py).
    _shared: bool = field(default=False, repr=False)
    _occurred_us: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)
    # The semantic and question channels' int8 views (quantized.py): `emb`'s copy is extended, not rebuilt, when
    # a snapshot grows; the questions' distinct-vector view is rebuilt on first use.
    _emb_codes: QuantizedRows | None = field(default=None, repr=False)
    _avgdl: float | None = field(default=None, repr=False)
    _q_rows: QuestionRows | None = field(default=None, repr=False)
    # The growth buffers the arrays above are views of (growth.py), once the snapshot has been extended.
    _grow: dict[str, GrowBuf] | None = field(default=None, repr=False)
    # What the writer's rules look facts up by (ingest.RuleIndex), for this snapshot's facts: the writer attaches
    # it to each snapshot it installs; never shared by `extended` (the writer grows it itself).
    writer_aux: Any = field(default=None, repr=False)

    def avg_doc_len(self) -> float:
        """Mean BM25 document length (tokens per fact), computed once per snapshot."""
        if self._avgdl is None:
            self._avgdl = float(self.doc_len.mean()) if self.doc_len.size else 0.0
        return self._avgdl

    def emb_codes(self) -> QuantizedRows:
        """The int8 copy of the fact embeddings (computed on first use)."""
        if self._emb_codes is None:
            self._emb_codes = QuantizedRows.of(self.emb)
        return self._emb_codes

    def question_rows(self) -> QuestionRows:
        """The question channel's view of the questions (computed on first use): generated questions repeat
        across facts (one template per kind of fact), so each distinct vector is scored once."""
        if self._q_rows is None:
            q = self.q_emb.reshape(self.q_owner.size, -1)
            distinct, inverse = np.unique(q, axis=0, return_inverse=True)
            distinct = np.ascontiguousarray(distinct, dtype=np.float32)
            order, owners, starts = self.question_groups()
            counts = np.diff(np.r_[starts, order.size])
            # (questions per owner) x owners, so the best per owner is a reduction over the short outer axis
            layout = np.full((int(counts.max()) if counts.size else 0, owners.size), distinct.shape[0], np.int64)
            cols = np.repeat(np.arange(owners.size), counts)
            layout[np.arange(order.size) - np.repeat(starts, counts), cols] = inverse.reshape(-1)[order]
            self._q_rows = QuestionRows(distinct, QuantizedRows.of(distinct), owners, layout)
        return self._q_rows

    def question_groups(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(question order by owning fact, owning facts, start of each fact's run in that order): the best
        question score per fact is then one `np.maximum.reduceat`, not the slow unbuffered `maximum.at`."""
        if self._q_groups is None:
            order = np.argsort(self.q_owner, kind="stable")
            owners_sorted = self.q_owner[order]
            starts = np.flatnonzero(np.r_[True, owners_sorted[1:] != owners_sorted[:-1]]) if order.size else \
                np.zeros(0, np.int64)
            self._q_groups = (order, owners_sorted[starts], starts)
        return self._q_groups

    def user_mask(self, user_id: str) -> np.ndarray:
        """Facts of `user_id` as a boolean mask (an index per user, not a loop per request)."""
        m = self._user_masks.get(user_id)
        if m is None:
            if not self._user_masks:  # first request: index every user at once
                by_user: dict[Any, list[int]] = {}
                for i, f in enumerate(self.facts):
                    by_user.setdefault(f.metadata.get("user_id"), []).append(i)
                for uid, pos in by_user.items():
                    mask = np.zeros(len(self.facts), dtype=bool)
                    mask[pos] = True
                    self._user_masks[uid] = mask
            m = self._user_masks.get(user_id)
            if m is None:
                m = np.zeros(len(self.facts), dtype=bool)
        return m

    def tie_rank(self) -> np.ndarray:
        """Each fact's position in (content, user, id) order: equal scores are ranked by this, so the same data
        gives the same ranking whatever order concurrent ingests committed it in."""
        if self._tie_rank is None:
            facts = list(self.facts)
            order = np.asarray(sorted(range(len(facts)), key=lambda i: _tie_key(facts[i])), dtype=np.int64)
            rank = np.empty(len(self.facts), dtype=np.int64)
            rank[order] = np.arange(len(self.facts))
            self._tie_rank, self._tie_order = rank, order
        return self._tie_rank

    def token_counts(self) -> np.ndarray:
        """cl100k token count of each fact's content (stored at ingest; counted here for older rows)."""
        if self._token_counts is None:
            from services.common.tokens import count_tokens

            self._token_counts = np.asarray([f.n_tokens if f.n_tokens >= 0 else count_tokens(f.content)
                                             for f in self.facts], dtype=np.int64)
        return self._token_counts

    def occurred_us(self) -> tuple[np.ndarray, np.ndarray]:
        """Each fact's occurred_at as exact microseconds since the epoch, and whether it has one (the temporal
        channel scores every fact with numpy: temporal.proximity_all)."""
        if self._occurred_us is None:
            has = np.fromiter((f.occurred_at is not None for f in self.facts), bool, len(self.facts))
            us = np.fromiter((micros(f.occurred_at) if f.occurred_at is not None else 0 for f in self.facts),
                             np.int64, len(self.facts))
            self._occurred_us = (us, has)
        return self._occurred_us

    def visible_mentions(self, now: float) -> tuple[np.ndarray, np.ndarray]:
        ok = self.m_visible <= now
        return self.m_fact[ok], self.m_ent[ok]

    def _growth(self) -> dict[str, GrowBuf]:
        """The growth buffers behind this snapshot's arrays (made on the first extension of a built snapshot)."""
        if self._grow is None:
            self._grow = {"emb": GrowBuf(self.emb), "doc_len": GrowBuf(self.doc_len), "q_emb": GrowBuf(self.q_emb),
                          "q_owner": GrowBuf(self.q_owner), "m_fact": GrowBuf(self.m_fact),
                          "m_ent": GrowBuf(self.m_ent), "m_visible": GrowBuf(self.m_visible)}
        return self._grow

    def extended(self, delta: IndexDelta, rev: int) -> TenantIndex:
        """A new snapshot = this one + a writer's own committed delta (no reload from SQLite). Readers holding
        this snapshot are unaffected: the successor shares this one's containers and adds past their ends
        (growth.py), so the cost is the delta's size, not the tenant's."""
        n0, e0 = len(self.facts), len(self.entities)
        new = dataclasses.replace(self, rev=rev, built_at=time.time(), _user_masks={}, _tie_rank=None, _tie_order=None,
                                  _token_counts=None, _q_groups=None, _shared=False,
                                  _occurred_us=None, _emb_codes=None, _q_rows=None,
                                  _avgdl=None, _grow=None, writer_aux=None)
        grow = dict(self._growth())
        fact_pos = PrefixMap.of(self.fact_pos, n0)
        updates = {fact_pos[fid]: fact for fid, fact in delta.fact_updates.items()}
        new.facts = CowList.of(self.facts).evolved(updates, delta.new_facts)
        n1 = len(new.facts)
        new.fact_pos = fact_pos.evolved(((f.id, n0 + i) for i, f in enumerate(delta.new_facts)), n1)
        new.norm_pos = PrefixMap.of(self.norm_pos, n0).evolved(
            ((f.norm, n0 + i) for i, f in enumerate(delta.new_facts)), n1, first_wins=True)
        if delta.new_facts:
            grow["emb"] = grow["emb"].append(n0, delta.new_emb)
            add: dict[str, dict[int, int]] = {}
            for i, f in enumerate(delta.new_facts):
                for t in f.tokens:
                    d = add.setdefault(t, {})
                    d[n0 + i] = d.get(n0 + i, 0) + 1
            new.postings = Postings.of(self.postings, n0).evolved(add, n1)
            grow["doc_len"] = grow["doc_len"].append(n0, [float(len(f.tokens)) for f in delta.new_facts])
        if delta.new_questions:
            nq = int(self.q_owner.shape[0])
            new.q_text = CowList.of(self.q_text).evolved({}, [t for _, t in delta.new_questions])
            grow["q_owner"] = grow["q_owner"].append(nq, np.asarray([new.fact_pos[fid] for fid, _ in
                                                                     delta.new_questions], np.int64))
            grow["q_emb"] = grow["q_emb"].append(nq, delta.new_q_emb)
        if delta.new_entities or delta.entity_updates:
            by_key = PrefixMap.of(self.entity_by_key, e0)
            e_updates = {by_key[key]: e for key, e in delta.entity_updates.items() if key in by_key}
            # an update of an entity created in this delta (not in this snapshot) lands after its creation
            late = {key: e for key, e in delta.entity_updates.items() if key not in by_key}
            added = [late.get(e.key, e) for e in delta.new_entities]
            new.entities = CowList.of(self.entities).evolved(e_updates, added)
            e1 = len(new.entities)
            new.entity_by_key = by_key.evolved(((e.key, e0 + i) for i, e in enumerate(added)), e1)
            new.entity_by_id = PrefixMap.of(self.entity_by_id, e0).evolved(
                ((e.id, e0 + i) for i, e in enumerate(added)), e1)
        if delta.new_mentions:
            nm = int(self.m_fact.shape[0])
            grow["m_fact"] = grow["m_fact"].append(nm, np.asarray([new.fact_pos[f] for f, _, _ in delta.new_mentions],
                                                                  np.int64))
            grow["m_ent"] = grow["m_ent"].append(nm, np.asarray([new.entity_by_id[e] for _, e, _ in
                                                                delta.new_mentions], np.int64))
            grow["m_visible"] = grow["m_visible"].append(nm, np.asarray([v for _, _, v in delta.new_mentions],
                                                                        np.float64))
        for name, g in grow.items():
            if g is not self._grow[name] or g.n != getattr(self, name).shape[0]:
                setattr(new, name, g.view())
        new._grow = grow
        if self._emb_codes is not None:  # rows are only ever appended: code the new ones
            new._emb_codes = self._emb_codes.appended(new.emb)
        self._carry_lookups(new, updates, delta.new_facts)
        return new

    def _carry_lookups(self, new: TenantIndex, updates: dict[int, Fact], added: list[Fact]) -> None:
        """The successor's per-fact lookups from this snapshot's, where a search already built them (a stream of
        writes with no search builds none): O(tenant) numpy copies and O(delta · log tenant) key comparisons, not a
        Python pass and sort over every fact after each write of a mixed read/write load. An update only ever
        changes superseded_by, confidence and metadata (ingest.finish); one that moved a fact to another user
        leaves the lookups to be rebuilt on first use."""
        if any(self.facts[p].metadata.get("user_id") != f.metadata.get("user_id") for p, f in updates.items()):
            return
        n0, k = len(self.facts), len(added)
        if self._token_counts is not None:
            from services.common.tokens import count_tokens

            new._token_counts = np.concatenate([self._token_counts, np.asarray(
                [f.n_tokens if f.n_tokens >= 0 else count_tokens(f.content) for f in added], np.int64)])
        if self._occurred_us is not None:
            us, has = self._occurred_us
            new._occurred_us = (
                np.concatenate([us, np.asarray([micros(f.occurred_at) if f.occurred_at is not None else 0
                                                for f in added], np.int64)]),
                np.concatenate([has, np.asarray([f.occurred_at is not None for f in added], bool)]))
        if self._user_masks:
            masks = {uid: np.concatenate([m, np.zeros(k, bool)]) for uid, m in self._user_masks.items()}
            for i, f in enumerate(added):
                uid = f.metadata.get("user_id")
                if uid not in masks:
                    masks[uid] = np.zeros(n0 + k, bool)
                masks[uid][n0 + i] = True
            new._user_masks = masks
        if self._tie_rank is not None and self._tie_order is not None:
            old_facts, order = self.facts, self._tie_order
            keys = [_tie_key(f) for f in added]
            # before[j]: how many of this snapshot's facts sort before added fact j (keys are distinct: ids are)
            before = np.asarray([bisect.bisect_left(order, key, key=lambda pos: _tie_key(old_facts[pos]))
                                 for key in keys], np.int64)
            among = np.empty(k, np.int64)
            among[sorted(range(k), key=keys.__getitem__)] = np.arange(k)
            rank = np.empty(n0 + k, np.int64)
            # an old fact of rank r moves down by the added facts that sort before it (before[j] <= r)
            rank[:n0] = self._tie_rank + np.searchsorted(np.sort(before), self._tie_rank, side="right")
            rank[n0:] = before + among
            tie_order = np.empty(n0 + k, np.int64)
            tie_order[rank] = np.arange(n0 + k)
            new._tie_rank, new._tie_order = rank, tie_order


@dataclass
class IndexDelta:
    """What one ingest committed, so the writer can extend its snapshot instead of reloading the tenant."""

    new_facts: list[Fact] = field(default_factory=list)
    new_emb: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    fact_updates: dict[str, Fact] = field(default_factory=dict)
    new_questions: list[tuple[str, str]] = field(default_factory=list)
    new_q_emb: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    new_entities: list[EntityRow] = field(default_factory=list)
    entity_updates: dict[str, EntityRow] = field(default_factory=dict)
    new_mentions: list[tuple[str, str, float]] = field(default_factory=list)  # (fact id, entity id, visible_at)
