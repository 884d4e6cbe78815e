"""Quaid's `recall()` as the rig reads it from the source (Quaid-Labs/quaid @ 9262e69,
`modules/quaid/datastore/memorydb/memory_graph.py`; `lib/tokens.py`), over the port's own node table. Every rule
below is a fact about that code, restated; `memrig fidelity quaid` holds this module to the real code.

Pipeline for `recall(query, limit)` (the parts that act without an LLM and without graph edges):
1. gateway metadata stripped (`] text` → `text` when ≥ 3 chars), no aliases (the rig stores none);
2. intent: the intent whose regex list has the most matches (first intent on ties; none → GENERAL) and its node
   type boosts; `prefer_fresh` when the query says latest/current/now/today/recently/as of;
3. hybrid search with limit×3: semantic = cosine KNN over limit×3×2×4 candidates, those ≥ 0.3 kept when at least
   max(5, k//4) pass (else the best max(5, k//4)), sorted, cut to limit×6; FTS = FTS5 `bm25(2.0, 1.0)` over
   (text, keywords), query = up to 8 key tokens (letters first, ≥ 3 chars, not stop words) quoted and OR-joined,
   1-based rank, cut to limit×6; weighted RRF `w/(60 + rank)` (weights by intent); quality = cosine, FTS-only
   `max(0.4, 0.7 − 0.02·rank)`; sorted by RRF (stable), cut to limit×6;
   nothing found → FTS alone with quality `max(0.5, 1 − 0.02·rank)`;
4. composite = .60·min(quality, 1) + .20·recency + .15·frequency + confidence·.05 + min(.05, .01·confirmations)
   + WHEN bonus .05 (a dated fact) + min(.03, .003·storage strength); recency = max(0, 1 − whole days since the
   last access / 90); frequency = min(1, log1p(n)/log1p(50)); prefer_fresh: weights .50/.35/.10; × the intent's
   type boost, capped at 1;
5. keep composite ≥ min_similarity (0.6), sort; multi-pass when the best is < 0.70 and fewer than `limit` remain:
   hybrid search (limit×2) for the capitalised words (> 2 chars) and for the first 5 key tokens, new nodes added
   when they pass; re-sort;
6. MMR (λ 0.7): the first kept, then argmax λ·score − 0.3·max cosine to those selected (strictly greater wins);
7. scores rounded to 3 places, sorted (stable), cut to `limit`;
8. access: accessed_at = now, access_count + 1, storage strength + 0.05·(1 + 3·difficulty), difficulty =
   0.4·(1 − score) + 0.3 for a multi-pass find;
9. nothing returned → one retry with the intent's expansion words appended; kept when it returns more.
Not run here (no data for them in the rig's write path; documented in README): co-session contiguity (Quaid reads
only `active`/`approved` nodes there; fresh facts are `pending`), graph traversal (no edges), aliases, HyDE and the
LLM reranker (LLM stages, off offline as in quaid-real), temporal validity penalties (facts carry no validity window).
"""

from __future__ import annotations

import math
import re
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

RRF_K = 60
MIN_SIMILARITY = 0.6  # Quaid's installer writes retrieval.minSimilarity 0.6
MULTI_PASS_GATE = 0.70
MMR_LAMBDA = 0.7
RECENCY_DAYS = 90
SEMANTIC_MIN_SIM = 0.3

