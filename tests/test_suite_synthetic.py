"""Synthetic suites end to end in-process: a tiny keyword backend (with an escaping envelope), the controls,
a fake LLM; scores recomputed from samples, reports rendered, judges' order recorded."""

import json
import re

import pytest

from services.adapters.base import MemoryBackend, SessionStore
from services.adapters.client import InProcessBackendClient
from services.common.types import Memory, RetrieveResult
from services.coordinator import judges
from services.coordinator.suites import common as C
from services.coordinator.suites.arclight import ArclightSuite
from services.coordinator.suites.octybot import OctybotSuite
from services.coordinator.suites.poisoned_memory import PoisonedMemorySuite
from services.coordinator.suites.quaid_weeks import QuaidWeeksSuite
from services.coordinator.suites.registry import all_suites
from tests.fixtures_suites import FakeLLM, run_inprocess


class KeywordBackend(MemoryBackend):
    """Ranks messages (and documents) by shared words with the query; wraps results in an escaping envelope."""

    name = "kw"
    capabilities = (("sessions", ""), ("documents", ""), ("recall", "lossy"))

    def __init__(self, config=None, context=None):
        super().__init__(config, context)
        self.store = SessionStore()

    async def reset(self, namespace):
        return self.store.reset(namespace)

    async def ingest(self, namespace, batch):
        self.store.apply(namespace, batch)

    async def retrieve(self, namespace, query):
        q = set(re.findall(r"\w{3,}", query.query.lower()))
        items = [(m.id, m.content, [m.id]) for s in self.store.ordered_sessions(namespace) for m in s.messages]
        items += [(d.id, d.text, list(d.evidence())) for d in self.store.ordered_documents(namespace)]
        scored = sorted(((len(q & set(re.findall(r"\w{3,}", t.lower()))), i, t, ev) for i, t, ev in items),
                        key=lambda x: (-x[0], x[1]))
        mems = [Memory(id=i, text=t, score=float(s), evidence_ids=ev) for s, i, t, ev in scored[: query.top_k] if s > 0]
        body = "\n".join("- " + m.text.replace("</", "&lt;/") for m in mems)
        return RetrieveResult(memories=mems, formatted_context=f"<kw_memories>\n{body}\n</kw_memories>" if mems else "")

    async def namespace_stats(self, namespace):
        return self.store.stats(namespace)

    def namespaces(self):
        return self.store.namespaces()


def clients():
    return {"kw": InProcessBackendClient(KeywordBackend()), "full-context": InProcessBackendClient.from_spec("full-context"),
            "none": InProcessBackendClient.from_spec("none")}


def test_registry_lists_all_suites():
    names = set(all_suites())
    assert {"arclight", "quaid-weeks", "octybot", "locomo", "longmemeval", "madial", "poisoned-memory"} <= names


@pytest.mark.parametrize("cls,opts", [(OctybotSuite, {}), (QuaidWeeksSuite, {"weeks": 2}), (PoisonedMemorySuite, {})])
async def test_retrieval_suites_score_and_render(cls, opts, tmp_path):
    suite = cls(opts, seed=2)
    samples = await run_inprocess(suite, clients(), run_dir=tmp_path)
    json.loads(json.dumps(samples))  # samples are JSON
    m = suite.score(samples)
    json.dumps(m)
    assert set(m["conditions"]) == {"kw", "full-context", "none"}
    md = suite.render(m)
    assert md.startswith("## ") and "| kw |" in md
    # scoring is a pure function of the samples
    assert suite.score(samples) == m


async def test_octybot_scores(tmp_path):
    suite = OctybotSuite()
    m = suite.score(await run_inprocess(suite, clients(), run_dir=tmp_path))
    fc, none, kw = (m["conditions"][k]["overall"]["pass"]["mean"] for k in ("full-context", "none", "kw"))
    assert fc == 1.0 and none == 0.0 and 0.0 < kw <= 1.0
    assert m["conditions"]["none"]["na_queries"] == 2


