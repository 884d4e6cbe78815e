"""The fault campaign over the rig's own processes (issue 49), the same cases `memrig drill rig-faults` prints
(services/drills/rig_faults.py): each a real `memrig bench --suite octybot` child over bm25, dense and full-context
(hash embedder), compared with one uninterrupted run of the same command; after each, no process of it runs.

What the campaign found and the rig now does (each also tested alone in tests/test_rig_faults_units.py): a backend's
garbage answer ended the whole run with an AttributeError; a deadline did not name the call; a results file that
could not be written was a traceback without its path; `kill -9` of `memrig bench` left its five services running;
a resume kept the killed run's half-written .metrics.json.PID.tmp; a cortex-mock killed by SIGKILL left its Redis
workers running.
"""

from __future__ import annotations

import pytest

from services.drills.rig_faults import PROBES, Campaign

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    with Campaign(tmp_path_factory.mktemp("rig-faults"), say=lambda s: None) as c:
        c.baseline()
        yield c


def _passed(*results):
    for r in results:
        assert r.passed, r.line()


def test_a_backend_killed_in_the_ingest_and_one_in_the_probes_cost_only_their_probes(campaign):
    ingest, probes = campaign.backend_kill()
    _passed(ingest, probes)
    # full-context died before it held anything: every one of its 50 probes lost; dense some, not all
    assert ingest.facts["lost_probes"] == PROBES and 0 < probes.facts["lost_probes"] < PROBES
    assert ingest.facts["reason"].startswith("ingest failed: BackendUnavailable: full-context: UNAVAILABLE: ")
    assert probes.facts["reason"].startswith("failed mid-run: UNAVAILABLE: dense: UNAVAILABLE: Retrieve: ")
    assert ingest.facts["bm25_ok"] == PROBES
    # the resume ran exactly what was lost: 50 of full-context's and dense's lost ones, nothing of bm25
    assert probes.facts["resumed"] == PROBES + probes.facts["lost_probes"]
    assert probes.facts["ok_keys"] == 3 * PROBES and probes.facts["twice"] == []
    assert probes.facts["table_differences"] == [] and probes.facts["survivors"] == []


def test_the_coordinator_killed_at_five_points_resumes_to_the_same_tables(campaign):
    res = campaign.coordinator_kill()
    _passed(res)
    assert res.facts["points"] == ["run.json half written", "during the ingest", "sample half appended",
                                   "during the probes", "metrics.json half written"]
    # 150 samples, each written whole once; the one line the crash cut is superseded, not lost
    assert res.facts["ok_keys"] == 3 * PROBES and res.facts["twice"] == [] and res.facts["missing"] == []
    assert len(res.facts["torn_lines"]) == 1
    assert res.facts["stale_tmp"] == [] and res.facts["survivors"] == []
    assert res.facts["compare"][0] == 0


def test_a_hung_backend_and_a_garbage_one_fail_named_and_block_nothing(campaign):
    res = campaign.hang_garbage()
    _passed(res)
    assert res.facts["ok"] == {"bm25": PROBES, "full-context": PROBES}
    assert res.facts["failures"]["garbage"] == ("failed mid-run: INTERNAL: garbage: INTERNAL: Retrieve: the answer is "
                                                "not a RetrieveResponse message (it could not be parsed)")
    assert res.facts["failures"]["hang"].endswith("(no answer within the 2 s deadline)")


def test_an_unwritable_or_full_results_directory_is_one_error_naming_the_file(campaign):
    start, mid, full = campaign.results_unwritable()
    _passed(start, mid, full)
    assert mid.facts["kept"] >= 1 and mid.facts["torn"] == []
    assert full.facts["size"] <= 150_000 and full.facts["kept"] >= 1
    for r in (mid, full):
        assert r.facts["table_differences"] == [] and r.facts["survivors"] == []


def test_cortex_mock_and_the_proxy_killed_under_load_lose_no_job_and_no_memory(tmp_path):
    # its own campaign: this case needs no uninterrupted bench run
    import shutil

    from services.drills.cortex_kill import DRILL_TEXTS, WORKERS

    if shutil.which("redis-server") is None:
        pytest.skip("[requires:redis] redis-server binary not installed (apt-get install -y redis-server)")
    with Campaign(tmp_path, say=lambda s: None) as c:
        res = c.cortex_proxy_kill()
    _passed(res)
    f = res.facts
    assert len(f["cortex_pids"]) == 1 + WORKERS and f["survivors"] == []
    assert f["state_problems"] == []
    # a job was running in a killed worker; after the restart it ran again and completed
    assert f["in_flight"] and all(a >= 2 for a in f["in_flight_attempts"].values())
    # the drill's 4 jobs (2 namespaces x 2 texts): one memory each
    assert f["drill_memories"] == sum(len(t) for t in DRILL_TEXTS.values()) == 4
    assert f["memories_after"] >= f["memories_before"] > 0 and f["jobs_after"] >= f["jobs_before"] > 0
    # the clients: 502s from the proxy while cortex-mock was down, no answer while the proxy was; none outside
    bw = f["clients"]["by_window"]
    assert bw["cortex-mock"].get("HTTP 502", 0) > 0
    assert any(k.startswith("HTTP 0 (") for k in bw["fault-proxy"])
    assert f["clients"]["outside"] == [] and f["clients"]["unexpected"] == []
    assert sum(f["csv_failures"].values()) == f["failures"] == sum(sum(c.values()) for c in bw.values())
    assert f["proxy_faults"] == ["rf-kept"]