# Intent regexes and node-type boosts (memory_graph._INTENT_PATTERNS), checked in this order.
INTENTS: tuple[tuple[str, tuple[str, ...], dict[str, float]], ...] = (
    ("WHO", (r"\bwho\b", r"\bwhose\b", r"\bwhom\b", r"person\b", r"people\b", r"family\b", r"friend\b"),
     {"Person": 1.3, "Fact": 1.0}),
    ("WHEN", (r"\bwhen\b", r"\bdate\b", r"\btime\b", r"\byear\b", r"\bmonth\b", r"\bday\b", r"\bschedule\b",
              r"\bbirthday\b", r"\banniversary\b"), {"Event": 1.3, "Fact": 1.0}),
    ("WHERE", (r"\bwhere\b", r"\blocation\b", r"\baddress\b", r"\blive[sd]?\b", r"\bcity\b", r"\bcountry\b"),
     {"Place": 1.3, "Fact": 1.0}),
    ("WHAT", (r"\bwhat\b", r"\bwhich\b", r"\btell me about\b", r"\bdescribe\b"), {}),
    ("PREFERENCE", (r"\blike[sd]?\b", r"\bprefer[s]?\b", r"\bfavorite\b", r"\bhate[sd]?\b", r"\bavoid\b",
                    r"\benjoy\b"), {"Preference": 1.3}),
    ("RELATION", (r"\brelated to\b", r"\bconnect", r"\brelationship\b", r"\bmarried\b", r"\bspouse\b", r"\bchild\b",
                  r"\bparent\b", r"\bsibling\b", r"\bpet\b"), {"Person": 1.2}),
    ("WHY", (r"\bwhy\b", r"\breason\b", r"\bcause[sd]?\b", r"\bbecause\b", r"\bled to\b", r"\bresult(?:ed)? in\b",
             r"\bdue to\b", r"\bhow come\b"), {"Event": 1.2, "Fact": 1.1}),
    ("PROJECT", tuple(r"\b" + w + r"\b" for w in (
        r"tech\s*stack", "database", "schema", "api", "endpoint", "middleware", "framework", "architecture",
        "deployment", "implementation", "code", "function", "file", "module", "package", "library")) + (r"\bdependenc",)
     + tuple(r"\b" + w + r"\b" for w in (
        "route", "server", "frontend", "backend", "testing", "test suite", "bug", "feature", "refactor", "commit",
        "branch", "project", "app", "recipe app", "portfolio")), {"Fact": 1.0, "Decision": 1.2}),
)
_INTENT_RES = tuple((n, tuple(re.compile(p, re.IGNORECASE) for p in ps), b) for n, ps, b in INTENTS)
FUSION = {"WHO": (0.5, 0.5), "WHERE": (0.5, 0.5), "RELATION": (0.5, 0.5), "WHEN": (0.4, 0.6),
          "PREFERENCE": (0.8, 0.2), "WHY": (0.8, 0.2), "PROJECT": (0.6, 0.4)}
FRESH_RE = re.compile(r"\b(latest|currently|current|now|today|most recent|recently|as of)\b", re.IGNORECASE)
EXPANSIONS = {"WHEN": "timeline latest current date before after changed",
              "PROJECT": "project implementation code schema api tests migration",
              "WHO": "who relationship said suggested source", "RELATION": "who relationship said suggested source"}
DEFAULT_EXPANSION = "key facts names dates details"
# lib/tokens.py STOPWORDS (as a set; order does not matter).
STOPWORDS = frozenset("""a about after again all also an and any are at be been before being between but by can could
did do does during each for from get going had has have he her his how i if in into is it its just know like likes
make many may me might more much must my need no not of often on or other our out over prefer preferred prefers
really said shall she should so some such take tell than that the their them these they think this those through
to too up us used uses using very want wanted wants was we were what when which who will with without would you
your""".split())
_KEY_TOKEN_RE = re.compile(r"\b[a-zA-Z][a-zA-Z0-9_-]*\b")


def classify_intent(query: str) -> tuple[str, dict[str, float]]:
    best, best_n, boosts = "GENERAL", 0, {}
    for name, pats, b in _INTENT_RES:
        n = sum(1 for p in pats if p.search(query))
        if n > best_n:
            best, best_n, boosts = name, n, b
    return best, boosts


def fusion_weights(intent: str) -> tuple[float, float]:
    return FUSION.get(intent, (0.7, 0.3))


def key_tokens(text: str, min_length: int = 3, max_tokens: int = 8) -> list[str]:
    out: list[str] = []
    for w in _KEY_TOKEN_RE.findall(text.lower()):
        if w not in STOPWORDS and len(w) >= min_length and w not in out:
            out.append(w)
            if len(out) >= max_tokens:
                break
    return out


@dataclass
class Node:
    id: str
    text: str
    vec: np.ndarray  # float32
    created_at: str | None
    accessed_at: datetime  # naive local time, as Quaid writes it
    session_id: str = ""
    evidence_ids: tuple[str, ...] = ()
    type: str = "Fact"
    status: str = "pending"
    confidence: float = 0.5
    access_count: int = 0
    confirmation_count: int = 0
    storage_strength: float = 0.0
    knowledge_type: str = "fact"
    keywords: str | None = None
    valid_from: str | None = None
    valid_until: str | None = None


