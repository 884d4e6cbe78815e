"""Start and stop the rig's processes by PID.

Every service prints `READY key=port ... pid=PID` on stdout when it serves; the launcher sends stdout and
stderr to a log file per process and waits for that line (services/common/process.py spawns, waits and stops).
`memrig up` records what it started in a state file so `memrig down` stops exactly those PIDs (SIGTERM, then
SIGKILL after a grace period). Each process it starts gets a Prometheus file_sd target file while it runs
(services/common/prom_targets.py), so Prometheus scrapes processes on port 0 with no hand-written config.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from services.adapters.registry import get_spec
from services.common import interrupt, process, prom_targets
from services.common.errors import LaunchError  # raised here; importable from here as before


@dataclass(frozen=True)
class ServiceSpec:
    name: str
    module: str
    description: str
    url_template: str = ""  # e.g. "http://127.0.0.1:{http}" ; filled from the READY ports
    requires: tuple[str, ...] = ()
    default_port: int = 0


SERVICES: dict[str, ServiceSpec] = {
    s.name: s
    for s in [
        ServiceSpec("llm-mock", "services.llm_mock", "Offline OpenAI-compatible model (answers, judge, compaction)",
                    "http://127.0.0.1:{http}/v1", default_port=8790),
        ServiceSpec("cortex-mock", "services.cortex_mock", "A Cortex API you can run locally",
                    "http://127.0.0.1:{http}", default_port=8791),
        ServiceSpec("fault-proxy", "services.fault_proxy", "Fault-injecting reverse proxy (toxiproxy-style admin API)",
                    "http://127.0.0.1:{http}", requires=("cortex-mock",), default_port=8792),
        ServiceSpec("embeddings-api", "services.embeddings_api",
                    "OpenAI-compatible /v1/embeddings from the rig's embedders and shared cache",
                    "http://127.0.0.1:{http}/v1", default_port=8793),
        ServiceSpec("coordinator", "services.coordinator", "Runs suites over backends (CoordinatorService)",
                    "127.0.0.1:{grpc}", default_port=8800),
        ServiceSpec("local-llm", "services.local_llm",
                    "Local language model (Qwen2.5-Coder-1.5B-Instruct Q4_K_M, llama.cpp; make setup-local-llm)",
                    "http://127.0.0.1:{http}/v1", default_port=8794),
    ]
}


@dataclass
class Proc:
    name: str
    pid: int
    ports: dict[str, int]
    url: str
    log: str
    argv: list[str] = field(default_factory=list)
    target: str = ""  # its Prometheus file_sd target file ("" when it serves no /metrics)

    def alive(self) -> bool:
        return process.pid_alive(self.pid)


class Rig:
    """A set of processes started together and stopped together."""

    def __init__(self, run_dir: str | Path = ".memrig/run", env: dict[str, str] | None = None):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.procs: dict[str, Proc] = {}
        self._popen: dict[str, subprocess.Popen] = {}
        # One start at a time per key: backends start concurrently (runner.run_suite), and two that require the
        # same service (cortex, cortex-fast: cortex-mock) must get the one process, not two. Each lock is kept with
        # its event loop: an asyncio.Lock belongs to the loop it first waited in, and a Rig may outlive one asyncio.run.
        self._start_locks: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Lock]] = {}
        self.local_llm_identity: dict[str, Any] = {}  # what local-llm's /memrig/identity said, once started
        self.env = dict(os.environ if env is None else env)
        self.env.setdefault("PYTHONUNBUFFERED", "1")
        # numpy's BLAS threads in several services fight over the cores: single-threaded BLAS made the cortex-mock's
        # semantic search ~10x faster on 2 cores (loadtests/capacity.py --blas-threads). Set it yourself to override.
        self.env.setdefault("OPENBLAS_NUM_THREADS", "1")
        # Ctrl-C in a CLI command (services/common/interrupt.py) stops every process this rig started, by PID;
        # stop_all forgets the registration again.
        interrupt.on_exit(self.stop_all)

    def set_embedder(self, name: str | None) -> None:
        """The run's embedder for every process started from now on (MEMRIG_EMBEDDER): backends get it as
        `--embedder` too, but services that embed on their own (cortex-mock, embeddings-api) read only this."""
        if name:
            self.env["MEMRIG_EMBEDDER"] = name

    # ---------------------------------------------------------------------------------------------
    async def start(self, key: str, module: str, args: list[str], url_template: str = "",
                    timeout: float = 120.0) -> Proc:
        loop = asyncio.get_running_loop()
        held = self._start_locks.get(key)
        if held is None or held[0] is not loop:
            held = self._start_locks[key] = (loop, asyncio.Lock())
        async with held[1]:
            return await self._start(key, module, args, url_template, timeout)

    async def _start(self, key: str, module: str, args: list[str], url_template: str, timeout: float) -> Proc:
        if key in self.procs and self.procs[key].alive():
            return self.procs[key]
        log_path = self.run_dir / f"{key.replace('/', '_')}.log"
        argv = [sys.executable, "-m", module, *args]
        p = process.spawn(argv, log_path, env=self.env, cwd=os.getcwd())
        self._popen[key] = p  # stop_all stops it even while it is still starting
        ports = await process.wait_ready_async(p, key, log_path, timeout)
        url = url_template.format(**ports) if url_template else ""
        proc = Proc(key, p.pid, ports, url, str(log_path), argv, target=self._write_target(key, module, ports, p.pid))
        self.procs[key] = proc
        return proc

    @staticmethod
    def _write_target(key: str, module: str, ports: dict[str, int], pid: int) -> str:
        """gRPC processes serve /metrics on their `metrics` side port, HTTP ones on their `http` port; the fault
        proxy under its admin prefix (every other path is forwarded upstream)."""
        port = ports.get("metrics") or ports.get("http")
        if not port:
            return ""
        path = "/__admin/metrics" if module == "services.fault_proxy" else "/metrics"
        try:
            return str(prom_targets.write_target(key, key.split("/", 1)[0], port, pid, metrics_path=path))
        except OSError as e:  # observability must never stop the rig from starting
            print(f"launcher: no Prometheus target for {key}: {e}", file=sys.stderr)
            return ""

    async def start_service(self, name: str, port: int = 0, extra: list[str] | None = None) -> Proc:
        spec = SERVICES.get(name)
        if spec is None:
            raise LaunchError(f"unknown service {name!r}; known: {', '.join(SERVICES)}")
        args = ["--port", str(port), *(extra or [])]
        if name == "fault-proxy" and "--upstream" not in args:
            upstream = await self.start_service("cortex-mock")
            args += ["--upstream", upstream.url]
        return await self.start(name, spec.module, args, spec.url_template)

    async def ensure_llm(self) -> str:
        """The LLM base URL: the user's configured endpoint, or a llm-mock started by this rig. Children started
        afterwards inherit it; this process's environment is left alone (the mock dies with the rig)."""
        if self.env.get("MEMRIG_LLM_BASE_URL"):
            return self.env["MEMRIG_LLM_BASE_URL"]
        p = await self.start_service("llm-mock")
        self.env["MEMRIG_LLM_BASE_URL"] = p.url
        return p.url

    async def ensure_llm_roles(self, choices: dict[str, str] | None = None) -> dict[str, Any]:
        """Point each LLM role at what `choices` names (services/common/llm_roles.py: mock / local / env), starting
        llm-mock and local-llm as needed, and return {role: LLMConfig}. The roles are set in this rig's child
        environment, so backends started afterwards write their memories with the flush role's model."""
        from services.common import llm_roles

        choices = {r: c for r, c in (choices or {}).items() if c != "env"}
        if "mock" in choices.values():
            mock = await self.start_service("llm-mock")
            for role in (r for r, c in choices.items() if c == "mock"):
                llm_roles.set_mock(self.env, role, mock.url)
        if "local" in choices.values():
            from services.local_llm.client import identity_details, local_role_settings

            local = await self.start_local_llm()
            for role in (r for r, c in choices.items() if c == "local"):
                llm_roles.set_role(self.env, role, local.url, local.ident["model"],
                                   local_role_settings(role, local.ident))
        if "answerer" not in choices:
            await self.ensure_llm()
        configs = llm_roles.role_configs(self.env)
        if "local" in choices.values():
            for cfg in configs.values():
                if cfg.base_url == self.procs["local-llm"].url:
                    cfg.details = identity_details(self.local_llm_identity)
        return configs

    async def start_local_llm(self) -> Any:
        """local-llm, once per rig, after checking that `make setup-local-llm` ran (a clear error otherwise)."""
        from services.local_llm.client import LocalLLM, fetch_identity
        from services.local_llm.setup import local_llm_status

        if "local-llm" not in self.procs or not self.procs["local-llm"].alive():
            ok, reason = local_llm_status()
            if not ok:
                raise LaunchError(f"local-llm cannot start: {reason}")
        proc = await self.start_service("local-llm")
        if not self.local_llm_identity:
            self.local_llm_identity = await fetch_identity(proc.url)
        return LocalLLM(proc.url, self.local_llm_identity, proc.pid)

    async def start_backend(self, name: str, config: dict[str, Any] | None = None,
                            embedder: str | None = None) -> Proc:
        spec = get_spec(name)
        key = f"backend/{name}"
        if key in self.procs and self.procs[key].alive():
            return self.procs[key]
        cfg = dict(spec.config)
        if spec.requires:
            urls = {}
            for r in spec.requires:
                urls[r] = (await self.start_service(r)).url
            if spec.config_from_services:
                cfg.update(spec.config_from_services(urls))
        cfg.update(config or {})
        args = ["--port", "0", "--config", json.dumps(cfg)]
        if embedder:
            args += ["--embedder", embedder]
        return await self.start(key, spec.module, args, "127.0.0.1:{grpc}")

    def backend_rss(self, name: str) -> int | None:
        """Resident bytes of a started backend: its process and every descendant (openclaw-real's Node sidecar,
        the embeddings bridge) plus the services its spec requires (cortex-mock for cortex). None when this rig did
        not start it (in-process or a --target)."""
        import psutil

        proc = self.procs.get(f"backend/{name}")
        if proc is None:
            return None
        pids = {proc.pid, *(self.procs[r].pid for r in get_spec(name).requires if r in self.procs)}
        total = 0
        for pid in pids:
            try:
                root = psutil.Process(pid)
                for p in (root, *root.children(recursive=True)):
                    with contextlib.suppress(psutil.Error):
                        total += p.memory_info().rss
            except psutil.Error:
                continue
        return total

    # ---------------------------------------------------------------------------------------------
    def stop(self, key: str) -> None:
        """By PID, with grace; our own child (started by this Rig, not loaded from a state file) is reaped too."""
        self.stop_many([key])

    @staticmethod
    def stop_tier(key: str) -> int:
        """0 for a backend, 1 for the fault proxy, 2 for what they depend on (the services)."""
        return 0 if key.startswith("backend/") else 1 if key == "fault-proxy" else 2

    def stop_order(self) -> list[str]:
        """Dependents first: backends, then the proxy, then what they depended on."""
        return sorted(self.procs, key=self.stop_tier)

    def stop_many(self, keys: list[str]) -> None:
        """Stop these at once by PID (process.stop: one SIGTERM each, one grace period for all; our own children
        reaped): an OpenClaw backend can take its whole grace to exit, and a run holds several."""
        procs = [(k, p) for k in keys if (p := self.procs.pop(k, None)) is not None]
        targets = []
        for k, p in procs:
            child = self._popen.pop(k, None)
            targets.append(child if child is not None and child.pid == p.pid else p.pid)
        process.stop(*targets)
        for _, p in procs:
            prom_targets.remove_target(p.target)

    def stop_all(self) -> None:
        """Everything this rig started, by PID, tier by tier in stop_order (each tier at once)."""
        interrupt.forget(self.stop_all)
        order = self.stop_order()
        for tier in sorted({self.stop_tier(k) for k in order}):
            self.stop_many([k for k in order if self.stop_tier(k) == tier])
        # a child still starting (spawned, not READY yet) when the run was stopped is in no `procs` entry
        for key, p in list(self._popen.items()):
            process.stop(p)
            self._popen.pop(key, None)

    # ---------------------------------------------------------------------------------------------
    @property
    def state_file(self) -> Path:
        return self.run_dir / "state.json"

    def save_state(self) -> None:
        self.state_file.write_text(json.dumps({k: asdict(p) for k, p in self.procs.items()}, indent=2))

    def load_state(self) -> None:
        if self.state_file.exists():
            for k, d in json.loads(self.state_file.read_text()).items():
                self.procs[k] = Proc(**d)

    def clear_state(self) -> None:
        self.state_file.unlink(missing_ok=True)

    def address_of(self, key: str) -> str | None:
        p = self.procs.get(key)
        return p.url if p and p.alive() else None

    async def __aenter__(self) -> Rig:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop_all()
