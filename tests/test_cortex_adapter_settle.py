"""The cortex adapter's settle asks about pending jobs oldest first and stops at the first one still pending
(the service runs its queue in about submission order), except in the last round before the deadline, which
asks about every job so the pending count it reports is exact."""

from __future__ import annotations

from services.adapters.cortex.backend import CortexBackend


class Jobs:
    """get_job from a status table; records the ids asked about."""

    def __init__(self, status: dict[str, str]):
        self.status = status
        self.asked: list[str] = []

    async def get_job(self, job_id, timeout_ms, key):
        self.asked.append(job_id)
        return {"job_id": job_id, "status": self.status[job_id]}

    async def knowledge(self, user_id, timeout_ms, key):
        return {"total_memories": 7, "total_sessions": 1}

    async def close(self):
        return None


def backend(status: dict[str, str], items: dict[str, int]) -> tuple[CortexBackend, Jobs]:
    b = CortexBackend({"base_url": "http://127.0.0.1:9", "settle_poll_ms": 1})
    fake = Jobs(status)
    b.client = fake  # type: ignore[assignment]
    b.jobs["ns"] = dict(items)
    return b, fake


async def test_a_round_stops_at_the_first_pending_job():
    status = {"j1": "completed", "j2": "running", "j3": "completed", "j4": "failed"}
    b, fake = backend(status, {"j1": 1, "j2": 2, "j3": 3, "j4": 4})
    await b._poll_jobs("ns", sweep=False)
    assert fake.asked == ["j1", "j2"]  # j3 and j4 not asked: j2 is still running
    assert b.indexed["ns"] == 1 and list(b.jobs["ns"]) == ["j2", "j3", "j4"]
    await b._poll_jobs("ns", sweep=True)
    assert fake.asked[2:] == ["j2", "j3", "j4"]
    assert b.indexed["ns"] == 1 + 3 and b.failed_jobs["ns"] == 4 and list(b.jobs["ns"]) == ["j2"]


async def test_jobs_behind_a_stuck_one_are_counted_at_the_deadline():
    status = {"j1": "completed", "j2": "pending", "j3": "completed", "j4": "completed"}
    b, fake = backend(status, {"j1": 1, "j2": 2, "j3": 3, "j4": 4})
    st = await b.settle("ns", 0.05)
    assert not st.settled and st.items_pending == 2 and st.items_indexed == 1 + 3 + 4
    # every non-final round asked about j2 once and stopped; j3 and j4 were asked about by the final sweep only
    assert fake.asked.count("j3") == 1 and fake.asked.count("j4") == 1 and fake.asked.count("j1") == 1
    assert fake.asked.count("j2") >= 2


async def test_settles_once_every_job_is_done():
    status = {"j1": "pending", "j2": "pending"}
    b, fake = backend(status, {"j1": 5, "j2": 2})
    await b._poll_jobs("ns", sweep=False)
    assert fake.asked == ["j1"]
    status.update(j1="completed", j2="completed")
    st = await b.settle("ns", 30)
    assert st.settled and st.items_indexed == 7 and st.items_pending == 0 and st.counts["total_memories"] == 7
    assert fake.asked == ["j1", "j1", "j2"]


class Expired(Jobs):
    """404 for the ids in `gone` (a job table that forgot them), else the status table."""

    def __init__(self, status, gone):
        super().__init__(status)
        self.gone = gone

    async def get_job(self, job_id, timeout_ms, key):
        from services.adapters.cortex.client import CortexHTTPError

        self.asked.append(job_id)
        if job_id in self.gone:
            raise CortexHTTPError("job status", 404, '{"detail": "unknown job"}')
        return {"job_id": job_id, "status": self.status[job_id]}


async def test_a_job_the_service_forgot_is_not_waited_for():
    """404: the record expired; waiting would never end. It is counted apart, and the round goes on."""
    b = CortexBackend({"base_url": "http://127.0.0.1:9", "settle_poll_ms": 1})
    fake = Expired({"j2": "completed", "j3": "pending"}, gone={"j1"})
    b.client = fake  # type: ignore[assignment]
    b.jobs["ns"] = {"j1": 4, "j2": 2, "j3": 1}
    await b._poll_jobs("ns", sweep=False)
    assert fake.asked == ["j1", "j2", "j3"] and list(b.jobs["ns"]) == ["j3"]
    assert b.unknown_jobs["ns"] == 4 and b.indexed["ns"] == 2
    fake.status["j3"] = "completed"
    st = await b.settle("ns", 30)
    assert st.settled and st.items_indexed == 3 and st.counts["items_job_unknown"] == 4


def test_the_settle_budget_grows_with_the_items_still_pending():
    """180 s (the engram benchmark's) or 1 s an item still pending, whichever is longer; the caller caps it. A BEAM
    500K conversation's ~1,100 messages were left queued at 180 s (docs/results/beam.md)."""
    b, _ = backend({}, {"j1": 300, "j2": 800})
    assert b.settle_budget("ns", 0) == 1_100.0  # 1,100 items pending at 1 s each
    assert b.settle_budget("ns", 600.0) == 600.0  # the caller's timeout caps it
    assert b.settle_budget("other", 0) == 180.0 and b.settle_budget("other", 30.0) == 30.0  # nothing pending
    b.jobs["ns"] = {"j1": 100}
    assert b.settle_budget("ns", 10_000.0) == 180.0  # 100 s of items: the floor holds
    assert CortexBackend({"base_url": "http://127.0.0.1:9", "settle_s_per_item": 0.5}).settle_budget("x", 0) == 180.0
