"""loadtests/: pure parts (stages, fault timeline, exporter, summary) in-process; locust only in subprocesses."""

from __future__ import annotations

import asyncio
import csv
import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import aiohttp
import pytest

from loadtests.fault_timeline import (
    FaultWindow,
    load_timeline,
    make_fault,
    parse_timeline,
    run_timeline,
    seeded_timeline,
    timeline_actions,
)
from loadtests.prom_exporter import LocustCollector, histogram_buckets
from loadtests.request_log import RequestLogWriter, failures_by_window, read_request_log
from loadtests.stages import Stage, stages_for, stages_from_env, tick_for
from loadtests.summary import CO_LABEL, fault_windows_wall, load_locust_run, summarise_locust_run
from loadtests.workload import Payloads, queries
from services.common import prom_targets


def test_no_loadtests_module_imported_locust():
    # Importing locust monkey-patches the process; the pure modules above must not do it.
    assert "locust" not in sys.modules and "gevent.monkey" not in sys.modules


# ------------------------------------------------------------------------------------------------ stages
def test_step_stages_and_tick():
    st = stages_for("step", {"users": 2, "step_users": 3, "steps": 3, "step_s": 10, "spawn_rate": 4})
    assert st == [Stage(10, 2, 4), Stage(20, 5, 4), Stage(30, 8, 4)]
    assert tick_for(st, 0) == (2, 4) and tick_for(st, 9.99) == (2, 4)
    assert tick_for(st, 10) == (5, 4) and tick_for(st, 29.9) == (8, 4)
    assert tick_for(st, 30) is None


def test_spike_and_soak_stages():
    sp = stages_for("spike", {"users": 2, "spike_users": 20, "before_s": 5, "spike_s": 2, "after_s": 5})
    assert [(s.end_s, s.users) for s in sp] == [(5, 2), (7, 20), (12, 2)]
    so = stages_for("soak", {"users": 10, "duration_s": 100, "ramp_s": 20})
    assert so == [Stage(100, 10, 0.5)]


def test_stages_from_env_and_errors():
    assert stages_from_env({}) is None
    kind, st = stages_from_env({"MEMRIG_LOAD_SHAPE": "step", "MEMRIG_LOAD_SHAPE_PARAMS": '{"steps": 2}'})
    assert kind == "step" and len(st) == 2
    with pytest.raises(ValueError, match="shape must be one of"):
        stages_for("ramp")
    with pytest.raises(ValueError, match="shape params for 'step'"):
        stages_for("step", {"bogus": 1})


# ------------------------------------------------------------------------------------------------ workload
def test_payloads_are_seeded_and_fit_the_cortex_shapes():
    a, b = Payloads(3), Payloads(3)
    assert [a.retrieve("fast") for _ in range(5)] == [b.retrieve("fast") for _ in range(5)]
    r = a.retrieve("full")
    assert r["mode"] == "full" and r["top_k"] == 10 and r["query"]
    conv = a.conversation()
    assert conv["messages"][0]["role"] == "user" and conv["session_id"].startswith("memrig-load-s")
    assert queries(5, 1) == queries(5, 1) != queries(5, 2)


# ------------------------------------------------------------------------------------------------ timeline
def test_seeded_timeline_is_deterministic_and_non_overlapping():
    a, b = seeded_timeline(5, 100.0, windows=4), seeded_timeline(5, 100.0, windows=4)
    assert a == b and [w.fault for w in a] == [w.fault for w in b]
    assert a != seeded_timeline(6, 100.0, windows=4)
    for w, nxt in zip(a, a[1:], strict=False):
        assert w.end_s <= nxt.at_s
    assert a[0].at_s >= 10 and a[-1].end_s <= 90
    assert all(w.fault["name"].startswith(f"tl{i}_") for i, w in enumerate(a))


def test_parse_and_load_timeline():
    spec = '[{"at_s": 3, "duration_s": 2, "preset": "error_503"}, {"at_s": 1, "duration_s": 1, "fault": {"type": "latency", "name": "slow", "attributes": {"latency_ms": 50}}}]'
    ws = load_timeline(spec)
    assert [w.name for w in ws] == ["slow", "tl0_error_503"]
    assert ws[1].fault == {"name": "tl0_error_503", "toxicity": 1.0, "type": "http_error",
                           "attributes": {"status": 503}}
    assert load_timeline("none") == [] and len(load_timeline("seeded:1:60:2")) == 2
    with pytest.raises(ValueError, match=r"timeline\[0\].duration_s"):
        parse_timeline([{"at_s": 1, "duration_s": 0, "preset": "reset"}])
    with pytest.raises(ValueError, match="unique"):
        parse_timeline([{"at_s": 1, "duration_s": 1, "preset": "reset", "name": "x"},
                        {"at_s": 3, "duration_s": 1, "preset": "reset", "name": "x"}])


