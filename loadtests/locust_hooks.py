"""Locust event wiring shared by the locustfiles: extra command-line options, the per-request log, the fault
timeline greenlet and the Prometheus exporter. Import only inside locust processes (it imports locust/gevent).

Options (each also settable by the env var shown; custom options reach workers from the master):
    --run-dir DIR          MEMRIG_LOAD_RUN_DIR        where the request log and fault-timeline log go
    --request-log          MEMRIG_LOAD_REQUEST_LOG=1  write requests-<pid>.jsonl (wall-clock start/end per request)
    --fault-timeline SPEC  MEMRIG_FAULT_TIMELINE      seeded:SEED[:DURATION[:N]], JSON file, or inline JSON
    --fault-admin URL      MEMRIG_FAULT_ADMIN_URL     fault proxy (or its admin listener) URL (default: --host)
    --fault-admin-token T  MEMRIG_FAULT_ADMIN_TOKEN
    --metrics-port P       MEMRIG_LOCUST_METRICS_PORT Prometheus exporter on the master/local runner (-1 = off, 0 = any)
    --metrics-host H       MEMRIG_LOCUST_METRICS_HOST its bind address (default 127.0.0.1; 0.0.0.0 in a pod)
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import gevent
from locust import events
from locust.runners import WorkerRunner

from loadtests.fault_timeline import FaultAdmin, load_timeline, run_timeline, timeline_to_json
from loadtests.prom_exporter import start_exporter
from loadtests.request_log import RequestLogWriter
from services.common import prom_targets

log = logging.getLogger("memrig.load")
_state: dict[str, Any] = {}


@events.init_command_line_parser.add_listener
def _options(parser: Any) -> None:
    g = parser.add_argument_group("memrig")
    g.add_argument("--run-dir", env_var="MEMRIG_LOAD_RUN_DIR", default="", help="directory for memrig load logs")
    g.add_argument("--request-log", env_var="MEMRIG_LOAD_REQUEST_LOG", action="store_true", default=False,
                   help="write a per-request JSONL log (wall-clock start/end) into --run-dir")
    g.add_argument("--fault-timeline", env_var="MEMRIG_FAULT_TIMELINE", default="",
                   help="fault timeline: seeded:SEED[:DURATION_S[:N]], a JSON file, or inline JSON")
    g.add_argument("--fault-admin", env_var="MEMRIG_FAULT_ADMIN_URL", default="",
                   help="fault proxy URL or its --admin-port listener (default: --host)")
    g.add_argument("--fault-admin-token", env_var="MEMRIG_FAULT_ADMIN_TOKEN", default="", help="admin bearer token")
    g.add_argument("--metrics-port", env_var="MEMRIG_LOCUST_METRICS_PORT", type=int, default=-1,
                   help="serve Prometheus metrics from the master/local runner on this port (-1 off, 0 any)")
    g.add_argument("--metrics-host", env_var="MEMRIG_LOCUST_METRICS_HOST", default="127.0.0.1",
                   help="bind address of the metrics exporter (default 127.0.0.1; a pod scraped by Prometheus "
                        "needs 0.0.0.0)")


def _run_dir(environment: Any) -> Path | None:
    d = getattr(environment.parsed_options, "run_dir", "") if environment.parsed_options else ""
    return Path(d) if d else None


@events.init.add_listener
def _on_init(environment: Any, **_kw: Any) -> None:
    opts = environment.parsed_options
    if opts is None:
        return
    run_dir = _run_dir(environment)

    # The writer is made on the first request: a worker only learns --run-dir/--request-log from the master
    # when the test starts, after its init event; the master itself never writes (it makes no requests).
    @environment.events.request.add_listener
    def _log_request(request_type, name, response_time, response_length=0, exception=None,
                     start_time=None, **_k):
        writer = _state.get("writer")
        if writer is None:  # first request: decide once
            o = environment.parsed_options
            d = _run_dir(environment)
            on = o is not None and o.request_log and d is not None
            writer = _state["writer"] = RequestLogWriter(d) if on else False
        if writer is False:
            return
        end = time.time()
        start = start_time if start_time else end - (response_time or 0) / 1000.0
        writer.write(request_type, name, start, end, response_time, exception)

    if isinstance(environment.runner, WorkerRunner):
        return
    if opts.metrics_port >= 0:
        _server, port = start_exporter(environment, opts.metrics_port, opts.metrics_host)
        _state["metrics_port"] = port
        # A file_sd target so Prometheus finds the exporter on any port (services/common/prom_targets.py).
        _state["target"] = prom_targets.write_target("locust", "locust", port)
        log.info("METRICS http=%d", port)
        if run_dir is not None:
            run_dir.mkdir(parents=True, exist_ok=True)
            (run_dir / "locust_metrics_port").write_text(str(port))


@events.test_start.add_listener
def _on_test_start(environment: Any, **_kw: Any) -> None:
    opts = environment.parsed_options
    if opts is None or isinstance(environment.runner, WorkerRunner) or not opts.fault_timeline:
        return
    run_time = float(getattr(opts, "run_time", 0) or 60)
    windows = load_timeline(opts.fault_timeline, duration_s=run_time)
    admin_url = opts.fault_admin or environment.host or ""
    admin = FaultAdmin(admin_url, opts.fault_admin_token)
    run_dir = _run_dir(environment)
    ev_file = None
    if run_dir is not None:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "fault_timeline.json").write_text(json.dumps(
            {"spec": opts.fault_timeline, "admin": admin_url, "windows": timeline_to_json(windows)}, indent=2))
        ev_file = open(run_dir / "fault_events.jsonl", "a", buffering=1)  # closed on stop

    def on_event(ev: dict[str, Any]) -> None:
        log.info("fault %s %s at %.2fs ok=%s", ev["action"], ev["name"], ev["rel_start_s"], ev["ok"])
        if ev_file is not None:
            ev_file.write(json.dumps(ev) + "\n")

    _state["stop_timeline"] = False
    _state["timeline_file"] = ev_file
    _state["timeline"] = gevent.spawn(run_timeline, windows, admin, sleep=gevent.sleep, on_event=on_event,
                                      should_stop=lambda: _state.get("stop_timeline", False))


def _stop_timeline() -> None:
    g = _state.pop("timeline", None)
    if g is not None:
        _state["stop_timeline"] = True
        g.join(timeout=10)  # removes whatever is still applied
        if not g.dead:
            g.kill(block=False)
    f = _state.pop("timeline_file", None)
    if f is not None:
        f.close()


@events.test_stop.add_listener
def _on_test_stop(environment: Any, **_kw: Any) -> None:
    _stop_timeline()
    w = _state.get("writer")
    if w:
        w.flush()


@events.quitting.add_listener
def _on_quitting(environment: Any, **_kw: Any) -> None:
    _stop_timeline()
    prom_targets.remove_target(_state.pop("target", None))
    w = _state.pop("writer", None)
    if w:
        w.close()
