"""`make load-bench` reporting (issue 14): which rule ended a climb, the headline (best rate over the process
counts, its ratio to the generator's ceiling, the engine's one-core rate) and the report lines that show
them. Pure functions, hand-computed expectations; the run itself is `make load-bench`."""

from __future__ import annotations

import pytest

from loadtests.capacity import stop_rule
from loadtests.capacity_report import headline, render_markdown


def test_stop_rule_names_the_rule():
    assert stop_rule("invalid: schedule lag p99 42.3 ms > 20 ms") == "schedule lag"
    assert stop_rule("invalid: 12 arrivals dropped (in-flight bound hit)") == "dropped arrivals"
    assert stop_rule("invalid: 3 requests never finished") == "unfinished requests"
    assert stop_rule("4 failed requests ({'http_500': 4})") == "failed requests"
    assert stop_rule("corrected p99 312.5 ms >= 250 ms") == "p99"


def test_headline_picks_the_best_process_count_and_divides_by_the_ceiling():
    r = {"scaling": {"1": {"max_sustained_rps": 300.0}, "2": {"max_sustained_rps": 520.0},
                     "4": {"max_sustained_rps": 480.0}},
         "generator_ceiling": {"max_sustained_rps": 2600.0}, "engine_cost": {"one_core_rps": 400.0}}
    h = headline(r)
    assert h["best_rps"] == 520.0 and h["best_processes"] == 2
    assert h["ratio_to_generator"] == 0.2  # 520 / 2600
    assert h["ratio_to_engine_one_core"] == 1.3  # 520 / 400
    assert h["meets_target"] is False
    r["scaling"]["4"]["max_sustained_rps"] = 1040.0
    assert headline(r)["meets_target"] is True and headline(r)["best_processes"] == 4
    assert headline({"scaling": {"1": {"max_sustained_rps": None}}})["ratio_to_generator"] is None


def test_markdown_prints_ratio_scaling_and_the_rule():
    step = {"phase": "climb", "rate": 20, "ok": 19, "failed": 0, "dropped": 0, "achieved_rps": 19.5,
            "corrected": {"p50_ms": 5, "p99_ms": 9}, "service": {"p99_ms": 8}, "schedule_lag": {"p99_ms": 1},
            "pass": True, "why": "ok", "drain_s": 0.5}
    sc = {"max_sustained_rps": 20, "first_failing_rps": 30, "ended_by": "p99", "ended_by_detail": "corrected p99 300 ms"}
    r = {"config": {"embedder": "hash", "mode": "fast", "top_k": 10, "arrival": "poisson", "concurrency": 64,
                    "step_s": 1.0, "slo_p99_ms": 250.0, "start_rate": 20.0, "blas_threads": 0},
         "machine": {"cpu_count": 2, "loadavg_at_start": [1.0, 1.0, 1.0], "event_loop": "uvloop 0.23.0"},
         "seeding": {"total_memories": 100, "requested": 100, "seconds": 1, "batch": 250},
         "idle_latency_ms": {"direct": 2, "proxied": 3},
         "rate_search": {"max_sustained_rps": 20, "first_failing_rps": 30, "hit_max_rate": False, "steps": [step],
                         "ended_by": "p99", "ended_by_detail": "corrected p99 300 ms"},
         "scaling": {"1": sc, "2": {**sc, "max_sustained_rps": 40, "ended_by": "schedule lag"}},
         "generator_ceiling": {"max_sustained_rps": 800, "ended_by": "schedule lag"},
         "engine_cost": {"facts": 100, "mean_ms": 2.5, "p50_ms": 2, "p99_ms": 4, "one_core_rps": 400.0},
         "command": "python -m loadtests.capacity"}
    r["headline"] = headline(r)
    md = render_markdown(r)
    assert "**Best sustained: 40 req/s** (2 process(es))" in md
    assert "Event loop of the generator and the services: uvloop 0.23.0 (`MEMRIG_EVENT_LOOP`)." in md
    assert "**ratio 0.05**" in md  # 40 / 800
    assert "= 400.0 req/s on one core" in md
    assert "The climb ended by: **p99**" in md
    assert "| 2 | 40 | 30 | schedule lag: corrected p99 300 ms |" in md