async def test_quaid_scores_and_scorecard(tmp_path):
    suite = QuaidWeeksSuite({"weeks": 4}, seed=1)
    m = suite.score(await run_inprocess(suite, clients(), run_dir=tmp_path))
    assert m["baseline"] == "full-context"
    kw = m["conditions"]["kw"]
    assert kw["delivery"] == "facts" and kw["accuracy"] is not None
    assert m["conditions"]["none"]["metrics"]["null_false_positive_rate"]["mean"] == 0.0
    assert m["conditions"]["full-context"]["metrics"]["null_false_positive_rate"]["mean"] == 1.0
    sc = m["comparisons"]["kw"]["scorecard"]
    assert sc["metrics"] == 13 and sc["wins"] + sc["losses"] + sc["ties"] + sc["n/a"] == 13
    assert "Scorecard (seed 001 §8): kw vs full-context" in suite.render(m)


async def test_poisoned_memory_envelope(tmp_path):
    suite = PoisonedMemorySuite()
    m = suite.score(await run_inprocess(suite, clients(), run_dir=tmp_path))
    kw = m["conditions"]["kw"]
    assert kw["returned"] >= 1 and kw["envelope_tags"] == ["kw_memories"]
    # the keyword backend escapes '</' but not chat-template tokens or ']]>'
    assert 0 < kw["contained"] <= kw["returned"]
    assert m["conditions"]["full-context"]["envelope_tags"] == []


async def test_arclight_with_judge_passes_and_pairwise(tmp_path):
    llm = FakeLLM()
    suite = ArclightSuite({"pairwise": True, "limit": 6}, seed=4)
    samples = await run_inprocess(suite, clients(), llm=llm, run_dir=tmp_path, judge_passes=3)
    conds = {s["condition"] for s in samples}
    assert conds == {"compacted", "compacted + kw", "compacted + full-context"}
    plus = [s for s in samples if s["condition"] == "compacted + kw"]
    for s in plus:
        assert len(s["judge"]["passes"]) == 3 and s["judge_prompt"] == "JUDGE_SYSTEM"
        pw = s["pairwise"]
        assert sorted(pw["order_shown"]) == ["a", "b"] and pw["prompt"] == "PAIRWISE_JUDGE_SYSTEM"
        assert pw["a"] == "compacted" and pw["b"] == "compacted + kw"
    m = suite.score(samples)
    m["judge"] = {"model": "fake", "offline_mock": True, "passes": 3}
    md = suite.render(m)
    assert "offline rubric judge (llm-mock), not a model" in md
    assert "compaction summary alone" in md  # fallback is said out loud
    assert m["conditions"]["compacted + kw"]["pairwise"]["n"] == 6


async def test_pairwise_order_randomised_and_mapped_back():
    class Ctx:
        judge_passes = 1
        judge_llm = FakeLLM()

    orders = set()
    for seed in range(12):
        r = await judges.pairwise_judge(Ctx(), "q?", "port 4000", "it is 4000 port", "no idea", seed)
        orders.add(tuple(r["order_shown"]))
        assert r["winner"] == "a"  # whatever the order shown, the better answer (a) wins
    assert orders == {("a", "b"), ("b", "a")}


async def test_binary_judge_majority():
    class Ctx:
        judge_passes = 3
        judge_llm = FakeLLM()

    r = await judges.binary_judge(Ctx(), "Where?", "Portland", "She lives in Portland")
    assert r["correct"] is True and r["passes"] == [1, 1, 1] and r["prompt"] == "BINARY_JUDGE_SYSTEM"
    r = await judges.binary_judge(Ctx(), "Where?", "Portland", "Seattle")
    assert r["correct"] is False


def test_judge_label():
    assert C.judge_label({"judge": {"offline_mock": True, "passes": 1}}).startswith(
        "judge: offline rubric judge (llm-mock), not a model")
    assert "gpt-4o" in C.judge_label({"judge": {"model": "gpt-4o", "offline_mock": False}})
    assert C.judge_label({}) == "judge: not recorded"
