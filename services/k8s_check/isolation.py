"""The rules that make a deploy/k8s run a clean, locked-down measurement (issue 39), on the rendered objects.

Clean measurement (`measurement_findings`, `namespace_findings`):
- a bench overlay (one holding a Job whose container runs `memrig bench...`) holds no load generator (a `locust`
  container) and no active fault timeline (MEMRIG_FAULT_TIMELINE or --fault-timeline other than "" / "none", in
  any ConfigMap or container), and nothing that holds the proxies' admin URL;
- across overlays: a bench overlay shares its namespace (and so its fault proxies and Redis) with no overlay that
  runs load or a timeline (applied together, the bench would be measured under them).

Locked down (`network_findings`, `redis_findings`, `exposure_findings`): NetworkPolicies evaluated as the API
defines ingress rules (a pod selected by no Ingress policy admits everything; a selected pod admits a connection
when some rule of some selecting policy matches both its source and its port; an empty `from` matches any
source, in any namespace), on every pair of rendered pod templates:
- every pod is selected by some Ingress policy (the namespace's default deny holds);
- Redis (6379) admits exactly the fault proxies and cortex-mock;
- cortex-mock admits only the fault proxies (and Prometheus);
- the proxies' forwarding port admits only the adapters and locust workers, and every adapter whose config names
  the proxy and every locust worker; their admin port only Prometheus and a drill's locust master (the one with
  MEMRIG_FAULT_ADMIN_URL), which it must admit;
- the adapters' gRPC port admits only the bench Job and locust, and the bench Job must get through;
- Prometheus reaches every target its pod discovery finds (checks.pod_targets), on its port;
- no rule admits other namespaces or addresses (namespaceSelector, ipBlock, or an empty `from`), every Service is
  ClusterIP, no Ingress object: the admin API and Redis are not reachable from outside the namespace;
- Redis runs with `requirepass` from the Secret and protected mode on; every container that opens Redis
  (--redis-url / REDIS_URL) gets REDIS_PASSWORD from the Secret, and no Redis URL carries a password.

Plus `shard_findings` (the proxies' --shard-map lists exactly the cortex-mock StatefulSet's pods, by name and
headless DNS), `image_findings` (every rig container runs one image), `job_findings` (every Job has
activeDeadlineSeconds and ttlSecondsAfterFinished).
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from services.k8s_check.checks import (
    SECRET_NAME,
    _containers,
    _port_numbers,
    pod_targets,
    ref,
    workloads,
)

NO_TIMELINE = ("", "none")
ADAPTER_JOB = "backend"  # pod label memrig.io/job of every adapter


# ---------------------------------------------------------------------------------------------------------
# helpers

def _argv(c: dict[str, Any]) -> list[str]:
    return [str(a) for a in list(c.get("command", [])) + list(c.get("args", []))]


def _flag(argv: list[str], flag: str) -> str | None:
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def _labels(tpl: dict[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in ((tpl.get("metadata") or {}).get("labels") or {}).items()}


def _name(tpl: dict[str, Any]) -> str:
    return _labels(tpl).get("app.kubernetes.io/name", "?")


def _env(c: dict[str, Any], configmaps: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """{env var: its source}: {"value": v} / {"secret": (name, key)} / {"configmap": value}."""
    out: dict[str, dict[str, Any]] = {}
    for ef in c.get("envFrom", []):
        cm = configmaps.get((ef.get("configMapRef") or {}).get("name", ""))
        for k, v in ((cm or {}).get("data") or {}).items():
            out[k] = {"configmap": str(v)}
    for e in c.get("env", []):
        vf = e.get("valueFrom") or {}
        if "value" in e:
            out[e["name"]] = {"value": str(e["value"])}
        elif "secretKeyRef" in vf:
            out[e["name"]] = {"secret": (vf["secretKeyRef"].get("name"), vf["secretKeyRef"].get("key"))}
        elif "configMapKeyRef" in vf:
            cm = configmaps.get(vf["configMapKeyRef"]["name"]) or {}
            out[e["name"]] = {"configmap": str((cm.get("data") or {}).get(vf["configMapKeyRef"]["key"], ""))}
    return out


def _env_value(src: dict[str, Any] | None) -> str:
    if not src:
        return ""
    return str(src.get("value", src.get("configmap", "")))


def _configmaps(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objs if o.get("kind") == "ConfigMap"}


def is_bench(c: dict[str, Any]) -> bool:
    argv = _argv(c)
    return argv[:1] == ["memrig"] and len(argv) > 1 and argv[1].startswith("bench")


def is_locust(c: dict[str, Any]) -> bool:
    return _argv(c)[:1] == ["locust"]


def active_timelines(objs: list[dict[str, Any]]) -> list[str]:
    """Where a fault timeline is switched on: `Kind/name: value` for every ConfigMap key, container env or flag."""
    out = []
    for o in objs:
        if o.get("kind") == "ConfigMap":
            v = str((o.get("data") or {}).get("MEMRIG_FAULT_TIMELINE", "")).strip()
            if v not in NO_TIMELINE:
                out.append(f"{ref(o)} MEMRIG_FAULT_TIMELINE={v}")
    for w, tpl in workloads(objs):
        for c in _containers(tpl):
            for e in c.get("env", []):
                if e.get("name") == "MEMRIG_FAULT_TIMELINE" and str(e.get("value", "")).strip() not in NO_TIMELINE:
                    out.append(f"{ref(w)} env MEMRIG_FAULT_TIMELINE={e.get('value')}")
            v = _flag(_argv(c), "--fault-timeline")
            if v is not None and v.strip() not in NO_TIMELINE:
                out.append(f"{ref(w)} --fault-timeline {v}")
    return out


def load_generators(objs: list[dict[str, Any]]) -> list[str]:
    return [ref(w) for w, tpl in workloads(objs) if any(is_locust(c) for c in _containers(tpl))]


def bench_jobs(objs: list[dict[str, Any]]) -> list[str]:
    return [ref(w) for w, tpl in workloads(objs) if any(is_bench(c) for c in _containers(tpl))]


def namespace_of(objs: list[dict[str, Any]]) -> str:
    return next((o["metadata"].get("namespace") for o in objs if o["metadata"].get("namespace")), "default")


# ---------------------------------------------------------------------------------------------------------
# 1. a clean measurement

def measurement_findings(objs: list[dict[str, Any]]) -> list[str]:
    """A bench Job never shares an overlay with a load generator, an active fault timeline, or a holder of the
    proxies' admin URL."""
    jobs = bench_jobs(objs)
    if not jobs:
        return []
    out = []
    where = ", ".join(jobs)
    for g in load_generators(objs):
        out.append(f"{g}: a load generator beside the bench ({where}): the bench would be measured under load "
                   f"(load belongs in its own overlay and namespace: overlays/load)")
    for t in active_timelines(objs):
        out.append(f"{t}: an active fault timeline beside the bench ({where}): the bench would be measured "
                   f"under faults (drills belong in their own overlay and namespace: overlays/drill)")
    cms = _configmaps(objs)
    for w, tpl in workloads(objs):
        for c in _containers(tpl):
            env = _env(c, cms)
            if _env_value(env.get("MEMRIG_FAULT_ADMIN_URL")) or _flag(_argv(c), "--fault-admin"):
                out.append(f"{ref(w)} container {c['name']}: holds the proxies' admin URL beside the bench ({where})")
    return out


