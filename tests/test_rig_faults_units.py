"""The rig's defences that the fault campaign (issue 49, tests/test_rig_faults.py) found missing, each on its own:
a backend's garbage answer is a failure of that backend's call, not a crash of the run; a backend that never
answers fails at the run's deadline named with the backend and the call; a results file that cannot be written is
one error naming it, and what was written before stays whole; a run killed by SIGKILL leaves no process running.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from services.adapters.client import GrpcBackendClient
from services.common.errors import BackendFailed, BackendUnavailable
from services.common.types import RetrieveQuery
from services.coordinator.report import render_failures
from services.coordinator.results import ResultsWriteError, RunDir

ROOT = Path(__file__).resolve().parent.parent


async def _faulty_server(fault: str):
    from services.adapters.base import BackendContext
    from services.adapters.full_context.backend import FullContextBackend
    from services.adapters.host import BackendHost
    from services.adapters.server import SERVICE_NAME, MemoryBackendServicer
    from services.common.grpc_util import start_server
    from services.drills.faulty_backend import handlers

    host = BackendHost(FullContextBackend({}, BackendContext(embedder_name="hash")))
    await host.start()
    server, health, port = await start_server(
        lambda s: s.add_generic_rpc_handlers((handlers(MemoryBackendServicer(host), fault, "Retrieve"),)),
        [SERVICE_NAME])
    return server, health, port, host


async def _retrieve_error(fault: str, deadline_s: float) -> tuple[Exception, float]:
    from services.common.grpc_util import graceful_stop

    server, health, port, host = await _faulty_server(fault)
    client = GrpcBackendClient(f"127.0.0.1:{port}", name=fault, deadline_s=deadline_s)
    try:
        await client.reset("ns")  # every other call is served as usual
        t0 = time.monotonic()
        with pytest.raises(Exception) as info:
            await client.retrieve("ns", RetrieveQuery(query="who is Peter?", top_k=3))
        return info.value, time.monotonic() - t0
    finally:
        await client.close()
        await graceful_stop(server, health, 0.2)
        await host.close()


async def test_a_garbage_answer_fails_that_backends_call_named_not_the_run():
    # before: grpc.aio handed back None for bytes that are not a RetrieveResponse, and the probe's first read of
    # it raised AttributeError, which ended the whole run (every backend's probes) with a traceback
    err, _ = await _retrieve_error("garbage", 5.0)
    assert isinstance(err, BackendFailed), repr(err)
    assert str(err) == ("garbage: INTERNAL: Retrieve: the answer is not a RetrieveResponse message (it could not be "
                        "parsed)")


async def test_a_backend_that_never_answers_fails_at_the_deadline_named_with_the_call():
    err, took = await _retrieve_error("hang", 0.5)
    assert isinstance(err, BackendUnavailable) and err.code == "DEADLINE_EXCEEDED", repr(err)
    assert str(err).startswith("hang: DEADLINE_EXCEEDED: Retrieve: ")
    assert str(err).endswith("(no answer within the 0.5 s deadline)")
    assert 0.4 < took < 3.0, took


def test_a_run_file_that_cannot_be_written_is_one_error_naming_it(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ResultsWriteError) as info:
        RunDir(tmp_path / "file" / "run")
    assert str(info.value).startswith(f"cannot write {tmp_path / 'file' / 'run'}: Not a directory (")
    rd = RunDir(tmp_path / "run")
    rd.append_sample({"key": "a|1", "status": "ok"})
    rd.write_run({"suite": "s"})
    (tmp_path / "run").rename(tmp_path / "moved")
    (tmp_path / "run").write_text("in the way")
    with pytest.raises(ResultsWriteError) as info:
        rd.append_sample({"key": "a|2", "status": "ok"})
    assert str(info.value).startswith(f"cannot write {tmp_path / 'run' / 'samples.jsonl'}: Not a directory")
    assert isinstance(info.value, OSError) and info.value.filename == str(tmp_path / "run" / "samples.jsonl")
    with pytest.raises(ResultsWriteError, match=f"cannot write {tmp_path / 'run' / 'run.json'}: "):
        rd.write_run({"suite": "s2"})
    # what was written before is whole
    assert (tmp_path / "moved" / "samples.jsonl").read_text() == '{"key": "a|1", "status": "ok"}\n'
    assert json.loads((tmp_path / "moved" / "run.json").read_text()) == {"suite": "s"}


def test_a_full_disk_mid_append_leaves_whole_lines_and_one_cut_last_line(tmp_path):
    # RLIMIT_FSIZE in a child: a write past the limit fails with EFBIG after writing what fits, as ENOSPC does
    code = textwrap.dedent(f"""
        import resource, sys
        sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / 'proto')!r}]
        from services.coordinator.results import RunDir, ResultsWriteError
        rd = RunDir({str(tmp_path / 'run')!r})
        resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))
        try:
            for i in range(100):
                rd.append_sample({{"key": f"c|{{i:02d}}", "status": "ok", "pad": "x" * 60}})
        except ResultsWriteError as e:
            print(i, e)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    n, _, msg = r.stdout.strip().partition(" ")
    assert msg.startswith(f"cannot write {tmp_path / 'run' / 'samples.jsonl'}: File too large ("), r
    data = (tmp_path / "run" / "samples.jsonl").read_bytes()
    assert len(data) == 1000
    # a line: '{"key": "c|00", ' (16) + '"status": "ok", ' (16) + '"pad": "' (8) + 60 x + '"}' (2) + newline = 103
    assert len(json.dumps({"key": "c|00", "status": "ok", "pad": "x" * 60})) + 1 == 103
    assert int(n) == 9  # 9 whole lines (927 bytes) fit; the 10th was cut after 73 of its bytes
    log = RunDir(tmp_path / "run").read_samples()
    assert [s["key"] for s in log.samples] == [f"c|{i:02d}" for i in range(9)]
    assert log.torn == [(10, "c|09")]  # the cut line, its key readable: a resume supersedes it


