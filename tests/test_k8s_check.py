"""deploy/k8s checked without a cluster (issues 31 and 39): `make k8s-check` passes on every overlay, and fails, naming
the object, on a manifest with a missing probe, a wrong port, a schema error, a bench beside load or a fault timeline
(or in their namespace), an open Redis, a NetworkPolicy that admits too much, or a shard map that misses a shard
(each written into a copy of deploy/ and rendered by kubectl's kustomize like the real ones). Plus the pieces the
check is built from, with hand-computed expectations: Prometheus' relabelling, the Downward API's CPU rounding, the
dashboards' label names, NetworkPolicy evaluation.

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

    return {name: render(REPO / "deploy" / "k8s" / "overlays" / name) for name in OVERLAYS}


def _named(objs: list[dict], kind: str) -> set[str]:
    return {o["metadata"]["name"] for o in objs if o["kind"] == kind}


# ---------------------------------------------------------------------------------------------------------
# the real overlays

OVERLAYS = ("local", "scale", "load", "drill")
RIG = {"redis", "llm-mock", "embeddings-api", "fault-proxy", "prometheus", "grafana"}  # + StatefulSet cortex-mock


def _by_name(objs: list[dict], kind: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in objs if o["kind"] == kind}


def _arg(c: dict, flag: str) -> str:
    return c["args"][c["args"].index(flag) + 1]


@needs_kubectl
@pytest.mark.slow
def test_the_local_overlay_passes_every_check(rendered):
    from services.k8s_check.__main__ import check_objects

    objs = rendered["local"]
    assert check_objects(objs) == []
    assert _named(objs, "Deployment") == RIG | {"adapter-full-context", "adapter-bm25", "adapter-cortex",
                                                "adapter-cortex-fast"}
    assert _named(objs, "StatefulSet") == {"cortex-mock"}
    assert _named(objs, "Job") == {"bench"}
    assert {o["metadata"].get("namespace") for o in objs if o["kind"] != "Namespace"} == {"memrig"}
    job = next(o for o in objs if o["kind"] == "Job")
    assert job["spec"]["template"]["spec"]["containers"][0]["args"][-5:] == [
        "--target=full-context=adapter-full-context:8850", "--target=bm25=adapter-bm25:8850",
        "--target=cortex=adapter-cortex:8850", "--target=cortex-fast=adapter-cortex-fast:8850",
        "--suites=cortex-v1"]


@needs_kubectl
@pytest.mark.slow
def test_the_scale_overlay_runs_every_default_suite_on_checked_data(rendered):
    from services.k8s_check.__main__ import check_objects

    objs = rendered["scale"]
    assert check_objects(objs) == []
    deps, sts = _by_name(objs, "Deployment"), _by_name(objs, "StatefulSet")
    assert "locust-master" not in deps and "locust-worker" not in deps  # no load beside the bench
    assert deps["fault-proxy"]["spec"]["replicas"] == 4
    assert {n for n in deps if n.startswith("adapter-")} == {
        f"adapter-{b}" for b in ("full-context", "bm25", "hybrid", "openclaw", "cortex", "cortex-fast", "quaid-real",
                                 "octybot-real")}
    job = _by_name(objs, "Job")["bench"]["spec"]
    assert (job["activeDeadlineSeconds"], job["ttlSecondsAfterFinished"]) == (43200, 604800)
    bench = job["template"]["spec"]["containers"][0]
    assert not any(a.startswith("--suites") for a in bench["args"])  # every default suite
    init = job["template"]["spec"]["initContainers"][0]
    assert init["command"][:4] == ["python", "-m", "services.datasets", "fetch"]
    mounts = {m["mountPath"]: m.get("readOnly", False) for m in bench["volumeMounts"]}
    assert mounts["/shared/data"] is True
    assert {"name": "MEMRIG_DATA_DIR", "value": "/shared/data"} in bench["env"]
    # --processes follows the CPU limit: 8 CPUs -> `--processes 8` once the kubelet expands $(CORTEX_PROCESSES)
    cm = _by_name(objs, "ConfigMap")
    c = sts["cortex-mock"]["spec"]["template"]["spec"]["containers"][0]
    argv = expand(c["args"], container_env(c, cm))
    assert argv[argv.index("--processes") + 1] == "8"
    local = _by_name(rendered["local"], "StatefulSet")["cortex-mock"]["spec"]["template"]["spec"]["containers"][0]
    largv = expand(local["args"], container_env(local, _by_name(rendered["local"], "ConfigMap")))
    assert largv[largv.index("--processes") + 1] == "2"
    # one image everywhere, named in components/image
    for name in OVERLAYS:
        images = {c["image"] for w, tpl in checks.workloads(rendered[name])
                  for c in tpl["spec"]["containers"] + tpl["spec"].get("initContainers", [])
                  if c["image"].startswith("memrig")}
        assert images == {"memrig:0.1.0"}, name


@needs_kubectl
@pytest.mark.slow
def test_load_and_drill_are_their_own_namespaces_and_say_so(rendered):
    from services.k8s_check.__main__ import check_objects

    for name, ns, timeline, run_dir in (("load", "memrig-load", "none", "/results/load"),
                                        ("drill", "memrig-drill", "seeded:7:240:3", "/results/drill")):
        objs = rendered[name]
        assert check_objects(objs) == [], name
        assert _named(objs, "Job") == set()
        assert {o["metadata"].get("namespace") for o in objs if o["kind"] != "Namespace"} == {ns}
        cfg = next(o for n, o in _by_name(objs, "ConfigMap").items() if n.startswith("locust-config"))["data"]
        assert (cfg["MEMRIG_FAULT_TIMELINE"], cfg["MEMRIG_LOAD_RUN_DIR"], cfg["LOCUST_CSV"]) == (
            timeline, run_dir, run_dir + "/locust")
    deps = _by_name(rendered["load"], "Deployment")
    assert deps["locust-worker"]["spec"]["replicas"] == 16
    assert _arg(deps["locust-master"]["spec"]["template"]["spec"]["containers"][0], "--expect-workers") == "16"
    assert _by_name(rendered["load"], "StatefulSet")["cortex-mock"]["spec"]["replicas"] == 4
    proxy = deps["fault-proxy"]["spec"]["template"]["spec"]["containers"][0]
    assert _arg(proxy, "--shard-map").split(",") == [
        f"cortex-mock-{i}=http://cortex-mock-{i}.cortex-mock:8791" for i in range(4)]
    drill_master = _by_name(rendered["drill"], "Deployment")["locust-master"]["spec"]["template"]
    assert drill_master["metadata"]["labels"]["memrig.io/fault-admin"] == "true"
    load_master = deps["locust-master"]["spec"]["template"]
    assert "memrig.io/fault-admin" not in load_master["metadata"]["labels"]
    assert not any(e["name"] == "MEMRIG_FAULT_ADMIN_TOKEN" for e in load_master["spec"]["containers"][0]["env"])


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
        "fault-proxy": ("fault-proxy", "fault-proxy", "10.1.2.3:8794", "/__admin/metrics"),
        "adapter-full-context": ("backend", "adapter-full-context", "10.1.2.3:8851", "/metrics"),
        "adapter-bm25": ("backend", "adapter-bm25", "10.1.2.3:8851", "/metrics"),
        "adapter-cortex": ("backend", "adapter-cortex", "10.1.2.3:8851", "/metrics"),
        "adapter-cortex-fast": ("backend", "adapter-cortex-fast", "10.1.2.3:8851", "/metrics"),
    }


# ---------------------------------------------------------------------------------------------------------
# the check fails on a broken manifest (a copy of deploy/ with one edit, rendered and checked end to end)

def _broken_copy(tmp_path: Path, rel: str, old: str, new: str, keep: tuple[str, ...] = ("local",)) -> Path:
    """deploy/ copied (without node_modules) with `old` replaced once by `new` in deploy/<rel>; only the overlays
    in `keep` kept. Returns the overlays directory."""
    dst = tmp_path / "deploy"
    shutil.copytree(REPO / "deploy", dst, ignore=shutil.ignore_patterns("node_modules", "bin", "schema-check"))
    for o in OVERLAYS:
        if o not in keep:
            shutil.rmtree(dst / "k8s" / "overlays" / o)
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
    assert lines == ["local: Service/cortex-mock: port http targets 8792, which StatefulSet/cortex-mock does not "
                     "declare (['8791', 'http'])"]


@needs_kubectl
@pytest.mark.slow
def test_the_check_fails_on_a_schema_error(tmp_path, capsys):
    # `periodSecond` is no field of a Probe: strict validation rejects the unknown key
    overlays = _broken_copy(tmp_path, "k8s/base/fault-proxy.yaml",
                            "            httpGet: {path: /__admin/metrics, port: admin}\n            periodSeconds: 5\n",
                            "            httpGet: {path: /__admin/metrics, port: admin}\n            periodSecond: 5\n")
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
    overlays = _broken_copy(tmp_path, "k8s/components/load/locust.yaml", "  replicas: 2   # the scale knob",
                            "  replicas: 3   #", keep=("drill",))
    code, lines = _run_check(overlays, capsys)
    assert code == 1
    assert lines == ["drill: Deployment/locust-master: --expect-workers 2 but Deployment/locust-worker has 3 replicas"]


@needs_kubectl
@pytest.mark.slow
def test_the_check_fails_on_a_bench_beside_load_and_a_fault_timeline(tmp_path, capsys):
    overlays = _broken_copy(tmp_path, "k8s/overlays/local/kustomization.yaml", "  - ../../components/bench\n",
                            "  - ../../components/bench\n  - ../../components/load\n  - ../../components/drill\n")
    code, lines = _run_check(overlays, capsys)
    assert code == 1
    gen = [x for x in lines if "a load generator beside the bench" in x]
    assert [x.split(":")[1].strip() for x in gen] == ["Deployment/locust-master", "Deployment/locust-worker"]
    assert any(x.startswith("local: ConfigMap/locust-config") and "MEMRIG_FAULT_TIMELINE=seeded:7:240:3: an active "
               "fault timeline beside the bench (Job/bench)" in x for x in lines), lines
    assert any("Deployment/locust-master container locust-master: holds the proxies' admin URL" in x for x in lines)


@needs_kubectl
@pytest.mark.slow
def test_the_check_fails_when_a_bench_shares_a_namespace_with_a_drill(tmp_path, capsys):
    overlays = _broken_copy(tmp_path, "k8s/overlays/drill/kustomization.yaml", "namespace: memrig-drill",
                            "namespace: memrig", keep=("local", "drill"))
    (overlays / "drill" / "namespace.yaml").write_text("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: memrig\n")
    code, lines = _run_check(overlays, capsys)
    assert code == 1
    assert lines == ["overlays: overlays local and drill share namespace memrig: applied together, the bench in local "
                     "would share fault-proxy and Redis with drill's Deployment/locust-master, Deployment/locust-worker, "
                     f"ConfigMap/{_locust_config_name(overlays / 'drill')} MEMRIG_FAULT_TIMELINE=seeded:7:240:3"]


def _locust_config_name(overlay: Path) -> str:
    from services.k8s_check.kubectl import render

    return next(o["metadata"]["name"] for o in render(overlay) if o["metadata"]["name"].startswith("locust-config"))


@needs_kubectl
@pytest.mark.slow
def test_the_check_fails_on_an_open_redis(tmp_path, capsys):
    overlays = _broken_copy(tmp_path, "k8s/base/redis.yaml", "--protected-mode yes", "--protected-mode no")
    code, lines = _run_check(overlays, capsys)
    assert (code, lines) == (1, ["local: Deployment/redis container redis: Redis without --protected-mode yes"])
    overlays = _broken_copy(tmp_path / "2", "k8s/base/networkpolicies.yaml",
                            "        - podSelector:\n            matchLabels: {app.kubernetes.io/name: cortex-mock}\n"
                            "      ports:\n        - {protocol: TCP, port: 6379}",
                            "        - podSelector: {}\n      ports:\n        - {protocol: TCP, port: 6379}")
    code, lines = _run_check(overlays, capsys)
    assert code == 1
    assert lines == ["local: Deployment/redis: port 6379 admits ['adapter', 'bench', 'embeddings-api', 'grafana', "
                     "'llm-mock', 'prometheus'] (only ['cortex-mock', 'fault-proxy'] may connect)"]


@needs_kubectl
@pytest.mark.slow
def test_the_check_fails_when_the_shard_map_misses_a_shard(tmp_path, capsys):
    overlays = _broken_copy(tmp_path, "k8s/base/cortex-mock.yaml", "  replicas: 2   # shards", "  replicas: 3   #")
    code, lines = _run_check(overlays, capsys)
    assert code == 1
    assert lines == ["local: Deployment/fault-proxy: --shard-map lists ['cortex-mock-0', 'cortex-mock-1'] but "
                     "StatefulSet/cortex-mock runs 3 pod(s): expected cortex-mock-0=http://cortex-mock-0.cortex-mock:8791,"
                     "cortex-mock-1=http://cortex-mock-1.cortex-mock:8791,cortex-mock-2=http://cortex-mock-2.cortex-mock:8791"]


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
        "cortex-api-key, proxy-admin-token, redis-password",
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
    text = (REPO / "docs" / "guides" / "kubernetes.md").read_text()
    m = re.search(r"kubectl -n \"\$ns\" create secret generic memrig-secrets((?:.*\\\n)*.*)", text)
    assert m, "docs/guides/kubernetes.md: no `kubectl -n \"$ns\" create secret generic memrig-secrets` command"
    loop = re.search(r"for ns in ([\w -]+); do", text)
    assert loop and loop.group(1).split() == ["memrig", "memrig-load", "memrig-drill"]
    assert sorted(re.findall(r"--from-literal=([\w-]+)=", m.group(1))) == sorted(checks.SECRET_KEYS)


@needs_kubectl
def test_rig_pods_run_as_the_images_user(rendered):
    users = re.findall(r"^USER (\d+)$", (REPO / "deploy" / "Dockerfile").read_text(), re.M)
    assert users == ["10001"], "deploy/Dockerfile: one numeric USER, last"
    assert "useradd --uid 10001" in (REPO / "deploy" / "Dockerfile").read_text()
    for objs in rendered.values():
        rig = [(w, tpl) for w, tpl in checks.workloads(objs)
               if tpl["spec"]["containers"][0]["image"].split("/")[-1].startswith("memrig:")]
        assert len(rig) >= 6
        for w, tpl in rig:
            assert tpl["spec"]["securityContext"]["runAsUser"] == 10001, checks.ref(w)


def _pod(name: str, port: int, **labels) -> dict:
    return {"metadata": {"labels": {"app.kubernetes.io/name": name, **labels}},
            "spec": {"containers": [{"name": name, "ports": [{"name": "p", "containerPort": port}]}]}}


def test_network_policies_are_evaluated_as_the_api_defines_them():
    from services.k8s_check.isolation import admits, selects

    redis, proxy, other = _pod("redis", 6379), _pod("fault-proxy", 8792, tier="a"), _pod("grafana", 3000)
    deny = {"kind": "NetworkPolicy", "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}
    allow = {"kind": "NetworkPolicy", "spec": {
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": "redis"}}, "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"podSelector": {"matchExpressions": [{"key": "tier", "operator": "In",
                                                                      "values": ["a"]}]}}],
                     "ports": [{"protocol": "TCP", "port": "p"}]}]}}
    assert admits([], other, redis, 6379)                 # selected by no policy: everything admitted
    assert not admits([deny], proxy, redis, 6379)         # default deny
    assert admits([deny, allow], proxy, redis, 6379)      # tier In [a], named port p = 6379
    assert not admits([deny, allow], other, redis, 6379)  # no tier label
    assert not admits([deny, allow], proxy, redis, 6380)  # another port
    assert selects({}, {"x": "1"}) and not selects({"matchExpressions": [{"key": "x", "operator": "DoesNotExist"}]},
                                                   {"x": "1"})
