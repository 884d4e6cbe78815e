"""Prometheus file_sd target files: how every process the rig starts becomes a scrape target.

The rig binds most processes to port 0, so no static scrape config can know their ports. Instead each one gets
a small JSON file in one shared directory (`$MEMRIG_TARGETS_DIR`, default `$MEMRIG_STATE_DIR/targets`, i.e.
`.memrig/targets`), in Prometheus' file_sd format (prometheus.io/docs/prometheus/2.42/configuration/
configuration/#file_sd_config): `[{"targets": ["127.0.0.1:PORT"], "labels": {...}}]`. The launcher writes one
for every process it starts (services/launcher.py) and removes it when it stops the process; processes started
another way (the turn simulator, the locust master) write their own. deploy/prometheus/prometheus.yml has one
file_sd job reading that directory (`memrig observe` points it there), so nothing is configured by hand.

Labels: `job` is the kind of process (llm-mock, cortex-mock, fault-proxy, coordinator, backend, turn-sim,
locust; a target's own `job` label wins over the scrape job's name), `service` the process's key in its rig
(`backend_openclaw`), `pid` its PID; `__metrics_path__` where it is not /metrics. Files are written atomically
(rename) so Prometheus never reads half of one; files of PIDs that no longer run are pruned on every write.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from services.common.process import pid_alive

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def targets_dir() -> Path:
    explicit = os.environ.get("MEMRIG_TARGETS_DIR")
    if explicit:
        return Path(explicit).resolve()
    return (Path(os.environ.get("MEMRIG_STATE_DIR", ".memrig")) / "targets").resolve()


def prune_dead(directory: Path | None = None) -> list[Path]:
    """Remove target files whose process is gone (killed without a chance to clean up); returns them."""
    d = directory or targets_dir()
    removed = []
    for f in d.glob("*.json") if d.exists() else ():
        try:
            pid = int(json.loads(f.read_text())[0]["labels"]["pid"])
        except (OSError, ValueError, KeyError, IndexError, TypeError):
            continue
        if not pid_alive(pid):
            f.unlink(missing_ok=True)
            removed.append(f)
    return removed


def target_group(service: str, job: str, port: int, pid: int, metrics_path: str = "/metrics",
                 host: str = "127.0.0.1") -> dict:
    labels = {"job": job, "service": service, "pid": str(pid)}
    if metrics_path != "/metrics":
        labels["__metrics_path__"] = metrics_path
    return {"targets": [f"{host}:{port}"], "labels": labels}


def write_target(service: str, job: str, port: int, pid: int | None = None, metrics_path: str = "/metrics",
                 directory: Path | None = None) -> Path:
    """Write (atomically) the target file of one process; returns its path (hand it to `remove_target`)."""
    d = directory or targets_dir()
    d.mkdir(parents=True, exist_ok=True)
    prune_dead(d)
    pid = os.getpid() if pid is None else pid
    service = _UNSAFE.sub("_", service)
    path = d / f"{service}.{pid}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps([target_group(service, job, port, pid, metrics_path)], indent=2))
    tmp.replace(path)
    return path


def remove_target(path: str | Path | None) -> None:
    if path:
        Path(path).unlink(missing_ok=True)
