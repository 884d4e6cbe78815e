"""`python -m services.cost_scenarios --port P [--out DIR] [--full] [--stay]`: run the costs benchmark while serving
/metrics on P (0 = any free port), printing `READY http=<port> pid=<pid>` once /metrics is up.

Standalone, it makes a Rig of its own (under DIR/.run) for the services the scenarios start, and stops it at the end.

Default metrics port 8793 (deploy/prometheus/prometheus.yml scrapes it). `--stay` keeps serving /metrics after the
run until SIGTERM/SIGINT, so a Prometheus started by `memrig observe` can scrape the whole run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
from pathlib import Path

DEFAULT_PORT = 8793


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m services.cost_scenarios", description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1", help="bind address of /metrics (default 127.0.0.1)")
    ap.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"/metrics port (0 = free port; default "
                                                                    f"{DEFAULT_PORT})")
    ap.add_argument("--out", default="results/.tmp/turn_sim", help="output directory (samples, costs.json, plots)")
    ap.add_argument("--full", action="store_true", help="full durations (idle 5 min, 200 turns per state)")
    ap.add_argument("--turns", type=int, default=None, help="turns per plugin state (default 50)")
    ap.add_argument("--idle-s", type=float, default=None, help="idle phase length in seconds")
    ap.add_argument("--no-drills", action="store_true", help="skip the failure drills")
    ap.add_argument("--no-continuity", action="store_true", help="skip the continuity arc")
    ap.add_argument("--llm-latency-ms", type=float, default=None, help="llm-mock latency per call (default 100)")
    ap.add_argument("--stay", action="store_true", help="keep serving /metrics after the run until SIGTERM")
    return ap.parse_args(argv)


async def amain(args: argparse.Namespace) -> int:
    from prometheus_client import REGISTRY

    from services.common import process, prom_targets
    from services.common.metrics_http import start_metrics_server
    from services.cost_scenarios.scenarios import CostsConfig, render_costs_markdown, run_costs
    from services.launcher import Rig

    runner, port = await start_metrics_server(args.host, args.port, REGISTRY)
    # Found by Prometheus through file_sd whatever the port (services/common/prom_targets.py).
    target = prom_targets.write_target("turn-sim", "turn-sim", port)
    process.announce_ready(http=port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    cfg = CostsConfig.for_mode(not args.full)
    if args.turns is not None:
        cfg.turns_per_state = args.turns
    if args.idle_s is not None:
        cfg.idle_s = args.idle_s
    if args.no_drills:
        cfg.drills = False
    if args.no_continuity:
        cfg.continuity_backends = ()
    if args.llm_latency_ms is not None:
        cfg.llm_latency_ms = args.llm_latency_ms
    out = Path(args.out)
    rig = Rig(out / ".run")
    task = asyncio.create_task(run_costs(out, rig, quick=not args.full, config=cfg))
    waiter = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    rc = 0
    if task in done:
        results = task.result()
        (out / "costs.md").write_text(render_costs_markdown(results))
        print(json.dumps({"out": str(out), "wall_s": results.get("wall_s")}), flush=True)
        if args.stay:
            await stop.wait()
    else:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        rc = 130
    waiter.cancel()
    rig.stop_all()
    prom_targets.remove_target(target)
    await runner.cleanup()
    return rc


def main(argv: list[str] | None = None) -> int:
    return asyncio.run(amain(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
