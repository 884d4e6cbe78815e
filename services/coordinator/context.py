"""ProbeContext: what a suite's per-probe code can ask of the rig during a run.

Retrievals are cached per (backend, probe) so conditions sharing a backend share one call. A namespace's first
timed retrieve on a backend is preceded by the backend's Prepare (untimed setup, recorded apart in `prepares`, never
in a retrieve's latency), the two back to back: no other retrieve of that backend runs between them. The compaction
summary is made once per namespace per run (and saved under artifacts/); answers and judgements go through
the one LLM client. Everything recorded here ends up in the sample, so metrics can be recomputed later.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from dataclasses import asdict
from pathlib import Path
from typing import Any

from services.adapters.base import NamespaceLocks
from services.adapters.client import BackendError
from services.common import prompts
from services.common.llm_client import LLMClient
from services.common.tokens import count_tokens
from services.common.transcripts import compact, render_session
from services.common.types import IngestBatch, Memory, RetrieveQuery, RetrieveResult
from services.coordinator.judges import rubric_judge
from services.coordinator.metrics import budget, shown
from services.coordinator.suites.probe import Condition, Probe


def default_format(memories: list[Memory]) -> str:
    """How the rig presents a backend's memories when the backend gives no formatted context of its own."""
    if not memories:
        return ""
    lines = ["Relevant memories:"] + [f"- {m.text.strip()}" for m in memories]
    return "\n".join(lines)


def text_hit(texts: list[str], expected: list[str]) -> bool:
    """True when any expected string occurs in any text (case-insensitive, whitespace collapsed)."""
    norm = [" ".join(t.lower().split()) for t in texts]
    for e in expected:
        e = " ".join(e.lower().split())
        if e and any(e in t for t in norm):
            return True
    return False


