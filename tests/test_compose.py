"""deploy/compose.yaml agrees with the rig: modules, ports (services/launcher.py SERVICES), flags each service
accepts, the compose Prometheus config and the Grafana provisioning paths."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from services.launcher import SERVICES

REPO = Path(__file__).resolve().parents[1]
COMPOSE = yaml.safe_load((REPO / "deploy/compose.yaml").read_text())
SVC = COMPOSE["services"]
TURN_SIM_PORT = 8793


def _flag_value(cmd: list[str], flag: str) -> str:
    return cmd[cmd.index(flag) + 1]


def _published(svc: dict) -> set[int]:
    out = set()
    for p in svc.get("ports", []):
        host, hp, cp = p.split(":")
        assert host == "127.0.0.1", f"{p}: publish on loopback only"
        assert hp == cp
        out.add(int(cp))
    return out


@pytest.mark.parametrize("name", list(SERVICES))
def test_rig_service_module_and_port_match_launcher(name):
    spec = SERVICES[name]
    svc = SVC[name]
    cmd = svc["command"]
    assert cmd[:3] == ["python", "-m", spec.module]
    assert int(_flag_value(cmd, "--port")) == spec.default_port
    assert _flag_value(cmd, "--host") == "0.0.0.0"  # inside the container; published on 127.0.0.1
    assert spec.default_port in _published(svc)


def test_turn_sim_port_matches_its_cli_default():
    from services.cost_scenarios.__main__ import DEFAULT_PORT

    assert DEFAULT_PORT == TURN_SIM_PORT
    assert int(_flag_value(SVC["turn-sim"]["command"], "--port")) == TURN_SIM_PORT


def test_coordinator_metrics_port_is_the_one_prometheus_scrapes():
    cmd = SVC["coordinator"]["command"]
    assert int(_flag_value(cmd, "--metrics-port")) == SERVICES["coordinator"].default_port + 1
    assert int(_flag_value(cmd, "--metrics-port")) in _published(SVC["coordinator"])


def test_fault_proxy_points_at_cortex_mock():
    cmd = SVC["fault-proxy"]["command"]
    assert _flag_value(cmd, "--upstream") == f"http://cortex-mock:{SERVICES['cortex-mock'].default_port}"


def test_compose_prometheus_scrapes_every_service_by_name():
    prom = SVC["prometheus"]
    mount = next(v for v in prom["volumes"] if v.endswith(":/etc/prometheus/prometheus.yml:ro"))
    cfg = yaml.safe_load((REPO / "deploy" / mount.split(":")[0]).read_text())
    targets = {j["job_name"]: (j["static_configs"][0]["targets"][0], j.get("metrics_path", "/metrics"))
               for j in cfg["scrape_configs"]}
    for name, spec in SERVICES.items():
        port = spec.default_port + (1 if name == "coordinator" else 0)
        assert targets[name][0] == f"{name}:{port}"
    assert targets["fault-proxy"][1] == "/__admin/metrics"
    assert targets["turn-sim"][0] == f"turn-sim:{TURN_SIM_PORT}"
    # The local config has no static jobs: local processes announce themselves through file_sd targets
    # (services/common/prom_targets.py; tested in tests/test_prom_targets.py).


def test_grafana_mounts_provisioning_and_dashboards():
    vols = SVC["grafana"]["volumes"]
    assert "./grafana/provisioning:/etc/grafana/provisioning:ro" in vols
    dash_mount = next(v for v in vols if v.startswith("./grafana/dashboards:"))
    prov = yaml.safe_load((REPO / "deploy/grafana/provisioning/dashboards/memrig.yaml").read_text())
    assert prov["providers"][0]["options"]["path"] == dash_mount.split(":")[1]
    ds = yaml.safe_load((REPO / "deploy/grafana/provisioning/datasources/prometheus.yaml").read_text())
    assert ds["datasources"][0]["url"] == "http://prometheus:9090"
    assert "127.0.0.1:9090:9090" in SVC["prometheus"]["ports"]


def test_redis_url_is_shared_by_cortex_mock_and_proxy():
    assert "redis" in SVC
    for name in ("cortex-mock", "fault-proxy"):
        assert _flag_value(SVC[name]["command"], "--redis-url") == "redis://redis:6379/0"


def test_build_context_and_dockerfile_exist():
    build = SVC["llm-mock"]["build"]
    assert (REPO / "deploy" / build["context"] / build["dockerfile"]).resolve() == REPO / "deploy/Dockerfile"


@pytest.mark.slow  # starts a server process
@pytest.mark.parametrize("name", [n for n in SVC if SVC[n].get("command", [""])[0] == "python"])
def test_every_flag_in_compose_is_accepted_by_the_service(name):
    cmd = SVC[name]["command"]
    module = cmd[2]
    help_text = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True,
                               cwd=REPO, timeout=120).stdout
    for arg in cmd[3:]:
        if arg.startswith("--"):
            assert arg in help_text, f"{name}: {module} has no flag {arg}"
