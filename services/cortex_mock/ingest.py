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
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from services.common.tokens import count_tokens
from services.cortex_mock.extract import ExtractedFact, is_negated
from services.cortex_mock.store import EntityRow, Fact, IndexDelta, TenantIndex, TenantStore
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
    t = term.split()
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


def apply_ingest(store: TenantStore, embedder, facts: list[ExtractedFact], ctx: IngestContext,
                 settle_delay_s: float = 0.0, now: float | None = None) -> dict[str, Any]:
    """Blocking: run in a thread. Returns the IngestResponse dict."""
    now = time.time() if now is None else now
    facts = sorted(facts, key=lambda f: f.occurred_at)  # stable: later statements supersede earlier ones
    cores = [f.core for f in facts]
    q_texts = [q for f in facts for q in f.questions]
    emb = embedder.encode(cores) if cores else np.zeros((0, embedder.dim), np.float32)
    q_emb = embedder.encode(q_texts) if q_texts else np.zeros((0, embedder.dim), np.float32)
    with store.lock:
        if ctx.job_id and (prior := store.applied_job(ctx.job_id)) is not None:
            return prior
        store.index(embedder)  # outside the write transaction when possible (re-embedding is slow)
        with store.write() as c:
            # Checked again under the write lock: two attempts of one job may race (a presumed-dead worker).
            if ctx.job_id and (prior := store.applied_job(ctx.job_id)) is not None:
                return prior
            idx = store.index(embedder)  # the snapshot at the locked rev (rebuilt if another process wrote)
            delta = IndexDelta()
            res = _apply_locked(store, c, idx, facts, emb, q_emb, ctx, settle_delay_s, now, embedder.name,
                                delta)
            if ctx.job_id:
                c.execute("INSERT OR REPLACE INTO applied_jobs(job_id, result, applied_at) VALUES (?,?,?)",
                          (ctx.job_id, json.dumps(res), now))
        store.install(idx, delta)
    return res


