"""`memrig drill rig-faults`: the rig's own processes killed, hung, fed garbage and denied their disk, one small real
run each (issue 49), with what the rig did and what was lost.

    memrig drill rig-faults [--out DIR] [--cases backend-kill,coordinator-kill,...] [--keep]

Every case runs `memrig bench --suite octybot` (50 probes, retrieval only) as a child process over three cheap
backends (bm25, dense and full-context, with the `hash` embedder), each case with its own state directory so no
stored result stands in for a measurement, and compares what it ends with against one uninterrupted run of the same
command (`baseline`): the per-probe values and the metric tables, timings apart, and `memrig compare`.

The cases (one line each, PASS or FAIL with the figures):
- backend-kill: one backend SIGKILLed during ingest (stopped with SIGSTOP once started, so the run's ingest waits on
  it, then killed), another during probes; the run records both as failed with the reason and the probes each
  lost, the third finishes, and a resume runs exactly the lost probes.
- coordinator-kill: `memrig bench` itself SIGKILLed five times into the same --out: mid-write of run.json (after the
  backends started), during ingest, mid-append of a sample (half a line on disk), during probes, mid-write of
  metrics.json; then a resume. No sample lost, none twice, no torn line left unsuperseded, no run file torn, and
  `memrig compare` against the uninterrupted run finds no change.
- hang-garbage: two more backends beside bm25 and full-context: one accepts Retrieve and never answers, one answers
  it with bytes that are not a response (services/drills/faulty_backend.py); with `--deadline-s 2` each fails
  named with the backend and the call, and the other backends' probes all finish.
- results-unwritable: --out under a regular file; the results directory replaced by a file mid-run; the disk full
  mid-run (RLIMIT_FSIZE in the coordinator, so writes past the limit fail with EFBIG as on a full disk). A one-line
  error naming the file, no traceback, every line written before intact, and a resume after the fix completes.
- cortex-proxy-kill (services/drills/cortex_kill.py; no bench run): cortex-mock with Redis-backed jobs (its API
  process and its worker processes, one mid-job) SIGKILLed under locust load through the fault proxy, then the
  proxy; each restarted on its port, Redis and data dir. The clients' failures are 502s while cortex-mock is down
  and unanswered requests while the proxy is, none outside; the jobs and memories read right before the kill are
  all there after the restart, the unfinished jobs completed once, no memory lost or doubled.
After every case no process of it survives: every process whose environment carries the case's marker is gone.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.common import process

ROOT = Path(__file__).resolve().parents[2]
MARK = "MEMRIG_RIG_FAULTS"  # in every process a case starts (inherited down the tree): how survivors are found
SUITE = "octybot"
BACKENDS = ("bm25", "dense", "full-context")
PROBES = 50  # octybot's probes per backend
DEADLINE_S = 2.0
FSIZE_LIMIT = 150_000  # bytes: samples.jsonl passes it after ~30 of 150 samples
TIMING = re.compile(r"latency|duration|_ms$|_s$|^p\d+")


@dataclass
class CaseResult:
    name: str
    fault: str
    rig_did: str = ""
    lost: str = "nothing"
    problems: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0

    @property
    def passed(self) -> bool:
        return not self.problems

    def line(self) -> str:
        head = f"{'PASS' if self.passed else 'FAIL'} {self.name} ({self.wall_s:.0f} s): {self.fault} -> {self.rig_did}; lost: {self.lost}"
        return head + "".join(f"\n    problem: {p}" for p in self.problems)

    def check(self, ok: bool, problem: str) -> bool:
        if not ok:
            self.problems.append(problem)
        return ok


# ------------------------------------------------------------------------------------------------------
# a bench run as a child process


class Bench:
    """`memrig bench` (or crash_at around it) as a child, its stderr read line by line as it comes."""

    def __init__(self, argv: list[str], env: dict[str, str], preexec: Callable[[], None] | None = None):
        self.argv = argv
        self.t0 = time.monotonic()
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
                                  preexec_fn=preexec)
        self.lines: list[tuple[float, str]] = []
        self.out = ""
        self._cv = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.p.stderr:
            with self._cv:
                self.lines.append((time.monotonic() - self.t0, line.rstrip("\n")))
                self._cv.notify_all()
        with self._cv:
            self._cv.notify_all()

    def wait_line(self, pred: Callable[[str], bool], timeout_s: float = 180.0) -> str | None:
        """The first stderr line (seen so far or later) `pred` accepts; None when the process ended or the time
        passed without one."""
        deadline = time.monotonic() + timeout_s
        seen = 0
        with self._cv:
            while True:
                for _, line in self.lines[seen:]:
                    if pred(line):
                        return line
                seen = len(self.lines)
                if not self._reader.is_alive() or time.monotonic() > deadline:
                    return None
                self._cv.wait(0.2)

    def wait(self, timeout_s: float = 300.0) -> int:
        try:
            self.out = self.p.stdout.read() if self.p.stdout else ""
            self.p.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self._reader.join(10)
        return self.p.returncode

    def kill(self) -> int:
        os.kill(self.p.pid, signal.SIGKILL)
        return self.wait()

    @property
    def err(self) -> str:
        return "\n".join(line for _, line in self.lines)

    def at(self, pred: Callable[[str], bool]) -> float | None:
        return next((t for t, line in self.lines if pred(line)), None)


def start_service(argv: list[str], log: Path, env: dict[str, str], timeout_s: float = 120.0
                  ) -> tuple[subprocess.Popen, dict[str, int]]:
    """A rig service as this drill's child, its output in `log`; (process, the ports of its READY line). One that
    exits first or is not ready in time is a LaunchError naming it, with its log's tail (services/common/process)."""
    p = process.spawn(argv, log, env=env, cwd=ROOT)
    return p, process.wait_ready(p, argv[2] if len(argv) > 2 else argv[0], log, timeout_s, grace_s=3.0)


