"""Issue 46 item 3: the cortex adapter's doubling settle poll, cortex-mock's per-phase job timings, the figures
services/studies/ingest_profile.py derives from them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from services.adapters.cortex import backend as cortex_backend
from services.adapters.cortex.backend import CortexBackend
from services.studies.ingest_profile import by_length, job_spans


def intervals(cfg: dict, n: int) -> list[float]:
    polls = CortexBackend({"base_url": "http://127.0.0.1:9", **cfg}).poll_intervals()
    return [round(next(polls), 6) for _ in range(n)]


def test_settle_poll_doubles_from_the_minimum_up_to_the_interval():
    assert intervals({}, 7) == [0.01, 0.02, 0.04, 0.08, 0.16, 0.2, 0.2]
    assert intervals({"settle_poll_min_ms": 200}, 3) == [0.2, 0.2, 0.2]  # the fixed poll of before
    assert intervals({"settle_poll_min_ms": 500, "settle_poll_ms": 50}, 2) == [0.05, 0.05]  # never above the max
    assert intervals({"settle_poll_min_ms": 3, "settle_poll_ms": 20}, 5) == [0.003, 0.006, 0.012, 0.02, 0.02]


@pytest.mark.parametrize("key", ["settle_poll_ms", "settle_poll_min_ms"])
def test_a_poll_interval_of_zero_is_refused_naming_it(key):
    with pytest.raises(ValueError, match=key):
        CortexBackend({"base_url": "http://127.0.0.1:9", key: 0})


class Jobs:
    """The job is done at the `done_at`-th status request; knowledge totals hold still."""

    def __init__(self, done_at: int):
        self.done_at, self.asked, self.knowledge_calls = done_at, 0, 0

    async def get_job(self, job_id, timeout_ms, key):
        self.asked += 1
        return {"job_id": job_id, "status": "completed" if self.asked >= self.done_at else "running"}

    async def knowledge(self, user_id, timeout_ms, key):
        self.knowledge_calls += 1
        return {"total_memories": 3, "total_sessions": 1}

    async def close(self):
        return None


async def test_settle_sleeps_follow_the_doubling_and_restart_for_the_knowledge_polls(monkeypatch):
    slept: list[float] = []

    async def sleep(s):
        slept.append(round(s, 6))

    monkeypatch.setattr(cortex_backend.asyncio, "sleep", sleep)
    b = CortexBackend({"base_url": "http://127.0.0.1:9"})
    b.client = Jobs(done_at=4)  # type: ignore[assignment]
    b.jobs["ns"] = {"j1": 3}
    st = await b.settle("ns", 30)
    assert st.settled and st.items_indexed == 3
    # three rounds find the job running (10, 20, 40 ms after each), the fourth done; then two knowledge reads 10 ms
    # apart agree (settle_knowledge_stable_polls = 2)
    assert slept == [0.01, 0.02, 0.04, 0.01]
    assert b.client.knowledge_calls == 2


def test_job_spans_from_job_records():
    jobs = [
        {"created_at": 100.0, "started_at": 100.5, "finished_at": 101.0, "processing_ms": 500.0,
         "result": {"timings_ms": {"extract": 100.0, "embed": 300.0, "write": 50.0}}},
        {"created_at": 100.1, "started_at": 101.0, "finished_at": 101.6, "processing_ms": 600.0,
         "result": {"timings_ms": {"embed": 400.0, "lock": 100.0, "snapshot": 20.0, "install": 30.0}}},
    ]
    s = job_spans(jobs, t_submit=99.9, t_end=101.9)
    assert s["jobs"] == 2
    assert s["queue"] == pytest.approx(0.5 + 0.9)
    assert s["extract"] == pytest.approx(0.1) and s["embed"] == pytest.approx(0.7) and s["lock"] == pytest.approx(0.1)
    assert s["write"] == pytest.approx(0.05) and s["snapshot"] == pytest.approx(0.02)
    assert s["other"] == pytest.approx(0.05 + 0.05)  # 500 - 450 and 600 - 550 ms outside the phases
    assert s["busy"] == pytest.approx(101.6 - 99.9) and s["overshoot"] == pytest.approx(0.3)
    assert job_spans([], 5.0, 4.0)["overshoot"] == 0.0  # clocks a hair apart never give a negative overshoot


def test_batches_grouped_by_padded_length():
    rows = [{"texts": 4, "padded_len": 256, "s": 0.4}, {"texts": 16, "padded_len": 40, "s": 0.16},
            {"texts": 2, "padded_len": 256, "s": 0.2}, {"texts": 10, "padded_len": 12, "s": 0.01}]
    assert by_length(rows) == {">128": {"batches": 2, "texts": 6, "ms_per_text": 100.0},
                               ">32": {"batches": 1, "texts": 16, "ms_per_text": 10.0},
                               "<=32": {"batches": 1, "texts": 10, "ms_per_text": 1.0}}


async def test_an_ingest_job_reports_its_phases(tmp_path):
    from services.cortex_mock.config import MockConfig
    from services.cortex_mock.engine import CortexEngine, encode_payload

    eng = CortexEngine(MockConfig(data_dir=str(tmp_path), embedder="hash"))
    body = {"messages": [{"role": "user", "content": "The staging cluster runs on Fargate in eu-west-1."},
                         {"role": "assistant", "content": "Noted: the deploy pipeline uses GitHub Actions runners."}],
            "session_id": "s1", "reference_date": datetime(2026, 1, 5, tzinfo=UTC)}
    try:
        res = await eng.run_job({"job_id": "j1", "tenant_id": "t", "kind": "ingest_conversation",
                                 "payload": encode_payload(body)})
    finally:
        await eng.close()
    t = res["timings_ms"]
    assert set(t) == {"extract", "embed", "lock", "snapshot", "write", "install"}
    assert all(v >= 0 for v in t.values()) and sum(t.values()) <= res["processing_ms"]
    assert res["facts_extracted"] == 2


def test_torch_threads_default_one_and_the_variable_checked():
    from services.common.embeddings import torch_threads
    from services.common.errors import InputError

    assert torch_threads({}) == 1 and torch_threads({"MEMRIG_TORCH_THREADS": " "}) == 1
    assert torch_threads({"MEMRIG_TORCH_THREADS": "2"}) == 2
    for bad in ("0", "-1", "two", "1.5"):
        with pytest.raises(InputError, match="MEMRIG_TORCH_THREADS"):
            torch_threads({"MEMRIG_TORCH_THREADS": bad})


def suite_sample() -> list[str]:
    """Dense's texts of the oracle suite's first namespaces (long turns that fill 256 tokens among them), or, without
    the data, texts of the same spread of lengths."""
    import numpy as np

    try:
        from services.coordinator.suites.registry import get_suite
        from services.studies.ingest_profile import dense_texts

        corpora = dict(list(get_suite("longmemeval")({}, seed=0).load().corpora.items())[:3])
    except Exception:  # the data is absent (the suite says so); the synthetic texts below stand in
        corpora = {}
    texts = [t for ts in dense_texts(corpora).values() for t in ts] if corpora else []
    if len(texts) < 20:
        rng = np.random.default_rng(1)
        words = "memory agent note search session user assistant reply question long short sandals".split()
        texts = [" ".join(rng.choice(words, size=int(n))) for n in rng.integers(2, 400, size=60)]
    return texts


@pytest.mark.slow
def test_minilm_with_one_torch_thread_gives_the_vectors_of_two(monkeypatch):
    import numpy as np
    import torch

    from services.common.embeddings import MiniLMEmbedder

    monkeypatch.delenv("MEMRIG_TORCH_THREADS", raising=False)
    before = torch.get_num_threads()
    texts = suite_sample()
    try:
        e = MiniLMEmbedder(None)
        assert torch.get_num_threads() == 1
        now = e.encode(texts)
        torch.set_num_threads(2)  # torch's default on the 2-core host, the rig's setting before
        reference = e.encode(texts)
    finally:
        torch.set_num_threads(before)
    assert now.shape == reference.shape == (len(texts), 384)
    assert float(np.min(np.sum(now * reference, axis=1))) > 1 - 1e-3
