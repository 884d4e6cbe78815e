"""Async ingest/reflect jobs: pending -> running -> completed | failed.

InProcessJobs: an asyncio queue served by a bounded number of worker tasks in the server process.
RedisJobs: a reliable queue in Redis served by worker processes (`python -m services.cortex_mock.worker`):
- submit: the job hash `P:job:<id>` + LPUSH `P:queue`.
- claim: BLMOVE `P:queue` -> `P:processing:<worker>` (RIGHT -> LEFT), so a claimed job is never only in memory.
- lease: each worker refreshes `P:worker:<worker>` (PX = lease) from a heartbeat task; the worker id is in the
  set `P:workers`.
- reaper (in every worker and in the server): for a worker whose lease expired, a Lua script atomically moves
  each job in its processing list back to the queue (attempts < max) or marks it failed with the reason.
- completion: the job hash gets the result, then LREM from the processing list. An ingest that committed
  before its worker died is recorded in the tenant DB (`applied_jobs`), so the retry returns that result
  instead of ingesting twice; and when no attempt is left (`--max-attempts 1`) and the reaper marks such a job
  failed, `GET /v1/jobs/{id}` reads `applied_jobs` and reports it completed (the commit is the truth).
Job status lives in Redis in that mode; the server reads it from there.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any

log = logging.getLogger("cortex_mock.jobs")

STATUSES = ("pending", "running", "completed", "failed")
JOB_TTL_S = 7 * 86400
# Finished job records kept for GET /v1/jobs/{id}; enough for a 100k-memory bench-perf step submitted before its
# first poll. A record keeps its status and result, and an ingest's result lists every fact and entity it made: a
# LongMemEval S session's is ~10 KB, so the count alone let the table grow by ~5 MB a haystack (RSS 344 -> 836 MB
# over 92 of them). Past either limit the oldest finished records go (their GET is a 404, as when a job's record has
# expired: the adapter counts those, items_job_unknown). Unfinished jobs are never evicted.
MAX_INPROCESS_JOBS = 200_000
MAX_INPROCESS_JOB_BYTES = 64 * 2**20  # the finished records' results, kept as JSON text


def new_job_id() -> str:
    return str(uuid.uuid4())


def public_view(rec: dict[str, Any]) -> dict[str, Any]:
    """The GET /v1/jobs/{id} body: {job_id, status, result?, error?} plus the P4 summary fields."""
    out: dict[str, Any] = {"job_id": rec["job_id"], "status": rec["status"], "kind": rec.get("kind"),
                           "attempts": int(rec.get("attempts") or 0), "created_at": rec.get("created_at"),
                           "started_at": rec.get("started_at"), "finished_at": rec.get("finished_at")}
    result = rec.get("result")
    if isinstance(result, str) and result:
        result = json.loads(result)
    if rec["status"] == "completed" and result:
        out["result"] = result
        for k in ("facts_extracted", "nodes_created", "edges_created", "processing_ms"):
            if k in result:
                out[k] = result[k]
    if rec.get("error"):
        out["error"] = rec["error"]
    if rec.get("worker"):
        out["worker"] = rec["worker"]
    return out


class JobCounts:
    """Jobs by status (submitted = pending) for the jobs counter, whichever backend holds them."""

    def __init__(self) -> None:
        self.counts: dict[str, float] = {s: 0.0 for s in (*STATUSES, "retried")}

    def inc(self, status: str, n: float = 1.0) -> None:
        self.counts[status] = self.counts.get(status, 0.0) + n


class SharedJobTable:
    """Job records in `<data_dir>/jobs.sqlite`, so with `--processes N` (no Redis) whichever server process a
    `GET /v1/jobs/{id}` lands on can answer for a job another process runs. Blocking: call via to_thread."""

    def __init__(self, path: str) -> None:
        import sqlite3
        import threading

        self._lock = threading.Lock()
        self.conn = sqlite3.connect(path, check_same_thread=False, timeout=30, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA busy_timeout=30000")
        self.conn.execute("CREATE TABLE IF NOT EXISTS jobs (job_id TEXT PRIMARY KEY, record TEXT NOT NULL,"
                          " updated_at REAL NOT NULL)")

    def put(self, rec: dict[str, Any]) -> None:
        with self._lock:
            self.conn.execute("INSERT OR REPLACE INTO jobs(job_id, record, updated_at) VALUES (?,?,?)",
                              (rec["job_id"], json.dumps(rec, default=str), time.time()))

    def get(self, job_id: str) -> dict[str, Any] | None:
        with self._lock:
            row = self.conn.execute("SELECT record FROM jobs WHERE job_id=?", (job_id,)).fetchone()
        return json.loads(row[0]) if row else None

    def close(self) -> None:
        with self._lock:
            self.conn.close()


class InProcessJobs:
    backend = "inprocess"

    def __init__(self, engine, workers: int = 2, shared: SharedJobTable | None = None,
                 clock: Callable[[], float] = time.time):
        self.engine = engine
        self.clock = clock
        self.n_workers = max(1, workers)
        self.queue: asyncio.Queue[str] = asyncio.Queue()
        self.jobs: OrderedDict[str, dict[str, Any]] = OrderedDict()
        # finished job ids, oldest first: only these records are ever evicted (a pending job's record is its
        # only copy: evicting it made the worker skip the job, and the ingest was lost)
        self._finished: deque[str] = deque()
        self._sizes: dict[str, int] = {}  # finished job id -> its result's JSON size
        self.finished_bytes = 0
        self.counts = JobCounts()
        self._tasks: list[asyncio.Task] = []
        self.shared = shared

    async def _publish(self, rec: dict[str, Any]) -> None:
        if self.shared is not None:
            await asyncio.to_thread(self.shared.put, dict(rec))

    async def start(self) -> None:
        self._tasks = [asyncio.create_task(self._worker(i), name=f"cortex-job-worker-{i}")
                       for i in range(self.n_workers)]

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        if self.shared is not None:
            self.shared.close()

    async def submit(self, tenant_id: str, kind: str, payload: str) -> dict[str, Any]:
        rec = {"job_id": new_job_id(), "tenant_id": tenant_id, "kind": kind, "payload": payload,
               "status": "pending", "attempts": 0, "created_at": self.clock()}
        self.jobs[rec["job_id"]] = rec
        self._evict()
        self.counts.inc("pending")
        await self._publish(rec)
        await self.queue.put(rec["job_id"])
        return rec

    def _evict(self) -> None:
        """Past MAX_INPROCESS_JOBS records or MAX_INPROCESS_JOB_BYTES of finished results, forget the oldest
        finished jobs (never a pending or running one)."""
        while self._finished and (len(self.jobs) > MAX_INPROCESS_JOBS
                                  or self.finished_bytes > MAX_INPROCESS_JOB_BYTES):
            job_id = self._finished.popleft()
            self.jobs.pop(job_id, None)
            self.finished_bytes -= self._sizes.pop(job_id, 0)

    def _finish(self, rec: dict[str, Any]) -> None:
        rec.pop("payload", None)  # done: its status and result are what is asked for
        if rec.get("result") is not None and not isinstance(rec["result"], str):
            # kept as its JSON text (public_view reads either, as it does Redis's): the same result as Python
            # objects took ~10x the memory, so the budget below would not have bounded RSS
            rec["result"] = json.dumps(rec["result"], default=str)
        size = len(rec.get("result") or "") + len(str(rec.get("error") or ""))
        self._sizes[rec["job_id"]] = size
        self.finished_bytes += size
        self._finished.append(rec["job_id"])
        self._evict()

    async def get(self, job_id: str) -> dict[str, Any] | None:
        rec = self.jobs.get(job_id)
        if rec is None and self.shared is not None:  # submitted to another server process on the port
            rec = await asyncio.to_thread(self.shared.get, job_id)
        return rec

    async def depth(self) -> int:
        return self.queue.qsize()

    async def refresh_counts(self) -> None:
        return None

    async def _worker(self, i: int) -> None:
        while True:
            job_id = await self.queue.get()
            rec = self.jobs.get(job_id)
            if rec is None:
                continue
            rec.update(status="running", started_at=self.clock(), attempts=rec["attempts"] + 1, worker=f"task-{i}")
            self.counts.inc("running")
            await self._publish(rec)
            try:
                res = await self.engine.run_job(rec)
                rec.update(status="completed", result=res, finished_at=self.clock())
                self.counts.inc("completed")
            except asyncio.CancelledError:
                rec.update(status="failed", error="server stopped while the job was running", finished_at=self.clock())
                if self.shared is not None:
                    self.shared.put(dict(rec))  # cancelled: no await; one small write
                raise
            except Exception as e:  # a failing job must not kill the worker
                log.exception("job %s failed", job_id)
                rec.update(status="failed", error=f"{type(e).__name__}: {e}", finished_at=self.clock())
                self.counts.inc("failed")
            self._finish(rec)
            await self._publish(rec)


# KEYS: processing list, queue, counts hash. ARGV: job key prefix, max attempts, reason.
# Requeues (or fails) every job left in a dead worker's processing list, atomically.
_REAP_LUA = """
local n = 0
while true do
  local id = redis.call('RPOP', KEYS[1])
  if not id then break end
  local jk = ARGV[1] .. id
  local attempts = tonumber(redis.call('HGET', jk, 'attempts') or '0')
  if attempts >= tonumber(ARGV[2]) then
    redis.call('HSET', jk, 'status', 'failed', 'error', ARGV[3] .. ' (attempt ' .. attempts .. ' of ' .. ARGV[2] .. ')',
               'finished_at', ARGV[4])
    redis.call('HINCRBY', KEYS[3], 'failed', 1)
  else
    redis.call('HSET', jk, 'status', 'pending', 'requeued_at', ARGV[4])
    redis.call('RPUSH', KEYS[2], id)
    redis.call('HINCRBY', KEYS[3], 'retried', 1)
  end
  n = n + 1
