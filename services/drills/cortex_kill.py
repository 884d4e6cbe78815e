"""rig-faults' `cortex-proxy-kill` case: cortex-mock (its API process and its Redis job workers) and then the fault
proxy SIGKILLed under locust load, each restarted on the same port, Redis and data directory (issue 49's fifth case).

The setting: redis-server (the job queue, and the proxy's fault definitions), cortex-mock with `--redis-url` and two
supervised worker processes (`--job-delay-ms`, so a worker is mostly inside a job, and a short `--lease-ms`, so a dead
worker's job is handed back within a second or two), the fault proxy in front of it (its faults in the same Redis),
and a locust subprocess (loadtests/cortex_locustfile.py: retrieve, recall and ingest jobs polled to the end) with a
few users through the proxy. Locust runs in its own process only: nothing here imports it.

1. Once jobs are flowing, the drill submits its own ingest jobs (a second tenant, two namespaces, texts it knows)
   and waits for a job that has just started running. Then every cortex-mock process is frozen (SIGSTOP, so nothing
   moves while the state is read), the state is read (`snapshot`: every job in Redis with its status, attempts and
   result; every memory in every tenant's SQLite file with its text, namespace and the job that made it), and the
   processes are SIGKILLed: the API process and each worker. Two seconds later cortex-mock is started again, same
   port, Redis and data directory. The clients saw, through the proxy, 502 "fault-proxy: upstream failed".
2. Then the proxy is SIGKILLed and restarted on its port: clients saw connection errors (HTTP 0); the fault it held
   (in Redis) is served again.
3. With the load stopped and the queue drained, the state is read again and compared (`state_problems`): every job
   accepted before the kill is there, a finished one unchanged, an unfinished one (queued, or running in a killed
   worker) completed, once; every memory there before is there with its text; every memory added since comes from a
   job that had not finished before the kill; no job applied twice, no memory stored twice. The drill's own jobs
   each left exactly the memory of their text, in their namespace.
The clients' failures (locust's per-request log, and its failures CSV for the counts) are each inside one of the two
windows and of the kind stated for it; none outside them.
"""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.common import process
from services.cortex_mock.store import tenant_id_for_key