def test_cli_reports_an_unwritable_out_in_one_line_naming_it(tmp_path):
    (tmp_path / "file").write_text("x")
    out = tmp_path / "file" / "run"
    r = subprocess.run([sys.executable, "-m", "services.cli", "bench", "--suite", "octybot", "--backends", "bm25",
                        "--out", str(out)], capture_output=True, text=True, timeout=120, cwd=ROOT,
                       env={**os.environ, "MEMRIG_STATE_DIR": str(tmp_path / "state")})
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.stderr.strip().splitlines()[-1].startswith(f"error: cannot write {out}: Not a directory (")


def test_a_target_may_have_a_name_of_its_own(monkeypatch, tmp_path):
    # README: `memrig bench --suite cortex-v1 --backends openclaw,mine --target mine=127.0.0.1:50051`; before, every
    # name went through the registry and `mine` was "unknown backend 'mine'"
    from services import cli
    from services.commands.bench import cmd_bench
    from services.coordinator import runner

    seen = {}

    async def fake_run_suite(cfg, progress=None, rig=None):
        seen["cfg"] = cfg
        return runner.RunOutcome(tmp_path, "succeeded", {}, {})

    monkeypatch.setattr(runner, "run_suite", fake_run_suite)
    monkeypatch.setenv("MEMRIG_STATE_DIR", str(tmp_path / "state"))
    args = cli.build_parser().parse_args(["bench", "--suite", "octybot", "--backends", "bm25,mine", "--target",
                                          "mine=127.0.0.1:50051", "--out", str(tmp_path / "o"), "--deadline-s", "2.5"])
    assert cmd_bench(args) == 0
    cfg = seen["cfg"]
    assert cfg.backends == ["bm25", "mine"] and cfg.targets == {"mine": "127.0.0.1:50051"}
    assert (cfg.deadline_s, cfg.ingest_deadline_s) == (2.5, 600.0)
    with pytest.raises(KeyError, match="unknown backend 'nope'"):  # a name with no target still must exist
        cmd_bench(cli.build_parser().parse_args(["bench", "--suite", "octybot", "--backends", "nope"]))