class ProbeContext:
    def __init__(
        self,
        clients: dict[str, Any],
        corpora: dict[str, IngestBatch],
        llm: LLMClient,
        judge_llm: LLMClient,
        run_dir: Path,
        suite_name: str,
        judge_passes: int = 1,
        judge_temperature: float = 0.0,
        retrieve_params: dict[str, tuple[int, str]] | None = None,
        compaction_llm: LLMClient | None = None,
    ):
        self.clients = clients
        self.corpora = corpora
        self.llm = llm
        self.compaction_llm = compaction_llm or llm
        self.judge_llm = judge_llm
        self.run_dir = run_dir
        self.suite_name = suite_name
        self.judge_passes = judge_passes
        self.judge_temperature = judge_temperature
        self.retrieve_params = retrieve_params or {}
        self._retrievals: dict[tuple[str, str], asyncio.Task] = {}
        # backend -> backend namespace -> what its Prepare did (PrepareResult); the runner puts it in run.json
        self.prepares: dict[str, dict[str, Any]] = {}
        self._gates = NamespaceLocks()  # per backend: retrieves shared, prepare + first retrieve exclusive
        self._compactions: dict[str, asyncio.Task] = {}
        self._message_chars: dict[str, dict[str, int]] = {}
        self._corpus_index: dict[str, shown.CorpusIndex] = {}
        (run_dir / "artifacts").mkdir(parents=True, exist_ok=True)

    def forget(self, backend: str, probe_ids: list[str]) -> None:
        """Drop the retrievals kept for these probes on this backend (their namespace was released)."""
        ids = set(probe_ids)
        for key in [k for k in self._retrievals if k[0] == backend and k[1].split("|", 1)[0] in ids]:
            del self._retrievals[key]

    def release(self, namespace: str) -> None:
        """Drop what the grader keeps of a namespace's corpus (its n-gram index, its message sizes): the namespace
        has been probed on every backend and released."""
        self._corpus_index.pop(namespace, None)
        self._message_chars.pop(namespace, None)

    def backend_namespace(self, namespace: str) -> str:
        return f"{self.suite_name}:{namespace}"

    # --------------------------------------------------------------------------------------------
    async def retrieve(self, backend: str, probe: Probe, top_k: int | None = None, mode: str | None = None
                       ) -> dict[str, Any]:
        k_default, mode_default = self.retrieve_params.get(backend, (6, "fast"))
        key = (backend, f"{probe.id}|{top_k or k_default}|{mode or mode_default}")
        if key not in self._retrievals:
            self._retrievals[key] = asyncio.ensure_future(
                self._retrieve(backend, probe, top_k or k_default, mode or mode_default)
            )
        return await self._retrievals[key]

    async def _retrieve(self, backend: str, probe: Probe, top_k: int, mode: str) -> dict[str, Any]:
        client = self.clients[backend]
        q = RetrieveQuery(query=probe.question[:2000], top_k=top_k, mode=mode, reference_time=probe.reference_time)
        res, latency_ns = await self._timed_retrieve(backend, client, self.backend_namespace(probe.namespace), q)
        rec = retrieval_record(res, latency_ns, probe.expected)
        # The grading runs in a worker thread: on the event loop it held up every call in flight, whose timings
        # then carried it (a retrieve of the `none` control measured at 142 ms p50 instead of 15 on LoCoMo).
        rec["budget"] = await asyncio.to_thread(budget.account, rec, budget.BUDGETS,
                                                self.message_chars(probe.namespace),
                                                self.corpus_index(probe.namespace), probe.ground_truth or None)
        return rec

    async def _timed_retrieve(self, backend: str, client: Any, ns: str, q: RetrieveQuery) -> tuple[RetrieveResult, int]:
        """The retrieve; the namespace's first on this backend runs right after the backend's Prepare, holding the
        backend's gate so no other retrieve of it lands in between (a process that switches namespaces pays the
        switch in Prepare, not in the timed search). A client without `prepare` (a test double) skips it."""
        gate = self._gates.get(backend)
        done = self.prepares.setdefault(backend, {})
        if ns in done or not hasattr(client, "prepare"):
            async with gate.read():
                return await client.retrieve(ns, q)
        async with gate.write():
            if ns not in done:
                done[ns] = await client.prepare(ns)
            return await client.retrieve(ns, q)

    def prepare_summary(self) -> dict[str, Any]:
        """Per backend, what run.json records of Prepare: namespaces prepared, whether the backend implements it,
        the client-observed time (total seconds, p50 and max ms) and the distinct notes."""
        out: dict[str, Any] = {}
        for backend, per_ns in self.prepares.items():
            if not per_ns:
                continue
            ms = sorted(r.client_duration_ns / 1e6 for r in per_ns.values())
            out[backend] = {"namespaces": len(ms), "implemented": all(r.implemented for r in per_ns.values()),
                            "total_s": round(sum(ms) / 1000, 3), "p50_ms": round(ms[(len(ms) - 1) // 2], 2),
                            "max_ms": round(ms[-1], 2), "notes": sorted({r.note for r in per_ns.values() if r.note})}
        return out

    def message_chars(self, namespace: str) -> dict[str, int]:
        """Characters of every message and document of a namespace's corpus, by id: what "half of a message shown"
        is measured against (metrics/budget.py)."""
        if namespace not in self._message_chars:
            batch = self.corpora.get(namespace)
            out: dict[str, int] = {}
            if batch is not None:
                for s in batch.sessions:
                    out.update((m.id, len(m.content)) for m in s.messages)
                out.update((d.id, len(d.text)) for d in batch.documents)
            self._message_chars[namespace] = out
        return self._message_chars[namespace]

    def corpus_index(self, namespace: str) -> shown.CorpusIndex:
        """The n-grams of every message and document of a namespace's corpus, as the rig ingested them: what the
        grader finds in an injected text (metrics/shown.py). Built once per namespace and run."""
        if namespace not in self._corpus_index:
            batch = self.corpora.get(namespace)
            items: list[tuple[str, str]] = []
            if batch is not None:
                items = [(m.id, m.content) for s in batch.sessions for m in s.messages]
                items += [(d.id, d.text) for d in batch.documents]
            self._corpus_index[namespace] = shown.CorpusIndex(items)
        return self._corpus_index[namespace]

    async def compaction(self, namespace: str) -> str:
        if namespace not in self._compactions:
            self._compactions[namespace] = asyncio.ensure_future(self._compaction(namespace))
        return await self._compactions[namespace]

    async def _compaction(self, namespace: str) -> str:
        batch = self.corpora[namespace]
        sessions = sorted(batch.sessions, key=lambda s: (s.started_at, s.session_id))
        text = "\n\n".join([render_session(s) for s in sessions] + [f"## {d.path or d.id}\n{d.text}" for d in batch.documents])
        h = hashlib.sha256((self.compaction_llm.config.model + "\x00" + text).encode()).hexdigest()[:16]
        path = self.run_dir / "artifacts" / f"compaction-{re.sub(r'[^A-Za-z0-9_.-]', '_', namespace)}-{h}.txt"
        if path.exists():
            return path.read_text()
        summary = await compact(self.compaction_llm, text)
        path.write_text(summary)
        return summary

    # --------------------------------------------------------------------------------------------
    async def gather_context(self, probe: Probe, condition: Condition) -> tuple[list[str], dict[str, Any]]:
        blocks: list[str] = []
        retrievals: dict[str, Any] = {}
        for part in condition.context:
            if part == "compaction":
                blocks.append(await self.compaction(probe.namespace))
            elif part.startswith("backend:"):
                name = part.split(":", 1)[1]
                r = await self.retrieve(name, probe)
                retrievals[name] = r
                blocks.append(r["formatted_context"])
            else:
                raise ValueError(f"condition {condition.name}: unknown context part {part!r}")
        return blocks, retrievals

    async def answer(self, question: str, blocks: list[str]) -> dict[str, Any]:
        user = prompts.answer_user(question, blocks)
        res = await self.llm.chat([{"role": "system", "content": prompts.ANSWER_SYSTEM},
                                   {"role": "user", "content": user}], temperature=0.0)
        return {
            "answer": res.text.strip(),
            "prompt_tokens": res.prompt_tokens,
            "completion_tokens": res.completion_tokens,
            "answer_latency_ms": res.latency_s * 1000,
        }

    async def judge(self, question: str, ground_truth: str, answer: str) -> dict[str, Any]:
        """The 0-3 rubric judge (judges.rubric_judge: passes, seeds, majority vote)."""
        return await rubric_judge(self, question, ground_truth, answer)

    async def answer_and_judge(self, probe: Probe, condition: Condition) -> dict[str, Any]:
        blocks, retrievals = await self.gather_context(probe, condition)
        sample: dict[str, Any] = {
            "retrievals": retrievals,
            "context_tokens": sum(count_tokens(b) for b in blocks),
        }
        if not condition.answer:
            return sample
        sample.update(await self.answer(probe.question, blocks))
        sample["judge"] = await self.judge(probe.question, probe.ground_truth, sample["answer"])
        return sample


def retrieval_record(res: RetrieveResult, latency_ns: int, expected: list[str]) -> dict[str, Any]:
    texts = [m.text for m in res.memories]
    return {
        "memories": [
            {
                "id": m.id,
                "text": m.text,
                "score": m.score,
                "kind": m.kind,
                "source": m.source,
                "evidence_ids": m.evidence_ids,
                "evidence_spans": [asdict(x) for x in m.evidence_spans],
                "channel_scores": m.channel_scores,
                "attributes": m.attributes,
            }
            for m in res.memories
        ],
        "context_spans": [asdict(x) for x in res.context_spans] if res.formatted_context else [],
        "formatted_context": res.formatted_context or default_format(res.memories),
        "latency_ms": latency_ns / 1e6,
        "server_ms": res.server_duration_ns / 1e6,
        "degraded": res.degraded,
        "degraded_reason": res.degraded_reason,
        "hit": text_hit(texts + [res.formatted_context], expected) if expected else None,
    }


__all__ = ["ProbeContext", "BackendError", "default_format", "text_hit", "retrieval_record"]
