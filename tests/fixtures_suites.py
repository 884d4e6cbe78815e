"""Test doubles for suites: a deterministic fake LLM (recognises the rig's prompt markers) and a small in-process
driver that ingests a suite's corpora into in-process backends and runs probes × conditions through a real
ProbeContext, without servers or the runner (the runner is the real path); and a miniature LoCoMo data directory.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

from services.common import prompts
from services.common.llm_client import ChatResult, LLMConfig
from services.coordinator.context import ProbeContext
from services.coordinator.suites.base import Suite


class FakeLLM:
    """Answers by quoting the context line sharing most words with the question; judges by ground-truth overlap."""

    def __init__(self, model: str = "fake-llm"):
        self.config = LLMConfig(model=model)
        self.calls: list[list[dict[str, str]]] = []

    async def chat(self, messages, temperature: float = 0.0, **kw) -> ChatResult:
        self.calls.append(messages)
        system, user = messages[0]["content"], messages[-1]["content"]
        if system.startswith(prompts.ANSWER_MARKER):
            return ChatResult(self._answer(user), prompt_tokens=len(user) // 4, completion_tokens=10)
        if system.startswith(prompts.COMPACTION_MARKER):
            return ChatResult("Summary: " + " ".join(user.split()[:60]))
        fields = dict(re.findall(r"^(Question|Ground truth|Answer|Response X|Response Y): (.*)$", user, re.M))
        gt = set(re.findall(r"\w+", fields.get("Ground truth", "").lower()))
        if system.startswith(prompts.JUDGE_MARKER):
            a = set(re.findall(r"\w+", fields.get("Answer", "").lower()))
            score = 3 if gt and gt <= a else 2 if gt & a else 1
            return ChatResult(json.dumps({"score": score, "reason": "fake"}))
        if system.startswith(prompts.BINARY_JUDGE_MARKER):
            a = set(re.findall(r"\w+", fields.get("Answer", "").lower()))
            return ChatResult(json.dumps({"label": "CORRECT" if gt and gt & a else "WRONG"}))
        if system.startswith(prompts.PAIRWISE_JUDGE_MARKER):
            x = len(gt & set(re.findall(r"\w+", fields.get("Response X", "").lower())))
            y = len(gt & set(re.findall(r"\w+", fields.get("Response Y", "").lower())))
            return ChatResult(json.dumps({"winner": "X" if x > y else "Y" if y > x else "TIE"}))
        return ChatResult("NO_REPLY")

    @staticmethod
    def _answer(user: str) -> str:
        if "\n\n" not in user:
            return prompts.ABSTAIN_TEXT
        *ctx, question = user.rsplit("\n\n", 1)
        q = set(re.findall(r"\w{3,}", question.lower()))
        best, score = "", 0
        for line in "\n\n".join(ctx).splitlines():
            s = len(q & set(re.findall(r"\w{3,}", line.lower())))
            if s > score:
                best, score = line.strip(), s
        return best or prompts.ABSTAIN_TEXT

    async def close(self) -> None:
        pass


async def run_inprocess(suite: Suite, clients: dict[str, Any], llm: FakeLLM | None = None,
                        run_dir: Path | None = None, capabilities: dict[str, dict[str, str]] | None = None,
                        judge_passes: int = 1) -> list[dict[str, Any]]:
    """Load, ingest every namespace into every client, run probes × conditions sequentially; return samples
    shaped like the runner's (its base fields + the suite's body)."""
    llm = llm or FakeLLM()
    run_dir = run_dir or Path(tempfile.mkdtemp(prefix="memrig-suite-"))
    data = suite.load()
    caps = capabilities or {}
    for name, c in clients.items():
        if name not in caps:
            d = await c.describe()
            caps[name] = {x["name"]: x["detail"] for x in d["capabilities"]}
    conds = suite.conditions(list(clients), caps)
    ctx = ProbeContext(clients, data.corpora, llm, llm, run_dir, suite.name, judge_passes=judge_passes,
                       retrieve_params={b: (suite.retrieve_top_k(b), suite.retrieve_mode(b)) for b in clients})
    needed = {b for c in conds for b in c.backends}
    for b in needed:
        for ns, batch in data.corpora.items():
            await clients[b].reset(ctx.backend_namespace(ns))
            await clients[b].ingest(ctx.backend_namespace(ns), batch)
            await clients[b].settle(ctx.backend_namespace(ns), 30)
    samples = []
    for p in data.probes:
        for c in conds:
            body = await suite.run_probe(ctx, p, c)
            samples.append({"key": f"{c.name}|{p.id}", "suite": suite.name, "condition": c.name, "condition_context": list(c.context), "probe_id": p.id,
                            "category": p.category, "question": p.question, "ground_truth": p.ground_truth,
                            "expected": p.expected, "evidence_ids": p.evidence_ids, "namespace": p.namespace,
                            "meta": p.meta, **body, "status": "ok"})
    return samples


def mini_locomo(tmp_path: Path) -> Path:
    """A one-conversation LoCoMo file (with an audit correction) under tmp_path/locomo; returns the data root."""
    conv = {"sample_id": "conv-26", "conversation": {
        "speaker_a": "Ann", "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a cat named Miso."},
                      {"speaker": "Bob", "dia_id": "D1:2", "text": "Lovely!", "blip_caption": "a cat on a sofa"}],
        "session_2_date_time": "9:00 am on 10 May, 2023",
        "session_2": [{"speaker": "Ann", "dia_id": "D2:1", "text": "Miso loves tuna."}],
        "session_3_date_time": "9:00 am on 12 May, 2023"},
        "qa": [{"question": "What is Ann's cat called?", "answer": "Miso", "evidence": ["D1:1"], "category": 4},
               {"question": "What does Miso love?", "answer": "tuna; fish", "evidence": ["D2:01"], "category": 3},
               {"question": "What is Bob's dog called?", "evidence": ["D1:2"], "category": 5,
                "adversarial_answer": "Rex"}]}
    d = tmp_path / "locomo"
    (d / "audit").mkdir(parents=True)
    (d / "locomo10_dev.json").write_text(json.dumps([conv]))
    (d / "audit" / "errors_conv_0.json").write_text(json.dumps([{
        "question_id": "locomo_0_qa0", "question": "What is Ann's cat called?", "correct_evidence": ["D1:1", "D2:1"],
        "correct_answer": "Miso the cat", "error_type": "WRONG_CITATION"}]))
    return tmp_path