end
return n
"""


class RedisJobs:
    backend = "redis"

    def __init__(self, url: str, prefix: str = "cortexmock", lease_ms: float = 10_000, max_attempts: int = 3,
                 clock: Callable[[], float] = time.time):
        """`clock` (epoch seconds) stamps the jobs and decides when a lease has expired: a lease is the
        expiry time written by the worker's heartbeat, compared with this clock by the reaper (Redis's own
        key TTL, 3 leases long, only collects the keys of workers gone for good). Tests inject a fake one."""
        from services.common.redis_client import async_redis

        self.clock = clock
        self.r = async_redis(url, decode_responses=True)
        self.p = prefix
        self.lease_ms = int(lease_ms)
        self.max_attempts = max_attempts
        self.counts = JobCounts()
        self._reap = self.r.register_script(_REAP_LUA)
        self._tasks: list[asyncio.Task] = []

    # keys
    @property
    def queue_key(self) -> str:
        return f"{self.p}:queue"

    def job_key(self, job_id: str) -> str:
        return f"{self.p}:job:{job_id}"

    def processing_key(self, wid: str) -> str:
        return f"{self.p}:processing:{wid}"

    def lease_key(self, wid: str) -> str:
        return f"{self.p}:worker:{wid}"

    async def start(self) -> None:
        await self.r.ping()
        self._tasks = [asyncio.create_task(self._reaper_loop(), name="cortex-reaper")]

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        await self.r.aclose()

    async def submit(self, tenant_id: str, kind: str, payload: str) -> dict[str, Any]:
        rec = {"job_id": new_job_id(), "tenant_id": tenant_id, "kind": kind, "payload": payload,
               "status": "pending", "attempts": 0, "created_at": self.clock()}
        async with self.r.pipeline(transaction=True) as pipe:
            pipe.hset(self.job_key(rec["job_id"]), mapping={k: str(v) for k, v in rec.items()})
            pipe.expire(self.job_key(rec["job_id"]), JOB_TTL_S)
            pipe.lpush(self.queue_key, rec["job_id"])
            pipe.hincrby(f"{self.p}:counts", "pending", 1)
            await pipe.execute()
        return rec

    async def get(self, job_id: str) -> dict[str, Any] | None:
        h = await self.r.hgetall(self.job_key(job_id))
        if not h:
            return None
        for k in ("created_at", "started_at", "finished_at"):
            if h.get(k):
                h[k] = float(h[k])
        return h

    async def depth(self) -> int:
        return int(await self.r.llen(self.queue_key))

    async def refresh_counts(self) -> None:
        h = await self.r.hgetall(f"{self.p}:counts")
        for k, v in h.items():
            self.counts.counts[k] = float(v)

    async def reap_once(self) -> int:
        """Requeue jobs of workers whose lease expired. Returns the number of jobs moved."""
        moved = 0
        for wid in await self.r.smembers(f"{self.p}:workers"):
            if await self.lease_alive(wid):
                continue
            n = int(await self._reap(
                keys=[self.processing_key(wid), self.queue_key, f"{self.p}:counts"],
                args=[f"{self.p}:job:", self.max_attempts, f"worker {wid} lost mid-job (lease expired)", self.clock()]))
            if not await self.r.llen(self.processing_key(wid)):
                await self.r.srem(f"{self.p}:workers", wid)
            if n:  # this worker's own jobs (the running total named the wrong worker)
                log.warning("reaper: requeued/failed %d job(s) of dead worker %s", n, wid)
            moved += n
        return moved

    async def renew_lease(self, wid: str) -> None:
        await self.r.set(self.lease_key(wid), repr(self.clock() + self.lease_ms / 1000.0), px=3 * self.lease_ms)

    async def lease_alive(self, wid: str) -> bool:
        v = await self.r.get(self.lease_key(wid))
        try:
            return v is not None and float(v) > self.clock()
        except ValueError:  # a lease written by an older worker (its pid): alive while the key lives
            return v is not None

    async def _reaper_loop(self) -> None:
        interval = max(0.05, self.lease_ms / 2000.0)
        while True:
            try:
                await self.reap_once()
            except asyncio.CancelledError:
                raise
            except Exception:  # Redis hiccup: try again next tick
                log.exception("reaper tick failed")
            await asyncio.sleep(interval)

    # -- worker side ------------------------------------------------------------------------------------
    async def serve(self, engine, concurrency: int = 1, stop: asyncio.Event | None = None,
                    worker_id: str | None = None, stop_grace_s: float = 10.0) -> None:
        """Run a worker until `stop` is set: heartbeat, reaper and `concurrency` claim loops.

        Shutdown is bounded: the claim loops get `stop_grace_s` to finish or be cancelled (a cancel that a
        Redis command swallows cannot hold it longer: `asyncio.wait` does not wait past its timeout), then
        the lease is deleted and this worker's unfinished jobs are handed back by one reap, each step with a
        2 s budget. Total: at most stop_grace_s + 4 s."""
        stop = stop or asyncio.Event()
        wid = worker_id or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.worker_id = wid
        await self.renew_lease(wid)
        await self.r.sadd(f"{self.p}:workers", wid)
        hb = asyncio.create_task(self._heartbeat(wid, stop))
        reaper = asyncio.create_task(self._reaper_loop())
        loops = [asyncio.create_task(self._claim_loop(engine, wid, stop)) for _ in range(max(1, concurrency))]
        try:
            await stop.wait()
        finally:
            stop.set()
            for t in loops:
                t.cancel()
            _, stuck = await asyncio.wait(loops, timeout=stop_grace_s)
            if stuck:
                log.warning("%d claim loop(s) did not stop within %.1fs; abandoning them", len(stuck), stop_grace_s)
            for t in (hb, reaper):
                t.cancel()
            await asyncio.wait([hb, reaper], timeout=1.0)
            # Graceful stop: hand unfinished jobs back right away instead of waiting for the lease to expire.
            for step in (self.r.delete(self.lease_key(wid)), self.reap_once()):
                try:
                    await asyncio.wait_for(step, 2.0)
                except (TimeoutError, Exception):  # Redis gone: the reaper of another worker does it later
                    log.warning("shutdown step failed; the lease expiry will release the jobs", exc_info=True)

    async def _heartbeat(self, wid: str, stop: asyncio.Event | None = None) -> None:
        """Refresh the lease until stopped (checking `stop`, so a stopping worker stops claiming liveness)."""
        while stop is None or not stop.is_set():
            await self.renew_lease(wid)
            await asyncio.sleep(self.lease_ms / 3000.0)

    async def _claim_loop(self, engine, wid: str, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                job_id = await self.r.blmove(self.queue_key, self.processing_key(wid), 1, "RIGHT", "LEFT")
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("claim failed")
                await asyncio.sleep(0.5)
                continue
            if job_id is None:
                continue
            jk = self.job_key(job_id)
            rec = await self.r.hgetall(jk)
            if not rec:
                await self.r.lrem(self.processing_key(wid), 1, job_id)
                continue
            attempts = await self.r.hincrby(jk, "attempts", 1)
            await self.r.hset(jk, mapping={"status": "running", "started_at": self.clock(), "worker": wid})
            await self.r.hincrby(f"{self.p}:counts", "running", 1)
            rec["attempts"] = attempts
            try:
                res = await engine.run_job(rec)
                fields = {"status": "completed", "result": json.dumps(res), "finished_at": self.clock(), "error": ""}
                counter = "completed"
            except asyncio.CancelledError:
                raise  # stopping: the job stays in the processing list and is handed back
            except Exception as e:
                log.exception("job %s failed", job_id)
                fields = {"status": "failed", "error": f"{type(e).__name__}: {e}", "finished_at": self.clock()}
                counter = "failed"
            async with self.r.pipeline(transaction=True) as pipe:
                pipe.hset(jk, mapping=fields)
                pipe.hincrby(f"{self.p}:counts", counter, 1)
                pipe.lrem(self.processing_key(wid), 1, job_id)
                await pipe.execute()