def stop_children(*procs: subprocess.Popen, grace_s: float = 3.0) -> None:
    """SIGTERM, up to grace_s for all, then SIGKILL; by PID, reaped."""
    process.stop(*procs, grace_s=grace_s)


def backend_pid(run_dir: Path, name: str) -> int | None:
    """The PID a started backend announced in its log (READY ... pid=N)."""
    log = run_dir / "procs" / f"backend_{name}.log"
    m = re.search(r"^READY\b.*\bpid=(\d+)", log.read_text(errors="replace"), re.M) if log.exists() else None
    return int(m.group(1)) if m else None


def marked(token: str) -> list[str]:
    """Live processes (not zombies) whose environment carries MARK=token, but this one."""
    needle = f"{MARK}={token}".encode()
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/stat") as f:
                if f.read().rsplit(") ", 1)[1][0] == "Z":
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            out.append(f"{entry} {cmd[:120]}")
        except (OSError, IndexError):
            continue
    return out


def survivors(token: str, wait_s: float = 10.0) -> list[str]:
    """What still runs of a case after up to wait_s (a guard sweeping a killed run's processes takes up to its grace
    period)."""
    deadline = time.monotonic() + wait_s
    while (left := marked(token)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


# ------------------------------------------------------------------------------------------------------
# what a run left


def raw_samples(run_dir: Path) -> tuple[list[dict[str, Any]], list[int]]:
    """Every readable samples.jsonl line in order, and the line numbers of the torn ones."""
    rows, torn = [], []
    path = run_dir / "samples.jsonl"
    if path.exists():
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if not line.strip():
                continue
            try:
                s = json.loads(line)
                if not isinstance(s, dict) or "key" not in s:
                    raise ValueError
                rows.append(s)
            except ValueError:
                torn.append(n)
    return rows, torn


def _untimed(o: Any) -> Any:
    if isinstance(o, dict):
        return {k: _untimed(v) for k, v in o.items() if not TIMING.search(str(k))}
    if isinstance(o, list):
        return [_untimed(x) for x in o]
    return o


def tables(run_dir: Path) -> dict[str, Any]:
    """What a run's tables say, timings apart: per condition its metric table (metrics.json), and per condition and
    probe every per-probe value (probes.jsonl) but latency."""
    m = json.loads((run_dir / "metrics.json").read_text())
    per_probe = {}
    for line in (run_dir / "probes.jsonl").read_text().splitlines():
        r = json.loads(line)
        per_probe[f"{r['condition']}|{r['probe_id']}"] = _untimed(r["values"])
    return {"conditions": _untimed(m.get("conditions")), "state": m.get("state"), "samples": m.get("samples"),
            "per_probe": per_probe}


def table_differences(a: Path, b: Path) -> list[str]:
    """Where two runs' tables differ (at most 5 places; [] when equal)."""
    from services.coordinator.determinism import tree_differences

    return tree_differences(tables(a), tables(b), "", limit=5)


# ------------------------------------------------------------------------------------------------------
# the campaign


class Campaign:
    def __init__(self, work: Path, say: Callable[[str], None] = print):
        self.work = Path(work)
        self.work.mkdir(parents=True, exist_ok=True)
        self.say = say
        self.baseline_dir = self.work / "baseline" / "run"
        self._llm: subprocess.Popen | None = None
        self.llm_url = ""

    # -- shared pieces ---------------------------------------------------------------------------
    def __enter__(self) -> Campaign:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._llm is not None:
            stop_children(self._llm)
            self._llm = None

    def llm(self) -> str:
        """One llm-mock for every case (octybot asks it nothing; a run only needs its address): saves a process
        start per run. Started without any case's marker, stopped by PID at the end."""
        if self._llm is None:
            env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'proto'}"}
            env.pop(MARK, None)
            self._llm, ports = start_service([sys.executable, "-m", "services.llm_mock", "--port", "0"],
                                             self.work / "llm-mock.log", env)
            self.llm_url = f"http://127.0.0.1:{ports['http']}/v1"
        return self.llm_url

    def env(self, case_dir: Path, token: str) -> dict[str, str]:
        env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'proto'}", "MEMRIG_STATE_DIR": str(case_dir / "state"),
               "MEMRIG_LLM_BASE_URL": self.llm(), MARK: token, "PYTHONUNBUFFERED": "1"}
        for k in ("MEMRIG_RUN_GUARD", "MEMRIG_EMBEDDER"):
            env.pop(k, None)
        return env

    @staticmethod
    def bench_args(out: Path, backends: tuple[str, ...] | list[str] = BACKENDS, *extra: str) -> list[str]:
        return ["bench", "--suite", SUITE, "--backends", ",".join(backends), "--embedder", "hash", "--out", str(out),
                *extra]

    def bench(self, args: list[str], env: dict[str, str], crash: str | None = None,
              preexec: Callable[[], None] | None = None) -> Bench:
        head = [sys.executable, "-m", "services.drills.crash_at", crash, "--"] if crash else \
            [sys.executable, "-m", "services.cli"]
        return Bench([*head, *args], env, preexec)

    def baseline(self) -> Path:
        """One uninterrupted run, the reference of every case (run once per campaign)."""
        if not (self.baseline_dir / "metrics.json").exists():
            token = uuid.uuid4().hex
            b = self.bench(self.bench_args(self.baseline_dir, BACKENDS, "--fresh"), self.env(self.baseline_dir.parent, token))
            code = b.wait()
            if code != 0:
                # the campaign's own reference run: no case can be judged without it (a rig bug, not input)
                raise RuntimeError(f"the uninterrupted run failed ({code}): {b.err[-2000:]}")
            if left := survivors(token):
                # a rig bug the campaign exists to find, in the run every case is compared with
                raise RuntimeError(f"the uninterrupted run left processes running: {left}")
        return self.baseline_dir

    def compare(self, run: Path) -> tuple[int, str]:
        r = subprocess.run([sys.executable, "-m", "services.cli", "compare", str(self.baseline()), str(run)],
                           capture_output=True, text=True, cwd=ROOT, timeout=300,
                           env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'proto'}"})
        return r.returncode, r.stdout + r.stderr

    def finish(self, res: CaseResult, run: Path, token: str, compare: bool = True) -> None:
        """The checks every case ends with: the final run equals the uninterrupted one (tables, timings apart; and
        `memrig compare` when asked), and nothing of the case runs any more."""
        rows, torn = raw_samples(run)
        ok = Counter(s["key"] for s in rows if s.get("status") == "ok")
        base = {s["key"] for s in raw_samples(self.baseline())[0]}
        later = {s["key"] for s in rows}
        res.facts.update(ok_keys=len(ok), twice=sorted(k for k, n in ok.items() if n > 1), torn_lines=torn,
                         missing=sorted(base - set(ok)))
        res.check(not res.facts["missing"], f"samples lost: {res.facts['missing'][:5]}")
        res.check(not res.facts["twice"], f"samples written twice: {res.facts['twice'][:5]}")
        res.check(set(ok) == base and later == base, f"sample keys differ from the uninterrupted run's: {sorted(later ^ base)[:5]}")
        diffs = table_differences(self.baseline(), run)
        res.facts["table_differences"] = diffs
        res.check(not diffs, f"tables differ from the uninterrupted run's: {diffs}")
        stale = sorted(p.name for p in run.iterdir() if p.name.endswith(".tmp"))
        res.facts["stale_tmp"] = stale
        res.check(not stale, f"torn temporary files left in {run}: {stale}")
        if compare:
            code, text = self.compare(run)
            res.facts["compare"] = (code, text.splitlines()[2] if len(text.splitlines()) > 2 else text)
            res.check(code == 0 and "**No change**" in text, f"memrig compare exit {code}: {text[:300]}")
        left = survivors(token)
        res.facts["survivors"] = left
        res.check(not left, f"processes survived the case: {left}")

    def case_dir(self, name: str) -> Path:
        d = self.work / name
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        return d

    # -- backend-kill ----------------------------------------------------------------------------
    def backend_kill(self) -> list[CaseResult]:
        """full-context stopped once started and killed during the ingest; dense killed during the probes."""
        self.baseline()
        t0 = time.monotonic()
        d = self.case_dir("backend-kill")
        run, token = d / "run", uuid.uuid4().hex
        env = self.env(d, token)
        ingest = CaseResult("backend-kill-ingest", "SIGKILL full-context during the ingest")
        probes = CaseResult("backend-kill-probes", "SIGKILL dense during the probes")
        # the reuse lines come once every backend has started and answered Describe (they start two at a time);
        # lanes=2 ingests full-context last (sorted), so it is stopped before its ingest ends
        b = self.bench(self.bench_args(run, ("full-context", "bm25", "dense"), "--fresh", "--lanes", "2"), env)
        victim = None
        if b.wait_line(lambda s: "reuse:  full-context" in s):
            victim = backend_pid(run, "full-context")
            if victim:
                os.kill(victim, signal.SIGSTOP)  # its ingest waits on it...
        ingested = b.wait_line(lambda s: "ingest:  dense" in s) and b.wait_line(lambda s: "ingest:  bm25" in s)
        if victim:
            time.sleep(0.3)
            os.kill(victim, signal.SIGKILL)  # ...and dies under it
        ingest.check(bool(victim and ingested), f"could not stop full-context in the ingest (pid {victim}): {b.err[-800:]}")
        if b.wait_line(lambda s: re.search(r"probes: [1-9]\d*/", s) is not None):
            dense = backend_pid(run, "dense")
            if dense:
                os.kill(dense, signal.SIGKILL)
        code = b.wait()
        rj = json.loads((run / "run.json").read_text())
        rows, torn = raw_samples(run)
        fails = rj.get("failures") or {}
        report = (run / "report.md").read_text() if (run / "report.md").exists() else ""
        lost = {n: sorted(s["probe_id"] for s in rows if s["status"] != "ok" and s["condition"] == n)
                for n in ("full-context", "dense", "bm25")}
        ok_bm25 = sum(1 for s in rows if s["condition"] == "bm25" and s["status"] == "ok")
        for res, name, phase in ((ingest, "full-context", "ingest failed"), (probes, "dense", "failed mid-run")):
            reason = fails.get(name, "")
            res.facts.update(exit=code, reason=reason, lost_probes=len(lost[name]), bm25_ok=ok_bm25)
            res.check(code == 1, f"exit {code}, not 1 (a partial run)")
            res.check(reason.startswith(phase) and name in reason and "UNAVAILABLE" in reason,
                      f"{name}'s failure reads {reason!r}, not '{phase}: ... {name}: UNAVAILABLE ...'")
            res.check(rj["backends"][name]["status"] == "failed", f"run.json does not mark {name} failed")
            res.check(f"backend **{name}**: {reason}; {len(lost[name])} probe(s) lost" in report,
                      f"report.md does not list {name}'s reason and lost probes")
            res.check(ok_bm25 == PROBES and not lost["bm25"], f"bm25 finished {ok_bm25} of {PROBES} probes")
        ingest.check(len(lost["full-context"]) == PROBES, f"full-context lost {len(lost['full-context'])} probes, not all {PROBES}")
        probes.check(0 < len(lost["dense"]) < PROBES, f"dense lost {len(lost['dense'])} of {PROBES} probes (killed mid-probes: some, not all)")
        probes.check(not torn, f"torn lines in samples.jsonl: {torn}")
        left = survivors(token)
        for res in (ingest, probes):
            res.check(not left, f"processes survived the faulted run: {left}")
        # the resume: exactly the lost probes, nothing else
        before = len(rows) + len(torn)
        r = self.bench(self.bench_args(run, ("full-context", "bm25", "dense")), env)
        rcode = r.wait()
        after, _ = raw_samples(run)
        new = sorted(s["key"] for s in after[len(rows):])
        want = sorted(f"{n}|{p}" for n in ("full-context", "dense") for p in lost[n])
        for res in (ingest, probes):
            res.facts.update(resume_exit=rcode, resumed=len(new), lines_before=before)
            res.check(rcode == 0, f"resume exit {rcode}: {r.err[-600:]}")
            res.check(new == want, f"the resume ran {len(new)} probes, not exactly the {len(want)} lost ones")
        self.finish(probes, run, token)
        ingest.facts.update({k: probes.facts[k] for k in ("table_differences", "survivors", "compare") if k in probes.facts})
        ingest.problems += [p for p in probes.problems if p not in ingest.problems and "dense" not in p]
        for res, name in ((ingest, "full-context"), (probes, "dense")):
            res.rig_did = (f"recorded {name} failed ({res.facts['reason'][:90]}...), {res.facts['lost_probes']} probe(s) "
                           f"lost, bm25 finished {ok_bm25}/{PROBES}; --resume ran {len(new)} probes, exactly the lost "
                           f"ones of both; tables = uninterrupted run's")
            res.lost = "nothing" if res.passed else "see problems"
            res.wall_s = time.monotonic() - t0
        return [ingest, probes]

    # -- coordinator-kill ------------------------------------------------------------------------
    def coordinator_kill(self) -> CaseResult:
        self.baseline()
        t0 = time.monotonic()
        d = self.case_dir("coordinator-kill")
        run, token = d / "run", uuid.uuid4().hex
        env = self.env(d, token)
        res = CaseResult("coordinator-kill", "SIGKILL memrig bench at 5 points into one --out")
        args = self.bench_args(run)
        points: list[str] = []

        def killed(b: Bench, what: str) -> None:
            code = b.wait()
            left = survivors(token)
            points.append(what)
            res.check(code == -signal.SIGKILL, f"{what}: exit {code}, not killed: {b.err[-600:]}")
            res.check(not left, f"{what}: processes survived the kill: {left}")
            try:
                json.loads((run / "run.json").read_text())
            except (OSError, ValueError) as e:
                res.problems.append(f"{what}: run.json unreadable after the kill: {e}")

        # 1. mid-write of run.json, the write after every backend started (before any ingest)
        killed(self.bench(args, env, crash="run.json:2"), "run.json half written")
        res.check((run / "run.tmp").exists(), "the crash left no half-written run.tmp (the hook missed)")
        # 2. during the ingest: a backend stopped, so the ingest waits on it; the coordinator killed meanwhile
        b = self.bench(args, env)
        if b.wait_line(lambda s: "reuse:  bm25" in s):  # every backend started and described
            pid = backend_pid(run, "bm25")
            if pid:
                os.kill(pid, signal.SIGSTOP)
        b.wait_line(lambda s: "ingest:  " in s, 120)
        time.sleep(0.3)
        b.p.send_signal(signal.SIGKILL)
        killed(b, "during the ingest")
        # 3. mid-append of the 20th sample: half a line on disk
        killed(self.bench(args, env, crash="samples:20"), "sample half appended")
        _, torn = raw_samples(run)
        res.check(len(torn) == 1, f"expected the one torn line the crash wrote, found {torn}")
        # 4. during the probes, from outside
        b = self.bench(args, env)
        b.wait_line(lambda s: re.search(r"probes: [1-9]\d*/", s) is not None)
        b.p.send_signal(signal.SIGKILL)
        killed(b, "during the probes")
        # 5. mid-write of metrics.json (every sample in)
        killed(self.bench(args, env, crash="file:metrics.json"), "metrics.json half written")
        res.check(any(p.name.startswith(".metrics.json.") for p in run.iterdir()) or (run / "metrics.json").exists() is False,
                  "the metrics.json crash left nothing (the hook missed)")
        r = self.bench(args, env)
        code = r.wait()
        res.check(code == 0, f"the resume exited {code}: {r.err[-800:]}")
        rows, torn = raw_samples(run)
        res.facts.update(points=points, lines=len(rows) + len(torn), torn_lines=torn)
        self.finish(res, run, token)
        res.facts["torn_lines"] = torn  # finish() counts them too: superseded, each key later written whole
        res.rig_did = (f"{len(points)} kills, then a resume: {res.facts.get('ok_keys')} samples, each once, "
                       f"{len(torn)} torn line superseded; no run file torn; memrig compare: no change; "
                       "no process left after any kill")
        res.lost = "nothing" if res.passed else "see problems"
        res.wall_s = time.monotonic() - t0
        return res

    # -- hang-garbage ----------------------------------------------------------------------------
    def hang_garbage(self) -> CaseResult:
        self.baseline()
        t0 = time.monotonic()
        d = self.case_dir("hang-garbage")
        run, token = d / "run", uuid.uuid4().hex
        env = self.env(d, token)
        res = CaseResult("hang-garbage", f"a backend that never answers Retrieve, one that answers it with garbage "
                                         f"(--deadline-s {DEADLINE_S:g})")
        faulty = {}
        try:
            for fault in ("hang", "garbage"):
                p, ports = start_service([sys.executable, "-m", "services.drills.faulty_backend", "--fault", fault,
                                          "--embedder", "hash"], d / f"{fault}.log", env)
                faulty[fault] = (p, ports["grpc"])
            args = self.bench_args(run, ("bm25", "full-context", "hang", "garbage"), "--fresh",
                                   "--deadline-s", f"{DEADLINE_S:g}", "--concurrency", "4",
                                   *[x for f, (_, port) in faulty.items() for x in ("--target", f"{f}=127.0.0.1:{port}")])
            b = self.bench(args, env)
            code = b.wait()
        finally:
            stop_children(*(p for p, _ in faulty.values()))
        rj = json.loads((run / "run.json").read_text())
        fails = rj.get("failures") or {}
        rows, _ = raw_samples(run)
        ok = Counter(s["condition"] for s in rows if s["status"] == "ok")
        t_probes = [t for t, line in b.lines if "probes:" in line]
        span = (t_probes[-1] - t_probes[0]) if t_probes else None
        res.facts.update(exit=code, failures=fails, ok=dict(ok), probes_span_s=span)
        res.check(code == 1, f"exit {code}, not 1 (partial): {b.err[-600:]}")
        hang, garbage = fails.get("hang", ""), fails.get("garbage", "")
        res.check("hang: DEADLINE_EXCEEDED: Retrieve" in hang and f"{DEADLINE_S:g} s deadline" in hang,
                  f"the hung backend's failure reads {hang!r}")
        res.check("garbage: " in garbage and "Retrieve" in garbage, f"the garbage backend's failure reads {garbage!r}")
        res.check(ok.get("bm25") == PROBES and ok.get("full-context") == PROBES,
                  f"the other backends finished {dict(ok)}, not {PROBES} each")
        res.check(span is not None and span < 6 * DEADLINE_S + 10,
                  f"the probes took {span} s: something waited past the deadlines")
        res.check(not ok.get("hang") and not ok.get("garbage"), f"a faulty backend passed probes: {dict(ok)}")
        left = survivors(token)
        res.check(not left, f"processes survived: {left}")
        res.rig_did = (f"hang -> {hang[:110]}; garbage -> {garbage[:110]}; bm25 and full-context {PROBES}/{PROBES} "
                       f"each, probes over in {span:.1f} s" if span is not None else "no probes ran")
        res.lost = "the faulty backends' probes (their own); nothing of the others" if res.passed else "see problems"
        res.wall_s = time.monotonic() - t0
        return res

    # -- results-unwritable ----------------------------------------------------------------------
    def results_unwritable(self) -> list[CaseResult]:
        self.baseline()
        out = [self._out_under_a_file(), self._dir_replaced_mid_run(), self._disk_full_mid_run()]
        return out

    def _error_line(self, res: CaseResult, b: Bench, code: int, path: Path) -> None:
        last = b.err.strip().splitlines()[-1] if b.err.strip() else ""
        res.facts.update(exit=code, error=last)
        res.check(code == 2, f"exit {code}, not 2")
        res.check(last.startswith(f"error: cannot write {path}"), f"the error does not name {path}: {last!r}")
        res.check("Traceback" not in b.err, f"a traceback instead of one line: {b.err[-800:]}")

    def _out_under_a_file(self) -> CaseResult:
        t0 = time.monotonic()
        d = self.case_dir("unwritable-out")
        token = uuid.uuid4().hex
        (d / "file").write_text("a file, not a directory\n")
        res = CaseResult("results-unwritable-start", "--out under a regular file")
        b = self.bench(self.bench_args(d / "file" / "run", BACKENDS, "--fresh"), self.env(d, token))
        code = b.wait()
        self._error_line(res, b, code, d / "file" / "run")
        res.check((d / "file").read_text() == "a file, not a directory\n", "the file in the way was changed")
        left = survivors(token)
        res.check(not left, f"processes survived: {left}")
        res.rig_did = f"exit {code}: {res.facts['error'][:110]}"
        res.lost = "nothing (nothing had run)" if res.passed else "see problems"
        res.wall_s = time.monotonic() - t0
        return res

    def _dir_replaced_mid_run(self) -> CaseResult:
        t0 = time.monotonic()
        d = self.case_dir("unwritable-mid-run")
        run, moved, token = d / "run", d / "run.moved", uuid.uuid4().hex
        env = self.env(d, token)
        res = CaseResult("results-unwritable-mid-run", "the results directory replaced by a file during the probes")
        b = self.bench(self.bench_args(run, BACKENDS, "--fresh", "--concurrency", "1"), env)
        if b.wait_line(lambda s: re.search(r"probes: [1-9]\d*/", s) is not None):
            run.rename(moved)
            run.write_text("in the way\n")
        code = b.wait()
        self._error_line(res, b, code, run / "samples.jsonl")
        rows, torn = raw_samples(moved)
        res.facts.update(kept=len(rows), torn=torn)
        res.check(rows and not torn and all(s["status"] == "ok" for s in rows),
                  f"what was written before is damaged: {len(rows)} lines, torn {torn}")
        try:
            json.loads((moved / "run.json").read_text())
        except (OSError, ValueError) as e:
            res.problems.append(f"run.json damaged: {e}")
        left = survivors(token)
        res.check(not left, f"processes survived: {left}")
        run.unlink()
        moved.rename(run)
        r = self.bench(self.bench_args(run), env)
        rcode = r.wait()
        res.check(rcode == 0, f"the resume after the fix exited {rcode}: {r.err[-600:]}")
        self.finish(res, run, token, compare=False)
        res.rig_did = (f"exit {code}: {res.facts['error'][:100]}; {len(rows)} samples kept whole; a resume after the "
                       "fix completed = uninterrupted run")
        res.lost = "nothing" if res.passed else "see problems"
        res.wall_s = time.monotonic() - t0
        return res

    def _disk_full_mid_run(self) -> CaseResult:
        import resource

        t0 = time.monotonic()
        d = self.case_dir("disk-full")
        run, token = d / "run", uuid.uuid4().hex
        env = self.env(d, token)
        res = CaseResult("results-disk-full", f"files capped at {FSIZE_LIMIT:,} bytes in the coordinator "
                                              "(RLIMIT_FSIZE: EFBIG, as a full disk's ENOSPC)")

        def cap() -> None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (FSIZE_LIMIT, FSIZE_LIMIT))

        b = self.bench(self.bench_args(run, BACKENDS, "--fresh"), env, preexec=cap)
        code = b.wait()
        self._error_line(res, b, code, run / "samples.jsonl")
        rows, torn = raw_samples(run)
        size = (run / "samples.jsonl").stat().st_size
        n_lines = len((run / "samples.jsonl").read_bytes().split(b"\n"))
        res.facts.update(kept=len(rows), torn=torn, size=size)
        res.check(len(rows) > 0 and all(s["status"] == "ok" for s in rows), f"{len(rows)} whole samples kept")
        res.check(torn in ([], [n_lines]) or torn == [len(rows) + 1],
                  f"a torn line other than the last one the full disk cut: {torn}")
        left = survivors(token)
        res.check(not left, f"processes survived: {left}")
        r = self.bench(self.bench_args(run), env)
        rcode = r.wait()
        res.check(rcode == 0, f"the resume with room again exited {rcode}: {r.err[-600:]}")
        self.finish(res, run, token, compare=True)
        res.rig_did = (f"exit {code}: {res.facts['error'][:100]}; {len(rows)} samples whole, "
                       f"{len(torn)} cut last line superseded by the resume, which completed = uninterrupted run")
        res.lost = "nothing" if res.passed else "see problems"
        res.wall_s = time.monotonic() - t0
        return res


    # -- cortex-proxy-kill -----------------------------------------------------------------------
    def cortex_proxy_kill(self) -> CaseResult:
        """cortex-mock (API process and Redis workers), then the fault proxy, SIGKILLed under locust load and
        restarted on the same Redis and data directory (services/drills/cortex_kill.py)."""
        from services.drills import cortex_kill as ck

        t0 = time.monotonic()
        d = self.case_dir("cortex-proxy-kill")
        token = uuid.uuid4().hex
        env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'proto'}", MARK: token, "PYTHONUNBUFFERED": "1"}
        for k in ("REDIS_URL", "MEMRIG_CORTEX_API_KEYS", "MEMRIG_CORTEX_API_KEYS_FILE", "MEMRIG_LOCUST_METRICS_PORT"):
            env.pop(k, None)
        res = CaseResult("cortex-proxy-kill", f"SIGKILL cortex-mock (API + {ck.WORKERS} Redis workers, one mid-job), "
                                              f"then the fault proxy, under locust load ({ck.USERS} users)")
        if shutil.which("redis-server") is None:
            res.problems.append("[requires:redis] redis-server is not installed (apt-get install -y redis-server)")
        else:
            ck.run(res, d, env)
        left = survivors(token)
        res.facts["survivors"] = left
        res.check(not left, f"processes survived the case: {left}")
        f = res.facts
        if "clients" in f:
            bw = f["clients"]["by_window"]
            res.rig_did = (f"clients saw {_kinds(bw.get('cortex-mock'))} while cortex-mock was down, "
                           f"{_kinds(bw.get('fault-proxy'))} while the proxy was down, no failure outside "
                           f"({f['failures']} of {f['requests']} requests); after the restarts {f['jobs_before']} "
                           f"jobs and {f['memories_before']} memories as before the kill, the job in flight "
                           f"re-run (attempts {sorted(f['in_flight_attempts'].values())}), "
                           f"{f['pending_at_kill']} queued ones done, {f['drill_memories']} drill memories once each, "
                           "the proxy's fault kept")
        else:
            res.rig_did = "did not run"
        res.lost = "nothing" if res.passed else "see problems"
        res.wall_s = time.monotonic() - t0
        return res


