"""What `make k8s-check` asserts about one rendered overlay: the Kubernetes API schemas, then the rig's own rules.

Each check takes the rendered objects (dicts, as `kubectl kustomize` prints them) and returns findings, one
string each, `Kind/name: what is wrong`; no finding = pass.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
DASHBOARDS = REPO / "deploy" / "grafana" / "dashboards"
K8S_VERSION = "1.33.0"  # the kubectl this check renders with is v1.33
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "Job")
SECRET_NAME = "memrig-secrets"
# The keys the manifests may read from the Secret (README "Beyond one machine" creates exactly these).
SECRET_KEYS = ("cortex-api-key", "proxy-admin-token", "redis-password")
# Env vars that carry a secret: only ever from a secretKeyRef, never a literal value.
SECRET_ENV = ("MEMRIG_CORTEX_API_KEYS", "MEMRIG_CORTEX_API_KEY", "MEMRIG_PROXY_ADMIN_TOKEN",
              "MEMRIG_FAULT_ADMIN_TOKEN", "REDIS_PASSWORD", "REDISCLI_AUTH")
# Flags that would put a secret on a command line (visible in `ps` and in the pod spec).
SECRET_FLAGS = ("--api-keys", "--admin-token", "--fault-admin-token")
PROBE_EXEMPT = "memrig.io/probe-exempt"
NO_METRICS = "memrig.io/no-metrics"


def ref(obj: dict[str, Any]) -> str:
    return f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"


# ---------------------------------------------------------------------------------------------------------
# Kubernetes API schemas

def schema_findings(objs: list[dict[str, Any]], version: str = K8S_VERSION) -> list[str]:
    """Every object against the API's OpenAPI schema of `version`, strict (unknown fields are errors), with
    kubernetes-validate (PyPI; the schemas are generated from Kubernetes' own OpenAPI document)."""
    import kubernetes_validate

    out = []
    for obj in objs:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            where = "/".join(str(p) for p in e.path) or "(top level)"
            out.append(f"{ref(obj)}: schema: {where}: {e.message}")
        except kubernetes_validate.SchemaNotFoundError as e:
            out.append(f"{ref(obj)}: schema: no schema for {obj.get('apiVersion')} {obj.get('kind')} in {version}: {e}")
    return out


# ---------------------------------------------------------------------------------------------------------
# helpers over the rendered objects

def workloads(objs: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(workload, its pod template) for every Deployment, StatefulSet, DaemonSet and Job."""
    for o in objs:
        if o.get("kind") in WORKLOAD_KINDS:
            yield o, o.get("spec", {}).get("template", {})


def _containers(template: dict[str, Any]) -> list[dict[str, Any]]:
    return list(template.get("spec", {}).get("containers", []))


def _port_numbers(container: dict[str, Any]) -> dict[str, int]:
    """{name or str(number): number} of a container's declared ports."""
    out: dict[str, int] = {}
    for p in container.get("ports", []):
        out[str(p["containerPort"])] = p["containerPort"]
        if p.get("name"):
            out[p["name"]] = p["containerPort"]
    return out


def _probe_port(probe: dict[str, Any]) -> str | None:
    for kind in ("httpGet", "tcpSocket", "grpc"):
        if kind in probe:
            return str(probe[kind].get("port"))
    return None  # exec


# ---------------------------------------------------------------------------------------------------------
# the rig's rules

def workload_findings(objs: list[dict[str, Any]]) -> list[str]:
    """Probes (Deployments/StatefulSets/DaemonSets: readiness and liveness on a declared port, unless annotated
    memrig.io/probe-exempt with a reason), requests and limits, non-root, read-only root, no privilege."""
    out = []
    for w, tpl in workloads(objs):
        spec = tpl.get("spec", {})
        exempt = (w.get("metadata", {}).get("annotations") or {}).get(PROBE_EXEMPT, "").strip()
        if spec.get("securityContext", {}).get("runAsNonRoot") is not True:
            out.append(f"{ref(w)}: pod securityContext.runAsNonRoot is not true")
        for c in _containers(tpl) + list(spec.get("initContainers", [])):
            where = f"{ref(w)} container {c['name']}"
            ports = _port_numbers(c)
            if w["kind"] != "Job" and not exempt:
                for kind in ("readinessProbe", "livenessProbe"):
                    probe = c.get(kind)
                    if not probe:
                        out.append(f"{where}: no {kind} (or annotate the workload {PROBE_EXEMPT}: <reason>)")
                        continue
                    port = _probe_port(probe)
                    if port is not None and port not in ports:
                        out.append(f"{where}: {kind} port {port} is not a declared container port "
                                   f"({sorted(ports)})")
            res = c.get("resources", {})
            for part in ("requests", "limits"):
                for r in ("cpu", "memory"):
                    if r not in res.get(part, {}):
                        out.append(f"{where}: no resources.{part}.{r}")
            sc = c.get("securityContext", {})
            if sc.get("readOnlyRootFilesystem") is not True:
                out.append(f"{where}: securityContext.readOnlyRootFilesystem is not true")
            if sc.get("allowPrivilegeEscalation") is not False:
                out.append(f"{where}: securityContext.allowPrivilegeEscalation is not false")
            if "ALL" not in (sc.get("capabilities") or {}).get("drop", []):
                out.append(f"{where}: securityContext.capabilities.drop lacks ALL")
            if sc.get("runAsUser") == 0 or spec.get("securityContext", {}).get("runAsUser") == 0:
                out.append(f"{where}: runs as uid 0")
            image = c.get("image", "")
            tag = image.rsplit("/", 1)[-1]
            if ":" not in tag or tag.endswith(":latest"):
                out.append(f"{where}: image {image!r} has no pinned tag")
    return out


def service_findings(objs: list[dict[str, Any]]) -> list[str]:
    """Every Service selects some pod template, and every port's targetPort is a container port of each pod
    template it selects (by name or number)."""
    out = []
    pods = list(workloads(objs))
    for s in (o for o in objs if o.get("kind") == "Service"):
        sel = s.get("spec", {}).get("selector") or {}
        chosen = [(w, tpl) for w, tpl in pods
                  if sel and all((tpl.get("metadata", {}).get("labels") or {}).get(k) == v for k, v in sel.items())]
        if not chosen:
            out.append(f"{ref(s)}: selector {sel} matches no pod template")
            continue
        for p in s["spec"].get("ports", []):
            target = str(p.get("targetPort", p["port"]))
            for w, tpl in chosen:
                declared: dict[str, int] = {}
                for c in _containers(tpl):
                    declared.update(_port_numbers(c))
                if target not in declared:
                    out.append(f"{ref(s)}: port {p.get('name', p['port'])} targets {target}, which {ref(w)} does not "
                               f"declare ({sorted(declared)})")
    return out


def _container_env(c: dict[str, Any]) -> list[dict[str, Any]]:
    return list(c.get("env", []))


def secret_findings(objs: list[dict[str, Any]]) -> list[str]:
    """Secrets come from the Secret through env, never as literal values or command-line flags."""
    out = []
    for w, tpl in workloads(objs):
        for c in _containers(tpl):
            where = f"{ref(w)} container {c['name']}"
            for e in _container_env(c):
                ref_ = (e.get("valueFrom") or {}).get("secretKeyRef")
                if e["name"] in SECRET_ENV and ref_ is None:
                    out.append(f"{where}: env {e['name']} must come from a secretKeyRef, not a literal value")
                if ref_ is not None and (ref_.get("name") != SECRET_NAME or ref_.get("key") not in SECRET_KEYS):
                    out.append(f"{where}: env {e['name']} reads {ref_.get('name')}/{ref_.get('key')}; the rig's "
                               f"Secret is {SECRET_NAME} with keys {', '.join(SECRET_KEYS)}")
            for a in list(c.get("command", [])) + list(c.get("args", [])):
                flag = str(a).split("=", 1)[0]
                if flag in SECRET_FLAGS:
                    out.append(f"{where}: {flag} on the command line (use its env var from the Secret)")
    for o in objs:
        if o.get("kind") == "Secret":
            out.append(f"{ref(o)}: a Secret in the manifests (its values would be in git); create it with kubectl")
        if o.get("kind") == "ConfigMap":
            for k in (o.get("data") or {}):
                if k in SECRET_ENV:
                    out.append(f"{ref(o)}: {k} in a ConfigMap (a secret belongs in {SECRET_NAME})")
    return out


def locust_findings(objs: list[dict[str, Any]]) -> list[str]:
    """The master waits for exactly as many workers as the worker Deployment runs (else it never starts, or
    starts before every worker is there)."""
    by_name = {o["metadata"]["name"]: o for o in objs if o.get("kind") == "Deployment"}
    master, worker = by_name.get("locust-master"), by_name.get("locust-worker")
    if master is None and worker is None:
        return []  # no load generator in this overlay (a bench overlay)
    if master is None or worker is None:
        return [f"Deployment/locust-{'master' if master is None else 'worker'}: missing"]
    args = _containers(master["spec"]["template"])[0].get("args", [])
    if "--expect-workers" not in args:
        return ["Deployment/locust-master: no --expect-workers"]
    expect = int(args[args.index("--expect-workers") + 1])
    replicas = worker["spec"].get("replicas", 1)
    if expect != replicas:
        return [f"Deployment/locust-master: --expect-workers {expect} but Deployment/locust-worker has "
                f"{replicas} replicas"]
    return []


# ---------------------------------------------------------------------------------------------------------
# Prometheus: simulate its Kubernetes pod discovery and relabelling on every pod template

_LABEL_UNSAFE = re.compile(r"[^a-zA-Z0-9_]")
_GROUP = re.compile(r"\$\{(\w+)\}|\$(\w+)")


def _sanitize(name: str) -> str:
    return _LABEL_UNSAFE.sub("_", name)


def _expand(replacement: str, m: re.Match) -> str:
    def one(g: re.Match) -> str:
        key = g.group(1) or g.group(2)
        try:
            return m.group(int(key)) if key.isdigit() else m.group(key)
        except IndexError:  # a group the regex does not have expands to nothing, as in Prometheus
            return ""
    return _GROUP.sub(lambda g: one(g) or "", replacement)


def relabel(labels: dict[str, str], configs: list[dict[str, Any]]) -> dict[str, str] | None:
    """Prometheus' relabelling (actions replace, keep, drop; anchored regexes; `$1`/`${1}` replacements; an
    empty replace result removes the label), as documented under relabel_config. None = target dropped."""
    labels = dict(labels)
    for rc in configs:
        action = rc.get("action", "replace")
        value = rc.get("separator", ";").join(labels.get(s, "") for s in rc.get("source_labels", []))
        m = re.fullmatch(str(rc.get("regex", "(.*)")), value)
        if action == "keep":
            if m is None:
                return None
        elif action == "drop":
            if m is not None:
                return None
        elif action == "replace":
            if m is not None:
                res = _expand(str(rc.get("replacement", "$1")), m)
                if res:
                    labels[rc["target_label"]] = res
                else:
                    labels.pop(rc["target_label"], None)
        else:
            raise ValueError(f"relabel action {action!r} is not simulated by services/k8s_check")
    return labels


def pod_targets(job: dict[str, Any], workload: dict[str, Any], template: dict[str, Any], namespace: str,
                pod_ip: str = "10.0.0.7") -> list[dict[str, str]]:
    """What a `kubernetes_sd_configs: role: pod` job makes of one running pod of this template: a target per
    declared container port (`__address__` ip:port), relabelled, deduplicated on the labels that remain."""
    meta = template.get("metadata", {})
    base = {"__meta_kubernetes_namespace": namespace,
            "__meta_kubernetes_pod_name": f"{workload['metadata']['name']}-0",
            "__meta_kubernetes_pod_ip": pod_ip, "__meta_kubernetes_pod_phase": "Running",
            "__metrics_path__": job.get("metrics_path", "/metrics"), "__scheme__": "http",
            "job": job["job_name"]}
    for k, v in (meta.get("labels") or {}).items():
        base[f"__meta_kubernetes_pod_label_{_sanitize(k)}"] = str(v)
        base[f"__meta_kubernetes_pod_labelpresent_{_sanitize(k)}"] = "true"
    for k, v in (meta.get("annotations") or {}).items():
        base[f"__meta_kubernetes_pod_annotation_{_sanitize(k)}"] = str(v)
        base[f"__meta_kubernetes_pod_annotationpresent_{_sanitize(k)}"] = "true"
    raw = []
    for c in _containers(template):
        for p in c.get("ports", []) or [{}]:
            t = dict(base, __meta_kubernetes_pod_container_name=c["name"])
            if p:
                t["__address__"] = f"{pod_ip}:{p['containerPort']}"
                t["__meta_kubernetes_pod_container_port_number"] = str(p["containerPort"])
                t["__meta_kubernetes_pod_container_port_name"] = p.get("name", "")
            else:
                t["__address__"] = pod_ip
            raw.append(t)
    seen, out = set(), []
    for t in raw:
        r = relabel(t, job.get("relabel_configs", []))
        if r is None:
            continue
        kept = {k: v for k, v in r.items() if not k.startswith("__meta_")}
        key = tuple(sorted(kept.items()))
        if key not in seen:
            seen.add(key)
            out.append(kept)
    return out


_BY = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
_MATCHER = re.compile(r"\{([^}]*)\}")
_LABEL_VALUES = re.compile(r"label_values\(\s*[^,()]+,\s*(\w+)\s*\)")


def dashboard_label_names(dashboard_dir: Path = DASHBOARDS) -> set[str]:
    """Every label name the dashboards' queries group by, match on or list values of."""
    names: set[str] = set()

    def walk(o: Any) -> None:
        if isinstance(o, dict):
            for k, v in o.items():
                if k in ("expr", "query", "definition") and isinstance(v, str):
                    for g in _BY.findall(v):
                        names.update(x.strip() for x in g.split(",") if x.strip())
                    for g in _MATCHER.findall(v):
                        names.update(m.group(1) for m in re.finditer(r"(\w+)\s*(?:=~|!~|!=|=)", g))
                    names.update(_LABEL_VALUES.findall(v))
                walk(v)
        elif isinstance(o, list):
            for x in o:
                walk(x)

    for f in sorted(dashboard_dir.glob("*.json")):
        walk(json.loads(f.read_text()))
    names.discard("le")  # histogram buckets, not a target label
    return names


def metrics_path_of(container: dict[str, Any]) -> str | None:
    """Where the rig process in this container serves Prometheus metrics (None = not a rig process)."""
    argv = list(container.get("command", [])) + list(container.get("args", []))
    if argv[:2] == ["python", "-m"] and len(argv) > 2:
        return "/__admin/metrics" if argv[2] == "services.fault_proxy" else "/metrics"
    if argv[:1] == ["locust"]:
        return "/metrics"
    return None


def prometheus_findings(objs: list[dict[str, Any]], dashboard_dir: Path = DASHBOARDS) -> list[str]:
    """The Prometheus ConfigMap's kubernetes_sd jobs find every workload not annotated memrig.io/no-metrics, on
    a declared port and the path its process serves; no target label shadows a label the dashboards query
    (Prometheus would rename the metric's own label to exported_<name>); Grafana gets every dashboard file and
    its datasource URL names the Prometheus Service."""
    out = []
    cms = {o["metadata"]["name"]: o for o in objs if o.get("kind") == "ConfigMap"}
    prom_cm = next((c for n, c in cms.items() if n.startswith("prometheus-config")), None)
    if prom_cm is None:
        return ["ConfigMap/prometheus-config: missing"]
    cfg = yaml.safe_load(prom_cm["data"]["prometheus.yml"])
    jobs = [j for j in cfg.get("scrape_configs", []) if j.get("kubernetes_sd_configs")]
    if not jobs:
        return [f"{ref(prom_cm)}: no kubernetes_sd_configs job"]
    shadow = dashboard_label_names(dashboard_dir)
    namespace = next((o["metadata"].get("namespace") for o in objs if o["metadata"].get("namespace")), "default")
    for w, tpl in workloads(objs):
        annotated = (w.get("metadata", {}).get("annotations") or {}).get(NO_METRICS, "").strip()
        targets = [t for j in jobs for t in pod_targets(j, w, tpl, namespace)]
        if annotated:
            if targets:
                out.append(f"{ref(w)}: annotated {NO_METRICS} but Prometheus scrapes it")
            continue
        if not targets:
            out.append(f"{ref(w)}: Prometheus finds no target in it (annotate prometheus.io/scrape, /port, /path, "
                       f"or the workload {NO_METRICS}: <reason>)")
            continue
        ports = {}
        for c in _containers(tpl):
            ports.update({str(v): c for v in _port_numbers(c).values()})
        for t in targets:
            port = t["__address__"].rsplit(":", 1)[-1]
            c = ports.get(port)
            if c is None:
                out.append(f"{ref(w)}: Prometheus scrapes port {port}, which no container declares")
                continue
            want = metrics_path_of(c)
            if want is not None and t.get("__metrics_path__") != want:
                out.append(f"{ref(w)}: Prometheus scrapes {t.get('__metrics_path__')} on {port}; the process "
                           f"serves {want}")
            clash = sorted(k for k in t if not k.startswith("__") and k in shadow)
            if clash:
                out.append(f"{ref(w)}: target label(s) {clash} shadow labels the dashboards query")
    dash = next((c for n, c in cms.items() if n.startswith("grafana-dashboards")), None)
    files = {f.name: f.read_text() for f in dashboard_dir.glob("*.json")}
    if dash is None:
        out.append("ConfigMap/grafana-dashboards: missing")
    elif (dash.get("data") or {}) != files:
        out.append(f"{ref(dash)}: holds {sorted(dash.get('data') or {})}, not the files of deploy/grafana/dashboards "
                   f"({sorted(files)}) as they are")
    ds = next((c for n, c in cms.items() if n.startswith("grafana-datasources")), None)
    if ds is not None:
        services = {(o["metadata"]["name"], p["port"]) for o in objs if o.get("kind") == "Service"
                    for p in o["spec"].get("ports", [])}
        for d in yaml.safe_load(next(iter(ds["data"].values()))).get("datasources", []):
            m = re.match(r"https?://([^:/]+):(\d+)", d.get("url", ""))
            if m is None or (m.group(1), int(m.group(2))) not in services:
                out.append(f"{ref(ds)}: datasource {d.get('name')} URL {d.get('url')} is no Service here")
    return out


def cpu_count(quantity: str) -> int:
    """A CPU quantity as the Downward API reports it with divisor 1: rounded up to whole CPUs."""
    q = str(quantity)
    return max(1, math.ceil(int(q[:-1]) / 1000)) if q.endswith("m") else max(1, math.ceil(float(q)))
