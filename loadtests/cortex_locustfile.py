"""Locust users for the Cortex API, normally through the fault proxy (`--host http://127.0.0.1:<proxy>`).

A CortexUser does what the OpenClaw Cortex plugin does during agent turns (loadtests/workload.py): retrieve
fast (most turns) and full, a `/v1/recall` tool call now and then, and a capture as an async ingest job that
is polled at `/v1/jobs/{id}` until completed or failed. The whole job (submit → done) is also reported as a
synthetic request "ingest job (end to end)", so its latency and failures show up beside the HTTP calls.

Closed model: each user waits for its answer before its next request, so these latencies are service times,
not corrected for coordinated omission (use loadtests/open_loop.py for SLO numbers).

    locust -f loadtests/cortex_locustfile.py --headless -u 10 -r 5 -t 30s --host http://127.0.0.1:8792 \
        --csv out/locust --html out/locust.html --json-file out/locust --run-dir out --request-log \
        --fault-timeline seeded:1

Env: MEMRIG_CORTEX_API_KEY (x-api-key, default "memrig-local"), MEMRIG_LOAD_SEED (default 0),
MEMRIG_LOAD_WAIT ("min,max" think time seconds, default "0.1,0.5"), MEMRIG_LOAD_SHAPE / _PARAMS (shapes.py).
"""

from __future__ import annotations

import itertools
import os
import time

import gevent
from locust import FastHttpUser, between, task

import loadtests.locust_hooks  # noqa: F401 - registers options, request log, fault timeline, exporter
from loadtests.shapes import selected_shape
from loadtests.workload import Mix, Payloads
from services.common.errors import DependencyError

API_KEY = os.environ.get("MEMRIG_CORTEX_API_KEY", "memrig-local")
SEED = int(os.environ.get("MEMRIG_LOAD_SEED", "0"))
_WAIT = [float(x) for x in os.environ.get("MEMRIG_LOAD_WAIT", "0.1,0.5").split(",")]
JOB_POLL_S = float(os.environ.get("MEMRIG_LOAD_JOB_POLL_S", "0.2"))
JOB_TIMEOUT_S = float(os.environ.get("MEMRIG_LOAD_JOB_TIMEOUT_S", "20"))
MIX = Mix()
_user_ids = itertools.count()


class JobFailed(DependencyError):
    """An ingest job that was not accepted, could not be polled, failed, or did not finish in time."""

    dependency = "the Cortex API under load"


def http_failure(r) -> str:
    """`HTTP <status>`; with no answer at all (status 0) the socket error's class too, so a refused or reset
    connection reads as such: `HTTP 0 (ConnectionRefusedError)`."""
    err = getattr(r, "error", None) if r.status_code == 0 else None
    return f"HTTP {r.status_code}" + (f" ({type(err).__name__})" if err is not None else "")


class CortexUser(FastHttpUser):
    host = os.environ.get("MEMRIG_CORTEX_URL", "http://127.0.0.1:8792")
    wait_time = between(_WAIT[0], _WAIT[-1])
    default_headers = {"x-api-key": API_KEY, "content-type": "application/json"}
    # A fault window must show up as failures, not be hidden behind long client waits.
    network_timeout = 10.0
    connection_timeout = 5.0

    def on_start(self) -> None:
        n = next(_user_ids)
        # Seeded per user: the same seed gives the same request sequence per user index and process.
        self.payloads = Payloads(seed=SEED * 10_007 + n * 31 + os.getpid() % 1000, user_id=f"load-user-{n}")

    def _post(self, path: str, body: dict, name: str | None = None):
        with self.client.post(path, json=body, name=name or path, catch_response=True) as r:
            if r.status_code >= 400 or r.status_code == 0:
                r.failure(http_failure(r))
                return None
            try:
                return r.json()
            except Exception as e:  # a body the client cannot parse is a failure
                r.failure(f"bad JSON: {e}")
                return None

    @task(MIX.retrieve_fast)
    def retrieve_fast(self) -> None:
        self._post("/v1/retrieve", self.payloads.retrieve("fast"), "/v1/retrieve [fast]")

    @task(MIX.retrieve_full)
    def retrieve_full(self) -> None:
        self._post("/v1/retrieve", self.payloads.retrieve("full"), "/v1/retrieve [full]")

    @task(MIX.recall)
    def recall(self) -> None:
        self._post("/v1/recall", self.payloads.recall())

    @task(MIX.ingest_job)
    def ingest_job(self) -> None:
        t0 = time.time()
        exc: Exception | None = None
        job = self._post("/v1/jobs/ingest/conversation", self.payloads.conversation())
        if not job or "job_id" not in job:
            exc = JobFailed("submit failed")
        else:
            exc = self._poll(job["job_id"], t0)
        self.environment.events.request.fire(
            request_type="JOB", name="ingest job (end to end)", response_time=(time.time() - t0) * 1000.0,
            response_length=0, response=None, context={}, exception=exc, start_time=t0)

    def _poll(self, job_id: str, t0: float) -> Exception | None:
        while time.time() - t0 < JOB_TIMEOUT_S:
            with self.client.get(f"/v1/jobs/{job_id}", name="/v1/jobs/[id]", catch_response=True) as r:
                if r.status_code >= 400 or r.status_code == 0:
                    r.failure(http_failure(r))
                    return JobFailed(f"poll {http_failure(r)}")
                try:
                    status = r.json().get("status")
                except Exception as e:
                    r.failure(f"bad JSON: {e}")
                    return JobFailed("poll bad JSON")
            if status == "completed":
                return None
            if status == "failed":
                return JobFailed("job failed")
            gevent.sleep(JOB_POLL_S)
        return JobFailed(f"job not done after {JOB_TIMEOUT_S:g}s")


_shape = selected_shape()
if _shape is not None:
    LoadShape = _shape