def _kinds(c: dict[str, int] | None) -> str:
    return ", ".join(f"{n} x {k}" for k, n in sorted((c or {}).items(), key=lambda kv: -kv[1])) or "nothing"


CASES: dict[str, Callable[[Campaign], CaseResult | list[CaseResult]]] = {
    "backend-kill": Campaign.backend_kill,
    "coordinator-kill": Campaign.coordinator_kill,
    "hang-garbage": Campaign.hang_garbage,
    "results-unwritable": Campaign.results_unwritable,
    "cortex-proxy-kill": Campaign.cortex_proxy_kill,
}


def run_cases(campaign: Campaign, names: list[str]) -> list[CaseResult]:
    results: list[CaseResult] = []
    for name in names:
        t0 = time.monotonic()
        try:
            got = CASES[name](campaign)
        except Exception as e:  # one broken case never hides the others
            got = CaseResult(name, "(case crashed)", problems=[f"{type(e).__name__}: {e}"])
            got.wall_s = time.monotonic() - t0
        for r in got if isinstance(got, list) else [got]:
            campaign.say(r.line())
            results.append(r)
    return results


# ------------------------------------------------------------------------------------------------------
# memrig drill rig-faults


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.description = ("Drills against the rig itself. rig-faults: kill, hang, feed garbage to and fill the disk of a "
                      "small real run's processes, one line per case with what the rig did and what was lost.")
    ap.add_argument("drill", choices=["rig-faults"], help="the drill to run")
    ap.add_argument("--cases", default=",".join(CASES),
                    help=f"comma-separated subset of: {', '.join(CASES)} (default: all)")
    ap.add_argument("--out", default=None, help="work directory (default: a temporary one, removed afterwards "
                                                "unless --keep)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (every run, log and report)")


def check(args: argparse.Namespace) -> None:
    from services.common.types import ValidationError

    names = [n.strip() for n in args.cases.split(",") if n.strip()]
    bad = [n for n in names if n not in CASES]
    if bad or not names:
        raise ValidationError("--cases", f"unknown case(s) {bad or '(none given)'}; known: {', '.join(CASES)}")
    args.case_names = names


def run(args: argparse.Namespace) -> int:
    work = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="memrig-rig-faults-"))
    t0 = time.monotonic()
    print(f"rig-faults: {len(args.case_names)} case(s) in {work}", flush=True)
    with Campaign(work, say=lambda s: print(s, flush=True)) as c:
        results = run_cases(c, args.case_names)
    failed = [r for r in results if not r.passed]
    print(f"rig-faults: {len(results) - len(failed)} of {len(results)} passed in {time.monotonic() - t0:.0f} s",
          flush=True)
    if not args.out and not args.keep:
        with contextlib.suppress(OSError):
            shutil.rmtree(work)
    return 1 if failed else 0
