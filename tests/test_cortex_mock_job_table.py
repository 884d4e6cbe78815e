"""cortex-mock's in-process job table keeps every job that has not finished: past MAX_INPROCESS_JOBS records it
forgets the oldest finished ones only (before, a large batch evicted records of jobs still queued, and the
worker skipped those jobs: their ingests were lost)."""

from __future__ import annotations

import asyncio

from services.cortex_mock import jobs as jobs_mod
from services.cortex_mock.jobs import InProcessJobs


class GatedEngine:
    """run_job waits for `gate`; records the payloads it ran."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.ran: list[str] = []

    async def run_job(self, rec):
        await self.gate.wait()
        self.ran.append(rec["payload"])
        return {"nodes_created": 1}


async def test_queued_jobs_survive_a_full_table_and_finished_ones_are_evicted_oldest_first(monkeypatch):
    monkeypatch.setattr(jobs_mod, "MAX_INPROCESS_JOBS", 3)
    eng = GatedEngine()
    q = InProcessJobs(eng, workers=1)
    await q.start()
    try:
        ids = [(await q.submit("t", "ingest", f"p{i}"))["job_id"] for i in range(5)]
        assert len(q.jobs) == 5  # over the cap, but none has finished: nothing may go
        eng.gate.set()
        for _ in range(200):
            if len(eng.ran) == 5 and q.counts.counts["completed"] == 5:
                break
            await asyncio.sleep(0.01)
        assert eng.ran == ["p0", "p1", "p2", "p3", "p4"]  # every job ran, in order
        assert list(q.jobs) == ids[2:]  # 5 finished, cap 3: the two oldest finished are forgotten
        assert await q.get(ids[0]) is None and (await q.get(ids[4]))["status"] == "completed"
        assert "payload" not in q.jobs[ids[4]]  # a finished record keeps its status and result, not its input
        # a new job pushes out the oldest finished one (ids[2]), never itself
        new = (await q.submit("t", "ingest", "p5"))["job_id"]
        assert list(q.jobs) == [ids[3], ids[4], new]
    finally:
        await q.stop()


async def test_finished_results_are_kept_within_a_byte_budget(monkeypatch):
    """An ingest's result lists what it made: count alone let the table hold GBs. Past the byte budget the oldest
    finished records go, whatever their number."""
    class BigResults(GatedEngine):
        async def run_job(self, rec):
            return {"facts": ["x" * 90]}  # JSON {"facts": ["x...x"]}: 12 + 90 + 3 = 105 bytes

    monkeypatch.setattr(jobs_mod, "MAX_INPROCESS_JOB_BYTES", 250)  # two such results fit, three do not
    q = InProcessJobs(BigResults(), workers=1)
    await q.start()
    try:
        ids = [(await q.submit("t", "ingest", f"p{i}"))["job_id"] for i in range(4)]
        for _ in range(200):
            if q.counts.counts["completed"] == 4:
                break
            await asyncio.sleep(0.01)
        assert list(q.jobs) == ids[2:] and q.finished_bytes == 2 * 105
        assert await q.get(ids[1]) is None
        assert jobs_mod.public_view(await q.get(ids[3]))["result"] == {"facts": ["x" * 90]}
        assert q.jobs[ids[3]]["result"] == '{"facts": ["' + "x" * 90 + '"]}'  # kept as its JSON text
    finally:
        await q.stop()
