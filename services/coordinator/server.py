"""The CoordinatorService gRPC server: list suites and backends, run a suite with streamed progress, get a run.

    python -m services.coordinator [--host 127.0.0.1] [--port 8800] [--metrics-port 8801] [--results DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from pathlib import Path

import grpc

from memrig.v1 import coordinator_pb2 as cpb
from memrig.v1 import coordinator_pb2_grpc as cpb_grpc
from services.adapters.registry import all_specs
from services.common import process
from services.common.errors import InputError
from services.common.grpc_util import graceful_stop, install_stop_signals, start_server
from services.common.metrics_http import start_metrics_server
from services.common.types import dict_to_struct, struct_to_dict
from services.coordinator.results import RESULTS_ROOT, RunDir
from services.coordinator.runner import RunConfig, run_suite
from services.coordinator.suites.registry import all_suites
from services.launcher import Rig

SERVICE_NAME = cpb.DESCRIPTOR.services_by_name["CoordinatorService"].full_name
_STATES = {"running": cpb.RUN_STATE_RUNNING, "succeeded": cpb.RUN_STATE_SUCCEEDED,
           "partial": cpb.RUN_STATE_PARTIAL, "failed": cpb.RUN_STATE_FAILED}


class CoordinatorServicer(cpb_grpc.CoordinatorServiceServicer):
    def __init__(self, rig: Rig, results_root: Path):
        self.rig = rig
        self.results_root = results_root
        self._run_lock = asyncio.Lock()  # one run at a time: runs share the machine and the backends

    async def ListSuites(self, request, context):
        return cpb.ListSuitesResponse(suites=[cpb.SuiteInfo(name=n, description=s.description)
                                              for n, s in sorted(all_suites().items())])

    async def ListBackends(self, request, context):
        return cpb.ListBackendsResponse(backends=[
            cpb.BackendInfo(name=n, description=s.description, address=self.rig.address_of(f"backend/{n}") or "")
            for n, s in all_specs().items()])

    async def RunSuite(self, request, context):
        if request.suite not in all_suites():
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"suite: unknown suite {request.suite!r}")
        specs = all_specs()
        unknown = [b for b in request.backends if b not in specs]
        if not request.backends or unknown:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                f"backends: {'unknown ' + ', '.join(unknown) if unknown else 'at least one is required'}")
        options = struct_to_dict(request.options)
        try:  # options are checked (names and types) before the stream starts, not reported as a FAILED event
            all_suites()[request.suite](options, seed=request.seed)
        except InputError as e:  # OptionError or any other bad input the suite names
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        out_dir = None
        if request.out_dir:
            out_dir = self._confined(request.out_dir)
            if out_dir is None:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                    f"out_dir: {request.out_dir!r} is outside the results root {self.results_root}")
        queue: asyncio.Queue = asyncio.Queue()
        cfg = RunConfig(suite=request.suite, backends=list(request.backends), out_dir=str(out_dir) if out_dir else None,
                        seed=request.seed, options=options, resume=request.resume)

        async def go():
            async with self._run_lock:
                try:
                    outcome = await run_suite(cfg, queue.put_nowait, rig=self.rig)
                    queue.put_nowait({"phase": "done", "state": outcome.state, "message": str(outcome.run_dir),
                                      "out_dir": str(outcome.run_dir)})
                except Exception as e:
                    queue.put_nowait({"phase": "failed", "state": "failed", "message": f"{type(e).__name__}: {e}"})
                queue.put_nowait(None)

        task = asyncio.ensure_future(go())
        try:
            while (ev := await queue.get()) is not None:
                yield cpb.RunSuiteResponse(
                    run_id=ev.get("run_id", ""), state=_STATES.get(ev.get("state", "running"), cpb.RUN_STATE_RUNNING),
                    phase=ev.get("phase", ""), done=int(ev.get("done") or 0), total=int(ev.get("total") or 0),
                    eta_seconds=float(ev.get("eta_seconds") or 0.0), message=str(ev.get("message", "")),
                    out_dir=ev.get("out_dir", ""))
        finally:
            if not task.done():
                task.cancel()

    def _confined(self, name: str) -> Path | None:
        """`name` (a run id, or a path relative to or inside the results root) resolved under the results root;
        None when it points elsewhere (an absolute path outside, `..`, a symlink out)."""
        root = self.results_root.resolve()
        path = Path(name)
        path = (path if path.is_absolute() else root / path).resolve()
        return path if path == root or root in path.parents else None

    async def GetRun(self, request, context):
        if not request.run:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "run: a run id or run directory is required")
        path = self._confined(request.run)
        if path is None or path == self.results_root.resolve():
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                f"run: {request.run!r} is not a run under the results root {self.results_root}")
        if not (path / "run.json").exists():
            await context.abort(grpc.StatusCode.NOT_FOUND, f"run: no run.json under {path}")
        rd = RunDir.__new__(RunDir)
        rd.path = path
        metrics = json.loads((path / "metrics.json").read_text()) if (path / "metrics.json").exists() else {}
        report = (path / "report.md").read_text() if (path / "report.md").exists() else ""
        return cpb.GetRunResponse(run_id=path.name, state=_STATES.get(metrics.get("state", "running")),
                                  run=dict_to_struct(rd.read_run()), metrics=dict_to_struct(metrics),
                                  report_markdown=report)


async def serve(host: str, port: int, metrics_port: int | None, results: Path) -> None:
    rig = Rig(Path(os.environ.get("MEMRIG_STATE_DIR", ".memrig")) / "coordinator")
    servicer = CoordinatorServicer(rig, results)
    server, health, bound = await start_server(
        lambda s: cpb_grpc.add_CoordinatorServiceServicer_to_server(servicer, s), [SERVICE_NAME], host, port)
    runner, mport = (None, 0)
    if metrics_port is not None:
        runner, mport = await start_metrics_server(host, metrics_port)
    stop = asyncio.Event()
    install_stop_signals(stop)
    process.announce_ready(grpc=bound, metrics=mport)
    try:
        await stop.wait()
    finally:
        await graceful_stop(server, health)
        if runner:
            await runner.cleanup()
        rig.stop_all()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m services.coordinator", description=__doc__)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8800)
    ap.add_argument("--metrics-port", type=int, default=8801, help="/metrics port (deploy/prometheus scrapes 8801); 0 = pick, -1 = off")
    ap.add_argument("--results", default=str(RESULTS_ROOT))
    a = ap.parse_args(argv)
    asyncio.run(serve(a.host, a.port, None if a.metrics_port < 0 else a.metrics_port, Path(a.results)))
