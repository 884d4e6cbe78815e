"""`memory-hook`: co11y's memory-hook as a memrig reference backend (the hook itself is not public: the facts
come from `gbasin/memory-hook-bench`, SPEC.md and `src/bench/configs/memory-hook.ts`).

Memories have the upstream schema `{id, trigger (embedded), rule (injected), source, section}` (the optional
`example` is never produced here). Upstream stores them in LanceDB, embeds triggers with all-MiniLM-L6-v2 and
reranks with Claude Haiku (`RERANK_PROVIDER=claude`); the bench compares `memory-hook` with `memory-no-rerank`.

- Ingest: one LLM call per session (prompts.MEMORY_HOOK_EXTRACTION_SYSTEM; the upstream extraction prompt is not
  public, so this one asks for that schema as one JSON object per line; the llm-mock answers it deterministically,
  services/llm_mock/memory_hook.py). Each memory's `source` = the ids of the messages its rule came from
  (fact_extraction.attribute), carried back as evidence_ids. Triggers are embedded with the rig's embedder
  (MiniLM by default, as upstream); a numpy matrix per namespace stands in for LanceDB's flat cosine search.
- Retrieve: cosine of the query and every trigger; the best `rerank_candidates_multiplier × top_k` go to the LLM
  rerank (prompts.MEMORY_HOOK_RERANK_SYSTEM), which returns the numbers of the relevant ones; those are kept in
  cosine order, cut to top_k. Without rerank (`memory-hook-no-rerank`) the best top_k by cosine are injected.
  `formatted_context` = the injected rules, one per line with their section.

Choices where those sources are silent (README.md): the hook fires on the rig's question (upstream: a PreToolUse hook on
Edit|Write|Read whose query is the tool call); the candidate pool is 2 × top_k; no similarity floor; a rerank reply
that cannot be parsed keeps the cosine top_k and marks the result degraded (fail open); the rerank keeping nothing
injects nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from services.adapters.base import StoreBackedBackend
from services.adapters.fact_extraction import attribute, new_messages, transcript
from services.common import prompts
from services.common.types import (
    ChannelDiagnostics,
    IngestBatch,
    Memory,
    RetrieveQuery,
    RetrieveResult,
    SettleResult,
    utc,
)

SECTIONS = ("decisions", "conventions", "facts")
_JSON_OBJ_RE = re.compile(r"\{.*\}")


@dataclass(frozen=True)
class HookMemory:
    id: str
    trigger: str
    rule: str
    source: tuple[str, ...]  # message ids (evidence)
    section: str
    created_at: datetime
    session_id: str


@dataclass
class _Namespace:
    memories: list[HookMemory] = field(default_factory=list)
    vecs: np.ndarray | None = None
    ids: set[str] = field(default_factory=set)


def parse_memories(reply: str) -> list[tuple[str, str, str]]:
    """(trigger, rule, section) per JSON line; lines that are not such objects are skipped; an empty trigger falls
    back to the rule; unknown sections become "facts"; duplicate rules are dropped."""
    out, seen = [], set()
    for line in reply.splitlines():
        m = _JSON_OBJ_RE.search(line)
        if not m:
            continue
        try:
            obj = json.loads(m.group(0))
        except json.JSONDecodeError:
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("rule"), str) or not obj["rule"].strip():
            continue
        rule = " ".join(obj["rule"].split())
        trig = obj.get("trigger") if isinstance(obj.get("trigger"), str) else ""
        trig = " ".join(trig.split()) or rule
        section = obj.get("section") if obj.get("section") in SECTIONS else "facts"
        if rule.lower() in seen:
            continue
        seen.add(rule.lower())
        out.append((trig, rule, section))
    return out


def parse_rerank(reply: str, n_candidates: int) -> list[int] | None:
    """0-based indices of the candidates the reranker marked relevant (in candidate order), or None if the reply
    is not `{"relevant": [numbers]}`. Out-of-range numbers are ignored."""
    m = _JSON_OBJ_RE.search(reply or "")
    if not m:
        return None
    try:
        obj = json.loads(m.group(0))
    except json.JSONDecodeError:
        return None
    rel = obj.get("relevant") if isinstance(obj, dict) else None
    if not isinstance(rel, list):
        return None
    keep = {int(x) - 1 for x in rel if isinstance(x, int | float) and not isinstance(x, bool)}
    return [i for i in range(n_candidates) if i in keep]


def top_by_cosine(cos: np.ndarray, n: int, floor: float = -1.0) -> list[int]:
    order = np.argsort(-cos, kind="stable")[: max(0, n)]
    return [int(i) for i in order if cos[i] >= floor]


def format_rules(memories: Sequence[Memory]) -> str:
    if not memories:
        return ""
    return "\n".join(["## Memories (memory-hook)",
                      *(f"- [{m.attributes.get('section', 'facts')}] {m.text}" for m in memories)])


class MemoryHookBackend(StoreBackedBackend):
    name = "memory-hook"
    description = "memory-hook: trigger/rule memories, vector search on triggers, optional LLM rerank, rules injected."
    capabilities = (("sessions", ""), ("documents", "memories extracted from the text"), ("recall", "exact"))
    defaults: dict[str, Any] = {
        "rerank": True,  # memory-hook (RERANK_PROVIDER=claude); False = memory-no-rerank
        "rerank_candidates_multiplier": 2,
        "min_similarity": -1.0,  # no floor (none is documented upstream)
        "llm_temperature": 0.0,
    }
    uses_embedder = True

    def __init__(self, config=None, context=None):
        super().__init__(config, context)
        self._ns: dict[str, _Namespace] = {}
        self.n = {"llm_calls": 0, "memories_added": 0, "retrieves": 0, "reranks": 0, "rerank_parse_failures": 0,
                  "rerank_dropped": 0}

    async def start(self) -> None:
        await asyncio.to_thread(lambda: self.context.embedder)

    def describe_config(self) -> dict[str, Any]:
        d = dict(self.config)
        d.update({
            "schema": "{id, trigger (embedded), rule (injected), source, section}",
            "sections": list(SECTIONS),
            "extraction_prompt": "prompts.MEMORY_HOOK_EXTRACTION_SYSTEM, one call per session",
            "rerank_prompt": "prompts.MEMORY_HOOK_RERANK_SYSTEM" if self.config["rerank"] else "off",
            "candidates": "rerank_candidates_multiplier * top_k" if self.config["rerank"] else "top_k",
            "search": "cosine on trigger embeddings (numpy flat, as LanceDB brute force)",
            "rerank_parse_failure": "keep cosine top_k, degraded",
            "prompts_hash": prompts.prompts_hash(),
        })
        return d

    # ------------------------------------------------------------------ ingest
    async def _extract(self, text: str) -> list[tuple[str, str, str]]:
        self.n["llm_calls"] += 1
        res = await self.context.llm.chat([{"role": "system", "content": prompts.MEMORY_HOOK_EXTRACTION_SYSTEM},
                                           {"role": "user", "content": text}],
                                          temperature=self.config["llm_temperature"])
        return parse_memories(res.text)

    async def _session(self, namespace, s, msgs) -> list[HookMemory]:
        by_id = {m.id: m for m in msgs}
        out = []
        for trig, rule, section in await self._extract(transcript(msgs)):
            src = attribute(rule, msgs)
            first = by_id.get(src[0]) if src else None
            ts = first.ts if first is not None and first.ts is not None else s.started_at
            mid = "mh-" + hashlib.sha1(f"{namespace}\0{s.session_id}\0{rule}".encode()).hexdigest()[:16]
            out.append(HookMemory(mid, trig, rule, src, section, utc(ts), s.session_id))
        return out

    async def _document(self, namespace, d, now) -> list[HookMemory]:
        out = []
        for trig, rule, section in await self._extract(d.text):
            mid = "mh-" + hashlib.sha1(f"{namespace}\0doc:{d.id}\0{rule}".encode()).hexdigest()[:16]
            out.append(HookMemory(mid, trig, rule, tuple(d.evidence()), section, utc(d.created_at or now),
                                  f"doc:{d.id}"))
        return out

    async def reset(self, namespace: str) -> int:
        self._ns.pop(namespace, None)
        return self.store.reset(namespace)

    async def ingest(self, namespace: str, batch: IngestBatch) -> None:
        work = new_messages(self.store.sessions.get(namespace, {}), batch.sessions)
        now = datetime.now(UTC)
        groups = await asyncio.gather(*(self._session(namespace, s, msgs) for s, msgs in work),
                                      *(self._document(namespace, d, now) for d in batch.documents))
        st = self._ns.get(namespace) or _Namespace()
        seen = set(st.ids)
        new = []
        for g in groups:
            for m in g:
                if m.id not in seen:
                    seen.add(m.id)
                    new.append(m)
        emb = self.context.embedder
        vecs = (await emb.aencode([m.trigger for m in new])) if new else np.zeros((0, emb.dim), np.float32)
        # Commit (synchronous).
        self.store.apply(namespace, batch)
        st.memories = st.memories + new
        st.vecs = vecs if st.vecs is None else np.vstack([st.vecs, vecs])
        st.ids = seen
        self._ns[namespace] = st
        self.n["memories_added"] += len(new)

    async def settle(self, namespace: str, timeout_s: float) -> SettleResult:
        n = len(self._ns[namespace].memories) if namespace in self._ns else 0
        return SettleResult(settled=True, items_indexed=n,
                            counts={"memories": n, "sessions": self.store.stats(namespace).sessions})

    # ------------------------------------------------------------------ retrieve
    async def retrieve(self, namespace: str, query: RetrieveQuery) -> RetrieveResult:
        st = self._ns.get(namespace)
        if st is None or not st.memories:
            return RetrieveResult()
        self.n["retrieves"] += 1
        t0 = time.perf_counter_ns()
        qvec = await self.context.embedder.aencode_query(query.query)
        cos = st.vecs @ qvec
        rerank = bool(self.config["rerank"])
        pool = query.top_k * int(self.config["rerank_candidates_multiplier"]) if rerank else query.top_k
        cands = top_by_cosine(cos, pool, float(self.config["min_similarity"]))
        t1 = time.perf_counter_ns()
        diags = [ChannelDiagnostics("vector", len(cands), t1 - t0, "cosine on triggers")]
        degraded, reason = False, ""
        if rerank and cands:
            res = await self.context.llm.chat(
                [{"role": "system", "content": prompts.MEMORY_HOOK_RERANK_SYSTEM},
                 {"role": "user", "content": prompts.memory_hook_rerank_user(
                     query.query, [(st.memories[i].trigger, st.memories[i].rule) for i in cands])}],
                temperature=self.config["llm_temperature"])
            self.n["reranks"] += 1
            keep = parse_rerank(res.text, len(cands))
            if keep is None:
                self.n["rerank_parse_failures"] += 1
                degraded, reason = True, "rerank reply not understood; cosine order kept"
                chosen = cands[: query.top_k]
            else:
                chosen = [cands[i] for i in keep][: query.top_k]
                self.n["rerank_dropped"] += len(cands) - len(keep)
            diags.append(ChannelDiagnostics("rerank", len(chosen), time.perf_counter_ns() - t1,
                                            f"LLM kept {len(chosen)} of {len(cands)}"))
        else:
            chosen = cands[: query.top_k]
        memories = []
        for i in chosen:
            m = st.memories[i]
            memories.append(Memory(
                id=m.id, text=m.rule, score=float(cos[i]), kind="rule", created_at=m.created_at,
                source=f"session:{m.session_id}", evidence_ids=list(m.source),
                channel_scores={"trigger_cosine": float(cos[i])},
                attributes={"trigger": m.trigger, "section": m.section, "reranked": str(rerank).lower()},
            ))
        return RetrieveResult(memories=memories, channels=diags, formatted_context=format_rules(memories),
                              degraded=degraded, degraded_reason=reason)

    # ------------------------------------------------------------------ introspection
    def items_in(self, namespace: str) -> int:
        return len(self._ns[namespace].memories) if namespace in self._ns else 0
