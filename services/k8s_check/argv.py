"""Every rig container's command line, parsed by the parser of the process it starts.

The container's environment is resolved as the kubelet would (`env` values, `envFrom` and `configMapKeyRef` from
the rendered ConfigMaps, `resourceFieldRef` limits.cpu rounded up, a placeholder for a secretKeyRef or a fieldRef), `$(VAR)` in
command and args expanded from it, and then:

- `python -m services.<svc>`: that service's own argparse (and the checks it runs after parsing, e.g. the fault
  proxy's admin token on a non-loopback address), with the container's environment set while it parses;
- `python -m services.adapters.<x>`: `adapter_parser`, its `--config` JSON, which must hold the registry's config
  for the backend named by the pod label memrig.io/backend, and the backend class built with that config;
- `memrig <cmd>`: services/cli.py's parser; every `--target` names a backend and a Service port here;
- `locust`: locust's own parser with the rig's options (loadtests/locust_hooks.py) in a child process (importing
  locust monkey-patches the interpreter), plus the load shape and fault timeline its environment selects.

Third-party images (Redis, Prometheus, Grafana) keep their own command lines: not parsed here.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from services.common.errors import InputError
from services.k8s_check.checks import cpu_count, ref, workloads

REPO = Path(__file__).resolve().parents[2]
_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


class ParseFailed(InputError):
    """A container's command line that no memrig parser accepts; `field` is the container's args, str(e) the
    parser's own words."""

    def __init__(self, message: str):
        super().__init__("args", message, text=message)


def container_env(c: dict[str, Any], configmaps: dict[str, dict[str, Any]]) -> dict[str, str]:
    env: dict[str, str] = {}
    for ef in c.get("envFrom", []):
        cm = configmaps.get((ef.get("configMapRef") or {}).get("name", ""))
        if cm is not None:
            env.update({k: str(v) for k, v in (cm.get("data") or {}).items()})
    limits = (c.get("resources") or {}).get("limits") or {}
    for e in c.get("env", []):
        vf = e.get("valueFrom") or {}
        if "value" in e:
            env[e["name"]] = _VAR.sub(lambda m: env.get(m.group(1), m.group(0)), str(e["value"]))
        elif "secretKeyRef" in vf:
            env[e["name"]] = f"secret-{vf['secretKeyRef']['key']}"
        elif "configMapKeyRef" in vf:
            cm = configmaps.get(vf["configMapKeyRef"]["name"]) or {}
            env[e["name"]] = str((cm.get("data") or {}).get(vf["configMapKeyRef"]["key"], ""))
        elif "fieldRef" in vf:  # the pod's own metadata: a stand-in of the same shape
            path = vf["fieldRef"].get("fieldPath", "")
            env[e["name"]] = "pod-0" if path == "metadata.name" else f"fieldref-{path}"
        elif "resourceFieldRef" in vf:
            rf = vf["resourceFieldRef"]
            if rf.get("resource") == "limits.cpu" and str(rf.get("divisor", "1")) == "1" and "cpu" in limits:
                env[e["name"]] = str(cpu_count(limits["cpu"]))
    return env


def expand(argv: list[str], env: dict[str, str]) -> list[str]:
    """Kubernetes' `$(VAR)` expansion in command/args (an unknown variable stays as written)."""
    return [_VAR.sub(lambda m: env.get(m.group(1), m.group(0)), str(a)) for a in argv]


