"""Issue 48: the file-level import graph of services/, loadtests/ and collectors/ has no circle.

Every `import` and `from ... import` in every .py file under those folders is an arrow, wherever it sits: at the
top, inside a function (a lazy import is still a dependency: the file cannot run without the other), under
`if TYPE_CHECKING:`. An arrow goes to a repo file:

- `import a.b.c` -> a/b/c.py, or a/b/c/__init__.py (else the longest prefix that is a repo module);
- `from a.b import c` -> a/b/c.py or a/b/c/__init__.py when c is a module, else a/b.py or a/b/__init__.py;
- relative imports the same way, from the importing file's package (`from . import x` in p/q.py is `from p import x`).

Imports of modules outside the three folders (the standard library, third-party packages, proto stubs) are not
arrows, nor are `importlib.import_module(name)` calls (the registries' discovery of adapters, suites and
commands by name: the name is data, and a static tool sees none of them either). Parent packages' __init__.py
files, which Python also runs on `import a.b.c`, are not arrows either: only the module named is. No `__init__.py`
is excused: none is needed (see test_no_circle_between_files).

A circle is a strongly connected component of two or more files. The test prints each one with the arrows inside
it and the line of each import, so the one to cut is easy to find.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROOTS = ("services", "loadtests", "collectors")
SKIP_DIRS = {"node_modules", "__pycache__"}


def module_files(repo: Path, roots: tuple[str, ...] = ROOTS) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file under the roots (node_modules, caches and dot-dirs left out)."""
    out: dict[str, Path] = {}
    for root in roots:
        base = repo / root
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
            for name in sorted(filenames):
                if not name.endswith(".py"):
                    continue
                rel = (Path(dirpath) / name).relative_to(repo).with_suffix("")
                parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
                out[".".join(parts)] = Path(dirpath) / name
    return out


