"""A fork server for `make mutation`: one process per measured module that has imported pytest and every
third-party module the module's tests import, and forks a child per test run, so a mutant's tests start in
milliseconds instead of paying the interpreter, pytest and numpy/aiohttp/grpc imports each time.

What keeps verdicts right:
- Nothing from the repository is imported in the server (modules whose file lies in the scratch copy, or whose
  top-level name is one of its packages, are never preloaded), so each child imports the mutated module from disk.
  Bytecode is never written (PYTHONDONTWRITEBYTECODE), so a mutant can't be shadowed by a cached original.
- Each child runs `pytest.main(args)` in its own process group; when the client goes away (cosmic-ray's timeout
  kills the test command) the server kills that whole group, and it kills the group's leftovers after every run.
- run.py checks the server on unmutated code before any mutant (the baseline must pass through it too); when the
  tests fail that way it tries `--safe` (only computational libraries and pytest preloaded: aiohttp/asyncio state
  imported before the fork has broken a test that patches aiohttp), then plain subprocesses.

Protocol (Unix socket, one request at a time): the client sends one JSON line {"args": [...]} (pytest's arguments)
and reads one JSON line {"exit": N}.

    python -m tests.mutation.forkserver --socket PATH [--safe] -- PYTEST_ARGS...  # serve; PYTEST_ARGS pick the preloads
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import socket
import sys
from pathlib import Path


def project_names(root: Path) -> set[str]:
    """Top-level module names the repository provides (packages and modules at the root and under proto/)."""
    names: set[str] = set()
    for base in (root, root / "proto"):
        if base.is_dir():
            for p in base.iterdir():
                if p.suffix == ".py" or (p.is_dir() and not p.name.startswith(".")):
                    names.add(p.stem)
    return names


def third_party(modules: dict[str, object], root: Path, own: set[str]) -> list[str]:
    """Names among `modules` that are safe to preload: they have a file outside `root`, and their top-level
    package is not one of the repository's."""
    out = []
    root = root.resolve()
    for name, mod in modules.items():
        if name == "__main__" or name.split(".")[0] in own or name.startswith("conftest"):
            continue
        f = getattr(mod, "__file__", None)
        if not f:
            continue
        try:
            Path(f).resolve().relative_to(root)
            continue  # lives in the repository
        except ValueError:
            out.append(name)
    return sorted(out)


# The fallback preload when a module's tests fail under the full one (e.g. aiohttp/asyncio state that a test patches
# behaves differently when imported before the fork): computational libraries and pytest only.
SAFE_TOP = ("_pytest", "pytest", "pluggy", "iniconfig", "packaging", "numpy", "scipy", "tiktoken", "regex", "google",
            "grpc", "torch", "transformers", "sentence_transformers", "tokenizers", "safetensors", "huggingface_hub",
            "bm25s", "sklearn", "psutil", "yaml", "orjson")


def _devnull_stdio() -> None:
    fd = os.open(os.devnull, os.O_RDWR)
    for target in (0, 1, 2):
        os.dup2(fd, target)
    os.close(fd)


def _run_pytest_in_child(args: list[str]) -> None:
    """In a forked child: own process group, quiet stdio, pytest, exit with its status (never returns)."""
    code = 3
    try:
        os.setpgid(0, 0)
        _devnull_stdio()
        import pytest

        code = int(pytest.main(args))
    except BaseException:  # whatever happens, the child must not return into the server loop
        code = 3
    finally:
        os._exit(code)


def discover_preloads(args: list[str], root: Path) -> list[str]:
    """Collect the tests once in a child and return the third-party modules that collection imported."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.setpgid(0, 0)
            _devnull_stdio()
            import pytest

            pytest.main(["--collect-only", "-q", *args])
            names = third_party(dict(sys.modules), root, project_names(root))
            os.write(w, json.dumps(names).encode())
        finally:
            os._exit(0)
    os.close(w)
    chunks = []
    while True:
        b = os.read(r, 1 << 16)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    os.waitpid(pid, 0)
    _kill_group(pid)
    try:
        return json.loads(b"".join(chunks) or b"[]")
    except ValueError:
        return []


def preload(names: list[str]) -> int:
    n = 0
    for name in names:
        try:
            __import__(name)
            n += 1
        except BaseException:  # a module that won't import here is simply not preloaded
            pass
    return n


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _recv_line(conn: socket.socket) -> bytes:
    buf = b""
    while not buf.endswith(b"\n"):
        b = conn.recv(1 << 16)
        if not b:
            break
        buf += b
    return buf


def serve_one(conn: socket.socket) -> None:
    """Run one request: fork, wait for the child or the client's disconnect, answer with the exit status."""
    req = json.loads(_recv_line(conn) or b"{}")
    args = [str(a) for a in req.get("args", [])]
    pid = os.fork()
    if pid == 0:
        conn.close()
        _run_pytest_in_child(args)
    pidfd = os.pidfd_open(pid)
    try:
        while True:
            ready, _, _ = select.select([pidfd, conn], [], [])
            if pidfd in ready:
                _, status = os.waitpid(pid, 0)
                code = os.waitstatus_to_exitcode(status)
                _kill_group(pid)  # servers a test left behind
                conn.sendall((json.dumps({"exit": code}) + "\n").encode())
                return
            if conn in ready and not conn.recv(1, socket.MSG_PEEK):  # the client is gone: timed out
                _kill_group(pid)
                os.waitpid(pid, 0)
                return
    finally:
        os.close(pidfd)


def request(sock_path: str, args: list[str]) -> int | None:
    """Client side: run pytest with `args` in the server's fresh child; its exit status, or None when the server
    is unreachable or answers nothing (callers then run the command themselves)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(sock_path)
            s.sendall((json.dumps({"args": args}) + "\n").encode())
            line = _recv_line(s)
    except OSError:
        return None
    try:
        return int(json.loads(line)["exit"])
    except (ValueError, KeyError, TypeError):
        return None


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    ap = argparse.ArgumentParser(prog="tests.mutation.forkserver")
    ap.add_argument("--socket", required=True)
    ap.add_argument("--safe", action="store_true", help="preload only the SAFE_TOP libraries")
    a = ap.parse_args(argv[:cut])
    pytest_args = argv[cut + 1:]
    sys.dont_write_bytecode = True
    root = Path.cwd()
    import pytest  # noqa: F401 - preloaded for every child

    names = discover_preloads(pytest_args, root)
    if a.safe:
        names = [n for n in names if n.split(".")[0] in SAFE_TOP]
    preload(names)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(a.socket)
    srv.listen(4)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("ready", flush=True)
    try:
        while True:
            conn, _ = srv.accept()
            with conn:
                try:
                    serve_one(conn)
                except (OSError, ValueError):
                    pass
    finally:
        srv.close()
        Path(a.socket).unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main())