ROOT = Path(__file__).resolve().parents[2]
PREFIX = "cortexmock"  # cortex-mock's Redis key prefix (its default)
PROXY_NAME = "rig-faults"
LOAD_KEY = "rig-faults-load"  # the locust users' tenant
DRILL_KEY = "rig-faults-drill"  # the drill's own jobs
WORKERS = 2
JOB_DELAY_MS = 800  # every job sleeps this long first: a worker is mostly mid-job when it is killed
LEASE_MS = 1000  # a killed worker's job is handed back once its lease (1 s) has expired
USERS = 4
DOWN_S = 2.0  # how long each killed process stays down under the load
SETTLE_S = 1.0  # a window ends this long after the restarted process is ready (connections re-made)
# The drill's own memories: one fact each, per namespace (the tenant's user_id).
DRILL_TEXTS = {
    "ns-a": ["Quentin rotated the signing key of the ledger service on 4 March.",
             "The ledger service keeps its audit log in bucket rf-audit-7731."],
    "ns-b": ["Ingrid moved the nightly export job of the reporting service to 02:30 UTC.",
             "The reporting service reads from the replica reporting-ro-4418."],
}
# What a client sees while each process is down (locust's failure text, services/drills/cortex_kill.failure_kind):
# with cortex-mock down the proxy answers 502 ("fault-proxy: upstream failed"); with the proxy down there is no
# answer at all (HTTP 0: the connection refused, or reset for a request it held). JOB is a whole ingest job, submit to
# done: its submit or a poll failed the same way.
EXPECTED = {"cortex-mock": ("HTTP 502", "JobFailed: submit failed", "JobFailed: poll HTTP 502"),
            "fault-proxy": ("HTTP 0 (", "JobFailed: submit failed", "JobFailed: poll HTTP 0 (")}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def children(pid: int) -> list[int]:
    """The live child processes of `pid` (from /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                rest = f.read().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        if rest[0] != "Z" and int(rest[1]) == pid:
            out.append(int(entry))
    return sorted(out)


def http(method: str, url: str, body: Any = None, key: str | None = None, timeout: float = 10.0
         ) -> tuple[int, Any]:
    """(status, parsed JSON body); status 0 with the error's text when there is no answer."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"content-type": "application/json",
                                                                         **({"x-api-key": key} if key else {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")
    except OSError as e:
        return 0, f"{type(e).__name__}: {e}"


# ------------------------------------------------------------------------------------------------------
# the persisted state


def redis_client(url: str):
    import redis

    return redis.Redis.from_url(url, decode_responses=True)


def jobs_snapshot(r, prefix: str = PREFIX) -> dict[str, dict[str, Any]]:
    """Every job record in Redis: job id -> {status, attempts, tenant_id, kind, worker, result}."""
    out = {}
    for k in r.scan_iter(match=f"{prefix}:job:*", count=1000):
        h = r.hgetall(k)
        if h:
            out[k.rsplit(":", 1)[1]] = {"status": h.get("status"), "attempts": int(h.get("attempts") or 0),
                                        "tenant_id": h.get("tenant_id"), "kind": h.get("kind"),
                                        "worker": h.get("worker", ""), "result": h.get("result", "")}
    return out


def memories_snapshot(data_dir: Path) -> dict[str, dict[str, Any]]:
    """Per tenant (its SQLite file in cortex-mock's data dir): `memories` (every FACT node: id -> {text, ns, job})
    and `applied` (the jobs whose ingest committed: applied_jobs)."""
    out: dict[str, dict[str, Any]] = {}
    for p in sorted(data_dir.glob("cortex_*.sqlite")):
        tenant = p.name[len("cortex_"):-len(".sqlite")]
        conn = sqlite3.connect(str(p), timeout=30)
        try:
            mem = {}
            for nid, content, md in conn.execute("SELECT id, content, metadata FROM nodes WHERE type='FACT'"):
                m = json.loads(md or "{}")
                mem[nid] = {"text": content, "ns": m.get("user_id"), "job": m.get("job_id")}
            applied = sorted(j for (j,) in conn.execute("SELECT job_id FROM applied_jobs"))
        finally:
            conn.close()
        out[tenant] = {"memories": mem, "applied": applied}
    return out


def snapshot(r, data_dir: Path) -> dict[str, Any]:
    return {"jobs": jobs_snapshot(r), "tenants": memories_snapshot(data_dir)}


def state_problems(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What the state after the restart (load stopped, queue drained) lost, changed or doubled from the state read
    right before the kill. Empty when: every job of `before` is in `after`, a finished one unchanged and an
    unfinished one completed; every memory of `before` is in `after` with its text and namespace; every memory new in
    `after` was made by a job that had not completed in `before`; each completed ingest job is applied once (and
    every applied job completed); no tenant holds one text twice in one namespace."""
    out: list[str] = []
    bj, aj = before["jobs"], after["jobs"]
    for jid, b in bj.items():
        a = aj.get(jid)
        if a is None:
            out.append(f"job {jid} ({b['status']} before the kill) is gone")
        elif b["status"] in ("completed", "failed"):
            if (a["status"], a["result"]) != (b["status"], b["result"]):
                out.append(f"job {jid} was {b['status']} before the kill, is {a['status']} after (or its result changed)")
        elif a["status"] != "completed":
            out.append(f"job {jid} ({b['status']} at the kill) ended {a['status']}, not completed")
    for jid, a in aj.items():
        if a["status"] != "completed":
            out.append(f"job {jid} is {a['status']} after the drain")
    done_before = {j for j, b in bj.items() if b["status"] == "completed"}
    for tenant, b in before["tenants"].items():
        a = after["tenants"].get(tenant)
        if a is None:
            out.append(f"tenant {tenant}'s store is gone")
            continue
        for nid, m in b["memories"].items():
            got = a["memories"].get(nid)
            if got is None:
                out.append(f"memory {nid} of {tenant} ({m['text'][:60]!r}) is gone")
            elif (got["text"], got["ns"]) != (m["text"], m["ns"]):
                out.append(f"memory {nid} of {tenant} changed: {m['text'][:40]!r} -> {got['text'][:40]!r}")
        missing_applied = set(b["applied"]) - set(a["applied"])
        if missing_applied:
            out.append(f"{tenant}: applied jobs gone: {sorted(missing_applied)[:3]}")
    for tenant, a in after["tenants"].items():
        known = before["tenants"].get(tenant, {"memories": {}})["memories"]
        for nid, m in a["memories"].items():
            if nid not in known and (m["job"] is None or m["job"] in done_before):
                out.append(f"memory {nid} of {tenant} is new but its job {m['job']} had completed before the kill")
        texts = Counter((m["ns"], m["text"]) for m in a["memories"].values())
        out += [f"{tenant}: {t[1][:60]!r} stored {n} times in namespace {t[0]}" for t, n in texts.items() if n > 1]
        if len(a["applied"]) != len(set(a["applied"])):
            out.append(f"{tenant}: a job applied twice")
    applied = {j for t in after["tenants"].values() for j in t["applied"]}
    ingests = {j for j, a in aj.items() if a["kind"] in ("ingest", "ingest_conversation") and a["status"] == "completed"}
    if ingests - applied:
        out.append(f"completed ingest jobs with nothing applied: {sorted(ingests - applied)[:3]}")
    if applied - set(aj):
        out.append(f"applied jobs Redis does not know: {sorted(applied - set(aj))[:3]}")
    return out


# ------------------------------------------------------------------------------------------------------
# what the clients saw


@dataclass
class Window:
    what: str  # the process that was down: cortex-mock | fault-proxy
    start: float  # wall clock: frozen / killed
    end: float  # wall clock: ready again + SETTLE_S


def failure_kind(error: str) -> str:
    """A locust failure's text without the exception's class when it is the check's own (CatchResponseError), as
    the request log (`Class: text`) and the failures CSV (`Class('text')`) write it: `HTTP 502`,
    `HTTP 0 (ConnectionRefusedError)`, `JobFailed: submit failed`."""
    m = re.fullmatch(r"(\w+)\((['\"])(.*)\2\)", error.strip(), re.S)
    cls, text = (m.group(1), m.group(3)) if m else (error.split(": ", 1) + [""])[:2] if ": " in error else ("", error)
    return text if cls == "CatchResponseError" else f"{cls}: {text}" if cls else text


def expected(window: str, kind: str) -> bool:
    return any(kind == e or (e.endswith("(") and kind.startswith(e)) for e in EXPECTED[window])


def classify(records: list[Any], windows: list[Window]) -> dict[str, Any]:
    """Every failed request (loadtests.request_log records) placed in the window it overlaps, by kind; `outside`
    lists those in no window, `unexpected` those of a kind the window does not expect."""
    by_window: dict[str, Counter] = {w.what: Counter() for w in windows}
    outside, unexpected = [], []
    ok_after = {w.what: 0 for w in windows}
    for rec in records:
        w = next((w for w in windows if rec.start <= w.end and rec.end >= w.start), None)
        if rec.ok:
            if w is None:
                for x in windows:
                    ok_after[x.what] += rec.start > x.end
            continue
        kind = failure_kind(rec.error)
        if w is None:
            outside.append(f"{rec.type} {rec.name}: {rec.error[:120]}")
            continue
        by_window[w.what][kind] += 1
        if not expected(w.what, kind):
            unexpected.append(f"{w.what} window: {rec.type} {rec.name}: {rec.error[:120]}")
    return {"by_window": {k: dict(v) for k, v in by_window.items()}, "outside": outside, "unexpected": unexpected,
            "ok_after": ok_after}


def locust_failures_csv(path: Path) -> Counter:
    """locust_failures.csv: occurrences by kind."""
    out: Counter = Counter()
    if path.exists():
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                out[failure_kind(row["Error"])] += int(row["Occurrences"])
    return out


def locust_totals(path: Path) -> tuple[int, int]:
    """(requests, failures) of locust_stats.csv's Aggregated row."""
    if path.exists():
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                if row["Name"] == "Aggregated":
                    return int(row["Request Count"]), int(row["Failure Count"])
    return 0, 0


# ------------------------------------------------------------------------------------------------------
# the processes


@dataclass
class Rig:
    """redis-server, cortex-mock (+ its workers), the fault proxy and locust: this case's processes, each stopped by
    PID at the end (`close`)."""

    d: Path
    env: dict[str, str]
    redis: subprocess.Popen | None = None
    redis_url: str = ""
    cortex: subprocess.Popen | None = None
    cortex_port: int = 0
    proxy: subprocess.Popen | None = None
    proxy_port: int = 0
    locust: subprocess.Popen | None = None
    restarts: Counter = field(default_factory=Counter)

    @property
    def cortex_url(self) -> str:
        return f"http://127.0.0.1:{self.cortex_port}"

    @property
    def proxy_url(self) -> str:
        return f"http://127.0.0.1:{self.proxy_port}"

    def start_redis(self) -> None:
        port = free_port()
        (self.d / "redis").mkdir(exist_ok=True)
        self.redis = process.spawn(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir",
                                    str(self.d / "redis"), "--save", "", "--appendonly", "no"],
                                   self.d / "redis.log", env=self.env)
        self.redis_url = f"redis://127.0.0.1:{port}/0"
        r = redis_client(self.redis_url)
        deadline = time.monotonic() + 15
        while True:
            try:
                if r.ping():
                    break
            except Exception:
                if self.redis.poll() is not None or time.monotonic() > deadline:
                    from services.common.errors import LaunchError

                    raise LaunchError(f"redis-server did not start; log {self.d / 'redis.log'}") from None
                time.sleep(0.05)
        r.close()

    def cortex_argv(self) -> list[str]:
        return [sys.executable, "-m", "services.cortex_mock", "--port", str(self.cortex_port),
                "--workers", str(WORKERS), "--redis-url", self.redis_url, "--embedder", "hash",
                "--data-dir", str(self.d / "cortex-data"), "--lease-ms", str(LEASE_MS),
                "--job-delay-ms", str(JOB_DELAY_MS), "--max-attempts", "3"]

    def start_cortex(self) -> None:
        n = self.restarts["cortex-mock"]
        log = self.d / f"cortex-mock{'.' + str(n) if n else ''}.log"
        self.cortex = process.spawn(self.cortex_argv(), log, env=self.env, cwd=ROOT)
        ports = process.wait_ready(self.cortex, "cortex-mock", log, 120.0, grace_s=3.0)
        self.cortex_port = ports["http"]
        self.restarts["cortex-mock"] += 1

    def start_proxy(self) -> None:
        n = self.restarts["fault-proxy"]
        log = self.d / f"fault-proxy{'.' + str(n) if n else ''}.log"
        argv = [sys.executable, "-m", "services.fault_proxy", "--upstream", self.cortex_url, "--port",
                str(self.proxy_port), "--redis-url", self.redis_url, "--name", PROXY_NAME, "--seed", "49"]
        self.proxy = process.spawn(argv, log, env=self.env, cwd=ROOT)
        self.proxy_port = process.wait_ready(self.proxy, "fault-proxy", log, 60.0, grace_s=3.0)["http"]
        self.restarts["fault-proxy"] += 1

    def start_locust(self, seconds: int) -> None:
        out = self.d / "load"
        out.mkdir(exist_ok=True)
        argv = [sys.executable, "-m", "locust", "-f", str(ROOT / "loadtests" / "cortex_locustfile.py"), "--headless",
                "--host", self.proxy_url, "-u", str(USERS), "-r", str(USERS), "-t", f"{seconds}s",
                "--csv", str(out / "locust"), "--run-dir", str(out), "--request-log", "--only-summary",
                "--stop-timeout", "5"]
        env = {**self.env, "MEMRIG_CORTEX_API_KEY": LOAD_KEY, "MEMRIG_LOAD_SEED": "49",
               "MEMRIG_LOAD_WAIT": "0.05,0.3", "MEMRIG_LOAD_JOB_TIMEOUT_S": "30"}
        self.locust = process.spawn(argv, self.d / "locust.log", env=env, cwd=ROOT)

    def stop_locust(self) -> int | None:
        """SIGTERM: locust stops its users and writes its stats (CSV, request log); SIGKILL after 30 s."""
        if self.locust is None:
            return None
        process.stop(self.locust, grace_s=30.0)
        return self.locust.returncode

    def cortex_pids(self) -> list[int]:
        """The API process and its worker processes."""
        return [self.cortex.pid, *children(self.cortex.pid)] if self.cortex is not None else []

    def close(self) -> None:
        for p in (self.locust, self.proxy, self.cortex):
            if p is not None:
                process.stop(p, grace_s=20.0)
        if self.redis is not None:
            process.stop(self.redis, grace_s=5.0)


def signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def wait_for(pred, timeout_s: float, poll_s: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(poll_s)
    return bool(pred())


# ------------------------------------------------------------------------------------------------------
# the case


def running_job(r, fresh_s: float = 0.3) -> str | None:
    """A job a worker started less than `fresh_s` ago (so it is still in its JOB_DELAY_MS sleep), if any."""
    now = time.time()
    for jid, j in jobs_snapshot(r).items():
        if j["status"] == "running":
            started = r.hget(f"{PREFIX}:job:{jid}", "started_at")
            if started and now - float(started) < fresh_s:
                return jid
    return None


def run(res: Any, d: Path, env: dict[str, str]) -> None:
    """The case, into `res` (a rig_faults.CaseResult: facts, checks, rig_did). `env` carries the case's marker; every
    process is stopped by PID before this returns."""
    rig = Rig(d, env)
    r = None
    windows: list[Window] = []
    try:
        rig.start_redis()
        r = redis_client(rig.redis_url)
        rig.start_cortex()
        rig.start_proxy()
        fault = {"name": "rf-kept", "type": "latency", "attributes": {"latency_ms": 1},
                 "match": {"path_regex": "^/v1/stats$"}}
        code, _ = http("POST", f"{rig.proxy_url}/__admin/faults", fault)
        res.check(code in (200, 201), f"the proxy refused the fault to keep: HTTP {code}")
        rig.start_locust(120)
        load_tenant, drill_tenant = tenant_id_for_key(LOAD_KEY), tenant_id_for_key(DRILL_KEY)

        def done_jobs() -> int:
            return sum(1 for j in jobs_snapshot(r).values() if j["status"] == "completed")

        res.check(wait_for(lambda: done_jobs() >= 3, 60, 0.2), "the load completed no 3 ingest jobs within 60 s")
        # 1. cortex-mock: the drill's own jobs queued behind the load's, a fresh running job, then freeze, read, kill
        drill_jobs: dict[str, tuple[str, str]] = {}
        for ns, texts in DRILL_TEXTS.items():
            for text in texts:
                code, body = http("POST", f"{rig.cortex_url}/v1/jobs/ingest", {"text": text, "user_id": ns},
                                  key=DRILL_KEY)
                if res.check(code == 200 and isinstance(body, dict), f"a drill job was refused: {code} {body}"):
                    drill_jobs[body["job_id"]] = (ns, text)
        wait_for(lambda: running_job(r) is not None, 15)
        pids = rig.cortex_pids()
        t_freeze = time.time()
        signal_all(pids, signal.SIGSTOP)
        before = snapshot(r, d / "cortex-data")
        signal_all(pids, signal.SIGKILL)
        rig.cortex.wait(10)
        res.check(wait_for(lambda: not any(process.pid_alive(p) for p in pids), 5),
                  f"cortex-mock's processes outlived SIGKILL: {[p for p in pids if process.pid_alive(p)]}")
        in_flight = {j: b for j, b in before["jobs"].items() if b["status"] == "running"}
        pending = {j: b for j, b in before["jobs"].items() if b["status"] == "pending"}
        res.facts.update(cortex_pids=pids, in_flight=sorted(in_flight), pending_at_kill=len(pending),
                         jobs_before=len(before["jobs"]),
                         memories_before=sum(len(t["memories"]) for t in before["tenants"].values()))
        res.check(len(pids) == 1 + WORKERS, f"cortex-mock ran {len(pids)} processes, not 1 + {WORKERS} workers")
        res.check(bool(in_flight), "no job was running in a worker at the kill")
        time.sleep(DOWN_S)
        rig.start_cortex()
        windows.append(Window("cortex-mock", t_freeze, time.time() + SETTLE_S))

        def settled(ids) -> bool:
            jobs = jobs_snapshot(r)
            return all(jobs.get(j, {}).get("status") in ("completed", "failed") for j in ids)

        res.check(wait_for(lambda: settled([*in_flight, *drill_jobs]), 30, 0.2),
                  "the in-flight and the drill's jobs did not finish within 30 s of the restart")
        time.sleep(2.0)
        # 2. the fault proxy
        faults_key = f"memrig:fault_proxy:{PROXY_NAME}:faults"
        faults_before = r.hgetall(faults_key)
        t_pkill = time.time()
        os.kill(rig.proxy.pid, signal.SIGKILL)
        rig.proxy.wait(10)
        time.sleep(DOWN_S)
        rig.start_proxy()
        windows.append(Window("fault-proxy", t_pkill, time.time() + SETTLE_S))
        code, listed = http("GET", f"{rig.proxy_url}/__admin/faults")
        items = listed.get("faults", []) if isinstance(listed, dict) else listed if isinstance(listed, list) else []
        names = sorted(f.get("name") for f in items if isinstance(f, dict))
        res.facts.update(proxy_faults=names)
        res.check(code == 200 and names == ["rf-kept"] and r.hgetall(faults_key) == faults_before,
                  f"the proxy's fault did not survive its restart: HTTP {code} {names}")
        time.sleep(2.5)
        t_stop = time.time()
        res.facts["locust_exit"] = rig.stop_locust()
        res.check(wait_for(lambda: not any(j["status"] in ("pending", "running") for j in jobs_snapshot(r).values()),
                           30, 0.2), "jobs still queued or running 30 s after the load stopped")
        after = snapshot(r, d / "cortex-data")
        # 3. the state: before vs after
        problems = state_problems(before, after)
        res.facts.update(state_problems=problems, jobs_after=len(after["jobs"]),
                         memories_after=sum(len(t["memories"]) for t in after["tenants"].values()))
        for p in problems[:10]:
            res.problems.append(f"state: {p}")
        retried = {j: after["jobs"][j]["attempts"] for j in in_flight if j in after["jobs"]}
        res.facts["in_flight_attempts"] = retried
        res.check(all(a >= 2 for a in retried.values()),
                  f"an in-flight job was not run again after its worker died: attempts {retried}")
        mem = after["tenants"].get(drill_tenant, {"memories": {}})["memories"]
        got = sorted((m["ns"], m["text"], m["job"]) for m in mem.values())
        want = sorted((ns, text, j) for j, (ns, text) in drill_jobs.items())
        res.facts["drill_memories"] = len(got)
        res.check(got == want, f"the drill's memories are {got}, not one per job: {want}")
        res.check(load_tenant in after["tenants"], "the load's tenant has no store")
        # the clients
        from loadtests.request_log import read_request_log

        recs = read_request_log(d / "load")
        seen = classify(recs, windows)
        csv_kinds = locust_failures_csv(d / "load" / "locust_failures.csv")
        total, failed = locust_totals(d / "load" / "locust_stats.csv")
        res.facts.update(windows=[(w.what, round(w.end - w.start, 1)) for w in windows], clients=seen,
                         csv_failures=dict(csv_kinds), requests=total, failures=failed,
                         logged=len(recs), load_s=round(t_stop - recs[0].start, 1) if recs else 0)
        res.check(total > 0 and len(recs) >= total, f"locust counted {total} requests, its log has {len(recs)}")
        res.check(sum(csv_kinds.values()) == failed == sum(1 for x in recs if not x.ok),
                  f"locust's failures: CSV {dict(csv_kinds)} / stats {failed} / log "
                  f"{sum(1 for x in recs if not x.ok)} disagree")
        for w in windows:
            kinds = seen["by_window"][w.what]
            res.check(any(k.startswith("HTTP") and expected(w.what, k) for k in kinds),
                      f"no client saw {EXPECTED[w.what][0].rstrip(' (')} while {w.what} was down: {kinds}")
            res.check(seen["ok_after"][w.what] > 0, f"no request succeeded after {w.what} came back")
        res.check(not seen["outside"], f"client failures outside the kill windows: {seen['outside'][:5]}")
        res.check(not seen["unexpected"], f"failures of an unexpected kind: {seen['unexpected'][:5]}")
    finally:
        if r is not None:
            r.close()
        rig.close()
