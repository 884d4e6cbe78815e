"""Where Quaid's source is, which Python packages it needs, whether it can run here, and how to install them.

Quaid's code is read, unmodified, from `../shared/third_party/quaid/` relative to the project root (Quaid-Labs/quaid at
commit 9262e690a25b14345445c03ad822c7535e043138, Apache-2.0; see that directory's README), or from
`$MEMRIG_QUAID_SOURCE`. Nothing of it is copied into this repository. Its `modules/quaid` tree must hash to
`MODULES_DIGEST`, that commit's files (services/adapters/external/availability.py, `tree_digest`; the tree's three
symlinks, `clawdbot.plugin.json`, `openclaw.plugin.json` and `adaptors/openclaw/openclaw.plugin.json`, hashed by their
target paths as git stores them, so a clone with real symlinks and a copy holding them as plain files give the same
figure: on the latter what `find modules/quaid -type f | sort | xargs sha256sum | sha256sum` prints in the source
directory), so a changed checkout is named rather than benchmarked under the pinned name.

Its Python dependencies beyond the standard library and numpy (an import scan of `modules/quaid`, tests excluded):
`sqlite-vec` (the vector index Quaid loads into SQLite; without it Quaid falls back to a brute-force scan of the 200
most recently accessed nodes). This venv's Python was built without `sqlite3.enable_load_extension`, so
`pysqlite3-binary` (the same DB-API module over a newer SQLite that can load extensions) stands in for `sqlite3` in
the sidecar. Both are pinned here and installed by `make setup-quaid` (`python -m services.adapters.quaid_real.install`).
"""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from services.adapters.external.availability import Availability, PinnedSource

QUAID_COMMIT = "9262e690a25b14345445c03ad822c7535e043138"
QUAID_REPO = "Quaid-Labs/quaid"
MODULES_DIGEST = "882cd3923fce6fb1dee1c507407402e5f7371a82f560bb01fb3f24ec98bbbafe"
# The packages setup-quaid installs, pinned; pysqlite3-binary only where the stdlib sqlite3 cannot load extensions.
PINS = {"sqlite-vec": "0.1.9", "pysqlite3-binary": "0.5.4.post2"}
SOURCE = PinnedSource(
    "Quaid", QUAID_REPO, QUAID_COMMIT, "quaid", "MEMRIG_QUAID_SOURCE",
    # the files the sidecar imports first (a partial or wrong directory fails here, with the path named)
    required=("modules/quaid/datastore/memorydb/memory_graph.py", "modules/quaid/datastore/memorydb/schema.sql",
              "modules/quaid/lib/providers.py", "modules/quaid/ingest/extract.py", "modules/quaid/config.py",
              "modules/quaid/VERSION"),
    patterns=("modules/quaid/**/*",), digest=MODULES_DIGEST, what="modules/quaid")


def source_dir() -> Path:
    return SOURCE.path()


def modules_dir() -> Path:
    return source_dir() / "modules" / "quaid"


def quaid_version() -> str:
    try:
        return (modules_dir() / "VERSION").read_text().strip()
    except OSError:
        return "unknown"


def stdlib_sqlite_loads_extensions() -> bool:
    import sqlite3

    return hasattr(sqlite3.Connection, "enable_load_extension")


def needed_pins() -> dict[str, str]:
    return {k: v for k, v in PINS.items() if k != "pysqlite3-binary" or not stdlib_sqlite_loads_extensions()}


def installed(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def availability() -> Availability:
    """Quaid's source at the pinned commit, and the pinned packages its sidecar needs in this Python."""
    src = source_dir()
    found = Availability(False, "", "Quaid", source=str(src), runtime=sys.executable,
                         runtime_version=".".join(map(str, sys.version_info[:3])))
    why = SOURCE.check()
    if why:
        return found.unavailable(why)
    pins = needed_pins()
    found = Availability(False, "", "Quaid", f"{quaid_version()} @ {QUAID_COMMIT[:7]}", str(src), found.runtime,
                         found.runtime_version, (", ".join(f"{d}=={v}" for d, v in pins.items()),))
    for dist, pin in pins.items():
        have = installed(dist)
        if have != pin:
            what = "not installed" if have is None else f"{have} installed"
            return found.unavailable(f"{dist}=={pin} is {what} (run `make setup-quaid`)")
    return replace(found, ok=True)


def install(quiet: bool = False) -> Availability:
    """pip-install the pinned packages that are missing (from the package index), then re-check."""
    todo = [f"{d}=={v}" for d, v in needed_pins().items() if installed(d) != v]
    if todo:
        cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", *todo]
        r = subprocess.run(cmd, capture_output=quiet, text=True)
        if r.returncode != 0:
            tail = (r.stderr or "")[-800:] if quiet else ""
            return availability().unavailable(f"pip install {' '.join(todo)} failed with exit {r.returncode}"
                                              f"{': ' + tail if tail else ''}")
    return availability()