def _package_of(module: str, path: Path) -> str:
    """The package a relative import in this file starts from: the module itself for an __init__.py."""
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _longest_module(name: str, modules: dict[str, Path]) -> str | None:
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        candidate = ".".join(parts[:n])
        if candidate in modules:
            return candidate
    return None


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, int]]:
    """(target module, line) for every import in the file that resolves to a module in `modules`."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _longest_module(alias.name, modules)
                if target is not None:
                    out.append((target, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                pkg = _package_of(module, path).split(".") if module else []
                up = node.level - 1
                if up > len(pkg):
                    raise ValueError(f"{path}:{node.lineno}: relative import beyond the top package")
                base_parts = pkg[:len(pkg) - up] if up else pkg
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                sub = f"{base}.{alias.name}" if base else alias.name
                if alias.name != "*" and sub in modules:
                    out.append((sub, node.lineno))
                    continue
                target = _longest_module(base, modules) if base else None
                if target is not None:
                    out.append((target, node.lineno))
    return out


def build_graph(repo: Path, roots: tuple[str, ...] = ROOTS) -> tuple[dict[str, set[str]], dict[tuple[str, str], int]]:
    """module -> the modules it imports (no self-arrows), and the first line of each arrow."""
    modules = module_files(repo, roots)
    graph: dict[str, set[str]] = {m: set() for m in modules}
    lines: dict[tuple[str, str], int] = {}
    for module, path in modules.items():
        for target, line in imports_of(module, path, modules):
            if target == module:
                continue
            graph[module].add(target)
            lines[(module, target)] = min(line, lines.get((module, target), line))
    return graph, lines


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with two or more modules, each sorted, the list sorted (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def describe(components: list[list[str]], graph: dict[str, set[str]], lines: dict[tuple[str, str], int]) -> str:
    out = []
    for comp in components:
        members = set(comp)
        arrows = [f"    {a} -> {b} (line {lines[(a, b)]})" for a in comp for b in sorted(graph[a]) if b in members]
        out.append(f"  circle of {len(comp)}: {', '.join(comp)}\n" + "\n".join(arrows))
    return "\n".join(out)


# --- the builder on a hand-made tree ---------------------------------------------------------------------------------

def _write(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")


@pytest.fixture
def fake_tree(tmp_path):
    # pkg/a.py -> pkg/b.py (top-level), pkg/b.py -> pkg/a.py (inside a function): a circle only if lazy imports count.
    _write(tmp_path, "pkg/__init__.py", "")
    _write(tmp_path, "pkg/a.py", "import os\nfrom pkg import b\n")
    _write(tmp_path, "pkg/b.py", "def f():\n    from pkg.a import thing\n    return thing\n")
    # pkg/sub/c.py -> pkg/sub/d.py by `from . import d`, and -> pkg/a.py by `from ..a import x` (relative, 2 levels).
    _write(tmp_path, "pkg/sub/__init__.py", "from .d import y\n")
    _write(tmp_path, "pkg/sub/c.py", "from . import d\nfrom ..a import x\n")
    _write(tmp_path, "pkg/sub/d.py", "import pkg.sub\nimport json\n")
    # `from pkg.sub import name_in_init` is not a module: it resolves to pkg/sub/__init__.py.
    _write(tmp_path, "pkg/e.py", "from pkg.sub import name_in_init\nimport pkg.sub.d as dd\n")
    # other/ is not a root: importing it is no arrow.
    _write(tmp_path, "other/f.py", "from pkg import a\n")
    _write(tmp_path, "pkg/g.py", "import other.f\n")
    return tmp_path


def test_builder_resolves_lazy_relative_and_package_imports(fake_tree):
    graph, lines = build_graph(fake_tree, ("pkg",))
    assert graph == {
        "pkg": set(),
        "pkg.a": {"pkg.b"},
        "pkg.b": {"pkg.a"},                       # the import inside f() counts
        "pkg.sub": {"pkg.sub.d"},                 # from .d in an __init__: relative to the package itself
        "pkg.sub.c": {"pkg.sub.d", "pkg.a"},      # from . import d; from ..a import x
        "pkg.sub.d": {"pkg.sub"},
        "pkg.e": {"pkg.sub", "pkg.sub.d"},        # a name from __init__ -> the __init__; import pkg.sub.d -> d
        "pkg.g": set(),                           # other/ is outside the roots
    }
    assert lines[("pkg.b", "pkg.a")] == 2
    assert lines[("pkg.sub.c", "pkg.a")] == 2


def test_builder_finds_the_circles(fake_tree):
    graph, _ = build_graph(fake_tree, ("pkg",))
    # pkg.sub <-> pkg.sub.d is a circle too (the __init__ imports d, d imports the package): not excused.
    assert circles(graph) == [["pkg.a", "pkg.b"], ["pkg.sub", "pkg.sub.d"]]
    assert circles({"x": {"y"}, "y": {"z"}, "z": {"x"}, "w": {"x"}}) == [["x", "y", "z"]]
    assert circles({"x": {"y"}, "y": set()}) == []


def test_relative_import_beyond_the_top_is_an_error(tmp_path):
    _write(tmp_path, "pkg/__init__.py", "")
    _write(tmp_path, "pkg/a.py", "from ...nowhere import z\n")
    with pytest.raises(ValueError, match="beyond the top package"):
        build_graph(tmp_path, ("pkg",))


# --- the repo --------------------------------------------------------------------------------------------------------

# Owned by another engineer (issue 48's second circle); remove the xfail the day it is cut.
REUSE_RUNNER = {"services.coordinator.reuse", "services.coordinator.runner"}


@pytest.fixture(scope="module")
def repo_graph():
    return build_graph(REPO)


def _others(components: list[list[str]]) -> list[list[str]]:
    return [c for c in components if not REUSE_RUNNER <= set(c)]


def test_no_circle_between_files(repo_graph):
    graph, lines = repo_graph
    found = _others(circles(graph))
    assert not found, "import circles between files:\n" + describe(found, graph, lines)


def test_no_circle_through_reuse_and_runner(repo_graph):
    graph, lines = repo_graph
    found = [c for c in circles(graph) if REUSE_RUNNER <= set(c)]
    assert not found, "import circles between files:\n" + describe(found, graph, lines)


def arrows_up(graph: dict[str, set[str]], lines: dict[tuple[str, str], int]) -> list[str]:
    """Arrows from a lower layer to a higher one, among the layers issue 48 named: the turn simulator (turn_sim)
    is below the drills, both are below the cost scenarios, which only the coordinator (bench-all, the run
    report) imports; the simulator imports none of them, nor the coordinator, the launcher or the CLI."""
    def under(module: str, *packages: str) -> bool:
        return any(module == p or module.startswith(p + ".") for p in packages)

    bad = []
    for a in sorted(graph):
        for b in sorted(graph[a]):
            up = (under(a, "services.turn_sim") and under(b, "services.drills", "services.cost_scenarios",
                                                          "services.coordinator", "services.launcher", "services.cli"))
            up |= under(a, "services.drills") and under(b, "services.cost_scenarios")
            up |= under(b, "services.cost_scenarios") and not under(a, "services.cost_scenarios",
                                                                     "services.coordinator")
            if up:
                bad.append(f"{a} -> {b} (line {lines[(a, b)]})")
    return bad


def test_arrows_up_are_found():
    graph = {"services.turn_sim.plugin": {"services.drills.base", "services.common.types"},
             "services.drills.runner": {"services.turn_sim.workload", "services.cost_scenarios.scenarios"},
             "services.cost_scenarios.scenarios": {"services.drills.runner", "services.launcher"},
             "services.coordinator.bench_all": {"services.cost_scenarios.scenarios"},
             "loadtests.run": {"services.cost_scenarios"}}
    lines = {(a, b): 7 for a, bs in graph.items() for b in bs}
    assert arrows_up(graph, lines) == [
        "loadtests.run -> services.cost_scenarios (line 7)",
        "services.drills.runner -> services.cost_scenarios.scenarios (line 7)",
        "services.turn_sim.plugin -> services.drills.base (line 7)",
    ]


def test_no_arrow_back_up(repo_graph):
    graph, lines = repo_graph
    assert "services.cost_scenarios.scenarios" in graph["services.coordinator.bench_all"]
    bad = arrows_up(graph, lines)
    assert not bad, "arrows back up:\n" + "\n".join(bad)
