"""`memrig observe` (`make observe`): start Prometheus (and Grafana when installed) against a running rig.

Prometheus gets a rendered copy of deploy/prometheus/prometheus.yml whose one file_sd job reads the targets
directory every rig process writes itself into (services/common/prom_targets.py: `memrig up`, `memrig bench`,
the turn simulator, `make load`'s locust master), so processes on ephemeral ports are scraped with no manual
target files. Grafana, if `grafana-server` (or
`grafana server`) is on PATH, gets deploy/grafana/provisioning with the datasource pointed at this Prometheus and
the dashboards path pointed at deploy/grafana/dashboards. Everything binds 127.0.0.1; the processes started here
are stopped by PID on SIGINT/SIGTERM.

    memrig observe [--prometheus-port 9090] [--grafana-port 3000] [--targets .memrig/targets]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from services.common import process, prom_targets, subcommand
from services.common.errors import LaunchError

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy"


def render_prometheus_config(base: str, targets_dir: Path) -> str:
    """The deploy config with its file_sd path made absolute (Prometheus resolves it from the config's folder,
    which is the run directory here)."""
    return base.replace('files: ["targets/*.json"]', f'files: ["{targets_dir}/*.json"]')


def render_grafana_provisioning(dst: Path, prometheus_url: str) -> Path:
    """A copy of deploy/grafana/provisioning pointing at this Prometheus and at the repo's dashboards."""
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(DEPLOY / "grafana" / "provisioning", dst)
    ds = dst / "datasources" / "prometheus.yaml"
    ds.write_text(ds.read_text().replace("http://prometheus:9090", prometheus_url))
    dp = dst / "dashboards" / "memrig.yaml"
    dp.write_text(dp.read_text().replace("/var/lib/grafana/dashboards", str(DEPLOY / "grafana" / "dashboards")))
    return dst


def _wait_http(url: str, timeout_s: float, proc: subprocess.Popen) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(url, timeout=1) as r:  # loopback only
                if r.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


def start_prometheus(run_dir: Path, port: int, config_text: str, binary: str | None = None,
                     retention: str = "2d") -> subprocess.Popen:
    binary = binary or shutil.which("prometheus")
    if not binary:
        raise FileNotFoundError("prometheus is not installed (Debian: apt-get install -y prometheus)")
    run_dir.mkdir(parents=True, exist_ok=True)
    cfg = run_dir / "prometheus.yml"
    cfg.write_text(config_text)
    p = process.spawn([binary, f"--config.file={cfg}", f"--storage.tsdb.path={run_dir / 'data'}",
                       f"--web.listen-address=127.0.0.1:{port}", f"--storage.tsdb.retention.time={retention}"],
                      run_dir / "prometheus.log")
    if not _wait_http(f"http://127.0.0.1:{port}/-/ready", 30, p):  # Prometheus says READY over HTTP, not stdout
        process.stop(p)
        raise LaunchError(f"prometheus did not become ready; see {run_dir / 'prometheus.log'}")
    return p


def grafana_binary() -> list[str] | None:
    if shutil.which("grafana-server"):
        return [shutil.which("grafana-server")]  # type: ignore[list-item]
    if shutil.which("grafana"):
        return [shutil.which("grafana"), "server"]  # type: ignore[list-item]
    return None


def start_grafana(run_dir: Path, port: int, prometheus_url: str) -> subprocess.Popen | None:
    cmd = grafana_binary()
    if cmd is None:
        return None
    prov = render_grafana_provisioning(run_dir / "grafana-provisioning", prometheus_url)
    env = dict(os.environ, GF_PATHS_PROVISIONING=str(prov), GF_PATHS_DATA=str(run_dir / "grafana-data"),
               GF_SERVER_HTTP_ADDR="127.0.0.1", GF_SERVER_HTTP_PORT=str(port), GF_AUTH_ANONYMOUS_ENABLED="true",
               GF_AUTH_ANONYMOUS_ORG_ROLE="Viewer", GF_ANALYTICS_REPORTING_ENABLED="false")
    home = next((d for d in ("/usr/share/grafana", "/usr/local/share/grafana") if Path(d).exists()), None)
    if home:
        cmd = [*cmd, f"--homepath={home}"]
    return process.spawn(cmd, run_dir / "grafana.log", env=env)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """`memrig observe`'s flags (services/common/subcommand.py)."""
    ap.description = __doc__.split("\n\n")[0]
    ap.add_argument("--prometheus-port", type=int, default=9090, help="Prometheus UI/API port (default 9090)")
    ap.add_argument("--grafana-port", type=int, default=3000, help="Grafana port if installed (default 3000)")
    ap.add_argument("--targets", default=None, help="file_sd targets directory the rig writes (default "
                    "$MEMRIG_TARGETS_DIR, else $MEMRIG_STATE_DIR/targets, i.e. .memrig/targets)")
    ap.add_argument("--run-dir", default=".memrig/observe", help="Prometheus data, rendered configs, logs")
    ap.add_argument("--config", default=str(DEPLOY / "prometheus" / "prometheus.yml"), help="Prometheus config")
    ap.add_argument("--no-grafana", action="store_true", help="start Prometheus only")
    ap.add_argument("--duration-s", type=float, default=0.0, help="stop after this long (0 = until Ctrl-C)")


def run(args: argparse.Namespace) -> int:
    run_dir = Path(args.run_dir).resolve()
    targets_dir = Path(args.targets).resolve() if args.targets else prom_targets.targets_dir()
    targets_dir.mkdir(parents=True, exist_ok=True)
    prom_targets.prune_dead(targets_dir)
    n = len(list(targets_dir.glob("*.json")))
    cfg = render_prometheus_config(Path(args.config).read_text(), targets_dir)
    try:
        prom = start_prometheus(run_dir, args.prometheus_port, cfg)
    except (FileNotFoundError, LaunchError) as e:
        print(f"memrig observe: {e}", file=sys.stderr)
        return 2
    prom_url = f"http://127.0.0.1:{args.prometheus_port}"
    procs = [prom]
    print(f"prometheus {prom_url} (pid {prom.pid}); {n} rig target(s) now in {targets_dir}", flush=True)
    graf = None if args.no_grafana else start_grafana(run_dir, args.grafana_port, prom_url)
    if graf is not None:
        procs.append(graf)
        print(f"grafana http://127.0.0.1:{args.grafana_port} (pid {graf.pid}); dashboards memrig-costs, "
              "memrig-faults", flush=True)
    elif not args.no_grafana:
        print("grafana is not installed: dashboards are in deploy/grafana/dashboards (query them in Prometheus, "
              "or use deploy/compose.yaml)", flush=True)
    stop = {"now": False}

    def _stop(*_):
        stop["now"] = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    t0 = time.monotonic()
    try:
        while not stop["now"] and all(p.poll() is None for p in procs):
            if args.duration_s and time.monotonic() - t0 >= args.duration_s:
                break
            time.sleep(1.0)
    finally:
        for p in reversed(procs):  # Grafana before the Prometheus it reads
            process.stop(p)
    return 0


def main(argv: list[str] | None = None) -> int:
    return subcommand.main(sys.modules[__name__], argv, "memrig observe")


if __name__ == "__main__":
    sys.exit(main())