def _apply_locked(store: TenantStore, c, idx: TenantIndex, facts: list[ExtractedFact], emb: np.ndarray, q_emb: np.ndarray,
                  ctx: IngestContext, settle_delay_s: float, now: float, model: str,
                  delta: IndexDelta) -> dict[str, Any]:
    nodes_created = edges_created = merged = supersessions = contradictions = 0
    out_facts: list[dict] = []
    out_entities: dict[str, dict] = {}
    batch: list[_Cand] = []
    entity_ids: dict[str, str] = {e.key: e.id for e in idx.entities}
    entity_aliases: dict[str, list[str]] = {e.key: list(e.aliases) for e in idx.entities}
    entity_types: dict[str, str] = {e.key: e.etype for e in idx.entities}
    sims_all = idx.emb @ emb.T if idx.emb.shape[0] and emb.shape[0] else np.zeros((idx.emb.shape[0], len(facts)))
    by_head: dict[str, list[int]] = {}
    for pos, f in enumerate(idx.facts):
        if f.attr_key:
            by_head.setdefault(f.attr_key.split()[-1], []).append(pos)
    loaded: dict[int, _Cand] = {}
    static: dict[str, Fact] = {}  # new facts' fixed fields, for the index delta
    q_rows: list[np.ndarray] = []

    def stored(pos: int) -> _Cand:
        if pos not in loaded:
            loaded[pos] = _cand_from_index(store, idx, pos)
        return loaded[pos]

    def add_edge(src: str, dst: str, etype: str, visible_at: float) -> None:
        nonlocal edges_created
        c.execute("INSERT INTO edges(src, dst, type, weight, created_at, visible_at) VALUES (?,?,?,?,?,?)",
                  (src, dst, etype, 1.0, now, visible_at))
        edges_created += 1

    def supersede(old: _Cand, new_id: str) -> None:
        nonlocal supersessions
        if old.superseded_by:
            return
        old.superseded_by = new_id
        c.execute("UPDATE nodes SET superseded_by=? WHERE id=?", (new_id, old.id))
        add_edge(new_id, old.id, "SUPERSEDES", now)
        supersessions += 1

    q_off = 0
    for i, f in enumerate(facts):
        q_slice = q_emb[q_off:q_off + len(f.questions)]
        q_off += len(f.questions)
        occurred = iso(f.occurred_at)
        new = _Cand(id=str(uuid.uuid4()), tokens=frozenset(content_tokens(f.core)), nums=numbers(f.core),
                    neg=f.negated, emb=emb[i], attr_key=f.attr_key, attr_value=f.attr_value,
                    occurred_at=f.occurred_at, entity_keys=frozenset(e.key for e in f.entities),
                    superseded_by=None, metadata={}, confidence=BASE_CONFIDENCE.get(f.speaker, 0.75),
                    norm=normalise(f.core), user=ctx.provenance.get("user_id"))
        # 1. near-duplicates: stored facts first (oldest wins), then earlier facts of this batch
        dup: _Cand | None = None
        if new.norm in idx.norm_pos and stored(idx.norm_pos[new.norm]).user == new.user:
            dup = stored(idx.norm_pos[new.norm])
        else:
            sims = sims_all[:, i] if sims_all.shape[0] else np.zeros(0)
            for pos in np.flatnonzero(sims >= DUP_COSINE):
                cand = stored(int(pos))
                if cand.user == new.user and is_near_duplicate(cand, new, float(sims[pos])):
                    dup = cand
                    break
        if dup is None:
            for cand in batch:
                if is_near_duplicate(cand, new, float(cand.emb @ new.emb)):
                    dup = cand
                    break
        fact_out = {"core": f.core, "fact_type": f.fact_type, "occurred_at": occurred,
                    "entity_refs": f.entity_refs, "speaker": f.speaker}
        if dup is not None:
            merged += 1
            md = dup.metadata
            md["mention_count"] = int(md.get("mention_count", 1)) + 1
            for key, vals in (("session_ids", [ctx.session_id] if ctx.session_id else []),
                              ("message_ids", f.message_ids)):
                cur = list(md.get(key, []))
                cur += [v for v in vals if v not in cur]
                md[key] = cur
            dup.confidence = min(0.99, dup.confidence + 0.05)
            c.execute("UPDATE nodes SET confidence=?, metadata=? WHERE id=?",
                      (dup.confidence, json.dumps(md), dup.id))
            fact_out.update(node_id=dup.id, merged_into=dup.id)
            out_facts.append(fact_out)
            for e in f.entities:
                out_entities.setdefault(e.key, {"name": e.name, "type": e.type, "aliases": list(e.aliases)})
            continue
        # 2. the new FACT node
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
        static[new.id] = Fact(id=new.id, content=f.core, source=ctx.source, confidence=new.confidence,
                              session_id=ctx.session_id, speaker=f.speaker, fact_type=f.fact_type,
                              occurred_at=f.occurred_at, occurred_iso=occurred, attr_key=f.attr_key,
                              attr_value=f.attr_value, superseded_by=None, metadata={}, tokens=tokens,
                              norm=new.norm, created_at=now + i * 1e-6, n_tokens=count_tokens(f.core))
        delta.new_questions += [(new.id, q) for q in f.questions]
        q_rows.append(q_slice)
        c.execute(
            "INSERT INTO nodes(id, type, content, norm, tokens, source, confidence, session_id, speaker, fact_type,"
            " occurred_at, created_at, attr_key, attr_value, metadata, emb, emb_model, n_tokens)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (new.id, "FACT", f.core, new.norm, " ".join(tokens),
             ctx.source, new.confidence, ctx.session_id, f.speaker, f.fact_type, occurred, now + i * 1e-6,
             f.attr_key, f.attr_value, json.dumps(new.metadata), np.asarray(emb[i], np.float32).tobytes(),
             model, static[new.id].n_tokens))
        nodes_created += 1
        c.executemany("INSERT INTO questions(fact_id, text, emb, emb_model) VALUES (?,?,?,?)",
                      [(new.id, q, np.asarray(q_slice[j], np.float32).tobytes(), model)
                       for j, q in enumerate(f.questions)])
        fact_out["node_id"] = new.id
        out_facts.append(fact_out)
        # 3. entities + MENTIONS (visible after the settle delay, as on the real service)
        for e in f.entities:
            if e.key not in entity_ids:
                eid = str(uuid.uuid4())
                entity_ids[e.key], entity_aliases[e.key], entity_types[e.key] = eid, list(e.aliases), e.type
                delta.new_entities.append(EntityRow(eid, e.name, e.key, e.type, list(e.aliases)))
                c.execute("INSERT INTO nodes(id, type, content, norm, tokens, source, confidence, occurred_at,"
                          " created_at, metadata) VALUES (?,?,?,?,?,?,?,?,?,?)",
                          (eid, "ENTITY", e.name, e.key, " ".join(content_tokens(e.name)), "extraction", 0.9,
                           occurred, now, json.dumps({"entity_type": e.type, "aliases": e.aliases})))
                nodes_created += 1
            else:
                extra = [a for a in e.aliases if a not in entity_aliases[e.key]]
                if extra:
                    entity_aliases[e.key] += extra
                    pos = idx.entity_by_key.get(e.key)
                    if pos is not None:
                        delta.entity_updates[e.key] = dataclasses.replace(idx.entities[pos],
                                                                          aliases=list(entity_aliases[e.key]))
                    else:  # created earlier in this batch
                        for j, ne in enumerate(delta.new_entities):
                            if ne.key == e.key:
                                delta.new_entities[j] = dataclasses.replace(ne, aliases=list(entity_aliases[e.key]))
                    c.execute("UPDATE nodes SET metadata=? WHERE id=?", (json.dumps(
                        {"entity_type": entity_types[e.key], "aliases": entity_aliases[e.key]}), entity_ids[e.key]))
            out_entities.setdefault(e.key, {"name": e.name, "type": entity_types[e.key],
                                            "aliases": entity_aliases[e.key]})
            add_edge(new.id, entity_ids[e.key], "MENTIONS", now + settle_delay_s)
            delta.new_mentions.append((new.id, entity_ids[e.key], now + settle_delay_s))
        # 4. supersession and contradiction against older stored and batch facts
        olders: list[_Cand] = []
        if f.attr_key:
            olders += [stored(p) for p in by_head.get(f.attr_key.split()[-1], [])
                       if idx.facts[p].superseded_by is None and idx.facts[p].attr_value != f.attr_value
                       and attributes_match(idx.facts[p].attr_key, f.attr_key)]
            olders += [b for b in batch if b.attr_key]
            for old in olders:
                if old.user == new.user and (attributes_match(old.attr_key, f.attr_key) and old.attr_value != f.attr_value
                        and _older_or_same(old.occurred_at, f.occurred_at)):
                    if antonym_values(old.attr_value, f.attr_value):
                        add_edge(new.id, old.id, "CONTRADICTS", now)
                        contradictions += 1
                    supersede(old, new.id)
        if f.switch_from:
            term_tokens = f.switch_from.split()
            first = term_tokens[0] if term_tokens else ""
            pool = [stored(int(p)) for p in idx.postings.get(first, (np.zeros(0, np.int64), None))[0]]
            pool += [b for b in batch if first in b.tokens or f.switch_from in b.entity_keys]
            for old in pool:
                if old.user == new.user and (mentions_term(old, f.switch_from) and not (f.switch_to and mentions_term(old, f.switch_to))
                        and _older_or_same(old.occurred_at, f.occurred_at)):
                    supersede(old, new.id)
        sims = sims_all[:, i] if sims_all.shape[0] else np.zeros(0)
        neg_pool = [stored(int(p)) for p in np.flatnonzero(sims >= NEG_COSINE)
                    if _features(store, idx.facts[int(p)])[2] != new.neg] + batch
        for old in neg_pool:
            if old.user == new.user and negation_conflict(old.tokens, old.neg, new.tokens, new.neg) and _older_or_same(
                    old.occurred_at, f.occurred_at):
                add_edge(new.id, old.id, "CONTRADICTS", now)
                contradictions += 1
                supersede(old, new.id)
        batch.append(new)
    # The index delta: final state of this batch's facts and of every stored fact the rules touched.
    for cand in batch:
        delta.new_facts.append(dataclasses.replace(static[cand.id], superseded_by=cand.superseded_by,
                                                   metadata=cand.metadata, confidence=cand.confidence))
    if batch:
        delta.new_emb = np.stack([cand.emb for cand in batch]).astype(np.float32)
    if q_rows:
        delta.new_q_emb = np.concatenate(q_rows).astype(np.float32)
    for pos, cand in loaded.items():
        old = idx.facts[pos]
        if (cand.superseded_by, cand.confidence, cand.metadata) != (old.superseded_by, old.confidence, old.metadata):
            delta.fact_updates[cand.id] = dataclasses.replace(old, superseded_by=cand.superseded_by,
                                                              metadata=cand.metadata, confidence=cand.confidence)
    return {
        "nodes_created": nodes_created, "edges_created": edges_created, "duplicates_merged": merged,
        "facts": out_facts, "entities": list(out_entities.values()),
        "supersessions": supersessions, "contradictions": contradictions,
        "emotions": [], "values": [], "beliefs": [], "insights": [],
    }