def test_timeline_actions_order_removal_first_on_ties():
    w1 = FaultWindow(1.0, 2.0, make_fault("reset", "a"))
    w2 = FaultWindow(3.0, 1.0, make_fault("reset", "b"))
    assert [(t, act, w.name) for t, act, w in timeline_actions([w2, w1])] == [
        (1.0, "apply", "a"), (3.0, "remove", "a"), (3.0, "apply", "b"), (4.0, "remove", "b")]


class _FakeClock:
    def __init__(self):
        self.t = 100.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


class _FakeAdmin:
    def __init__(self, clock, fail_on: str = ""):
        self.clock, self.fail_on, self.calls = clock, fail_on, []

    def add(self, fault):
        if fault["name"] == self.fail_on:
            raise RuntimeError("HTTP 409")
        self.calls.append(("add", fault["name"], round(self.clock() - 100.0, 6)))

    def remove(self, name):
        self.calls.append(("remove", name, round(self.clock() - 100.0, 6)))


def test_run_timeline_switches_at_the_set_times():
    clk = _FakeClock()
    admin = _FakeAdmin(clk)
    ws = [FaultWindow(2.0, 3.0, make_fault("error_503", "a")), FaultWindow(6.0, 1.5, make_fault("reset", "b"))]
    evs = run_timeline(ws, admin, sleep=clk.sleep, clock=clk, wall=clk)
    assert admin.calls == [("add", "a", 2.0), ("remove", "a", 5.0), ("add", "b", 6.0), ("remove", "b", 7.5)]
    assert [e["action"] for e in evs] == ["apply", "remove", "apply", "remove"] and all(e["ok"] for e in evs)


def test_run_timeline_stopped_early_removes_live_faults_and_logs_failures():
    clk = _FakeClock()
    admin = _FakeAdmin(clk, fail_on="b")
    ws = [FaultWindow(1.0, 10.0, make_fault("error_503", "a")), FaultWindow(2.0, 1.0, make_fault("reset", "b"))]
    evs = run_timeline(ws, admin, sleep=clk.sleep, clock=clk, wall=clk, should_stop=lambda: clk.t - 100 >= 4.0)
    # b's apply failed (logged, not fatal); at 4 s the run is stopped and the live fault a is removed.
    assert [(e["action"], e["name"], e["ok"]) for e in evs] == [
        ("apply", "a", True), ("apply", "b", False), ("remove", "b", True), ("remove", "a", True)]
    assert admin.calls[-1][:2] == ("remove", "a")


# ------------------------------------------------------------------------------------------------ exporter
def test_histogram_buckets_are_cumulative_in_seconds():
    # locust keys are rounded ms: 3 ms x2, 40 ms x1, 120 ms x1, 12000 ms x1, 90000 ms x1
    b = dict(histogram_buckets({3: 2, 40: 1, 120: 1, 12000: 1, 90000: 1}))
    assert b["0.005"] == 2 and b["0.025"] == 2 and b["0.05"] == 3 and b["0.1"] == 3 and b["0.25"] == 4
    assert b["10.0"] == 4 and b["30.0"] == 5 and b["60.0"] == 5 and b["+Inf"] == 6


def test_collector_reads_runner_stats():
    e = SimpleNamespace(method="POST", name="/v1/retrieve [fast]", num_requests=10, num_failures=2,
                        response_times={5: 8, 300: 2}, total_response_time=640, current_rps=3.5)
    env = SimpleNamespace(runner=SimpleNamespace(stats=SimpleNamespace(entries={("a", "b"): e}), user_count=4,
                                                 clients={"w1": 1, "w2": 2}))
    fams = {f.name: f for f in LocustCollector(env).collect()}
    assert fams["memrig_locust_requests"].samples[0].value == 10
    assert fams["memrig_locust_failures"].samples[0].labels == {"method": "POST", "name": "/v1/retrieve [fast]"}
    h = {(s.name, s.labels.get("le")): s.value for s in fams["memrig_locust_response_time_seconds"].samples}
    assert h[("memrig_locust_response_time_seconds_bucket", "0.005")] == 8
    assert h[("memrig_locust_response_time_seconds_bucket", "0.25")] == 8
    assert h[("memrig_locust_response_time_seconds_bucket", "0.5")] == 10
    assert h[("memrig_locust_response_time_seconds_sum", None)] == pytest.approx(0.64)
    assert fams["memrig_locust_users"].samples[0].value == 4
    assert fams["memrig_locust_workers"].samples[0].value == 2