def test_cpu_per_request_arithmetic():
    from loadtests.cpu_meter import cores_busy, cores_needed, cpu_ms_per_request

    assert cpu_ms_per_request(10.0, 10.5, 250) == 2.0  # 0.5 s of CPU over 250 requests
    assert cpu_ms_per_request(0.0, 0.3, 1000) == 0.3
    assert cpu_ms_per_request(1.0, 2.0, 0) is None and cpu_ms_per_request(None, 2.0, 10) is None
    assert cores_busy(2.0, 3.5, 0.5) == 3.0  # 1.5 CPU-seconds in half a second
    assert cores_busy(2.0, None, 1.0) is None and cores_busy(0.0, 1.0, 0.0) is None
    # issue 14: 1,000 req/s at 1.2 ms (server) + 0.3 ms (generator) a request = 1.5 cores
    assert cores_needed(1000.0, 1.2, 0.3) == 1.5
    assert cores_needed(541.0, 2.0, 0.3) == 1.244
    assert cores_needed(None, 1.0, 1.0) is None and cores_needed(10.0, None, 1.0) is None


@pytest.mark.slow  # starts a server process
def test_step_cpu_reads_the_server_tree_and_this_process():
    import os
    import subprocess
    import sys
    import time

    from loadtests.cpu_meter import StepCpu, tree_cpu_seconds

    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\ntime.sleep(30)"
    parent = subprocess.Popen([sys.executable, "-c", f"import subprocess, sys, time\n"
                               f"c = subprocess.Popen([sys.executable, '-c', {burn!r}])\n"
                               f"print(c.pid, flush=True)\ntime.sleep(30)"], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    try:
        meter = StepCpu(parent.pid).start()
        t = time.process_time()
        while time.process_time() - t < 0.05:  # this process (the generator) spends 50 ms of CPU
            pass
        deadline = time.time() + 20
        while (tree_cpu_seconds(child) or 0.0) < 0.3 and time.time() < deadline:
            time.sleep(0.05)
        out = meter.stop(10)
        # the child's 0.3 s of CPU (at most what it had burnt at `start`, ~0 to a little) counts for the tree
        assert out["requests"] == 10
        assert out["generator_ms_per_req"] >= 5.0  # >= 50 ms / 10
        assert out["server_ms_per_req"] is not None and out["server_ms_per_req"] > 5.0
        assert tree_cpu_seconds(parent.pid) >= tree_cpu_seconds(child) >= 0.3
    finally:
        for pid in (child, parent.pid):
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        parent.wait()
    assert tree_cpu_seconds(parent.pid) is None  # gone
    assert StepCpu(None).start().stop(5)["server_ms_per_req"] is None


def test_cpu_at_best_and_the_report_line():
    from loadtests.capacity import cpu_at_best

    def st(rate, ok, server):
        return {"rate": rate, "pass": ok, "cpu": {"server_ms_per_req": server, "generator_ms_per_req": 0.25,
                                                  "server_cores": 1.0, "generator_cores": 0.2}}

    steps = [st(100, True, 2.0), st(150, True, 1.8), st(225, False, 1.7), st(187.5, True, 1.6)]
    assert cpu_at_best(steps, 187.5)["server_ms_per_req"] == 1.6
    assert cpu_at_best(steps, 187.5)["cores_needed"] == 0.347  # 187.5 * (1.6 + 0.25) / 1000
    assert cpu_at_best(steps, 150)["server_ms_per_req"] == 1.8
    assert cpu_at_best(steps, None) is None and cpu_at_best(steps, 225) is None  # 225 failed
    r = {"scaling": {"1": {"max_sustained_rps": 150.0, "cpu_at_best": cpu_at_best(steps, 150)},
                     "2": {"max_sustained_rps": 187.5, "cpu_at_best": cpu_at_best(steps, 187.5)}},
         "generator_ceiling": {"max_sustained_rps": 2000.0}, "engine_cost": {"one_core_rps": 500.0}}
    h = headline(r)
    assert h["cpu_at_best"]["server_ms_per_req"] == 1.6  # from the best process count (2)
    assert h["cores_for_1000_rps"] == 1.85  # 1000 * (1.6 + 0.25) / 1000


def test_markdown_prints_cpu_per_request_and_the_cores_1000_would_take():
    cpu = {"server_ms_per_req": 1.6, "generator_ms_per_req": 0.3, "server_cores": 0.8, "generator_cores": 0.15,
           "server_ms_per_req_by_thread": {"loop": 0.45, "search": 1.1, "other": 0.02}}
    step = {"phase": "climb", "rate": 500, "ok": 5000, "failed": 0, "dropped": 0, "achieved_rps": 499.0,
            "corrected": {"p50_ms": 5, "p99_ms": 9}, "service": {"p99_ms": 8}, "schedule_lag": {"p99_ms": 1},
            "pass": True, "why": "ok", "drain_s": 0.5, "cpu": cpu}
    best = {"rate": 500, **cpu, "cores_needed": 0.95}
    sc = {"max_sustained_rps": 500, "first_failing_rps": 750, "ended_by": "p99", "ended_by_detail": "corrected p99 300 ms",
          "cpu_at_best": best}
    r = {"config": {"embedder": "hash", "mode": "fast", "top_k": 10, "arrival": "poisson", "concurrency": 64,
                    "step_s": 1.0, "slo_p99_ms": 250.0, "start_rate": 20.0, "blas_threads": 0},
         "machine": {"cpu_count": 2, "loadavg_at_start": [1.0, 1.0, 1.0]},
         "seeding": {"total_memories": 100, "requested": 100, "seconds": 1, "batch": 250},
         "idle_latency_ms": {"direct": 2, "proxied": 3},
         "rate_search": {**sc, "hit_max_rate": False, "steps": [step]},
         "scaling": {"1": sc}, "engine_cost": {"facts": 100, "mean_ms": 1.5, "p50_ms": 1.4, "p99_ms": 3,
                                               "cpu_mean_ms": 1.2, "one_core_rps": 666.7},
         "generator_ceiling": {"max_sustained_rps": 3000, "ended_by": "schedule lag",
                               "cpu_at_best": {"server_ms_per_req": 0.09, "generator_ms_per_req": 0.2}},
         "command": "python -m loadtests.capacity"}
    r["headline"] = headline(r)
    md = render_markdown(r)
    assert "| pass | 0.5 | 1.6 | 0.3 |" in md  # the step row ends with the CPU columns
    assert "server 1.6 ms + generator 0.3 ms, 0.95 cores at 500 req/s of 2" in md
    assert "1,000 req/s would need **1.9 cores**" in md  # 1000 * (1.6 + 0.3) / 1000
    assert "Against the trivial target: server 0.09 ms + generator 0.2 ms a request." in md
    assert ("The server's share by thread: event loops 0.45 ms, search threads (the engine) 1.1 ms, other threads "
            "0.02 ms.") in md
    assert "(CPU 1.2 ms)" in md
    assert "| 1 | 500 | 750 | p99: corrected p99 300 ms | 1.6 + 0.3 |" in md


async def test_warm_every_process_reaches_each_process_over_its_own_connection():
    """A stand-in for N processes on one port: each new connection is answered by the next of 3 fake
    processes (round robin, as SO_REUSEPORT spreads connections); every fake process must see the warm-up and
    the whole query set once, then one more warm-up after the share wait."""
    from aiohttp import web
    from aiohttp.test_utils import TestServer

    from loadtests.capacity import warm_every_process

    owner: dict[int, int] = {}
    seen: dict[int, dict[str, int]] = {}

    def pid_of(request: web.Request) -> int:
        key = id(request.transport)
        if key not in owner:
            owner[key] = 100 + len(owner) % 3
        return owner[key]

    async def health(request):
        return web.json_response({"pid": pid_of(request)})

    async def count(request):
        c = seen.setdefault(pid_of(request), {"/v1/warmup": 0, "/v1/retrieve": 0})
        c[request.path] += 1
        await request.read()
        return web.json_response({})

    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_post("/v1/warmup", count)
    app.router.add_post("/v1/retrieve", count)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        out = await warm_every_process(str(server.make_url("")).rstrip("/"), 3, ["q1", "q2", "q3", "q4"], 5,
                                       "fast", share_wait_s=0.0)
    finally:
        await server.close()
    assert out["warmed"] == 3 and out["reshared"] == 3 and out["attempts"] == 6  # round robin: no repeats
    assert sorted(seen) == [100, 101, 102]
    assert all(c == {"/v1/warmup": 2, "/v1/retrieve": 4} for c in seen.values())
    assert sorted(out["seconds_per_process"]) == ["100", "101", "102"]


def test_thread_roles():
    from loadtests.cpu_meter import thread_role

    assert thread_role(100, 100, "python") == "loop"  # the main thread (tid == pid) runs the event loop
    assert thread_role(100, 101, "cortex-search_0") == "search"
    assert thread_role(100, 102, "asyncio_0") == "other"
    assert thread_role(100, 103, "") == "other"


def test_cpu_split_by_thread_of_a_process_tree():
    """A child burns 0.2 s of CPU in a thread named like cortex-mock's search pool and 0.1 s in its main thread;
    the split attributes each to its role."""
    import os
    import subprocess
    import sys

    from loadtests.cpu_meter import StepCpu, tree_cpu_by_role

    code = ("import threading, time, sys, setproctitle\n"
            "def burn(s):\n    t = time.thread_time()\n    while time.thread_time() - t < s: pass\n"
            "done = threading.Event()\n"
            "def search():\n    setproctitle.setthreadtitle('cortex-search_0')\n    burn(0.2)\n    done.set()\n"
            "    time.sleep(30)\n"
            "print('ready', flush=True)\n"
            "sys.stdin.readline()\n"
            "threading.Thread(target=search, name='cortex-search_0', daemon=True).start(); done.wait()\n"
            "burn(0.1)\nprint('done', flush=True)\ntime.sleep(30)")
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        # its imports done before the meter starts (a fixed sleep let them into the main thread's share on a
        # loaded host: 18 ms a request instead of 10)
        assert p.stdout.readline().strip() == "ready"
        meter = StepCpu(p.pid).start()
        p.stdin.write("go\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "done"
        split = meter.stop(10)["server_ms_per_req_by_thread"]
        # 0.2 s in the search thread and 0.1 s in the main thread over 10 requests; /proc counts thread time in
        # 10 ms clock ticks, so each share is within a tick (1 ms a request) of that, plus a little start-up
        assert 19.0 <= split["search"] < 24.0
        assert 9.0 <= split["loop"] < 14.0
        assert split["other"] < 1.0
    finally:
        os.kill(p.pid, 9)
        p.wait()
    assert tree_cpu_by_role(p.pid) is None


def test_completed_requests_are_the_summary_ok_plus_failed():
    import numpy as np

    from loadtests.capacity import completed_requests
    from loadtests.open_loop import Phase, Records, Validity, summarise

    rec = Records.empty(4)
    rec.intended[:] = [1_000, 2_000, 3_000, 4_000]
    rec.dispatched[:] = rec.intended
    rec.sent[:] = [1_100, 2_100, 3_100, 0]
    rec.done[:] = [5_000, 6_000, 7_000, 0]  # the 4th was dropped: never sent, never done
    rec.ok[:] = [True, True, False, False]
    rec.dropped[:] = [False, False, False, True]
    rec.errors[2] = "http_500"
    assert completed_requests(rec) == 3
    res = summarise(rec, [Phase(1000.0, 0.004, "constant", "p")], Validity(50.0), {})
    assert res["ok"] + res["failed"] == 3 and np.count_nonzero(rec.done) == 3


def test_engine_drift_is_the_second_engine_reading_over_the_first():
    sc = {"max_sustained_rps": 300.0, "first_failing_rps": 450.0, "ended_by": "p99",
          "ended_by_detail": "corrected p99 300 ms"}
    r = {"scaling": {"1": sc}, "generator_ceiling": {"max_sustained_rps": 3000.0},
         "engine_cost": {"facts": 100, "mean_ms": 1.7, "p50_ms": 1.6, "p99_ms": 3, "cpu_mean_ms": 1.6,
                         "one_core_rps": 588.2},
         "engine_cost_end": {"cpu_mean_ms": 2.0}}
    h = headline(r)
    assert h["engine_drift"] == 1.25  # 2.0 / 1.6: the machine slowed by a quarter
    r["headline"] = h
    base = {"config": {"embedder": "hash", "mode": "fast", "top_k": 10, "arrival": "poisson", "concurrency": 64,
                       "step_s": 1.0, "slo_p99_ms": 250.0, "start_rate": 20.0, "blas_threads": 0},
            "machine": {"cpu_count": 2, "loadavg_at_start": [1.0, 1.0, 1.0]},
            "seeding": {"total_memories": 100, "requested": 100, "seconds": 1, "batch": 250},
            "idle_latency_ms": {"direct": 2, "proxied": 3},
            "rate_search": {**sc, "hit_max_rate": False, "steps": []},
            "command": "python -m loadtests.capacity"}
    md = render_markdown({**r, **base})
    assert ("The same engine measurement after the process-count runs: CPU 2.0 ms a retrieve, x1.25 the first "
            "reading") in md
    # without the second reading (an older bench.json) there is no drift and no line
    del r["engine_cost_end"]
    r["headline"] = headline(r)
    assert r["headline"]["engine_drift"] is None
    assert "after the process-count runs" not in render_markdown({**r, **base})
    assert headline({**r, "engine_cost": {"one_core_rps": 500.0}, "engine_cost_end": {"cpu_mean_ms": 2.0}})[
        "engine_drift"] is None  # no first CPU reading: nothing to divide by
