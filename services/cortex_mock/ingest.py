"""Writing extracted facts into a tenant: near-duplicate merging, entity resolution, MENTIONS edges (visible
after the settle delay), and SUPERSEDES / CONTRADICTS edges.

Rules (each a small function below):
- duplicate: same normalised text, or cosine >= 0.90 with token Jaccard >= 0.8, equal numbers, equal negation
  and equal attribute value -> merged into the older fact (mention_count, session_ids, message_ids grow).
- supersession: a newer fact with the same attribute (subject keys share the head word and one's words contain
  the other's) and a different value supersedes the older one ("TTL is 300s" -> "TTL is 600s");
  "switched/migrated from X to Y" supersedes older facts that mention X but not Y.
- contradiction: the same statement with opposite negation, or antonym values (enabled/disabled); the newer
  fact also supersedes the older.
The whole write is one IMMEDIATE transaction: a crash leaves nothing half-applied, and a retried job whose
first attempt committed returns the recorded result instead of ingesting twice.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from services.common.tokens import count_tokens
from services.cortex_mock.extract import Entity, ExtractedFact, is_negated
from services.cortex_mock.snapshot import EntityRow, Fact, IndexDelta, TenantIndex
from services.cortex_mock.store import TenantStore
from services.cortex_mock.temporal import iso
from services.cortex_mock.text import content_tokens, jaccard, normalise, numbers

DUP_COSINE = 0.90
DUP_JACCARD = 0.8
NEG_COSINE = 0.6
ANTONYMS = {frozenset(p) for p in [("enabled", "disabled"), ("on", "off"), ("true", "false"), ("yes", "no"),
                                   ("allowed", "forbidden"), ("public", "private"), ("required", "optional"),
                                   ("sync", "async"), ("up", "down")]}
# Negators as the tokenizer leaves them ("don't" -> "don", "t").
_NEG_WORDS = frozenset({"not", "no", "never", "don", "dont", "doesn", "doesnt", "isn", "isnt", "won", "wont",
                        "aren", "arent", "didn", "didnt", "t", "n"})
BASE_CONFIDENCE = {"user": 0.85, "assistant": 0.75}


@dataclass
class IngestContext:
    session_id: str | None = None
    source: str = "conversation"  # conversation | text
    provenance: dict[str, Any] = field(default_factory=dict)  # user_id, source_origin, derivation_mode, ...
    job_id: str | None = None


@dataclass
class _Cand:
    """A fact as the rules compare it (either already stored or created earlier in this batch)."""

    id: str
    tokens: frozenset[str]
    nums: frozenset[str]
    neg: bool
    emb: np.ndarray
    attr_key: str
    attr_value: str
    occurred_at: datetime | None
    entity_keys: frozenset[str]
    superseded_by: str | None
    metadata: dict[str, Any]
    confidence: float
    norm: str
    user: str | None = None  # user_id scopes dedup/supersession: one user's facts never touch another's


def attributes_match(a: str, b: str) -> bool:
    """Same attribute: the subject keys share the head (last) word and one key's words contain the other's."""
    if not a or not b:
        return False
    ta, tb = a.split(), b.split()
    if ta[-1] != tb[-1]:
        return False
    return set(ta) <= set(tb) or set(tb) <= set(ta)


def is_near_duplicate(a: _Cand, b: _Cand, cosine: float) -> bool:
    if a.norm == b.norm:
        return True
    return (cosine >= DUP_COSINE and jaccard(a.tokens, b.tokens) >= DUP_JACCARD and a.nums == b.nums
            and a.neg == b.neg and a.attr_value == b.attr_value)


def negation_conflict(a_tokens: frozenset[str], a_neg: bool, b_tokens: frozenset[str], b_neg: bool) -> bool:
    """The same statement with opposite polarity ("we use Redis" vs "we don't use Redis")."""
    if a_neg == b_neg:
        return False
    ca, cb = a_tokens - _NEG_WORDS, b_tokens - _NEG_WORDS
    return len(ca) >= 2 and ca == cb


def antonym_values(a: str, b: str) -> bool:
    return frozenset((a, b)) in ANTONYMS


def mentions_term(c: _Cand, term: str) -> bool:
    """The term is one of the fact's entities, or all its content tokens are among the fact's (both stemmed alike:
    "Redis" is the token "redi" in a fact, so the term's words go through the same tokenizer)."""
    t = content_tokens(term)
    return term in c.entity_keys or (bool(t) and set(t) <= c.tokens)


def _older_or_same(a: datetime | None, b: datetime | None) -> bool:
    return a is None or b is None or a <= b


def _features(store: TenantStore, f: Fact) -> tuple[frozenset[str], frozenset[str], bool, frozenset[str]]:
    """Content-derived rule features of a stored fact (tokens, numbers, negation, entity keys), cached per
    store: they never change for a fact id."""
    feat = store.features.get(f.id)
    if feat is None:
        feat = (frozenset(content_tokens(f.content)), numbers(f.content), is_negated(f.content),
                frozenset(r.lower() for r in f.entity_refs))
        store.features[f.id] = feat
    return feat


def _cand_from_index(store: TenantStore, idx: TenantIndex, pos: int) -> _Cand:
    f = idx.facts[pos]
    tokens, nums, neg, ents = _features(store, f)
    return _Cand(id=f.id, tokens=tokens, nums=nums, neg=neg, emb=idx.emb[pos], attr_key=f.attr_key,
                 attr_value=f.attr_value, occurred_at=f.occurred_at, entity_keys=ents,
                 superseded_by=f.superseded_by, metadata=dict(f.metadata), confidence=f.confidence, norm=f.norm,
                 user=f.metadata.get("user_id"))


def _put(d: dict, key: Any, pos: int) -> None:
    """d[key]: one position (an int) or several (a list, ascending)."""
    v = d.get(key)
    if v is None:
        d[key] = pos
    elif isinstance(v, int):
        d[key] = [v, pos]
    else:
        v.append(pos)


def _positions(d: dict, key: Any) -> list[int]:
    v = d.get(key)
    return [] if v is None else [v] if isinstance(v, int) else v


def _negation_key(tokens: frozenset[str]) -> int | None:
    """What `negation_conflict` compares (the tokens without negators), hashed; None when it needs no lookup
    (fewer than 2 such tokens never conflict). Equal hashes are candidates only: the rule compares the sets."""
    core = tokens - _NEG_WORDS
    return hash(core) if len(core) >= 2 else None


class RuleIndex:
    """What the rules look stored facts up by, for the facts of one snapshot (`n` of them), so that a new fact
    reaches its candidates without a pass over every stored fact:
    - norms: normalised text -> positions (a stored fact with the same text is a duplicate candidate whatever
      its embedding);
    - neg_keys: hash of the content tokens without negators -> positions (`negation_conflict` needs them equal);
    - heads: head word of the attribute -> positions of the facts that have one (`attributes_match`);
    - no_tokens: positions of facts without a content token (Jaccard 1.0 only with each other).
    Near duplicates by Jaccard come from the snapshot's BM25 postings (`dup_candidates`). Built once per
    snapshot chain (a pass over the facts), then grown by the writer with each batch it installs (`absorb`)."""

    def __init__(self) -> None:
        self.n = 0
        self.norms: dict[str, int | list[int]] = {}
        self.neg_keys: dict[int, int | list[int]] = {}
        self.heads: dict[str, int | list[int]] = {}
        self.no_tokens: list[int] = []

    @classmethod
    def of(cls, idx: TenantIndex) -> RuleIndex:
        """The snapshot's own (attached by the writer that installed it), or one built from its facts."""
        r = idx.writer_aux
        if isinstance(r, RuleIndex) and r.n == len(idx.facts):
            return r
        r = cls()
        for pos, f in enumerate(idx.facts):
            r.add(pos, f.norm, frozenset(content_tokens(f.content)), f.attr_key)
        r.n = len(idx.facts)
        idx.writer_aux = r
        return r

    def add(self, pos: int, norm: str, tokens: frozenset[str], attr_key: str) -> None:
        _put(self.norms, norm, pos)
        key = _negation_key(tokens)
        if key is not None:
            _put(self.neg_keys, key, pos)
        if attr_key:
            _put(self.heads, attr_key.split()[-1], pos)
        if not tokens:
            self.no_tokens.append(pos)

    def absorb(self, batch: list[_Cand]) -> None:
        """The facts a batch appended to the snapshot, in order (positions n, n + 1, ...)."""
        for c in batch:
            self.add(self.n, c.norm, c.tokens, c.attr_key)
            self.n += 1

    def dup_candidates(self, idx: TenantIndex, new: _Cand) -> np.ndarray:
        """Positions (ascending) holding every stored fact `is_near_duplicate` can accept for `new`: the same
        normalised text, or token Jaccard >= DUP_JACCARD. The latter shares at least `need` = ceil(0.8 |A|) of the
        new fact's tokens A (|A & B| >= 0.8 |A | B| >= 0.8 |A|), so it holds at least one of any |A| - need + 1
        of them: the rarest, looked up in the BM25 postings (each fact's content tokens are among its indexed
        tokens, so the postings are a superset)."""
        parts = [np.asarray(_positions(self.norms, new.norm), np.int64)]
        toks = new.tokens
        if not toks:
            parts.append(np.asarray(self.no_tokens, np.int64))
        else:
            # the 1e-9 keeps the bound safe against the rounding of the quotient jaccard() computes
            need = max(1, math.ceil(DUP_JACCARD * len(toks) - 1e-9))
            lists = []
            for t in toks:
                p = idx.postings.get(t)
                lists.append(p[0] if p is not None else np.zeros(0, np.int64))
            lists.sort(key=len)
            parts += lists[:len(toks) - need + 1]
        cand = np.unique(np.concatenate(parts))
        return cand[cand < len(idx.facts)]


def apply_ingest(store: TenantStore, embedder, facts: list[ExtractedFact], ctx: IngestContext,
                 settle_delay_s: float = 0.0, now: float | None = None,
                 timings: dict[str, float] | None = None) -> dict[str, Any]:
    """Blocking: run in a thread. Returns the IngestResponse dict. `timings`, when given, gets the seconds of each
    phase added to it: embed (the facts' and their questions' vectors), lock (waiting for the tenant's other
    writer), snapshot (the tenant's index brought up to date before the write), write (the rules and the SQLite
    transaction up to its commit), install (the snapshot extended by the batch)."""
    now = time.time() if now is None else now
    spans = timings if timings is not None else {}
    t = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal t
        t1 = time.perf_counter()
        spans[name] = spans.get(name, 0.0) + t1 - t
        t = t1

    facts = sorted(facts, key=lambda f: f.occurred_at)  # stable: later statements supersede earlier ones
    cores = [f.core for f in facts]
    q_texts = [q for f in facts for q in f.questions]
    emb = embedder.encode(cores) if cores else np.zeros((0, embedder.dim), np.float32)
    q_emb = embedder.encode(q_texts) if q_texts else np.zeros((0, embedder.dim), np.float32)
    lap("embed")
    with store.lock:
        lap("lock")
        if ctx.job_id and (prior := store.applied_job(ctx.job_id)) is not None:
            return prior
        store.index(embedder)  # outside the write transaction when possible (re-embedding is slow)
        lap("snapshot")
        with store.write() as c:
            # Checked again under the write lock: two attempts of one job may race (a presumed-dead worker).
            if ctx.job_id and (prior := store.applied_job(ctx.job_id)) is not None:
                return prior
            idx = store.index(embedder)  # the snapshot at the locked rev (rebuilt if another process wrote)
            delta = IndexDelta()
            w = _BatchWriter(store, c, idx, emb, ctx, settle_delay_s, now, embedder.name, delta)
            res = w.run(facts, q_emb)
            if ctx.job_id:
                c.execute("INSERT OR REPLACE INTO applied_jobs(job_id, result, applied_at) VALUES (?,?,?)",
                          (ctx.job_id, json.dumps(res), now))
        lap("write")
        grown = store.install(idx, delta)
        if grown is not None:  # the rules' lookups follow the snapshot: this batch's facts are its last ones
            w.rules.absorb(w.batch)
            grown.writer_aux = w.rules
        lap("install")
    return res


class _BatchWriter:
    """One batch of extracted facts written under the tenant's write transaction `c`: each fact is merged into a
    near-duplicate or inserted with its entities, then the supersession and contradiction rules run against the
    stored facts (`idx`, loaded lazily as `_Cand`s) and the batch's earlier facts. `finish` fills the index delta and
    returns the IngestResponse dict."""

    def __init__(self, store: TenantStore, c, idx: TenantIndex, emb: np.ndarray, ctx: IngestContext,
                 settle_delay_s: float, now: float, model: str, delta: IndexDelta):
        self.store, self.c, self.idx, self.emb, self.ctx = store, c, idx, emb, ctx
        self.settle_delay_s, self.now, self.model, self.delta = settle_delay_s, now, model, delta
        self.nodes_created = self.edges_created = self.merged = self.supersessions = self.contradictions = 0
        self.out_facts: list[dict] = []
        self.out_entities: dict[str, dict] = {}
        self.batch: list[_Cand] = []
        # entities this batch created or touched, by key (the stored ones are read on first use: `_known_entity`)
        self.entity_ids: dict[str, str] = {}
        self.entity_aliases: dict[str, list[str]] = {}
        self.entity_types: dict[str, str] = {}
        self.rules = RuleIndex.of(idx)
        # The batch's own facts by what the rules compare (`_remember`): before these, each new fact was compared
        # with every earlier fact of its batch by three rules; a BEAM capture window holds a few hundred facts, and
        # the write of beam-100K-15's 4,071 took 7.3 s with the scans, 4.6 s with these (docs/results/beam.md).
        # Values are ascending positions in `self.batch`, so a rule meets its candidates in batch order.
        self.batch_norms: dict[str, list[int]] = {}
        self.batch_postings: dict[str, list[int]] = {}
        self.batch_no_tokens: list[int] = []
        self.batch_neg_keys: dict[int, list[int]] = {}
        self.batch_heads: dict[str, list[int]] = {}
        self.loaded: dict[int, _Cand] = {}
        self.static: dict[str, Fact] = {}  # new facts' fixed fields, for the index delta
        self.q_rows: list[np.ndarray] = []

    def run(self, facts: list[ExtractedFact], q_emb: np.ndarray) -> dict[str, Any]:
        q_off = 0
        for i, f in enumerate(facts):
            self.add(i, f, q_emb[q_off:q_off + len(f.questions)])
            q_off += len(f.questions)
        return self.finish()

    # ------------------------------------------------------------------ helpers
    def stored(self, pos: int) -> _Cand:
        if pos not in self.loaded:
            self.loaded[pos] = _cand_from_index(self.store, self.idx, pos)
        return self.loaded[pos]

    def add_edge(self, src: str, dst: str, etype: str, visible_at: float) -> None:
        self.c.execute("INSERT INTO edges(src, dst, type, weight, created_at, visible_at) VALUES (?,?,?,?,?,?)",
                       (src, dst, etype, 1.0, self.now, visible_at))
        self.edges_created += 1

    def supersede(self, old: _Cand, new_id: str) -> None:
        if old.superseded_by:
            return
        old.superseded_by = new_id
        self.c.execute("UPDATE nodes SET superseded_by=? WHERE id=?", (new_id, old.id))
        self.add_edge(new_id, old.id, "SUPERSEDES", self.now)
        self.supersessions += 1

    def _sims(self, i: int, pos: np.ndarray) -> np.ndarray:
        """Cosine of the batch's fact i with the stored facts at `pos` (unit vectors: dot products)."""
        if pos.size == 0:
            return np.zeros(0, np.float32)
        return self.idx.emb[pos] @ self.emb[i]

    def _known_entity(self, key: str) -> bool:
        """Whether the entity exists (stored, or created by this batch); a stored one is read into the batch's
        maps on first use."""
        if key in self.entity_ids:
            return True
        pos = self.idx.entity_by_key.get(key)
        if pos is None:
            return False
        e = self.idx.entities[pos]
        self.entity_ids[key], self.entity_aliases[key], self.entity_types[key] = e.id, list(e.aliases), e.etype
        return True

    # ------------------------------------------------------------------ one fact
    def add(self, i: int, f: ExtractedFact, q_slice: np.ndarray) -> None:
        occurred = iso(f.occurred_at)
        new = _Cand(id=str(uuid.uuid4()), tokens=frozenset(content_tokens(f.core)), nums=numbers(f.core),
                    neg=f.negated, emb=self.emb[i], attr_key=f.attr_key, attr_value=f.attr_value,
                    occurred_at=f.occurred_at, entity_keys=frozenset(e.key for e in f.entities),
                    superseded_by=None, metadata={}, confidence=BASE_CONFIDENCE.get(f.speaker, 0.75),
                    norm=normalise(f.core), user=self.ctx.provenance.get("user_id"))
        fact_out = {"core": f.core, "fact_type": f.fact_type, "occurred_at": occurred,
                    "entity_refs": f.entity_refs, "speaker": f.speaker}
        # 1. near-duplicates: stored facts first (oldest wins), then earlier facts of this batch
        dup = self._duplicate_of(i, new)
        if dup is not None:
            self._merge(dup, f, fact_out)
            return
        # 2. the new FACT node
        self._insert_fact(i, f, new, occurred, q_slice)
        fact_out["node_id"] = new.id
        self.out_facts.append(fact_out)
        # 3. entities + MENTIONS (visible after the settle delay, as on the real service)
        for e in f.entities:
            self._link_entity(new.id, e, occurred)
        # 4. supersession and contradiction against older stored and batch facts
        if f.attr_key:
            self._attribute_rule(f, new)
        if f.switch_from:
            self._switch_rule(f, new)
        self._negation_rule(i, f, new)
        self._remember(new)

    def _duplicate_of(self, i: int, new: _Cand) -> _Cand | None:
        idx = self.idx
        if new.norm in idx.norm_pos and self.stored(idx.norm_pos[new.norm]).user == new.user:
            return self.stored(idx.norm_pos[new.norm])
        pos = self.rules.dup_candidates(idx, new)
        sims = self._sims(i, pos)
        for p, sim in zip(pos[sims >= DUP_COSINE].tolist(), sims[sims >= DUP_COSINE].tolist(), strict=True):
            cand = self.stored(p)
            if cand.user == new.user and is_near_duplicate(cand, new, sim):
                return cand
        for j in self._batch_dup_candidates(new):
            cand = self.batch[j]
            if is_near_duplicate(cand, new, float(cand.emb @ new.emb)):
                return cand
        return None

    def _batch_dup_candidates(self, new: _Cand) -> list[int]:
        """Positions in the batch (ascending) of every earlier batch fact `is_near_duplicate` can accept for `new`:
        the same normalised text, or token Jaccard >= DUP_JACCARD (for a fact with tokens A: one holding at least
        one of any |A| - ceil(0.8 |A|) + 1 of them, the argument of RuleIndex.dup_candidates; without tokens: the
        batch facts without tokens, the only ones at Jaccard 1.0 with it)."""
        found = set(self.batch_norms.get(new.norm, ()))
        toks = new.tokens
        if not toks:
            found.update(self.batch_no_tokens)
        else:
            need = max(1, math.ceil(DUP_JACCARD * len(toks) - 1e-9))
            lists = sorted((self.batch_postings.get(t, ()) for t in toks), key=len)
            for lst in lists[:len(toks) - need + 1]:
                found.update(lst)
        return sorted(found)

    def _batch_attr_candidates(self, attr_key: str) -> list[int]:
        """Positions in the batch (ascending) of its facts with an attribute of the same head word as `attr_key`:
        `attributes_match` is false for any other."""
        return self.batch_heads.get(attr_key.split()[-1], [])

    def _batch_neg_candidates(self, key: int | None) -> list[int]:
        """Positions in the batch (ascending) of its facts whose tokens without negators hash to `key`
        (`_negation_key` of the new fact): `negation_conflict` needs those token sets equal."""
        return [] if key is None else self.batch_neg_keys.get(key, [])

    def _remember(self, new: _Cand) -> None:
        """Append a new fact to the batch and to the batch's lookups."""
        j = len(self.batch)
        self.batch.append(new)
        self.batch_norms.setdefault(new.norm, []).append(j)
        for t in new.tokens:
            self.batch_postings.setdefault(t, []).append(j)
        if not new.tokens:
            self.batch_no_tokens.append(j)
        key = _negation_key(new.tokens)
        if key is not None:
            self.batch_neg_keys.setdefault(key, []).append(j)
        if new.attr_key and (words := new.attr_key.split()):
            self.batch_heads.setdefault(words[-1], []).append(j)

    def _merge(self, dup: _Cand, f: ExtractedFact, fact_out: dict) -> None:
        self.merged += 1
        md = dup.metadata
        md["mention_count"] = int(md.get("mention_count", 1)) + 1
        for key, vals in (("session_ids", [self.ctx.session_id] if self.ctx.session_id else []),
                          ("message_ids", f.message_ids)):
            cur = list(md.get(key, []))
            cur += [v for v in vals if v not in cur]
            md[key] = cur
        dup.confidence = min(0.99, dup.confidence + 0.05)
        self.c.execute("UPDATE nodes SET confidence=?, metadata=? WHERE id=?",
                       (dup.confidence, json.dumps(md), dup.id))
        fact_out.update(node_id=dup.id, merged_into=dup.id)
        self.out_facts.append(fact_out)
        for e in f.entities:
            self.out_entities.setdefault(e.key, {"name": e.name, "type": e.type, "aliases": list(e.aliases)})

    def _insert_fact(self, i: int, f: ExtractedFact, new: _Cand, occurred: str, q_slice: np.ndarray) -> None:
        ctx, now = self.ctx, self.now
        new.metadata = {
            "speaker": f.speaker, "fact_type": f.fact_type, "entity_refs": f.entity_refs, "occurred_at": occurred,
            "session_id": ctx.session_id, "session_ids": [ctx.session_id] if ctx.session_id else [],
            "message_ids": list(f.message_ids), "mention_count": 1, "questions": list(f.questions),
            **{k: v for k, v in ctx.provenance.items() if v is not None},
        }
        if f.switch_from:
            new.metadata.update(switch_from=f.switch_from, switch_to=f.switch_to)
        if f.attr_key:
            new.metadata.update(attribute=f.attr_key, value=f.attr_value)
        if ctx.job_id:
            new.metadata["job_id"] = ctx.job_id
        tokens = content_tokens(f.core + " " + " ".join(f.entity_refs))
        self.static[new.id] = Fact(id=new.id, content=f.core, source=ctx.source, confidence=new.confidence,
                                   session_id=ctx.session_id, speaker=f.speaker, fact_type=f.fact_type,
                                   occurred_at=f.occurred_at, occurred_iso=occurred, attr_key=f.attr_key,
                                   attr_value=f.attr_value, superseded_by=None, metadata={}, tokens=tokens,
                                   norm=new.norm, created_at=now + i * 1e-6, n_tokens=count_tokens(f.core))
        self.delta.new_questions += [(new.id, q) for q in f.questions]
        self.q_rows.append(q_slice)
        self.c.execute(
            "INSERT INTO nodes(id, type, content, norm, tokens, source, confidence, session_id, speaker, fact_type,"
            " occurred_at, created_at, attr_key, attr_value, metadata, emb, emb_model, n_tokens)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (new.id, "FACT", f.core, new.norm, " ".join(tokens),
             ctx.source, new.confidence, ctx.session_id, f.speaker, f.fact_type, occurred, now + i * 1e-6,
             f.attr_key, f.attr_value, json.dumps(new.metadata), np.asarray(self.emb[i], np.float32).tobytes(),
             self.model, self.static[new.id].n_tokens))
        self.nodes_created += 1
        self.c.executemany("INSERT INTO questions(fact_id, text, emb, emb_model) VALUES (?,?,?,?)",
                           [(new.id, q, np.asarray(q_slice[j], np.float32).tobytes(), self.model)
                            for j, q in enumerate(f.questions)])

    def _link_entity(self, fact_id: str, e: Entity, occurred: str) -> None:
        if not self._known_entity(e.key):
            self._new_entity(e, occurred)
        else:
            self._extend_aliases(e)
        self.out_entities.setdefault(e.key, {"name": e.name, "type": self.entity_types[e.key],
                                             "aliases": self.entity_aliases[e.key]})
        visible_at = self.now + self.settle_delay_s
        self.add_edge(fact_id, self.entity_ids[e.key], "MENTIONS", visible_at)
        self.delta.new_mentions.append((fact_id, self.entity_ids[e.key], visible_at))

    def _new_entity(self, e: Entity, occurred: str) -> None:
        eid = str(uuid.uuid4())
        self.entity_ids[e.key], self.entity_aliases[e.key], self.entity_types[e.key] = eid, list(e.aliases), e.type
        self.delta.new_entities.append(EntityRow(eid, e.name, e.key, e.type, list(e.aliases)))
        self.c.execute("INSERT INTO nodes(id, type, content, norm, tokens, source, confidence, occurred_at,"
                       " created_at, metadata) VALUES (?,?,?,?,?,?,?,?,?,?)",
                       (eid, "ENTITY", e.name, e.key, " ".join(content_tokens(e.name)), "extraction", 0.9,
                        occurred, self.now, json.dumps({"entity_type": e.type, "aliases": e.aliases})))
        self.nodes_created += 1

    def _extend_aliases(self, e: Entity) -> None:
        aliases = self.entity_aliases[e.key]
        extra = [a for a in e.aliases if a not in aliases]
        if not extra:
            return
        aliases += extra
        pos = self.idx.entity_by_key.get(e.key)
        if pos is not None:
            self.delta.entity_updates[e.key] = dataclasses.replace(self.idx.entities[pos], aliases=list(aliases))
        else:  # created earlier in this batch
            for j, ne in enumerate(self.delta.new_entities):
                if ne.key == e.key:
                    self.delta.new_entities[j] = dataclasses.replace(ne, aliases=list(aliases))
        self.c.execute("UPDATE nodes SET metadata=? WHERE id=?", (json.dumps(
            {"entity_type": self.entity_types[e.key], "aliases": aliases}), self.entity_ids[e.key]))

    def _attribute_rule(self, f: ExtractedFact, new: _Cand) -> None:
        """A newer value of the same attribute supersedes the older (and contradicts it when the values are
        antonyms)."""
        idx = self.idx
        olders = [self.stored(p) for p in _positions(self.rules.heads, f.attr_key.split()[-1])
                  if idx.facts[p].superseded_by is None and idx.facts[p].attr_value != f.attr_value
                  and attributes_match(idx.facts[p].attr_key, f.attr_key)]
        olders += [self.batch[j] for j in self._batch_attr_candidates(f.attr_key)]
        for old in olders:
            if old.user == new.user and (attributes_match(old.attr_key, f.attr_key) and old.attr_value != f.attr_value
                    and _older_or_same(old.occurred_at, f.occurred_at)):
                if antonym_values(old.attr_value, f.attr_value):
                    self.add_edge(new.id, old.id, "CONTRADICTS", self.now)
                    self.contradictions += 1
                self.supersede(old, new.id)

    def _switch_rule(self, f: ExtractedFact, new: _Cand) -> None:
        """"switched from X to Y" supersedes older facts that mention X but not Y."""
        term_tokens = content_tokens(f.switch_from)  # stemmed like the index's postings and the facts' tokens
        first = term_tokens[0] if term_tokens else ""
        pool = [self.stored(int(p)) for p in self.idx.postings.get(first, (np.zeros(0, np.int64), None))[0]]
        pool += [b for b in self.batch if first in b.tokens or f.switch_from in b.entity_keys]
        for old in pool:
            if old.user == new.user and (mentions_term(old, f.switch_from) and not (f.switch_to and mentions_term(old, f.switch_to))
                    and _older_or_same(old.occurred_at, f.occurred_at)):
                self.supersede(old, new.id)

    def _negation_rule(self, i: int, f: ExtractedFact, new: _Cand) -> None:
        """The same statement with the opposite polarity contradicts and supersedes the older one."""
        key = _negation_key(new.tokens)
        pos = np.asarray(_positions(self.rules.neg_keys, key) if key is not None else [], np.int64)
        pos = pos[self._sims(i, pos) >= NEG_COSINE]
        neg_pool = [self.stored(p) for p in pos.tolist()
                    if _features(self.store, self.idx.facts[p])[2] != new.neg]
        neg_pool += [self.batch[j] for j in self._batch_neg_candidates(key)]
        for old in neg_pool:
            if old.user == new.user and negation_conflict(old.tokens, old.neg, new.tokens, new.neg) and _older_or_same(
                    old.occurred_at, f.occurred_at):
                self.add_edge(new.id, old.id, "CONTRADICTS", self.now)
                self.contradictions += 1
                self.supersede(old, new.id)

    # ------------------------------------------------------------------ the batch's result
    def finish(self) -> dict[str, Any]:
        """The index delta: final state of this batch's facts and of every stored fact the rules touched; and the
        IngestResponse dict."""
        delta = self.delta
        for cand in self.batch:
            delta.new_facts.append(dataclasses.replace(self.static[cand.id], superseded_by=cand.superseded_by,
                                                       metadata=cand.metadata, confidence=cand.confidence))
        if self.batch:
            delta.new_emb = np.stack([cand.emb for cand in self.batch]).astype(np.float32)
        if self.q_rows:
            delta.new_q_emb = np.concatenate(self.q_rows).astype(np.float32)
        for pos, cand in self.loaded.items():
            old = self.idx.facts[pos]
            if (cand.superseded_by, cand.confidence, cand.metadata) != (old.superseded_by, old.confidence, old.metadata):
                delta.fact_updates[cand.id] = dataclasses.replace(old, superseded_by=cand.superseded_by,
                                                                  metadata=cand.metadata, confidence=cand.confidence)
        return {
            "nodes_created": self.nodes_created, "edges_created": self.edges_created,
            "duplicates_merged": self.merged, "facts": self.out_facts, "entities": list(self.out_entities.values()),
            "supersessions": self.supersessions, "contradictions": self.contradictions,
            "emotions": [], "values": [], "beliefs": [], "insights": [],
        }
