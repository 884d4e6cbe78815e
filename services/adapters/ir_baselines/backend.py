"""`bm25`, `dense`, `hybrid`: the first rows of any retrieval paper, as control backends over the same documents
every other backend gets (documents.py: one document per message, carrying its id as evidence id).

One class, three registered names (config `method`), and `bm25-official`:
- `bm25`: Okapi BM25, k1 1.2, b 0.75 (bm25s, ranking.py), over the message text;
- `bm25-official`: BM25 as LongMemEval's own code runs it (ranking.py): `text.split(" ")` tokens with case kept,
  rank_bm25's BM25Okapi (k1 1.5, b 0.75, epsilon 0.25), over the user turns only (the official turn-level corpus;
  ingested documents kept), every document ranked, a zero score included (the official code sorts them all);
- `dense`: cosine similarity of the rig's embedder (all-MiniLM-L6-v2 by default, through the shared embedding
  cache) between the query and each document rendered as "[date] text";
- `hybrid`: reciprocal rank fusion (k 60) of the BM25 ranking (documents sharing a term with the query) and the
  dense ranking (every document).

No query rewriting, no recency, no thresholds: what a sceptic would run first. Every parameter is in Describe.
The index of a namespace is rebuilt on ingest from a staged copy and swapped in whole, so a failed ingest leaves
the old index and store untouched; embeddings of unchanged documents are reused, not re-encoded.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

import numpy as np

from services.adapters.base import BackendContext, SessionStore, StoreBackedBackend
from services.adapters.ir_baselines.documents import IRDocument, documents_of, render, session_documents
from services.adapters.ir_baselines.ranking import (
    STOPWORD_LISTS,
    TOKEN_PATTERN,
    TOKENISERS,
    BM25Index,
    OkapiBM25Index,
    ranks_of,
    rrf,
    stable_order,
    tokens_of,
)
from services.common.types import ChannelDiagnostics, IngestBatch, Memory, RetrieveQuery, RetrieveResult

METHODS = ("bm25", "dense", "hybrid")
SCORINGS = ("bm25s-lucene", "okapi")
INDEX_ROLES = ("all", "user")
GRANULARITIES = ("message", "session")


@dataclass
class NamespaceIndex:
    docs: list[IRDocument]
    bm25: BM25Index | OkapiBM25Index | None
    dense_texts: list[str]
    vectors: np.ndarray | None  # (n, dim) unit rows, or None when the method has no dense channel


class IRBaselineBackend(StoreBackedBackend):
    name = "bm25"
    description = "Control: a standard IR baseline (BM25, dense or RRF hybrid) over one document per message."
    capabilities = (("sessions", ""), ("documents", ""), ("recall", "exact"))
    defaults = {
        "method": "bm25",
        "k1": 1.2,
        "b": 0.75,
        "stopwords": "en",
        "bm25_template": "{text}",
        "dense_template": "[{date}] {text}",
        "date_format": "%d %B %Y",
        "rrf_k": 60,
        # which BM25 (ranking.py): the rig's ("regex", "bm25s-lucene") or LongMemEval's ("official", "okapi")
        "bm25_tokens": "regex",
        "bm25_scoring": "bm25s-lucene",
        "bm25_epsilon": 0.25,  # okapi only: the idf floor, as a share of the mean idf
        "index_roles": "all",  # "user": messages of other roles are not indexed (LongMemEval's turn corpus)
        "rank_all": False,  # True: documents that share no token with the query are ranked too, after the rest
        # "session": one document per session, its (indexed) messages joined by session_joiner: LongMemEval's
        # session granularity (the official code joins a session's user turns with one space)
        "granularity": "message",
        "session_joiner": " ",
    }

    def __init__(self, config: dict[str, Any] | None = None, context: BackendContext | None = None):
        super().__init__(config, context)
        method = self.config["method"]
        if method not in METHODS:
            raise ValueError(f"{self.name}: config 'method' must be one of {list(METHODS)}, got {method!r}")
        if self.config["stopwords"] not in STOPWORD_LISTS:
            raise ValueError(f"{self.name}: config 'stopwords' must be one of {sorted(STOPWORD_LISTS)}")
        if int(self.config["rrf_k"]) < 1:
            raise ValueError(f"{self.name}: config 'rrf_k' must be >= 1")
        for key, allowed in (("bm25_tokens", TOKENISERS), ("bm25_scoring", SCORINGS), ("index_roles", INDEX_ROLES),
                             ("granularity", GRANULARITIES)):
            if self.config[key] not in allowed:
                raise ValueError(f"{self.name}: config {key!r} must be one of {list(allowed)}, got {self.config[key]!r}")
        self.name = method
        self.uses_embedder = method in ("dense", "hybrid")
        self._uses_bm25 = method in ("bm25", "hybrid")
        self._index: dict[str, NamespaceIndex] = {}

    def describe_config(self) -> dict[str, Any]:
        cfg = dict(self.config)
        if self.config["bm25_tokens"] == "official":
            cfg["tokeniser"] = 'official: text.split(" "), case and punctuation kept, no stopwords (LongMemEval)'
        else:
            cfg["tokeniser"] = f"regex {TOKEN_PATTERN}, lower-cased, stopwords {self.config['stopwords']}, no stemming"
        cfg["bm25_implementation"] = (
            f"rank_bm25 0.2.2 BM25Okapi restated in numpy (epsilon {self.config['bm25_epsilon']})"
            if self.config["bm25_scoring"] == "okapi" else f"bm25s {version('bm25s')} method=lucene (Okapi ranking)")
        roles = "" if self.config["index_roles"] == "all" else "user "
        cfg["documents"] = (f"one per message (evidence id = message id), {roles or 'every role'}"
                            if self.config["granularity"] == "message" else
                            f"one per session: its {roles}messages joined by {self.config['session_joiner']!r} "
                            f"(evidence ids = those messages' ids; a session without {roles or 'any '}messages is "
                            "an empty document citing nothing, as LongMemEval's session corpus)"
                            ) + "; ingested documents as given"
        cfg["tie_break"] = "document order: sessions by (start, id), messages in order, then documents by id"
        if self.config["method"] == "hybrid":
            cfg["fusion"] = "RRF: sum 1/(rrf_k + rank) over the bm25 (score > 0) and dense rankings"
        return cfg

    # -- ingestion ---------------------------------------------------------------------------------
    async def reset(self, namespace: str) -> int:
        self._index.pop(namespace, None)
        return self.store.reset(namespace)

    async def ingest(self, namespace: str, batch: IngestBatch) -> None:
        staged = SessionStore()
        staged.sessions[namespace] = dict(self.store.sessions.get(namespace, {}))
        staged.documents[namespace] = dict(self.store.documents.get(namespace, {}))
        staged.apply(namespace, batch)
        index = await self._build(documents_of(staged, namespace), self._index.get(namespace))
        # commit: both steps are plain assignments, nothing below can fail half-way
        self.store.apply(namespace, batch)
        self._index[namespace] = index

    async def _build(self, docs: list[IRDocument], old: NamespaceIndex | None) -> NamespaceIndex:
        cfg = self.config
        roles = ("user", "") if cfg["index_roles"] == "user" else None
        if cfg["granularity"] == "session":  # a session without a message of those roles: an empty document
            docs = session_documents(docs, str(cfg["session_joiner"]), roles)
        elif roles is not None:
            docs = [d for d in docs if d.role in roles]
        bm25 = None
        if self._uses_bm25:
            tokens = [tokens_of(render(cfg["bm25_template"], d, cfg["date_format"]), cfg["bm25_tokens"], cfg["stopwords"])
                      for d in docs]
            if cfg["bm25_scoring"] == "okapi":
                bm25 = await asyncio.to_thread(OkapiBM25Index, tokens, float(cfg["k1"]), float(cfg["b"]),
                                               float(cfg["bm25_epsilon"]))
            else:
                bm25 = await asyncio.to_thread(BM25Index, tokens, float(cfg["k1"]), float(cfg["b"]))
        texts: list[str] = []
        vectors = None
        if self.uses_embedder:
            texts = [render(cfg["dense_template"], d, cfg["date_format"]) for d in docs]
            vectors = await self._embed_reusing(texts, old)
        return NamespaceIndex(docs, bm25, texts, vectors)

    async def _embed_reusing(self, texts: list[str], old: NamespaceIndex | None) -> np.ndarray:
        known = {t: i for i, t in enumerate(old.dense_texts)} if old is not None and old.vectors is not None else {}
        missing = sorted({t for t in texts if t not in known})
        fresh = await self.context.embedder.aencode(missing) if missing else None
        new_row = {t: i for i, t in enumerate(missing)}
        dim = self.context.embedder.dim
        out = np.empty((len(texts), dim), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i] = old.vectors[known[t]] if t in known else fresh[new_row[t]]  # type: ignore[index,union-attr]
        return out

    def items_in(self, namespace: str) -> int | None:
        idx = self._index.get(namespace)
        return len(idx.docs) if idx is not None else None

    # -- retrieval ---------------------------------------------------------------------------------
    async def retrieve(self, namespace: str, query: RetrieveQuery) -> RetrieveResult:
        idx = self._index.get(namespace)
        if idx is None or not idx.docs:
            return RetrieveResult()
        t0 = time.perf_counter_ns()
        qvec = None
        if self.uses_embedder:
            qvec = await self.context.embedder.aencode_query(query.query)
        top, channels, diags = await asyncio.to_thread(self._rank, idx, query.query, qvec, query.top_k)
        memories = []
        for i, score in top:
            d = idx.docs[i]
            memories.append(Memory(
                id=d.id, text=d.text, score=score, kind="message" if d.source.startswith("session:") else "document",
                created_at=d.created_at, source=d.source, evidence_ids=list(d.evidence_ids),
                channel_scores={c: float(v[i]) for c, v in channels.items()}))
        return RetrieveResult(memories=memories, server_duration_ns=time.perf_counter_ns() - t0, channels=diags,
                              formatted_context=self._format(idx, [i for i, _ in top]))

    def _rank(self, idx: NamespaceIndex, text: str, qvec: np.ndarray | None, top_k: int
              ) -> tuple[list[tuple[int, float]], dict[str, np.ndarray], list[ChannelDiagnostics]]:
        cfg = self.config
        channels: dict[str, np.ndarray] = {}
        diags: list[ChannelDiagnostics] = []
        if idx.bm25 is not None:
            t = time.perf_counter_ns()
            channels["bm25"] = idx.bm25.scores(tokens_of(text, cfg["bm25_tokens"], cfg["stopwords"]))
            diags.append(ChannelDiagnostics("bm25", int(np.count_nonzero(channels["bm25"] > 0)),
                                            time.perf_counter_ns() - t))
        if idx.vectors is not None and qvec is not None:
            t = time.perf_counter_ns()
            channels["dense"] = idx.vectors.astype(np.float64) @ qvec.astype(np.float64)
            diags.append(ChannelDiagnostics("dense", len(idx.docs), time.perf_counter_ns() - t))
        method = cfg["method"]
        if method == "hybrid":
            n = len(idx.docs)
            b_ranks = ranks_of(stable_order(channels["bm25"]), channels["bm25"] > 0)
            d_ranks = ranks_of(stable_order(channels["dense"]), np.ones(n, dtype=bool))
            final = rrf([b_ranks, d_ranks], int(cfg["rrf_k"]))
            channels["rrf"] = final
        else:
            final = channels[method]
        order = stable_order(final)
        if method == "bm25" and not cfg["rank_all"]:
            order = order[final[order] > 0]  # a document sharing no term with the query is not a match
        return [(int(i), float(final[i])) for i in order[:top_k]], channels, diags

    def _format(self, idx: NamespaceIndex, picked: list[int]) -> str:
        if not picked:
            return ""
        lines = ["# Retrieved messages"]
        for i in picked:
            d = idx.docs[i]
            date = d.created_at.strftime(self.config["date_format"]) if d.created_at else ""
            lines.append(f"- [{date}] {d.text}" if date else f"- {d.text}")
        return "\n".join(lines)