# ------------------------------------------------------------------------------------------------ logs/summary
def test_request_log_and_failures_by_window(tmp_path):
    w = RequestLogWriter(tmp_path)
    w.write("POST", "/a", 10.0, 10.1, 100, None)
    w.write("POST", "/a", 12.0, 12.2, 200, RuntimeError("HTTP 503"))
    w.write("POST", "/a", 19.0, 19.5, 500, RuntimeError("HTTP 503"))
    w.close()
    recs = read_request_log(tmp_path)
    assert [r.ok for r in recs] == [True, False, False] and recs[1].error.startswith("RuntimeError")
    assert failures_by_window(recs, [(11.0, 13.0)]) == {"inside": 1, "outside": 1}


def _write_csv(path: Path, header: list[str], rows: list[list]) -> None:
    with open(path, "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(header)
        wr.writerows(rows)


def test_summary_reads_a_run_dir(tmp_path):
    hdr = ["Type", "Name", "Request Count", "Failure Count", "Median Response Time", "Average Response Time",
           "Min Response Time", "Max Response Time", "Average Content Size", "Requests/s", "Failures/s", "50%",
           "95%", "99%"]
    _write_csv(tmp_path / "locust_stats.csv", hdr, [
        ["POST", "/v1/retrieve [fast]", 90, 3, 5, 6.1, 1, 40, 100, 9.0, 0.3, 5, 20, 38],
        ["", "Aggregated", 90, 3, 5, 6.1, 1, 40, 100, 9.0, 0.3, 5, 20, 38]])
    _write_csv(tmp_path / "locust_failures.csv", ["Method", "Name", "Error", "Occurrences"],
               [["POST", "/v1/retrieve [fast]", "HTTP 503", 3]])
    _write_csv(tmp_path / "locust_stats_history.csv", ["Timestamp", "User Count"], [[1, 2], [2, 5]])
    (tmp_path / "locust.json").write_text(json.dumps([{"start_time": 1000.0, "last_request_timestamp": 1010.0}]))
    (tmp_path / "fault_events.jsonl").write_text(
        json.dumps({"action": "apply", "name": "f", "type": "http_error", "rel_start_s": 2.0, "wall_start": 1002.0,
                    "wall_end": 1002.01, "ok": True}) + "\n"
        + json.dumps({"action": "remove", "name": "f", "type": "http_error", "rel_start_s": 5.0, "wall_start": 1005.0,
                      "wall_end": 1005.01, "ok": True}) + "\n")
    s = load_locust_run(tmp_path)
    assert s["duration_s"] == 10.0 and s["peak_users"] == 5 and s["total"]["requests"] == 90
    assert fault_windows_wall(s["fault_events"]) == [(1002.0, 1005.01)]
    md = summarise_locust_run(tmp_path)
    assert CO_LABEL in md and "| POST | /v1/retrieve [fast] | 90 | 3 | 9.00 |" in md and "HTTP 503 (x3)" in md
    assert "apply `f`" in md
    assert "No locust stats" in summarise_locust_run(tmp_path / "missing")


# ------------------------------------------------------------------------------------------------ locust runs
# Locust runs only in subprocesses: python -m loadtests.run starts the real cortex-mock (hash embedder) behind the
# real fault proxy (or a gRPC adapter), runs locust, and stops exactly those processes.


ROOT = Path(__file__).resolve().parent.parent


async def _run_load(out: Path, *args: str, timeout: float = 120) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "loadtests.run", "--out", str(out), *args, cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        stdout, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    return proc.returncode, stdout.decode(errors="replace")


def _master_log(out: Path) -> str:
    p = out / "locust_master.log"
    return p.read_text()[-3000:] if p.exists() else ""


@pytest.mark.slow  # a locust run (~6 s)
async def test_headless_cortex_run_against_a_local_rig(tmp_path):
    """run.py starts the real cortex-mock behind the real fault proxy, runs locust headless, stops both."""
    code, text = await _run_load(tmp_path, "--users", "4", "--spawn-rate", "4", "--duration", "5")
    assert code == 0, text + _master_log(tmp_path)
    s = load_locust_run(tmp_path)
    assert s["total"]["rps"] > 0 and s["total"]["failures"] == 0, _master_log(tmp_path)
    names = {e["name"] for e in s["endpoints"]}
    assert {"/v1/retrieve [fast]", "/v1/retrieve [full]", "/v1/recall"} <= names
    rig_logs = sorted(p.name for p in (tmp_path / "rig").glob("*.log"))
    assert rig_logs == ["cortex-mock.log", "fault-proxy.log"]
    for f in ("locust_stats.csv", "locust_stats_history.csv", "locust.json", "locust.html", "locust_summary.md"):
        assert (tmp_path / f).exists(), f
    assert CO_LABEL in (tmp_path / "locust_summary.md").read_text()


@pytest.mark.slow  # a locust run (~6 s)
async def test_fault_window_shows_up_as_failures_inside_that_window(tmp_path):
    timeline = json.dumps([{"at_s": 1.5, "duration_s": 2.0, "preset": "error_503", "name": "down"}])
    run = asyncio.create_task(_run_load(tmp_path, "--users", "4", "--spawn-rate", "4",
                                        "--duration", "5", "--faults", timeline, "--metrics-port", "0"))
    # While it runs: the master's Prometheus exporter serves locust's figures.
    port_file, scraped, targets = tmp_path / "locust_metrics_port", "", {}
    async with aiohttp.ClientSession() as http:
        for _ in range(200):
            if run.done():
                break
            if port_file.exists() and port_file.read_text().strip():
                # the master announced its exporter as a Prometheus file_sd target, and so did the rig's processes
                for f in prom_targets.targets_dir().glob("*.json"):
                    g = json.loads(f.read_text())[0]
                    targets[g["labels"]["job"]] = g
                async with http.get(f"http://127.0.0.1:{port_file.read_text().strip()}/metrics") as r:
                    scraped = await r.text()
                if 'memrig_locust_requests_total{method="POST",name="/v1/retrieve [fast]"}' in scraped:
                    break
            await asyncio.sleep(0.1)
    code, text = await run
    assert code == 0, text + _master_log(tmp_path)
    assert "memrig_locust_response_time_seconds_bucket" in scraped and "memrig_locust_users" in scraped
    assert targets["locust"]["targets"] == [f"127.0.0.1:{port_file.read_text().strip()}"]
    assert targets["fault-proxy"]["labels"]["__metrics_path__"] == "/__admin/metrics" and "cortex-mock" in targets
    assert list(prom_targets.targets_dir().glob("*.json")) == []  # every process removed its target on exit

    events = [json.loads(x) for x in (tmp_path / "fault_events.jsonl").read_text().splitlines()]
    assert [(e["action"], e["name"], e["ok"]) for e in events] == [("apply", "down", True), ("remove", "down", True)]
    applied_from, applied_to = events[0]["wall_start"], events[0]["wall_end"]
    removed_from, removed_to = events[1]["wall_start"], events[1]["wall_end"]
    recs = read_request_log(tmp_path)
    failed = [r for r in recs if not r.ok]
    # Every failure overlaps the window the fault was live (apply call start .. remove call end) ...
    assert failed and all(r.start <= removed_to and r.end >= applied_from for r in failed), failed[:5]
    # ... every request wholly inside it failed, and requests wholly outside it succeeded.
    inside = [r for r in recs if r.start >= applied_to and r.end <= removed_from]
    outside = [r for r in recs if r.end < applied_from or r.start > removed_to]
    assert inside and all(not r.ok for r in inside)
    assert outside and all(r.ok for r in outside)
    assert "failures inside fault windows" in (tmp_path / "locust_summary.md").read_text()


@pytest.mark.slow  # a locust run (~6 s)
async def test_grpc_locust_run_against_started_adapter(tmp_path):
    code, text = await _run_load(tmp_path, "--target", "grpc", "--backend", "full-context", "--users", "3",
                                 "--spawn-rate", "3", "--duration", "3")
    assert code == 0, text + _master_log(tmp_path)
    s = load_locust_run(tmp_path)
    names = {e["name"] for e in s["endpoints"]}
    assert "/memrig.v1.MemoryBackendService/Retrieve" in names and "/memrig.v1.MemoryBackendService/Ingest" in names
    assert s["total"]["rps"] > 0 and s["total"]["failures"] == 0


@pytest.mark.slow
async def test_distributed_master_with_two_workers(tmp_path):
    code, text = await _run_load(tmp_path, "--workers", "2", "--users", "4",
                                 "--spawn-rate", "4", "--duration", "5")
    assert code == 0, text + _master_log(tmp_path)
    log = _master_log(tmp_path)
    assert "--master" in (tmp_path / "locust_command.json").read_text()
    s = load_locust_run(tmp_path)
    assert s["total"]["rps"] > 0 and s["total"]["failures"] == 0, log
    # Each worker wrote its own request log; both did requests.
    assert len(list(tmp_path.glob("requests-*.jsonl"))) == 2


# ------------------------------------------------------------------------------------------------ dashboard
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "locust.json"


def _dashboard_exprs() -> list[str]:
    d = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in d["panels"] for t in p["targets"]]


