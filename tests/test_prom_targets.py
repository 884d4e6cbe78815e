"""Prometheus wiring: file_sd targets written by every process the rig starts, the deploy configs checked by
promtool (skipped with the reason when it is absent), `make load` passing a metrics port, and histogram bounds
on the rig's own delays and timeouts."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Histogram

from collectors.buckets import LATENCY_BUCKETS_S
from services import observe
from services.common import prom_targets
from services.launcher import Rig

REPO = Path(__file__).resolve().parents[1]


def test_write_remove_and_labels(tmp_path):
    p = prom_targets.write_target("backend/openclaw", "backend", 4201, pid=1, directory=tmp_path)
    assert p.name == "backend_openclaw.1.json"
    assert json.loads(p.read_text()) == [{"targets": ["127.0.0.1:4201"],
                                          "labels": {"job": "backend", "service": "backend_openclaw", "pid": "1"}}]
    q = prom_targets.write_target("fault-proxy", "fault-proxy", 4300, pid=1, metrics_path="/__admin/metrics",
                                  directory=tmp_path)
    assert json.loads(q.read_text())[0]["labels"]["__metrics_path__"] == "/__admin/metrics"
    assert not list(tmp_path.glob("*.tmp"))
    prom_targets.remove_target(p)
    prom_targets.remove_target(p)  # twice is fine
    assert [f.name for f in tmp_path.glob("*.json")] == ["fault-proxy.1.json"]


def test_dead_processes_are_pruned(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    prom_targets.write_target("llm-mock", "llm-mock", 4100, pid=dead.pid, directory=tmp_path)
    assert [f.name for f in prom_targets.prune_dead(tmp_path)] == [f"llm-mock.{dead.pid}.json"]
    prom_targets.write_target("llm-mock", "llm-mock", 4100, pid=dead.pid, directory=tmp_path)
    live = prom_targets.write_target("turn-sim", "turn-sim", 4200, directory=tmp_path)  # this process
    assert list(tmp_path.glob("*.json")) == [live]  # writing prunes too


def test_targets_dir_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMRIG_STATE_DIR", str(tmp_path / "st"))
    monkeypatch.delenv("MEMRIG_TARGETS_DIR", raising=False)
    assert prom_targets.targets_dir() == tmp_path / "st" / "targets"
    monkeypatch.setenv("MEMRIG_TARGETS_DIR", str(tmp_path / "t"))
    assert prom_targets.targets_dir() == tmp_path / "t"


@pytest.mark.slow  # starts a server process
async def test_launcher_writes_a_target_per_process_and_removes_it(tmp_path):
    rig = Rig(tmp_path / "run")
    try:
        p = await rig.start_service("llm-mock")
        files = list(prom_targets.targets_dir().glob("*.json"))
        assert [f.name for f in files] == [f"llm-mock.{p.pid}.json"] and p.target == str(files[0])
        group = json.loads(files[0].read_text())[0]
        assert group == {"targets": [f"127.0.0.1:{p.ports['http']}"],
                         "labels": {"job": "llm-mock", "service": "llm-mock", "pid": str(p.pid)}}
        # `memrig down` runs in another process: the state file carries the target path
        rig.save_state()
        other = Rig(tmp_path / "run")
        other.load_state()
        other.stop("llm-mock")
        assert list(prom_targets.targets_dir().glob("*.json")) == []
    finally:
        rig.stop_all()


def test_make_load_passes_a_metrics_port():
    make = (REPO / "Makefile").read_text()
    load = re.search(r"^load:.*\n((?:\t.*\n)+)", make, re.M).group(1)
    assert "--metrics-port" in load
    from loadtests import run

    src = (REPO / "loadtests" / "run.py").read_text()
    assert '"--metrics-port", type=int, default=0' in src and run.LOCUSTFILES


@pytest.mark.skipif(shutil.which("promtool") is None,
                    reason="[requires:promtool] promtool not installed (Debian: apt-get install -y prometheus)")
@pytest.mark.parametrize("config", ["prometheus.yml", "prometheus.compose.yml"])
def test_promtool_checks_the_configs(tmp_path, config):
    text = (REPO / "deploy" / "prometheus" / config).read_text()
    if config == "prometheus.yml":
        targets = tmp_path / "targets"
        targets.mkdir()
        prom_targets.write_target("llm-mock", "llm-mock", 4100, pid=1, directory=targets)
        text = observe.render_prometheus_config(text, targets)
    cfg = tmp_path / config
    cfg.write_text(text)
    r = subprocess.run(["promtool", "check", "config", str(cfg)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout + r.stderr


def _histogram_quantile(q: float, bounds: tuple[float, ...], counts: list[float]) -> float:
    """PromQL's histogram_quantile on cumulative bucket counts (linear interpolation inside the bucket,
    prometheus/promql/quantile.go)."""
    rank = q * counts[-1]
    prev_bound, prev_count = 0.0, 0.0
    for bound, count in zip(bounds, counts, strict=False):
        if count >= rank:
            return prev_bound + (bound - prev_bound) * (rank - prev_count) / (count - prev_count)
        prev_bound, prev_count = bound, count
    return bounds[-1]


@pytest.mark.parametrize("delay_s", [0.1, 0.3, 0.5, 1.0, 2.0, 3.0, 60.0])
def test_a_fixed_rig_delay_reads_true_on_the_dashboard(delay_s):
    # Every delay/timeout the rig sets is a bucket bound, so a fixed delay observed 100 times reads as p95 in
    # (previous bound, delay]: with the old 0.25 -> 0.5 step, 0.3 s read as 0.4875 s (issue 15).
    assert delay_s in LATENCY_BUCKETS_S
    reg = CollectorRegistry()
    h = Histogram("d_seconds", "delay", buckets=LATENCY_BUCKETS_S, registry=reg)
    for _ in range(100):
        h.observe(delay_s)
    counts = [reg.get_sample_value("d_seconds_bucket", {"le": str(float(b))}) for b in LATENCY_BUCKETS_S]
    p95 = _histogram_quantile(0.95, LATENCY_BUCKETS_S, counts)
    below = LATENCY_BUCKETS_S[LATENCY_BUCKETS_S.index(delay_s) - 1]
    assert below < p95 <= delay_s
    assert delay_s - p95 <= 0.05 * (delay_s - below) + 1e-9  # 95 % of the way through the last bucket


def test_buckets_rise_smoothly():
    ratios = [b / a for a, b in zip(LATENCY_BUCKETS_S, LATENCY_BUCKETS_S[1:], strict=False)]
    assert all(r > 1 for r in ratios)
    assert max(r for a, r in zip(LATENCY_BUCKETS_S, ratios, strict=False) if a >= 0.1) <= 2.0
    assert LATENCY_BUCKETS_S[-1] == 60.0


def test_a_new_registry_never_inherits_metrics_of_a_collected_one_with_its_id():
    # CPython reuses a freed object's address, so id() of a new registry often equals a dead one's: metrics
    # must be remembered per registry object, or the new registry gets a gauge that exports nowhere.
    import gc

    from prometheus_client import CollectorRegistry, Gauge

    from collectors.prom import get_metric
    from services.embeddings_api.service import _metrics

    reused = 0
    for _ in range(50):  # with id()-keyed caches an id was reused within the first rounds and this failed
        old = CollectorRegistry()
        old_id = id(old)
        get_metric(Gauge, "memrig_test_reuse", "d", ("c",), old).labels("x").set(1)
        _metrics(old)
        del old
        # the young generations only: a full collection costs ~0.5 s in a pytest process that has run the suite
        gc.collect(1)
        new = CollectorRegistry()
        reused += id(new) == old_id
        get_metric(Gauge, "memrig_test_reuse", "d", ("c",), new).labels("y").set(7)
        _metrics(new)[0].labels("m", "ok").inc()
        assert new.get_sample_value("memrig_test_reuse", {"c": "y"}) == 7
        assert new.get_sample_value("memrig_test_reuse", {"c": "x"}) is None
        assert new.get_sample_value("memrig_embeddings_requests_total", {"model": "m", "outcome": "ok"}) == 1
        del new
    assert reused > 0  # the case this is about happened (it does in every round here)
