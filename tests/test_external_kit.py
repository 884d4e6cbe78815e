"""The external-runtime kit (services/adapters/external): a sidecar's start, ready line, timeout, log tail and stop by
PID; a one-shot child killed with its group; a pinned source's checks and digest; the install command's shape.
The children are tiny Python programs (no Node)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from services.adapters.external.availability import Availability, PinnedSource, install_main, tree_digest
from services.adapters.external.sidecar import Sidecar, run_once
from services.common.errors import DependencyError


class DemoError(DependencyError):
    dependency = "the demo system"


def py(tmp_path: Path, code: str, name: str = "demo-real", stdin: bool = False) -> Sidecar:
    return Sidecar(name, [sys.executable, "-c", code], cwd=tmp_path, env=dict(os.environ), log=tmp_path / "demo.log",
                   error=DemoError, stdin=stdin)


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


# ------------------------------------------------------------------------------------------ Sidecar
@pytest.mark.slow
async def test_ready_timeout_names_the_process_shows_the_log_tail_and_leaves_no_child(tmp_path):
    sc = py(tmp_path, "import sys, time\nprint('loading modules, step 3 of 9', file=sys.stderr, flush=True)\n"
                      "time.sleep(60)")
    with pytest.raises(DemoError) as e:
        await sc.start(timeout_s=1.0)
    msg = str(e.value)
    assert msg.startswith("demo-real: the sidecar (pid ") and "was not ready in 1 s" in msg
    assert msg.endswith("log: loading modules, step 3 of 9\n")
    pid = int(msg.split("(pid ")[1].split(")")[0])
    assert gone(pid) and sc.proc is None and not sc.alive


@pytest.mark.slow
async def test_a_child_that_exits_or_prints_something_else_first_is_refused_with_its_exit_and_log(tmp_path):
    sc = py(tmp_path, "import sys\nprint('config.json: no such file', file=sys.stderr)\nsys.exit(3)")
    with pytest.raises(DemoError, match=r"exited before it was ready \(exit 3\); log: config.json: no such file"):
        await sc.start(timeout_s=30)
    sc = py(tmp_path, "print('HELLO', flush=True)\nimport time\ntime.sleep(60)")
    with pytest.raises(DemoError, match="did not start: its first line was b'HELLO\\\\n', not READY"):
        await sc.start(timeout_s=30)
    assert sc.proc is None


@pytest.mark.slow
async def test_requests_are_one_line_each_and_stop_ends_a_stdin_reader_by_eof(tmp_path):
    code = ("import sys\nprint('READY', flush=True)\n"
            "for line in sys.stdin:\n    print(line.strip().upper(), flush=True)\n"
            "print('bye', file=sys.stderr, flush=True)")
    sc = py(tmp_path, code, stdin=True)
    assert await sc.start(timeout_s=30) == b"READY\n"
    pid = sc.pid
    assert await sc.request(b"abc", 30) == b"ABC\n"
    assert await sc.request(b"x y\n", 30) == b"X Y\n"
    proc = sc.proc
    await sc.stop(grace_s=10)
    assert proc.returncode == 0 and gone(pid)  # it ended on EOF, before any signal
    assert sc.log_tail() == "bye\n"
    with pytest.raises(DemoError, match="not running"):
        await sc.request(b"abc", 1)


@pytest.mark.slow
async def test_stop_sends_sigterm_then_sigkill_to_the_pid(tmp_path):
    polite = py(tmp_path, "print('READY', flush=True)\nimport time\ntime.sleep(60)")
    await polite.start(timeout_s=30)
    proc, pid = polite.proc, polite.pid
    await polite.stop(grace_s=10)
    assert proc.returncode == -signal.SIGTERM and gone(pid)

    stubborn = py(tmp_path, "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                            "print('READY', flush=True)\ntime.sleep(60)")
    await stubborn.start(timeout_s=30)
    proc, pid = stubborn.proc, stubborn.pid
    t0 = time.monotonic()
    await stubborn.stop(grace_s=0.5)
    assert proc.returncode == -signal.SIGKILL and gone(pid)
    assert 0.5 <= time.monotonic() - t0 < 10
    await stubborn.stop()  # a second stop is a no-op


@pytest.mark.slow
async def test_drained_stdout_goes_to_the_log(tmp_path):
    sc = py(tmp_path, "import time\nprint('READY', flush=True)\nprint('chatty 1', flush=True)\ntime.sleep(60)")
    await sc.start(timeout_s=30, drain_stdout=True)
    for _ in range(100):
        if "chatty 1" in sc.log_tail():
            break
        await asyncio.sleep(0.05)
    assert sc.log_tail() == "chatty 1\n"
    await sc.stop(grace_s=5)


@pytest.mark.slow
async def test_run_once_returns_the_output_and_kills_an_overrunning_childs_group(tmp_path):
    done = await run_once("demo-real", [sys.executable, "-c", "import sys; d = sys.stdin.read(); "
                                        "print(d[::-1]); print('warn', file=sys.stderr); sys.exit(2)"],
                          b"abc", cwd=tmp_path, env=dict(os.environ), timeout_s=30, error=DemoError)
    assert (done.returncode, done.stdout, done.stderr) == (2, "cba\n", "warn\n")
    pidfile = tmp_path / "grandchild.pid"
    code = ("import subprocess, sys, time\n"
            f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            f"open({str(pidfile)!r}, 'w').write(str(p.pid))\ntime.sleep(60)")
    with pytest.raises(DemoError, match="demo-real: did not finish in 1 s"):
        await run_once("demo-real", [sys.executable, "-c", code], b"", cwd=tmp_path, env=dict(os.environ),
                       timeout_s=1.0, error=DemoError)
    grandchild = int(pidfile.read_text())
    for _ in range(100):  # killed with the group; reaped by init
        if gone(grandchild):
            break
        await asyncio.sleep(0.05)
    assert gone(grandchild)
    with pytest.raises(DemoError, match="demo-real: cannot start /nonexistent/bun"):
        await run_once("demo-real", ["/nonexistent/bun"], b"", cwd=tmp_path, env={}, timeout_s=1, error=DemoError)


# ------------------------------------------------------------------------------------------ pinned sources
def _tree(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)


def test_tree_digest_is_sha256_of_sorted_sha256sum_lines_without_pycache(tmp_path):
    _tree(tmp_path, {"src/b.ts": b"b", "src/a/x.ts": b"x", "src/__pycache__/m.ts": b"junk", "src/c.py": b"c"})
    h = {k: hashlib.sha256(v).hexdigest() for k, v in {"b": b"b", "x": b"x"}.items()}
    want = hashlib.sha256(f"{h['x']}  src/a/x.ts\n{h['b']}  src/b.ts\n".encode()).hexdigest()
    assert tree_digest(tmp_path, ("src/**/*.ts",)) == want


def test_tree_digest_hashes_a_symlink_by_its_target_path_as_git_stores_it(tmp_path):
    # a real symlink, one to a directory and a dangling one: each hashed by its target path (no trailing newline),
    # never by what it points to, so a tree holding them as plain files of that path has the same digest
    linked = tmp_path / "linked"
    _tree(linked, {"src/a.ts": b"export const a = 1;\n", "src/sub/b.ts": b"b"})
    os.symlink("a.ts", linked / "src/link.ts")
    os.symlink("sub", linked / "src/dir.ts")
    os.symlink("../nowhere.ts", linked / "src/gone.ts")
    def digest(a_ts: bytes) -> str:
        lines = [(a_ts, "src/a.ts"), (b"sub", "src/dir.ts"), (b"../nowhere.ts", "src/gone.ts"), (b"a.ts", "src/link.ts"),
                 (b"b", "src/sub/b.ts")]
        return hashlib.sha256("".join(f"{hashlib.sha256(d).hexdigest()}  {rel}\n" for d, rel in lines).encode()
                              ).hexdigest()

    want = digest(b"export const a = 1;\n")
    assert tree_digest(linked, ("src/**/*.ts",)) == want
    plain = tmp_path / "plain"  # git's core.symlinks=false checkout of the same tree
    _tree(plain, {"src/a.ts": b"export const a = 1;\n", "src/sub/b.ts": b"b", "src/link.ts": b"a.ts",
                  "src/dir.ts": b"sub", "src/gone.ts": b"../nowhere.ts"})
    assert tree_digest(plain, ("src/**/*.ts",)) == want
    # the target's content is in the target's line alone: a changed a.ts changes that line, the link's stays
    (linked / "src/a.ts").write_bytes(b"export const a = 2;\n")
    assert tree_digest(linked, ("src/**/*.ts",)) == digest(b"export const a = 2;\n") != want


def _pinned(tmp_path: Path, digest: str) -> PinnedSource:
    return PinnedSource("Demo", "demo-labs/demo", "abcdef0123456789abcdef0123456789abcdef01", "demo",
                        "MEMRIG_DEMO_SOURCE", required=("lib/main.py",), patterns=("lib/**/*.py",), digest=digest,
                        what="library code")


def test_pinned_source_names_a_missing_directory_and_a_changed_one(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMRIG_DEMO_SOURCE", str(tmp_path / "nowhere"))
    src = _pinned(tmp_path, "0" * 64)
    assert src.path() == tmp_path / "nowhere"
    assert src.check() == (f"Demo's source is not at {tmp_path / 'nowhere'} (missing lib/main.py); put demo-labs/demo "
                           "@ abcdef0 at ../shared/third_party/demo beside the project or set MEMRIG_DEMO_SOURCE")
    _tree(tmp_path / "demo", {"lib/main.py": b"print('v1')\n"})
    monkeypatch.setenv("MEMRIG_DEMO_SOURCE", str(tmp_path / "demo"))
    pinned = tree_digest(tmp_path / "demo", ("lib/**/*.py",))
    assert _pinned(tmp_path, pinned).check() == ""
    (tmp_path / "demo" / "lib" / "main.py").write_bytes(b"print('v2')\n")
    got = tree_digest(tmp_path / "demo", ("lib/**/*.py",))
    assert _pinned(tmp_path, pinned).check() == (f"Demo's library code at {tmp_path / 'demo'} is not commit abcdef0 "
                                                 f"of demo-labs/demo (digest {got[:12]}, pinned {pinned[:12]})")


def test_unset_variable_reads_the_shared_third_party_directory(monkeypatch):
    monkeypatch.delenv("MEMRIG_DEMO_SOURCE", raising=False)
    root = Path(__file__).resolve().parents[1]
    assert _pinned(Path("."), "0").path() == root.parent / "shared" / "third_party" / "demo"


# ------------------------------------------------------------------------------------------ Availability, install
def test_summary_and_install_command_shape(capsys):
    a = Availability(True, "", "Demo", "1.2", "/src/demo", "/opt/bin/node", "24.19.0", ("pins x==1",))
    assert a.summary() == "Demo 1.2 from /src/demo on node 24.19.0 (/opt/bin/node); pins x==1"
    assert install_main("demo-real", lambda: a) == 0
    assert capsys.readouterr().out == "demo-real: Demo 1.2 from /src/demo on node 24.19.0 (/opt/bin/node); pins x==1\n"
    bad = a.unavailable("Node 20.1.0 is too old")
    assert (bad.ok, bad.reason, bad.runtime_version) == (False, "Node 20.1.0 is too old", "24.19.0")
    assert install_main("demo-real", lambda: bad) == 1
    assert capsys.readouterr().err == "demo-real unavailable: Node 20.1.0 is too old\n"
