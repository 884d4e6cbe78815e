"""Which tests execute which line of a mutated module: the map `make mutation` uses to run, for each mutant, first
only the tests that reach the changed line (tests/mutation/selective.py).

Two parts:
- a pytest plugin (`-p tests.mutation.coverage_map`) for a run under `coverage run`: it switches coverage's
  dynamic context to the pytest node id for each test's setup, call and teardown, so every recorded line knows the
  tests that executed it. Lines run while importing and collecting keep the empty context ("" = import time).
- `build_map(data_file, module_file)`: reads that coverage data back into {"tests": {line: [node ids]},
  "import_lines": [lines run at import time]} for one source file.

Coverage only sees this process: a line that only a test's subprocess executes (a server started by the test) is
absent from the map, so the selective runner falls back to the whole test command for it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest


def _current_coverage():
    try:
        import coverage
    except ImportError:  # the plugin is inert without coverage
        return None
    return coverage.Coverage.current()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    cov = _current_coverage()
    if cov is not None:
        cov.switch_context(item.nodeid)
    yield
    if cov is not None:
        cov.switch_context("")


def build_map(data_file: str | Path, module_file: str | Path) -> dict[str, Any]:
    """Lines of `module_file` → the node ids of the tests that executed them, from a coverage data file written
    by a `coverage run` of pytest with this plugin loaded."""
    import coverage

    data = coverage.CoverageData(basename=str(data_file))
    data.read()
    target = Path(module_file).resolve()
    measured = next((f for f in data.measured_files() if Path(f).resolve() == target), None)
    if measured is None:
        return {"tests": {}, "import_lines": []}
    by_line = data.contexts_by_lineno(measured)
    tests: dict[str, list[str]] = {}
    import_lines: list[int] = []
    for line, contexts in sorted(by_line.items()):
        ids = sorted(c for c in contexts if c)
        if ids:
            tests[str(line)] = ids
        if "" in contexts:
            import_lines.append(line)
    return {"tests": tests, "import_lines": import_lines}


def write_map(data_file: str | Path, module_file: str | Path, out: str | Path) -> dict[str, Any]:
    m = build_map(data_file, module_file)
    Path(out).write_text(json.dumps(m))
    return m