@pytest.mark.parametrize("value", ["0", "-1", "inf", "soon"])
def test_deadline_flags_refuse_what_is_not_a_positive_number_of_seconds(value, capsys):
    from services import cli

    with pytest.raises(SystemExit) as info:
        cli.build_parser().parse_args(["bench", "--suite", "octybot", "--deadline-s", value])
    assert info.value.code == 2
    assert "argument --deadline-s:" in capsys.readouterr().err


def test_the_report_lists_the_probes_a_failed_backend_lost():
    errors = [{"condition": "dense", "condition_context": ["backend:dense"], "probe_id": f"R{i:02d}",
               "error": "backend dense unavailable"} for i in (3, 1, 2)]
    errors.append({"condition": "bm25", "condition_context": ["backend:bm25"], "probe_id": "R09", "error": "x"})
    text = render_failures(errors, {"dense": "failed mid-run: UNAVAILABLE: dense: UNAVAILABLE: Retrieve: gone"})
    assert ("- backend **dense**: failed mid-run: UNAVAILABLE: dense: UNAVAILABLE: Retrieve: gone; 3 probe(s) lost: "
            "R01, R02, R03") in text


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1][0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("guarded", [True, False])
def test_a_guarded_command_killed_by_sigkill_leaves_no_child_running(tmp_path, guarded):
    # the shape of `memrig bench`: a child in its own session (as the launcher starts every service); the command
    # is then killed by SIGKILL, so none of its own cleanup runs
    code = textwrap.dedent(f"""
        import subprocess, sys, time
        sys.path[:0] = [{str(ROOT)!r}]
        from services.coordinator import guard
        g = guard.protect() if {guarded} else None
        p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
        print(p.pid, flush=True)
        time.sleep(120)
    """)
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    child = int(parent.stdout.readline())
    try:
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 8
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _alive(child) is (not guarded)  # unguarded: the child runs on (what issue 49's campaign found)
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)


def test_a_closed_guard_takes_its_token_out_of_the_environment(tmp_path):
    # an in-process command (a test calling cli.main) must not leave the finished run's token in the interpreter's
    # environment: every process started later would carry it
    from services.coordinator import guard

    env = {"PATH": os.environ.get("PATH", "")}
    g = guard.protect(env, log=tmp_path / "guard.log")
    assert env[guard.ENV] == g.token
    g.close()
    assert guard.ENV not in env and g.proc is None
    env[guard.ENV] = "another-runs-token"  # a later run's token is not the closed guard's to remove
    g.close()
    assert env[guard.ENV] == "another-runs-token"


def test_a_run_clears_the_half_written_files_a_killed_writer_left(tmp_path):
    # a writer killed mid-write leaves .NAME.PID.tmp (write_text) or run.tmp (write_run): half a file nothing renames
    rd = RunDir(tmp_path / "run")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()  # a PID that has exited
    (rd.path / f".metrics.json.{dead}.tmp").write_text('{"half": ')
    (rd.path / "run.tmp").write_text('{"suite": "oc')
    live = rd.path / f".report.md.{os.getpid()}.tmp"  # a live writer's (this process) is left alone
    live.write_text("being written")
    rd.write_json("metrics.json", {"whole": True})
    assert sorted(rd.clear_stale_temp()) == sorted([f".metrics.json.{dead}.tmp", "run.tmp"])
    assert sorted(p.name for p in rd.path.iterdir()) == sorted([live.name, "metrics.json"])


# ---------------------------------------------------------------------------------------------------------------
# cortex-proxy-kill (services/drills/cortex_kill.py): what it compares and what it found


def _job(status: str, attempts: int = 1, result: str = "", kind: str = "ingest_conversation") -> dict:
    return {"status": status, "attempts": attempts, "tenant_id": "t1", "kind": kind, "worker": "w", "result": result}


def _state(jobs: dict, memories: dict, applied: list[str]) -> dict:
    return {"jobs": jobs, "tenants": {"t1": {"memories": memories, "applied": applied}}}