def namespace_findings(overlays: dict[str, list[dict[str, Any]]]) -> list[str]:
    """No bench overlay shares its namespace with an overlay that runs load or a fault timeline."""
    out = []
    for b, bobjs in sorted(overlays.items()):
        if not bench_jobs(bobjs):
            continue
        ns = namespace_of(bobjs)
        for o, oobjs in sorted(overlays.items()):
            if o == b or namespace_of(oobjs) != ns:
                continue
            what = load_generators(oobjs) + active_timelines(oobjs)
            if what:
                out.append(f"overlays {b} and {o} share namespace {ns}: applied together, the bench in {b} would "
                           f"share fault-proxy and Redis with {o}'s {', '.join(what)}")
    return out


# ---------------------------------------------------------------------------------------------------------
# 2. NetworkPolicies, evaluated

def selects(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """A LabelSelector (matchLabels; matchExpressions In, NotIn, Exists, DoesNotExist) against pod labels; {} and
    None select every pod."""
    selector = selector or {}
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != str(v):
            return False
    for e in selector.get("matchExpressions") or []:
        op, key, values = e.get("operator"), e.get("key"), [str(x) for x in e.get("values") or []]
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise ValueError(f"matchExpressions operator {op!r}")
    return True


def _ingress_policies(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for o in objs:
        if o.get("kind") != "NetworkPolicy":
            continue
        spec = o.get("spec") or {}
        types = spec.get("policyTypes") or (["Ingress"] + (["Egress"] if spec.get("egress") else []))
        if "Ingress" in types:
            out.append(o)
    return out


def _port_matches(rule_ports: list[dict[str, Any]] | None, port: int, dst: dict[str, Any]) -> bool:
    if not rule_ports:
        return True
    named: dict[str, int] = {}
    for c in _containers(dst):
        named.update(_port_numbers(c))
    for p in rule_ports:
        if p.get("protocol", "TCP") != "TCP":
            continue
        want = p.get("port")
        if want is None:
            return True
        n = named.get(str(want)) if isinstance(want, str) else int(want)
        end = p.get("endPort")
        if n is not None and (n == port or (end is not None and n <= port <= int(end))):
            return True
    return False


def admits(policies: list[dict[str, Any]], src: dict[str, Any], dst: dict[str, Any], port: int) -> bool:
    """Whether pod template `src` may open a TCP connection to `port` of pod template `dst` (same namespace)."""
    dl, sl = _labels(dst), _labels(src)
    chosen = [p for p in policies if selects((p.get("spec") or {}).get("podSelector"), dl)]
    if not chosen:
        return True
    for p in chosen:
        for rule in (p.get("spec") or {}).get("ingress") or []:
            peers = rule.get("from")
            if not _port_matches(rule.get("ports"), port, dst):
                continue
            if not peers:
                return True
            for peer in peers:
                if "podSelector" in peer and "namespaceSelector" not in peer and selects(peer["podSelector"], sl):
                    return True
    return False


def _who(policies, pods, dst, port) -> set[str]:
    return {_name(tpl) if _labels(tpl).get("memrig.io/job") != ADAPTER_JOB else "adapter"
            for w, tpl in pods if admits(policies, tpl, dst, port) and tpl is not dst}


def _proxy_clients(objs: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Pods that send requests to the fault proxy: adapters whose --config base_url names it, locust workers."""
    out = []
    for w, tpl in workloads(objs):
        for c in _containers(tpl):
            cfg = _flag(_argv(c), "--config")
            try:
                base = (json.loads(cfg) or {}).get("base_url", "") if cfg else ""
            except (ValueError, AttributeError):
                base = ""
            if "fault-proxy" in str(base) or (is_locust(c) and "--worker" in _argv(c)):
                out.append((w, tpl))
                break
    return out


def network_findings(objs: list[dict[str, Any]]) -> list[str]:
    pols = _ingress_policies(objs)
    pods = list(workloads(objs))
    by_name = {_name(tpl): (w, tpl) for w, tpl in pods}
    out = []
    if not pols:
        return ["no NetworkPolicy: every pod admits every connection"]
    for w, tpl in pods:
        if not any(selects((p.get("spec") or {}).get("podSelector"), _labels(tpl)) for p in pols):
            out.append(f"{ref(w)}: selected by no Ingress NetworkPolicy (admits every connection)")

    def expect(dst_name: str, port: int, allowed: set[str], required: set[str]) -> None:
        if dst_name not in by_name:
            return
        w, dst = by_name[dst_name]
        got = _who(pols, pods, dst, port)
        extra, missing = sorted(got - allowed), sorted(required - got)
        if extra:
            out.append(f"{ref(w)}: port {port} admits {extra} (only {sorted(allowed)} may connect)")
        if missing:
            out.append(f"{ref(w)}: port {port} refuses {missing}, which must connect")

    present = set(by_name)
    expect("redis", 6379, {"fault-proxy", "cortex-mock"}, {"fault-proxy", "cortex-mock"} & present)
    expect("cortex-mock", 8791, {"fault-proxy", "prometheus"}, {"fault-proxy", "prometheus"} & present)
    if "fault-proxy" in by_name:
        _, proxy = by_name["fault-proxy"]
        argv = next((_argv(c) for c in _containers(proxy)), [])
        fwd, admin = int(_flag(argv, "--port") or 8792), _flag(argv, "--admin-port")
        clients = {_name(t) if _labels(t).get("memrig.io/job") != ADAPTER_JOB else "adapter"
                   for _, t in _proxy_clients(objs)}
        expect("fault-proxy", fwd, {"adapter", "locust-worker"}, clients)
        if admin is None:
            out.append(f"{ref(by_name['fault-proxy'][0])}: the admin API shares the forwarding port {fwd} "
                       f"(every client of the proxy could reach it): give it --admin-port")
        else:
            cms = _configmaps(objs)
            # a locust worker never switches faults (the timeline runs on the master), though it reads the same env
            drill = {_name(t) for _, t in pods for c in _containers(t)
                     if _env_value(_env(c, cms).get("MEMRIG_FAULT_ADMIN_URL")) and "--worker" not in _argv(c)}
            expect("fault-proxy", int(admin), {"prometheus", "locust-master"}, drill | ({"prometheus"} & present))
    for w, tpl in pods:
        if _labels(tpl).get("memrig.io/job") == ADAPTER_JOB:
            got = _who(pols, pods, tpl, 8850)
            extra = sorted(got - {"bench", "locust-worker", "locust-master"})
            if extra:
                out.append(f"{ref(w)}: port 8850 admits {extra} (only the bench Job and locust may connect)")
            if "bench" in present and "bench" not in got:
                out.append(f"{ref(w)}: port 8850 refuses the bench Job")
    # Prometheus reaches every target its discovery finds
    prom = by_name.get("prometheus")
    cm = next((o for o in objs if o.get("kind") == "ConfigMap" and o["metadata"]["name"].startswith("prometheus-config")),
              None)
    if prom is not None and cm is not None:
        jobs = [j for j in yaml.safe_load(cm["data"]["prometheus.yml"]).get("scrape_configs", [])
                if j.get("kubernetes_sd_configs")]
        for w, tpl in pods:
            for t in (t for j in jobs for t in pod_targets(j, w, tpl, namespace_of(objs))):
                port = int(t["__address__"].rsplit(":", 1)[-1])
                if not admits(pols, prom[1], tpl, port):
                    out.append(f"{ref(w)}: Prometheus cannot reach its metrics port {port} (NetworkPolicy)")
    return out


def exposure_findings(objs: list[dict[str, Any]]) -> list[str]:
    out = []
    for o in objs:
        if o.get("kind") == "Service" and (o.get("spec") or {}).get("type", "ClusterIP") != "ClusterIP":
            out.append(f"{ref(o)}: type {o['spec']['type']} exposes it outside the cluster (ClusterIP only)")
        if o.get("kind") in ("Ingress", "Gateway", "HTTPRoute", "Route"):
            out.append(f"{ref(o)}: exposes the rig outside the namespace")
        if o.get("kind") == "NetworkPolicy":
            for i, rule in enumerate((o.get("spec") or {}).get("ingress") or []):
                peers = rule.get("from")
                if not peers:
                    out.append(f"{ref(o)}: ingress[{i}] has no `from`: admits every namespace and address")
                for peer in peers or []:
                    if "namespaceSelector" in peer or "ipBlock" in peer:
                        out.append(f"{ref(o)}: ingress[{i}] admits other namespaces or addresses ({sorted(peer)})")
    return out


def redis_findings(objs: list[dict[str, Any]]) -> list[str]:
    out = []
    cms = _configmaps(objs)
    for w, tpl in workloads(objs):
        for c in _containers(tpl):
            argv, env = _argv(c), _env(c, cms)
            where = f"{ref(w)} container {c['name']}"
            if str(c.get("image", "")).split("/")[-1].startswith("redis"):
                text = " ".join(argv)
                if "requirepass" not in text:
                    out.append(f"{where}: Redis without requirepass")
                if "--protected-mode yes" not in text:
                    out.append(f"{where}: Redis without --protected-mode yes")
                if env.get("REDIS_PASSWORD", {}).get("secret") != (SECRET_NAME, "redis-password"):
                    out.append(f"{where}: REDIS_PASSWORD must come from {SECRET_NAME}/redis-password")
                continue
            url = _flag(argv, "--redis-url") or _env_value(env.get("REDIS_URL"))
            if not url:
                continue
            if re.match(r"rediss?://[^/@]*:[^/@]*@", url):
                out.append(f"{where}: the Redis URL carries a password (use REDIS_PASSWORD from the Secret)")
            if env.get("REDIS_PASSWORD", {}).get("secret") != (SECRET_NAME, "redis-password"):
                out.append(f"{where}: opens Redis ({url}) without REDIS_PASSWORD from {SECRET_NAME}/redis-password")
    return out


# ---------------------------------------------------------------------------------------------------------
# shards, image, Jobs

def shard_findings(objs: list[dict[str, Any]]) -> list[str]:
    sts = next((o for o in objs if o.get("kind") == "StatefulSet" and o["metadata"]["name"] == "cortex-mock"), None)
    proxy = next((o for o in objs if o.get("kind") == "Deployment" and o["metadata"]["name"] == "fault-proxy"), None)
    if sts is None or proxy is None:
        return []
    from services.fault_proxy.shards import parse_shard_map

    argv = next((_argv(c) for c in _containers(proxy["spec"]["template"])), [])
    text = _flag(argv, "--shard-map")
    if text is None:
        return [f"{ref(proxy)}: no --shard-map, but {ref(sts)} shards the tenants"]
    n, svc = sts["spec"].get("replicas", 1), sts["spec"].get("serviceName")
    port = next((p["containerPort"] for c in _containers(sts["spec"]["template"]) for p in c.get("ports", [])), None)
    want = [(f"cortex-mock-{i}", f"http://cortex-mock-{i}.{svc}:{port}") for i in range(n)]
    got = [(s.name, s.url) for s in parse_shard_map(text)]
    if got != want:
        return [f"{ref(proxy)}: --shard-map lists {[g[0] for g in got]} but {ref(sts)} runs {n} pod(s): expected "
                f"{','.join(f'{a}={b}' for a, b in want)}"]
    svc_obj = next((o for o in objs if o.get("kind") == "Service" and o["metadata"]["name"] == svc), None)
    if svc_obj is None or (svc_obj.get("spec") or {}).get("clusterIP") != "None":
        return [f"{ref(sts)}: serviceName {svc} must be a headless Service (clusterIP: None) for per-pod DNS"]
    return []


def image_findings(objs: list[dict[str, Any]]) -> list[str]:
    images: dict[str, list[str]] = {}
    for w, tpl in workloads(objs):
        spec = tpl.get("spec", {})
        for c in list(spec.get("containers", [])) + list(spec.get("initContainers", [])):
            img = str(c.get("image", ""))
            if img.split("/")[-1].split(":")[0] == "memrig":
                images.setdefault(img, []).append(f"{ref(w)}/{c['name']}")
    if len(images) > 1:
        return [f"rig containers run {len(images)} images, not one: "
                + "; ".join(f"{i} ({', '.join(v[:3])}{' ...' if len(v) > 3 else ''})" for i, v in sorted(images.items()))]
    return []


def job_findings(objs: list[dict[str, Any]]) -> list[str]:
    out = []
    for o in objs:
        if o.get("kind") == "Job":
            for k in ("activeDeadlineSeconds", "ttlSecondsAfterFinished"):
                if k not in (o.get("spec") or {}):
                    out.append(f"{ref(o)}: no spec.{k}")
    return out


def isolation_findings(objs: list[dict[str, Any]]) -> list[str]:
    return (measurement_findings(objs) + network_findings(objs) + exposure_findings(objs) + redis_findings(objs)
            + shard_findings(objs) + image_findings(objs) + job_findings(objs))