def test_dashboard_refers_to_the_datasource_by_uid_and_to_exported_metrics():
    import re

    d = json.loads(DASHBOARD.read_text())
    assert d["uid"] == "memrig-locust" and d["id"] is None
    for p in d["panels"]:
        assert p["datasource"] == {"type": "prometheus", "uid": "memrig-prometheus"}, p["title"]
        assert all(t["datasource"]["uid"] == "memrig-prometheus" for t in p["targets"])
    e = SimpleNamespace(method="GET", name="/x", num_requests=1, num_failures=0, response_times={1: 1},
                        total_response_time=1, current_rps=1.0)
    env = SimpleNamespace(runner=SimpleNamespace(stats=SimpleNamespace(entries={1: e}), user_count=1, clients=None))
    exported = {s.name for f in LocustCollector(env).collect() for s in f.samples}
    for expr in _dashboard_exprs():
        names = set(re.findall(r"\bmemrig_locust_[a-z_]+", expr))
        assert names and names <= exported, (expr, names - exported)


@pytest.mark.slow
@pytest.mark.skipif(not __import__("shutil").which("prometheus"), reason="[requires:prometheus] prometheus binary not installed")
async def test_dashboard_queries_return_data_from_a_real_prometheus(tmp_path):
    from loadtests.run import free_port

    mport, pport = free_port(), free_port()
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: locust\n    static_configs:\n"
                   f"      - targets: ['127.0.0.1:{mport}']\n")
    prom = await asyncio.create_subprocess_exec(
        "prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{pport}", stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL)
    out = tmp_path / "run"
    timeline = json.dumps([{"at_s": 0.5, "duration_s": 14, "preset": "error_503", "toxicity": 0.3, "name": "flaky"}])
    run = asyncio.create_task(_run_load(out, "--users", "4", "--spawn-rate", "4",
                                        "--duration", "15", "--faults", timeline, "--metrics-port", str(mport)))
    exprs = _dashboard_exprs()
    positive: set[str] = set()  # expressions that returned a value > 0 at some point
    answered: set[str] = set()  # expressions that returned any series
    try:
        async with aiohttp.ClientSession() as http:
            while not run.done() and len(positive) < len(exprs):
                await asyncio.sleep(1.0)
                for expr in exprs:
                    q = expr.replace("$__rate_interval", "5s").replace("$endpoint", ".*")
                    try:
                        async with http.get(f"http://127.0.0.1:{pport}/api/v1/query", params={"query": q}) as r:
                            body = await r.json()
                    except aiohttp.ClientError:
                        break  # prometheus still starting
                    assert body["status"] == "success", (q, body)
                    vals = [float(v["value"][1]) for v in body["data"]["result"]]
                    answered.update([expr] if vals else [])
                    positive.update([expr] if any(x == x and x > 0 for x in vals) else [])
                if positive | {e for e in answered if "workers" in e} >= set(exprs):
                    break
        code, text = await run
        assert code == 0, text
    finally:
        if not run.done():
            run.cancel()
        prom.terminate()
        await prom.wait()
    # A local runner has no workers: that panel answers 0; every other panel showed data.
    missing = [e for e in exprs if e not in positive and not ("workers" in e and e in answered)]
    assert not missing, missing


@pytest.mark.slow  # a locust run (~6 s)
async def test_spike_shape_drives_users_and_ends_the_run(tmp_path):
    params = json.dumps({"users": 2, "spike_users": 6, "before_s": 1.5, "spike_s": 1.5, "after_s": 1.5,
                         "spawn_rate": 20})
    code, text = await _run_load(tmp_path, "--target", "grpc", "--shape", "spike", "--shape-params", params,
                                 "--max-duration", "30")
    assert code == 0, text + _master_log(tmp_path)
    with open(tmp_path / "locust_stats_history.csv", newline="") as f:
        users = [int(r["User Count"]) for r in csv.DictReader(f)]
    # The shape (no -t was given) drove the users: base 2, the spike at 6; its end stopped the run.
    assert 2 in users and max(users) == 6
    assert "-t" not in json.loads((tmp_path / "locust_command.json").read_text())["master"]
    assert load_locust_run(tmp_path)["total"]["failures"] == 0