def _mem(text: str, job: str, ns: str = "u1") -> dict:
    return {"text": text, "ns": ns, "job": job}


def test_the_state_after_the_restart_keeps_what_was_there_and_adds_only_unfinished_jobs_work():
    from services.drills.cortex_kill import state_problems

    before = _state({"j1": _job("completed", result='{"n": 1}'), "j2": _job("running"), "j3": _job("pending", 0)},
                    {"m1": _mem("Ana owns the ledger.", "j1")}, ["j1"])
    after = _state({"j1": _job("completed", result='{"n": 1}'), "j2": _job("completed", 2, '{"n": 1}'),
                    "j3": _job("completed", 1, '{"n": 1}'), "j4": _job("completed", 1, '{"n": 1}')},
                   {"m1": _mem("Ana owns the ledger.", "j1"), "m2": _mem("Bo runs the cron.", "j2"),
                    "m3": _mem("Cy moved the bucket.", "j3"), "m4": _mem("Di wrote the export.", "j4")},
                   ["j1", "j2", "j3", "j4"])
    assert state_problems(before, after) == []
    # each way of losing, changing or doubling, named
    lost = _state({"j1": after["jobs"]["j1"], "j2": _job("failed", 3), "j4": after["jobs"]["j4"]},
                  {"m1": _mem("Ana owns the ledger!", "j1"), "m4": _mem("Di wrote the export.", "j4"),
                   "m5": _mem("Di wrote the export.", "j4"), "m6": _mem("Ed late.", "j1")}, ["j1", "j4"])
    assert state_problems(before, lost) == [
        "job j2 (running at the kill) ended failed, not completed",
        "job j3 (pending before the kill) is gone",
        "job j2 is failed after the drain",
        "memory m1 of t1 changed: 'Ana owns the ledger.' -> 'Ana owns the ledger!'",
        "memory m6 of t1 is new but its job j1 had completed before the kill",
        "t1: 'Di wrote the export.' stored 2 times in namespace u1",
    ]
    gone = _state(after["jobs"], {}, ["j2", "j3", "j4"])
    assert state_problems(before, gone) == ["memory m1 of t1 ('Ana owns the ledger.') is gone",
                                            "t1: applied jobs gone: ['j1']",
                                            "completed ingest jobs with nothing applied: ['j1']"]


def test_client_failures_are_placed_in_their_kill_window_and_judged_by_its_kind():
    from loadtests.request_log import RequestRecord
    from services.drills.cortex_kill import Window, classify, failure_kind

    # as the request log and locust's failures CSV write them
    assert failure_kind("CatchResponseError: HTTP 502") == failure_kind("CatchResponseError('HTTP 502')") == "HTTP 502"
    assert failure_kind("JobFailed('poll HTTP 0 (ConnectionRefusedError)')") == \
        "JobFailed: poll HTTP 0 (ConnectionRefusedError)"

    def rec(start: float, end: float, error: str = "", typ: str = "POST") -> RequestRecord:
        return RequestRecord(typ, "/v1/retrieve", start, end, (end - start) * 1000, not error, error)

    windows = [Window("cortex-mock", 10.0, 14.0), Window("fault-proxy", 20.0, 23.0)]
    seen = classify([rec(1, 2), rec(9.9, 10.5, "CatchResponseError: HTTP 502"), rec(12, 12.1, "CatchResponseError: HTTP 502"),
                     rec(8, 13, "JobFailed: poll HTTP 502", "JOB"), rec(13, 13.1, "CatchResponseError: HTTP 0 (ConnectionRefusedError)"),
                     rec(15, 15.1), rec(21, 21.1, "CatchResponseError: HTTP 0 (ConnectionRefusedError)"),
                     rec(22, 22.1, "CatchResponseError: HTTP 502"), rec(24, 24.2), rec(30, 30.1, "CatchResponseError: HTTP 500")],
                    windows)
    assert seen["by_window"] == {"cortex-mock": {"HTTP 502": 2, "JobFailed: poll HTTP 502": 1,
                                                 "HTTP 0 (ConnectionRefusedError)": 1},
                                 "fault-proxy": {"HTTP 0 (ConnectionRefusedError)": 1, "HTTP 502": 1}}
    assert seen["outside"] == ["POST /v1/retrieve: CatchResponseError: HTTP 500"]
    assert seen["unexpected"] == ["cortex-mock window: POST /v1/retrieve: CatchResponseError: HTTP 0 (ConnectionRefusedError)",
                                  "fault-proxy window: POST /v1/retrieve: CatchResponseError: HTTP 502"]
    assert seen["ok_after"] == {"cortex-mock": 2, "fault-proxy": 1}


