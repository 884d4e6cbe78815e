"""The test command cosmic-ray runs for each mutant under `make mutation`: the tests that reach the mutated line
first, the module's whole test command only when they all pass.

    python -m tests.mutation.selective --map MAP.json --module PATH --original ORIG --paths N \\
        -- python -m pytest ARGS TESTS

cosmic-ray writes the mutant into PATH (the scratch copy) and runs this. The changed lines are found by comparing
PATH with the unmutated copy ORIG; MAP (tests/mutation/coverage_map.py) names the tests that executed each line.

- Some changed line ran at import time (a constant, a default argument, a decorator), or no test reached it in
  process (it may run in a test's subprocess): the whole command decides.
- Otherwise those tests run first (same pytest arguments, stop at the first failure). A failure kills the mutant;
  when they all pass, the whole command decides, so a survivor is always a survivor of the module's full test
  command and selection only makes killing cheaper, never changes a verdict.

With `--server SOCK` each pytest run happens in a fork of a warm server (tests/mutation/forkserver.py); when the
server does not answer, as a subprocess.

Exit status: that of the command that decided (0 = the mutant survived).
"""

from __future__ import annotations

import argparse
import difflib
import json
import subprocess
import sys
from pathlib import Path

from tests.mutation.forkserver import request

# pytest exit codes that say nothing about the mutant: interrupted, internal error, usage error, no tests collected
_NOT_A_VERDICT = {2, 3, 4, 5}


def changed_lines(original: str, mutated: str) -> set[int]:
    """1-based line numbers of `original` that the mutant replaced or deleted (for a pure insertion, the line
    before it)."""
    a, b = original.splitlines(), mutated.splitlines()
    out: set[int] = set()
    for tag, i1, i2, _j1, _j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag in ("replace", "delete"):
            out.update(range(i1 + 1, i2 + 1))
        elif tag == "insert":
            out.add(max(i1, 1))
    return out


def select_tests(lines: set[int], cover: dict) -> list[str] | None:
    """Node ids of the tests that executed any of `lines`, or None when the whole command must decide (a line ran
    at import time, or no test reached one of them in process)."""
    if not lines:
        return None
    import_lines = set(cover.get("import_lines", []))
    tests = cover.get("tests", {})
    picked: set[str] = set()
    for line in lines:
        if line in import_lines or str(line) not in tests:
            return None
        picked.update(tests[str(line)])
    return sorted(picked)


def split_command(command: list[str], n_paths: int) -> tuple[list[str], list[str]]:
    """(the command without its test paths, the test paths): the last `n_paths` arguments are the paths."""
    if not 0 <= n_paths <= len(command):
        raise SystemExit(f"selective: --paths {n_paths} does not fit a command of {len(command)} arguments")
    cut = len(command) - n_paths
    return command[:cut], command[cut:]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        raise SystemExit("selective: usage: --map MAP --module PATH --original ORIG --paths N -- COMMAND...")
    cut = argv.index("--")
    ap = argparse.ArgumentParser(prog="tests.mutation.selective")
    ap.add_argument("--map", required=True)
    ap.add_argument("--module", required=True)
    ap.add_argument("--original", required=True)
    ap.add_argument("--paths", type=int, required=True, help="how many trailing arguments of COMMAND are test paths")
    ap.add_argument("--server", help="a fork server's socket (tests/mutation/forkserver.py) to run pytest in")
    a = ap.parse_args(argv[:cut])
    command = argv[cut + 1:]
    cover = json.loads(Path(a.map).read_text())
    lines = changed_lines(Path(a.original).read_text(), Path(a.module).read_text())
    picked = select_tests(lines, cover)
    if picked:
        base, _paths = split_command(command, a.paths)
        first = run([*base, *picked], a.server)
        if first not in (0, *_NOT_A_VERDICT):
            return first  # a reaching test failed: killed
    return run(command, a.server)


def run(command: list[str], server: str | None) -> int:
    """Exit status of `command` (`python -m pytest ARGS`): in a fork of the server when one is given and
    answers, else as a subprocess."""
    if server and command[1:3] == ["-m", "pytest"]:
        code = request(server, command[3:])
        if code is not None:
            return code
    return subprocess.run(command).returncode


if __name__ == "__main__":
    sys.exit(main())