@contextlib.contextmanager
def _environ(env: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _argparse(fn, *a) -> Any:
    """Run a parser; an argparse error (SystemExit) becomes ParseFailed with what it printed."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return fn(*a)
    except SystemExit as e:
        said = err.getvalue().strip()
        raise ParseFailed(said.splitlines()[-1] if said else f"exit {e.code}") from None


class _Serve(Exception):
    """Raised where the process would start serving: parsing and validation are over."""


def _parse_service(module: str, args: list[str]) -> None:
    if module == "services.llm_mock":
        from services.llm_mock.__main__ import parse_args
        _argparse(parse_args, args)
    elif module == "services.cortex_mock":
        from services.cortex_mock.__main__ import build_parser, config_from_args
        cfg = config_from_args(_argparse(build_parser().parse_args, args))
        if cfg.processes < 1 or cfg.host in ("127.0.0.1", "localhost"):
            raise ParseFailed(f"--processes {cfg.processes} / --host {cfg.host}: not reachable or not running")
    elif module == "services.fault_proxy":
        from services.fault_proxy.__main__ import parse_args
        _argparse(parse_args, args)
    elif module == "services.embeddings_api":
        # Its parser is built inside main(); stop main() where it would start serving.
        mod = importlib.import_module("services.embeddings_api.__main__")

        def stop(coro):
            coro.close()
            raise _Serve

        real = asyncio.run
        mod.asyncio.run = stop  # the module's own reference to asyncio
        try:
            _argparse(mod.main, args)
        except _Serve:
            pass
        finally:
            mod.asyncio.run = real
    else:
        raise ParseFailed(f"no parser known for python -m {module}")


def _parse_adapter(module: str, args: list[str], backend: str | None) -> None:
    from services.adapters.base import BackendContext
    from services.adapters.registry import get_spec
    from services.adapters.server import adapter_parser

    if not backend:
        raise ParseFailed("an adapter pod needs the label memrig.io/backend naming its backend")
    try:
        spec = get_spec(backend)
    except KeyError as e:
        raise ParseFailed(f"backend {backend!r} is not in the registry ({e})") from None
    if spec.module != module:
        raise ParseFailed(f"backend {backend} runs {spec.module}, the container runs {module}")
    cls = spec.load_class()
    a = _argparse(adapter_parser(cls).parse_args, args)
    try:
        cfg = json.loads(a.config)
    except json.JSONDecodeError as e:
        raise ParseFailed(f"--config is not JSON: {e}") from None
    missing = {k: v for k, v in spec.config.items() if cfg.get(k) != v}
    if missing:
        raise ParseFailed(f"--config lacks the registry's config of {backend}: {missing}")
    try:
        cls(cfg, BackendContext(embedder_name="hash"))
    except (ValueError, TypeError, KeyError) as e:
        raise ParseFailed(f"{backend} refuses --config {cfg}: {e}") from None
    if a.host in ("127.0.0.1", "localhost"):
        raise ParseFailed("--host is loopback: the Service cannot reach it")


def _parse_memrig(args: list[str], services: dict[str, set[int]]) -> None:
    from services.adapters.registry import get_spec
    from services.cli import build_parser
    from services.coordinator.plan import parse_targets

    a = _argparse(build_parser().parse_args, args)
    for name, addr in parse_targets(getattr(a, "target", [])).items():
        try:
            get_spec(name)
        except KeyError:
            raise ParseFailed(f"--target {name}: no such backend") from None
        host, _, port = addr.rpartition(":")
        if int(port) not in services.get(host, set()):
            raise ParseFailed(f"--target {name}={addr}: no Service {host} with port {port}")


_LOCUST_CHILD = r"""
import json, os, sys
jobs = json.load(sys.stdin)
import locust  # monkey-patches this child only
from locust.argument_parser import get_parser
from loadtests.fault_timeline import load_timeline
from loadtests.stages import stages_from_env
results = []
for job in jobs:
    os.environ.update(job["env"])
    args = job["args"]
    try:
        f = args[args.index("-f") + 1]
        mod = f[:-3].replace("/", ".")
        __import__(mod)  # registers the rig's options (loadtests/locust_hooks.py) and its users
        p = get_parser(default_config_files=[])
        import io, contextlib
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            try:
                o = p.parse_args(args)
            except SystemExit:
                lines = [x for x in err.getvalue().strip().splitlines() if x.strip()]
                raise ValueError(" ".join(x.strip() for x in lines[-2:]))
        if o.master:
            stages_from_env()
            load_timeline(o.fault_timeline)
            if o.metrics_port >= 0 and o.metrics_host in ("127.0.0.1", "localhost"):
                raise ValueError("--metrics-host is loopback: Prometheus cannot scrape it")
        results.append(None)
    except Exception as e:
        results.append(f"{type(e).__name__}: {e}")
    for k in job["env"]:
        os.environ.pop(k, None)
print(json.dumps(results))
"""


def _parse_locust(jobs: list[dict[str, Any]]) -> list[str | None]:
    if not jobs:
        return []
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "proto"), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", _LOCUST_CHILD], input=json.dumps(jobs), capture_output=True, text=True,
                       cwd=REPO, env=env, timeout=120)
    if r.returncode != 0:
        return [f"locust parser child failed: {r.stderr.strip()[-500:]}"] * len(jobs)
    return json.loads(r.stdout.strip().splitlines()[-1])


def argv_findings(objs: list[dict[str, Any]]) -> list[str]:
    """Parse every memrig container's command line; one finding per container whose line a parser refuses."""
    configmaps = {o["metadata"]["name"]: o for o in objs if o.get("kind") == "ConfigMap"}
    services = {}
    for o in objs:
        if o.get("kind") == "Service":
            services[o["metadata"]["name"]] = {p["port"] for p in o["spec"].get("ports", [])}
    out: list[str] = []
    locust_jobs: list[dict[str, Any]] = []
    locust_where: list[str] = []
    for w, tpl in workloads(objs):
        backend = (tpl.get("metadata", {}).get("labels") or {}).get("memrig.io/backend")
        for c in tpl.get("spec", {}).get("containers", []):
            if not str(c.get("image", "")).split("/")[-1].startswith("memrig"):
                continue  # a third-party image
            where = f"{ref(w)} container {c['name']}"
            env = container_env(c, configmaps)
            argv = expand(list(c.get("command", [])) + list(c.get("args", [])), env)
            try:
                with _environ(env):
                    if argv[:2] == ["python", "-m"] and argv[2].startswith("services.adapters."):
                        _parse_adapter(argv[2], argv[3:], backend)
                    elif argv[:2] == ["python", "-m"]:
                        _parse_service(argv[2], argv[3:])
                    elif argv[:1] == ["memrig"]:
                        _parse_memrig(argv[1:], services)
                    elif argv[:1] == ["locust"]:
                        f = argv[argv.index("-f") + 1] if "-f" in argv else ""
                        if not (REPO / f).is_file():
                            raise ParseFailed(f"-f {f!r}: no such locustfile in the image (/app = the repo)")
                        locust_jobs.append({"args": argv[1:], "env": env})
                        locust_where.append(where)
                    else:
                        raise ParseFailed(f"no parser known for {argv[:3]}")
            except ParseFailed as e:
                out.append(f"{where}: {' '.join(argv)}: {e}")
    for where, err in zip(locust_where, _parse_locust(locust_jobs), strict=True):
        if err:
            out.append(f"{where}: {err}")
    return out