@pytest.fixture
def redis_url(tmp_path):
    import shutil

    from services.drills.cortex_kill import free_port, redis_client

    if shutil.which("redis-server") is None:
        pytest.skip("[requires:redis] redis-server binary not installed (apt-get install -y redis-server)")
    port = free_port()
    p = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp_path),
                          "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    r = redis_client(f"redis://127.0.0.1:{port}/0")
    deadline = time.monotonic() + 10
    while True:
        try:
            r.ping()
            break
        except Exception:
            if time.monotonic() > deadline:
                p.kill()
                raise
            time.sleep(0.05)
    r.close()
    yield f"redis://127.0.0.1:{port}/0"
    p.terminate()
    p.wait(10)


@pytest.mark.slow  # starts cortex-mock and its worker
def test_the_workers_of_a_cortex_mock_killed_by_sigkill_stop_with_it(tmp_path, redis_url):
    # before: a worker spawned by cortex-mock ran on for good when cortex-mock was SIGKILLed (claiming jobs; a
    # restart added as many again), which issue 49's cortex-proxy-kill case found
    from services.common import process
    from services.drills.cortex_kill import children

    log = tmp_path / "cortex.log"
    p = process.spawn([sys.executable, "-m", "services.cortex_mock", "--port", "0", "--workers", "1", "--redis-url",
                       redis_url, "--embedder", "hash", "--data-dir", str(tmp_path / "data")], log, cwd=ROOT)
    workers: list[int] = []
    try:
        process.wait_ready(p, "cortex-mock", log, 60)
        workers = children(p.pid)
        assert len(workers) == 1
        p.send_signal(signal.SIGKILL)
        p.wait(10)
        deadline = time.monotonic() + 10
        while _alive(workers[0]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(workers[0]), log.read_text()[-1500:]
        assert f"cortex-mock (pid {p.pid}) is gone; stopping" in log.read_text()
    finally:
        process.stop(p, *[w for w in workers if _alive(w)], grace_s=0)


async def test_the_reaper_logs_each_dead_workers_own_job_count(redis_url, caplog):
    # before: the count logged was the running total, so a second dead worker with no job was logged as having
    # requeued the first one's (seen in cortex-proxy-kill's log: "2 job(s) of dead worker" for a worker that held 1)
    import logging

    from services.cortex_mock.jobs import RedisJobs

    now = [1_000.0]
    jobs = RedisJobs(redis_url, "reaplog", lease_ms=1000, max_attempts=3, clock=lambda: now[0])
    try:
        for wid, n in (("wa", 2), ("wb", 0), ("wc", 1)):
            for _ in range(n):
                rec = await jobs.submit("tenant", "ingest", "{}")
                await jobs.r.lrem(jobs.queue_key, 1, rec["job_id"])
                await jobs.r.lpush(jobs.processing_key(wid), rec["job_id"])
            await jobs.r.sadd("reaplog:workers", wid)
            await jobs.renew_lease(wid)
        now[0] += 2.0  # every lease expired
        with caplog.at_level(logging.WARNING, "cortex_mock.jobs"):
            assert await jobs.reap_once() == 3
        said = sorted(r.getMessage() for r in caplog.records if "dead worker" in r.getMessage())
        assert said == ["reaper: requeued/failed 1 job(s) of dead worker wc",
                        "reaper: requeued/failed 2 job(s) of dead worker wa"]
    finally:
        await jobs.r.flushdb()
        await jobs.r.aclose()