@dataclass
class Found:
    node: Node
    score: float
    multi_pass: bool = False
    channel: dict[str, float] = field(default_factory=dict)


class NodeStore:
    """One namespace's nodes: a float32 matrix for KNN and an FTS5 table over (text, keywords)."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.by_id: dict[str, int] = {}
        self.mat = np.zeros((0, 0), np.float32)
        self._db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self._db.execute("CREATE VIRTUAL TABLE f USING fts5(name, keywords, tokenize='porter unicode61')")
        self._lock = threading.Lock()

    def add(self, nodes: Sequence[Node]) -> None:
        with self._lock:
            for n in nodes:
                self.by_id[n.id] = len(self.nodes)
                self.nodes.append(n)
                self._db.execute("INSERT INTO f(rowid, name, keywords) VALUES (?, ?, ?)",
                                 (len(self.nodes), n.text, n.keywords))
            self.mat = np.vstack([np.asarray(n.vec, np.float32) for n in self.nodes]) if self.nodes else self.mat

    def live(self, n: Node) -> bool:
        return n.status in ("approved", "pending", "active")

    def semantic(self, qvec: np.ndarray, limit: int) -> list[tuple[Node, float]]:
        if not self.nodes:
            return []
        k = limit * 4
        q = np.asarray(qvec, np.float32)
        sims = (self.mat @ q) / (np.linalg.norm(self.mat, axis=1) * np.linalg.norm(q) + 1e-30)
        order = np.argsort(-sims, kind="stable")[:k]
        min_results = max(5, k // 4)
        above = [int(i) for i in order if sims[i] >= SEMANTIC_MIN_SIM]
        pick = above if len(above) >= min_results else [int(i) for i in order[:max(min_results, len(above))]]
        out = [(self.nodes[i], float(sims[i])) for i in pick if self.live(self.nodes[i])]
        out.sort(key=lambda x: x[1], reverse=True)
        return out[:limit]

    def fts(self, query: str, limit: int) -> list[tuple[Node, float]]:
        toks = key_tokens(query)
        if not toks:
            return []
        q = " OR ".join(f'"{t}"' for t in toks)
        with self._lock:
            rows = self._db.execute("SELECT rowid FROM f WHERE f MATCH ? ORDER BY bm25(f, 2.0, 1.0) LIMIT ?",
                                    (q, limit * 3)).fetchall()
        out, seen = [], set()
        rank = 0
        for (rowid,) in rows:
            n = self.nodes[rowid - 1]
            if not self.live(n):
                continue
            rank += 1
            if n.id not in seen:
                seen.add(n.id)
                out.append((n, float(rank)))
        return out[:limit]


def hybrid(store: NodeStore, query: str, qvec: np.ndarray, limit: int, intent: str) -> list[tuple[Node, float]]:
    wv, wf = fusion_weights(intent)
    sem = store.semantic(qvec, limit * 2)
    fts = store.fts(query, limit * 2)
    rrf: dict[str, float] = {}
    quality: dict[str, float] = {}
    nodes: dict[str, Node] = {}
    for rank, (n, sim) in enumerate(sem, 1):
        nodes[n.id] = n
        rrf[n.id] = wv / (RRF_K + rank)
        quality[n.id] = sim
    for n, r in fts:
        nodes.setdefault(n.id, n)
        rrf[n.id] = rrf.get(n.id, 0.0) + wf / (RRF_K + r)
        if n.id not in quality:
            quality[n.id] = max(0.4, 0.7 - r * 0.02)
    return [(nodes[i], quality[i]) for i in sorted(rrf, key=rrf.get, reverse=True)][:limit * 2]


def composite(n: Node, q: float, intent: str, fresh: bool, now: datetime) -> float:
    wr, wc, wf = (0.5, 0.35, 0.10) if fresh else (0.60, 0.20, 0.15)
    days = (now - n.accessed_at).days
    recency = max(0.0, 1.0 - days / RECENCY_DAYS)
    freq = min(1.0, math.log1p(n.access_count) / math.log1p(50)) if n.access_count > 0 else 0.0
    conf = n.confidence * 0.05 * (0.7 if n.knowledge_type == "belief" else 0.9 if n.knowledge_type == "preference"
                                  else 1.0)
    when = 0.0
    if intent == "WHEN" and (n.valid_from or n.valid_until or n.created_at):
        when = 0.10 if (n.valid_from and n.valid_until) else 0.05
    c = (wr * min(q, 1.0) + wc * recency + wf * freq + conf + min(0.05, n.confirmation_count * 0.01) + when
         + min(0.03, n.storage_strength * 0.003))
    return min(max(0.0, c), 1.0)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    return 0.0 if na == 0 or nb == 0 else float(np.dot(a, b) / (na * nb))


def mmr(results: list[Found], limit: int, lam: float = MMR_LAMBDA) -> list[Found]:
    if len(results) <= 1:
        return results
    selected, cands = [results[0]], list(results[1:])
    while cands and len(selected) < limit:
        best, bi = -1.0, 0
        for i, c in enumerate(cands):
            ms = max((cosine(c.node.vec, s.node.vec) for s in selected), default=0.0)
            v = lam * c.score - (1 - lam) * max(0.0, ms)
            if v > best:
                best, bi = v, i
        selected.append(cands.pop(bi))
    return selected


def recall(store: NodeStore, query: str, limit: int, embed, now: datetime | None = None,
           min_similarity: float = MIN_SIMILARITY, retry: bool = True, track: bool = True) -> list[Found]:
    """Quaid's recall (see the module docstring). `embed(text) -> vector` (the same embedder as ingest)."""
    if not query or not query.strip():
        return []
    now = now or datetime.now()
    clean = query
    m = re.search(r"\]\s*([^\[].+)$", query, re.DOTALL)
    if m and len(m.group(1).strip()) >= 3:
        clean = m.group(1).strip()
    intent, boosts = classify_intent(clean)
    fresh = bool(FRESH_RE.search(clean))
    found = hybrid(store, clean, embed(clean), limit * 3, intent)
    if not found:
        found = [(n, max(0.5, 1.0 - r * 0.02)) for n, r in store.fts(clean, limit * 3)]

    def score(n: Node, q: float) -> float:
        c = composite(n, q, intent, fresh, now)
        return min(c * boosts[n.type], 1.0) if n.type in boosts else c

    scored = [Found(n, score(n, q), channel={"quality": q}) for n, q in found]
    scored = [f for f in scored if f.score >= min_similarity]
    scored.sort(key=lambda f: f.score, reverse=True)
    if scored and scored[0].score < MULTI_PASS_GATE and len(scored) < limit:
        entity = [w for w in clean.split() if w[0:1].isupper() and len(w) > 2]
        keys = key_tokens(clean)
        passes = ([" ".join(entity)] if entity else []) + ([" ".join(keys[:5])] if keys and keys != [clean] else [])
        have = {f.node.id for f in scored}
        for sq in passes:
            if sq.strip() and sq.strip() != clean.strip():
                for n, q in hybrid(store, sq, embed(sq), limit * 2, intent):
                    if n.id not in have:
                        c = score(n, q)
                        if c >= min_similarity:
                            scored.append(Found(n, c, True, {"quality": q}))
                            have.add(n.id)
        scored.sort(key=lambda f: f.score, reverse=True)
    out = mmr([f for f in scored if f.score >= min_similarity], limit)
    for f in out:
        f.score = round(f.score, 3)
    out.sort(key=lambda f: f.score, reverse=True)
    out = out[:limit]
    if track:
        for f in out:
            difficulty = min(1.0, 0.4 * (1.0 - f.score) + (0.3 if f.multi_pass else 0.0))
            f.node.accessed_at = now
            f.node.access_count += 1
            f.node.storage_strength = min(f.node.storage_strength + 0.05 * (1.0 + 3.0 * difficulty), 10.0)
    if retry and not out:
        expanded = f"{clean.strip()} {EXPANSIONS.get(intent, DEFAULT_EXPANSION)}"
        again = recall(store, expanded, limit, embed, now, min_similarity, retry=False, track=track)
        if len(again) > len(out):
            return again
    return out
