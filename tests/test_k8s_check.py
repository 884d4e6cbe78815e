"""deploy/k8s checked without a cluster (issue 31): `make k8s-check` passes on every overlay, and fails, naming the
object, on a manifest with a missing probe, a wrong port or a schema error (each written into a copy of deploy/ and
rendered by kubectl's kustomize like the real ones). Plus the pieces the check is built from, with hand-computed
expectations: Prometheus' relabelling, the Downward API's CPU rounding, the dashboards' label names.

Skips with the reason when kubectl cannot be had (`npm ci --prefix deploy/k8s/check`; linux/amd64 only).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from services.k8s_check import checks
from services.k8s_check.argv import container_env, expand

REPO = Path(__file__).resolve().parents[1]


def _kubectl_reason() -> str | None:
    try:
        import kubernetes_validate  # noqa: F401
    except ImportError:
        return "[requires:k8s-schema] kubernetes-validate absent (make setup installs the dev extra)"
    from services.k8s_check.kubectl import KubectlUnavailable, kubectl_path

    try:
        kubectl_path()
    except KubectlUnavailable as e:
        return f"[requires:k8s-schema] {e}"
    return None


_REASON = _kubectl_reason()
needs_kubectl = pytest.mark.skipif(_REASON is not None, reason=_REASON or "")


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict]]:
    from services.k8s_check.kubectl import render

    return {name: render(REPO / "deploy" / "k8s" / "overlays" / name) for name in ("local", "scale")}


def _named(objs: list[dict], kind: str) -> set[str]:
    return {o["metadata"]["name"] for o in objs if o["kind"] == kind}


# ---------------------------------------------------------------------------------------------------------
# the real overlays

RIG = {"redis", "llm-mock", "embeddings-api", "cortex-mock", "fault-proxy", "locust-master", "locust-worker",
       "prometheus", "grafana"}


@needs_kubectl
@pytest.mark.slow
def test_the_local_overlay_passes_every_check(rendered):
    from services.k8s_check.__main__ import check_objects

    objs = rendered["local"]
    assert check_objects(objs) == []
    assert _named(objs, "Deployment") == RIG | {"adapter-full-context", "adapter-bm25", "adapter-cortex",
                                                "adapter-cortex-fast"}
    assert _named(objs, "Job") == {"bench"}
    assert {o["metadata"].get("namespace") for o in objs if o["kind"] != "Namespace"} == {"memrig"}
    job = next(o for o in objs if o["kind"] == "Job")
    assert job["spec"]["template"]["spec"]["containers"][0]["args"][-5:] == [
        "--target=full-context=adapter-full-context:8850", "--target=bm25=adapter-bm25:8850",
        "--target=cortex=adapter-cortex:8850", "--target=cortex-fast=adapter-cortex-fast:8850",
        "--suites=cortex-v1"]


@needs_kubectl
@pytest.mark.slow
def test_the_scale_overlay_passes_and_scales(rendered):
    from services.k8s_check.__main__ import check_objects

    objs = rendered["scale"]
    assert check_objects(objs) == []
    deps = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Deployment"}
    assert deps["locust-worker"]["spec"]["replicas"] == 16
    assert deps["fault-proxy"]["spec"]["replicas"] == 4
    master = deps["locust-master"]["spec"]["template"]["spec"]["containers"][0]
    assert master["args"][master["args"].index("--expect-workers") + 1] == "16"
    images = {c["image"] for o in deps.values() for c in o["spec"]["template"]["spec"]["containers"]}
    assert "registry.example.com/memrig:0.1.0" in images and not any(i.startswith("memrig") for i in images)
    # --processes follows the CPU limit: 8 CPUs -> `--processes 8` once the kubelet expands $(CORTEX_PROCESSES)
    cm = {o["metadata"]["name"]: o for o in objs if o["kind"] == "ConfigMap"}
    c = deps["cortex-mock"]["spec"]["template"]["spec"]["containers"][0]
    argv = expand(c["args"], container_env(c, cm))
    assert argv[argv.index("--processes") + 1] == "8"
    local = next(o for o in rendered["local"] if o["kind"] == "Deployment" and o["metadata"]["name"] == "cortex-mock")
    lc = local["spec"]["template"]["spec"]["containers"][0]
    lcm = {o["metadata"]["name"]: o for o in rendered["local"] if o["kind"] == "ConfigMap"}
    largv = expand(lc["args"], container_env(lc, lcm))
    assert largv[largv.index("--processes") + 1] == "2"


@needs_kubectl
def test_prometheus_finds_every_rig_component(rendered):
    objs = rendered["local"]
    prom = next(o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("prometheus-config"))
    import yaml

    job = yaml.safe_load(prom["data"]["prometheus.yml"])["scrape_configs"][0]
    found = {}
    for w, tpl in checks.workloads(objs):
        for t in checks.pod_targets(job, w, tpl, "memrig", pod_ip="10.1.2.3"):
            found[w["metadata"]["name"]] = (t["job"], t["service"], t["__address__"], t["__metrics_path__"])
    assert found == {
        "llm-mock": ("llm-mock", "llm-mock", "10.1.2.3:8790", "/metrics"),
        "embeddings-api": ("embeddings-api", "embeddings-api", "10.1.2.3:8793", "/metrics"),
        "cortex-mock": ("cortex-mock", "cortex-mock", "10.1.2.3:8791", "/metrics"),
        "fault-proxy": ("fault-proxy", "fault-proxy", "10.1.2.3:8792", "/__admin/metrics"),
        "locust-master": ("locust", "locust-master", "10.1.2.3:8810", "/metrics"),
        "adapter-full-context": ("backend", "adapter-full-context", "10.1.2.3:8851", "/metrics"),
        "adapter-bm25": ("backend", "adapter-bm25", "10.1.2.3:8851", "/metrics"),
        "adapter-cortex": ("backend", "adapter-cortex", "10.1.2.3:8851", "/metrics"),
        "adapter-cortex-fast": ("backend", "adapter-cortex-fast", "10.1.2.3:8851", "/metrics"),
    }


# ---------------------------------------------------------------------------------------------------------
# the check fails on a broken manifest (a copy of deploy/ with one edit, rendered and checked end to end)

def _broken_copy(tmp_path: Path, rel: str, old: str, new: str) -> Path:
    """deploy/ copied (without node_modules) with `old` replaced once by `new` in deploy/<rel>; only the local
    overlay kept. Returns the overlays directory."""
    dst = tmp_path / "deploy"
    shutil.copytree(REPO / "deploy", dst, ignore=shutil.ignore_patterns("node_modules", "bin", "schema-check"))
    shutil.rmtree(dst / "k8s" / "overlays" / "scale")
    f = dst / rel
    text = f.read_text()
    assert text.count(old) == 1, f"{rel}: {old!r} occurs {text.count(old)} times"
    f.write_text(text.replace(old, new))
    return dst / "k8s" / "overlays"


def _run_check(overlays: Path, capsys) -> tuple[int, list[str]]:
    from services.k8s_check.__main__ import main

    code = main(["--overlays", str(overlays)])
    lines = [x.strip() for x in capsys.readouterr().out.splitlines() if x.startswith("  ")]
    return code, lines


@needs_kubectl
@pytest.mark.slow
def test_the_check_fails_on_a_missing_probe(tmp_path, capsys):
    overlays = _broken_copy(tmp_path, "k8s/base/llm-mock.yaml",
                            "          readinessProbe:\n            httpGet: {path: /health, port: http}\n"
                            "            periodSeconds: 5\n", "")
    code, lines = _run_check(overlays, capsys)
    assert code == 1
    assert lines == ["local: Deployment/llm-mock container llm-mock: no readinessProbe "
                     "(or annotate the workload memrig.io/probe-exempt: <reason>)"]


@needs_kubectl
@pytest.mark.slow
def test_the_check_fails_on_a_wrong_port(tmp_path, capsys):
    overlays = _broken_copy(tmp_path, "k8s/base/cortex-mock.yaml",
                            "- {name: http, port: 8791, targetPort: http}", "- {name: http, port: 8791, targetPort: 8792}")
    code, lines = _run_check(overlays, capsys)
    assert code == 1
    assert lines == ["local: Service/cortex-mock: port http targets 8792, which Deployment/cortex-mock does not "
                     "declare (['8791', 'http'])"]


@needs_kubectl
@pytest.mark.slow
def test_the_check_fails_on_a_schema_error(tmp_path, capsys):
    # `periodSecond` is no field of a Probe: strict validation rejects the unknown key
    overlays = _broken_copy(tmp_path, "k8s/base/fault-proxy.yaml",
                            "            httpGet: {path: /__admin/metrics, port: http}\n            periodSeconds: 5\n",
                            "            httpGet: {path: /__admin/metrics, port: http}\n            periodSecond: 5\n")
    code, lines = _run_check(overlays, capsys)
    assert code == 1
    assert len(lines) == 1
    assert lines[0].startswith("local: Deployment/fault-proxy: schema: spec/template/spec/containers/0/readinessProbe: ")
    assert "'periodSecond'" in lines[0] and "not allowed" in lines[0]


@needs_kubectl
@pytest.mark.slow
def test_the_check_fails_on_a_flag_the_service_does_not_take(tmp_path, capsys):
    overlays = _broken_copy(tmp_path, "k8s/base/fault-proxy.yaml", '"--seed", "0"]', '"--seed", "0", "--admin-port"]')
    code, lines = _run_check(overlays, capsys)
    assert code == 1
    assert len(lines) == 1 and "--admin-port: expected one argument" in lines[0], lines


@needs_kubectl
@pytest.mark.slow
def test_the_check_fails_when_the_master_expects_other_than_the_workers(tmp_path, capsys):
    overlays = _broken_copy(tmp_path, "k8s/base/locust.yaml", "  replicas: 2   # the scale knob", "  replicas: 3   #")
    code, lines = _run_check(overlays, capsys)
    assert code == 1
    assert lines == ["local: Deployment/locust-master: --expect-workers 2 but Deployment/locust-worker has 3 replicas"]


# ---------------------------------------------------------------------------------------------------------
# rules on hand-made objects (no kubectl needed)

def _deployment(**container) -> dict:
    c = {"name": "app", "image": "memrig:1", "ports": [{"name": "http", "containerPort": 8790}],
         "readinessProbe": {"httpGet": {"path": "/health", "port": "http"}},
         "livenessProbe": {"tcpSocket": {"port": 8790}},
         "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
         "securityContext": {"readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False,
                             "capabilities": {"drop": ["ALL"]}}}
    c.update(container)
    return {"kind": "Deployment", "metadata": {"name": "x"},
            "spec": {"template": {"metadata": {"labels": {"app": "x"}},
                                  "spec": {"securityContext": {"runAsNonRoot": True}, "containers": [c]}}}}


def test_workload_rules_on_hand_made_deployments():
    assert checks.workload_findings([_deployment()]) == []
    assert checks.workload_findings([_deployment(livenessProbe={"grpc": {"port": 8850}}, image="memrig")]) == [
        "Deployment/x container app: livenessProbe port 8850 is not a declared container port (['8790', 'http'])",
        "Deployment/x container app: image 'memrig' has no pinned tag"]
    d = _deployment(resources={"limits": {"cpu": "1"}})
    del d["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"]
    assert checks.workload_findings([d]) == [
        "Deployment/x: pod securityContext.runAsNonRoot is not true",
        "Deployment/x container app: no resources.requests.cpu",
        "Deployment/x container app: no resources.requests.memory",
        "Deployment/x container app: no resources.limits.memory"]


def test_secret_rules():
    d = _deployment(env=[{"name": "MEMRIG_PROXY_ADMIN_TOKEN", "value": "hunter2"},
                         {"name": "K", "valueFrom": {"secretKeyRef": {"name": "other", "key": "k"}}}],
                    args=["--admin-token=x"])
    assert checks.secret_findings([d]) == [
        "Deployment/x container app: env MEMRIG_PROXY_ADMIN_TOKEN must come from a secretKeyRef, not a literal value",
        "Deployment/x container app: env K reads other/k; the rig's Secret is memrig-secrets with keys "
        "cortex-api-key, proxy-admin-token",
        "Deployment/x container app: --admin-token on the command line (use its env var from the Secret)"]


def test_relabel_follows_prometheus_semantics():
    configs = [
        {"source_labels": ["a"], "regex": "yes", "action": "keep"},
        {"source_labels": ["ip", "port"], "regex": r"(.+);(\d+)", "replacement": "$1:$2", "target_label": "__address__"},
        {"source_labels": ["p"], "regex": "(.+)", "target_label": "__metrics_path__"},
        {"source_labels": ["gone"], "target_label": "drop_me"},  # empty result removes the label
        {"source_labels": ["a"], "regex": "ye", "action": "drop"},  # anchored: "ye" does not match "yes"
    ]
    got = checks.relabel({"a": "yes", "ip": "10.0.0.1", "port": "8791", "p": "", "__metrics_path__": "/metrics",
                          "drop_me": "x"}, configs)
    assert got == {"a": "yes", "ip": "10.0.0.1", "port": "8791", "p": "", "__address__": "10.0.0.1:8791",
                   "__metrics_path__": "/metrics"}
    assert checks.relabel({"a": "no"}, configs) is None
    assert checks.relabel({"a": "yes"}, [{"source_labels": ["a"], "regex": "y(.)s", "replacement": "${1}!",
                                          "target_label": "b"}]) == {"a": "yes", "b": "e!"}


def test_cpu_quantities_round_up_like_the_downward_api():
    assert [checks.cpu_count(q) for q in ("2", "500m", "1500m", "8", "0.1", "2001m")] == [2, 1, 2, 8, 1, 3]


def test_the_dashboards_label_names():
    # by (...) groupings, {...} matchers and label_values() of deploy/grafana/dashboards, as of this commit
    assert checks.dashboard_label_names() == {"name", "method", "component", "state", "backend", "top_k", "phase",
                                              "host", "status", "fault", "type", "task", "outcome"}


def test_env_resolution_and_expansion():
    c = {"envFrom": [{"configMapRef": {"name": "cm"}}],
         "env": [{"name": "P", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1"}}},
                 {"name": "S", "valueFrom": {"secretKeyRef": {"name": "memrig-secrets", "key": "cortex-api-key"}}},
                 {"name": "V", "value": "$(A)-x"}],
         "resources": {"limits": {"cpu": "3500m"}}}
    env = container_env(c, {"cm": {"data": {"A": "a"}}})
    assert env == {"A": "a", "P": "4", "S": "secret-cortex-api-key", "V": "a-x"}
    assert expand(["--processes", "$(P)", "$(NOPE)"], env) == ["--processes", "4", "$(NOPE)"]


def test_readme_creates_exactly_the_secret_keys_the_manifests_read():
    text = (REPO / "README.md").read_text()
    m = re.search(r"kubectl -n memrig create secret generic memrig-secrets((?:.*\\\n)*.*)", text)
    assert m, "README: no `kubectl -n memrig create secret generic memrig-secrets` command"
    assert sorted(re.findall(r"--from-literal=([\w-]+)=", m.group(1))) == sorted(checks.SECRET_KEYS)


@needs_kubectl
def test_rig_pods_run_as_the_images_user(rendered):
    users = re.findall(r"^USER (\d+)$", (REPO / "deploy" / "Dockerfile").read_text(), re.M)
    assert users == ["10001"], "deploy/Dockerfile: one numeric USER, last"
    assert "useradd --uid 10001" in (REPO / "deploy" / "Dockerfile").read_text()
    for objs in rendered.values():
        rig = [(w, tpl) for w, tpl in checks.workloads(objs)
               if tpl["spec"]["containers"][0]["image"].split("/")[-1].startswith("memrig:")]
        assert len(rig) >= 10
        for w, tpl in rig:
            assert tpl["spec"]["securityContext"]["runAsUser"] == 10001, checks.ref(w)
