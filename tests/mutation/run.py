"""`make mutation`: mutation testing (cosmic-ray 8.7, a maintained tool) over the modules whose numbers memrig
quotes, listed with the tests that must kill their mutants in tests/mutation/modules.toml.

Why cosmic-ray: every mutant runs the module's tests in a fresh process (a subprocess, or a fork of a server that
has imported nothing from the repository), so asyncio, gRPC and forked
servers in the tests need no special care, and a hanging mutant is killed by its timeout (and counted killed).
The working tree is never mutated: the tracked (and untracked, not ignored) files are copied to a scratch
directory and cosmic-ray edits the copy. Per module: `cosmic-ray init`, `baseline` (the tests must pass on the
unmutated copy, else the module is reported as not measured), `exec`, then `dump` is read back.

Operators: by default the plan excludes binary-operator replacements into FloorDiv, Mod, Pow, shifts and
bitwise operators (on this float/str code they raise at once: killed, but each costs a full test run; they
were ~60% of all mutants); `--all-operators` keeps them.

Speed: each mutant first runs only the tests whose coverage reached its line and the whole command only when
they pass (tests/mutation/selective.py: verdicts equal a full run's), and every pytest run is a fork of a warm
server holding pytest and the third-party imports (tests/mutation/forkserver.py; `--no-fork` turns it off).
`--jobs N` modules run at once, each in its own scratch copy.

Output (`--out`, default results/mutation): report.md (kill rate per module, surviving mutants with their
diffs, equivalent mutants with reasons, timing) and report.json. Exit status 1 when a measured module is below
the target kill rate (modules.toml, 90%) or a baseline failed.

    python -m tests.mutation.run [--modules collectors/resources.py,loadtests/open_loop.py] [--out DIR] [--keep]
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PLAN = Path(__file__).with_name("modules.toml")


@dataclass
class ModuleResult:
    path: str
    tests: list[str]
    mutants: int = 0
    killed: int = 0
    timeouts: int = 0  # counted as killed (the mutant made the tests hang)
    survived: int = 0
    incompetent: int = 0  # the runner itself failed; neither killed nor survived
    skipped: int = 0  # operator excluded by the plan (exclude-operators)
    annotations: int = 0  # inside a never-evaluated annotation: equivalent by construction, not run
    equivalent: int = 0
    pending: int = 0
    seconds: float = 0.0
    baseline_ok: bool = True
    baseline_s: float = 0.0  # one run of the module's whole test command on unmutated code
    selective: bool = False  # mutants ran the tests that reach the changed line first (coverage map built)
    forked: str = ""  # test runs were forks of a warm server (forkserver.py): "full" or "safe" preload
    commit: str = ""  # the code measured: git HEAD, "+dirty" when the working tree differed
    source_sha256: str = ""  # of the mutated module as measured
    carried: int = 0  # --rerun-survivors: killed in the earlier full run of the same source, not run again
    carried_from: str = ""  # the commit of that earlier run
    error: str = ""
    survivors: list[dict[str, Any]] = field(default_factory=list)
    equivalents: list[dict[str, Any]] = field(default_factory=list)

    @property
    def kill_rate(self) -> float | None:
        """killed / (killed + survived): equivalent, incompetent and unfinished mutants are left out."""
        scored = self.killed + self.survived
        return self.killed / scored if scored else None


def load_plan(path: Path = PLAN) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    plan = tomllib.loads(path.read_text())
    defaults = plan.get("defaults", {})
    modules = plan.get("module", [])
    for m in modules:
        if not (ROOT / m["path"]).is_file():
            raise SystemExit(f"modules.toml: path {m['path']!r} does not exist")
        for t in m["tests"]:
            if not (ROOT / t).exists():
                raise SystemExit(f"modules.toml: test {t!r} (module {m['path']}) does not exist")
    return defaults, modules, plan.get("equivalent", [])


def select(modules: list[dict[str, Any]], wanted: str | None) -> list[dict[str, Any]]:
    if not wanted:
        return modules
    keys = [w.strip() for w in wanted.split(",") if w.strip()]
    out = [m for m in modules if any(k == m["path"] or k in m["path"] for k in keys)]
    if not out:
        raise SystemExit(f"--modules {wanted!r} matches none of: {', '.join(m['path'] for m in modules)}")
    return out


def scratch_copy(dest: Path) -> None:
    """The working-tree version of every tracked file and every untracked, non-ignored one."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            check=True, capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = ROOT / rel
        if not src.is_file():
            continue  # deleted in the working tree
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / rel)


def _toml_str(s: str) -> str:
    return json.dumps(s)  # a JSON string literal is a valid TOML basic string


def cosmic_ray_config(module: str, test_command: str, timeout: float, exclude_operators: list[str] = ()) -> str:
    return "\n".join([
        "[cosmic-ray]",
        f"module-path = {_toml_str(module)}",
        f"timeout = {float(timeout)}",
        "excluded-modules = []",
        f"test-command = {_toml_str(test_command)}",
        "",
        "[cosmic-ray.distributor]",
        'name = "local"',
        "",
        "[cosmic-ray.filters.operators-filter]",
        f"exclude-operators = [{', '.join(_toml_str(e) for e in exclude_operators)}]",
        "",
    ])


def annotation_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(start, end) positions (line 1-based, column 0-based) of every annotation in a module that has
    `from __future__ import annotations`: there annotations are strings never evaluated at run time (PEP 563),
    so a mutant inside one (`float | None` -> `float - None`) is equivalent. Empty for other modules."""
    tree = ast.parse(source)
    future = any(isinstance(n, ast.ImportFrom) and n.module == "__future__" and
                 any(a.name == "annotations" for a in n.names) for n in tree.body)
    if not future:
        return []
    nodes: list[ast.expr] = []
    for n in ast.walk(tree):
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.returns is not None:
            nodes.append(n.returns)
        elif isinstance(n, ast.arg) and n.annotation is not None:
            nodes.append(n.annotation)
        elif isinstance(n, ast.AnnAssign):
            nodes.append(n.annotation)
    return [((a.lineno, a.col_offset), (a.end_lineno or a.lineno, a.end_col_offset or 0)) for a in nodes]


def in_spans(pos: tuple[int, int], spans: list[tuple[tuple[int, int], tuple[int, int]]]) -> bool:
    return any(lo <= tuple(pos) < hi for lo, hi in spans)


def skip_annotation_mutants(db_path: Path, source: str) -> int:
    """Mark the session's mutants inside annotations as skipped (cosmic-ray's own filters do the same with
    WorkerOutcome.SKIPPED); returns how many."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    spans = annotation_spans(source)
    if not spans:
        return 0
    n = 0
    with use_db(str(db_path), WorkDB.Mode.open) as db:
        for item in list(db.pending_work_items):
            if all(in_spans(m.start_pos, spans) for m in item.mutations):
                db.set_result(item.job_id, WorkResult(output="annotation (not evaluated, PEP 563)",
                                                      worker_outcome=WorkerOutcome.SKIPPED))
                n += 1
    return n


def _diff_key(module: str, operator: str, diff: str) -> tuple[str, str, str]:
    """Identifies a mutant across code moves: module, operator and the changed lines without positions."""
    changed = [ln[1:].strip() for ln in (diff or "").splitlines()
               if ln[:1] in "+-" and not ln.startswith(("+++", "---")) and ln[1:].strip()]
    return module, operator, "\n".join(changed)


def equivalent_keys(equivalents: list[dict[str, Any]]) -> dict[tuple[str, str, str], str]:
    return {(e["module"], e["operator"], e["changed"].strip()): e["reason"] for e in equivalents}


CARRIED = "carried: killed in an earlier run of the same source"


def carry_killed(db_path: Path, rerun: set[tuple[str, int]]) -> int:
    """--rerun-survivors: mark every pending mutant not in `rerun` ((operator, occurrence) of the earlier run's
    survivors and equivalents) as killed-before, so only those run again; returns how many were carried."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    n = 0
    with use_db(str(db_path), WorkDB.Mode.open) as db:
        for item in list(db.pending_work_items):
            if not any((m.operator_name, m.occurrence) in rerun for m in item.mutations):
                db.set_result(item.job_id, WorkResult(output=CARRIED, worker_outcome=WorkerOutcome.SKIPPED))
                n += 1
    return n


def rerun_set(prev: ModuleResult | None, source_sha: str) -> set[tuple[str, int]] | None:
    """The mutants to run again when an earlier result of the same source is complete (nothing pending or
    incompetent, measured), else None (a full run)."""
    if (prev is None or prev.error or not prev.source_sha256 or prev.source_sha256 != source_sha
            or prev.pending or prev.incompetent or prev.mutants == 0):
        return None
    return {(x["operator"], int(x["occurrence"])) for x in [*prev.survivors, *prev.equivalents]}


def tally(res: ModuleResult, rows: list[list[Any]], equivalents: dict[tuple[str, str, str], str]) -> None:
    """Count the dump rows ([work item, result or null]) of one module into `res`."""
    for item, result in rows:
        mut = item["mutations"][0]
        res.mutants += 1
        if result is None:
            res.pending += 1
            continue
        if str(result.get("worker_outcome", "")).lower() == "skipped":
            if (result.get("output") or "").startswith(CARRIED):
                res.killed += 1
                res.carried += 1
            elif (result.get("output") or "").startswith("annotation"):
                res.annotations += 1
            else:
                res.skipped += 1
            continue
        where = {"operator": mut["operator_name"], "occurrence": mut["occurrence"], "line": mut["start_pos"][0],
                 "function": mut.get("definition_name"), "diff": result.get("diff") or ""}
        reason = equivalents.get(_diff_key(res.path, mut["operator_name"], result.get("diff") or ""))
        outcome = str(result.get("test_outcome") or "").lower()
        if reason is not None and outcome == "survived":
            res.equivalent += 1
            res.equivalents.append({**where, "reason": reason})
        elif outcome == "killed":
            res.killed += 1
            res.timeouts += int((result.get("output") or "").strip() == "timeout")
        elif outcome == "survived":
            res.survived += 1
            res.survivors.append(where)
        else:
            res.incompetent += 1


def cosmic_ray_bin() -> list[str]:
    exe = Path(sys.executable).with_name("cosmic-ray")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "cosmic_ray.cli"]


def coverage_map(scratch: Path, m: dict[str, Any], args: list[str], env: dict[str, str], work: Path,
                 slug: str) -> Path | None:
    """Run the module's tests once under coverage with per-test contexts and write the line → tests map
    (tests/mutation/coverage_map.py); None when that fails (every mutant then runs the whole command)."""
    data, out = work / f"{slug}.coverage", work / f"{slug}.map.json"
    cmd = [sys.executable, "-m", "coverage", "run", f"--data-file={data}", f"--include={scratch / m['path']}",
           "-m", "pytest", "-p", "tests.mutation.coverage_map", *args, *m["tests"]]
    run = subprocess.run(cmd, cwd=scratch, env={**env, "PYTHONDONTWRITEBYTECODE": "1"}, capture_output=True,
                         text=True)
    if run.returncode != 0:
        return None
    from tests.mutation.coverage_map import write_map

    cover = write_map(data, scratch / m["path"], out)
    return out if cover["tests"] else None


class ForkServer:
    """tests/mutation/forkserver.py for one module's scratch copy: started after the baseline, checked on unmutated
    code (the module's whole test command must pass through it), stopped by PID (its process group)."""

    def __init__(self, scratch: Path, pytest_args: list[str], env: dict[str, str], safe: bool = False):
        self.dir = Path(tempfile.mkdtemp(prefix="mrfs-"))
        self.socket = str(self.dir / "s")
        self.safe = safe
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.mutation.forkserver", "--socket", self.socket,
                                      *(["--safe"] if safe else []), "--", *pytest_args], cwd=scratch, env={**env, "PYTHONDONTWRITEBYTECODE": "1"},
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                     start_new_session=True)

    def ready(self, pytest_args: list[str], timeout: float = 120.0) -> bool:
        from tests.mutation.forkserver import request

        ok: list[bool] = []
        reader = threading.Thread(target=lambda: ok.append(self.proc.stdout.readline().strip() == "ready"),
                                  daemon=True)
        reader.start()
        reader.join(timeout)
        return bool(ok and ok[0]) and request(self.socket, pytest_args) == 0

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def run_module(scratch: Path, m: dict[str, Any], defaults: dict[str, Any],
               equivalents: dict[tuple[str, str, str], str], all_operators: bool = False,
               selective: bool = True, previous: ModuleResult | None = None, fork: bool = True) -> ModuleResult:
    res = ModuleResult(m["path"], list(m["tests"]))
    res.source_sha256 = hashlib.sha256((scratch / m["path"]).read_bytes()).hexdigest()
    work = scratch / ".mutation"
    work.mkdir(exist_ok=True)
    slug = m["path"].replace("/", "_").removesuffix(".py")
    cfg, db = work / f"{slug}.toml", work / f"{slug}.sqlite"
    args = list(m.get("args", defaults.get("args", [])))
    test_cmd = shlex.join([sys.executable, "-m", "pytest", *args, *m["tests"]])
    timeout = float(m.get("timeout", defaults.get("timeout", 120)))
    excluded = [] if all_operators else list(m.get("exclude-operators", defaults.get("exclude-operators", [])))
    cfg.write_text(cosmic_ray_config(m["path"], test_cmd, timeout, excluded))
    env = {**os.environ, "PYTHONPATH": f"{scratch}{os.pathsep}{scratch / 'proto'}"}
    cr = cosmic_ray_bin()
    server: ForkServer | None = None
    t0 = time.perf_counter()
    try:
        subprocess.run([*cr, "init", str(cfg), str(db)], cwd=scratch, env=env, check=True, capture_output=True)
        if excluded:
            subprocess.run([str(Path(cr[0]).with_name("cr-filter-operators")) if len(cr) == 1 else sys.executable,
                            *([] if len(cr) == 1 else ["-m", "cosmic_ray.tools.filters.operators_filter"]),
                            str(db), str(cfg)], cwd=scratch, env=env, check=True, capture_output=True)
        skip_annotation_mutants(db, (scratch / m["path"]).read_text())
        rerun = rerun_set(previous, res.source_sha256) if previous is not None else None
        if rerun is not None:
            carry_killed(db, rerun)
            res.carried_from = previous.commit
        tb = time.perf_counter()
        base = subprocess.run([*cr, "baseline", str(cfg)], cwd=scratch, env=env, capture_output=True, text=True)
        res.baseline_s = round(time.perf_counter() - tb, 1)
        if base.returncode != 0:
            res.baseline_ok = False
            res.error = f"baseline failed (the tests fail on unmutated code): {base.stderr[-800:]}"
            return res
        cover = coverage_map(scratch, m, args, env, work, slug) if selective else None
        if cover is not None:
            original = work / f"{slug}.original.py"
            shutil.copy2(scratch / m["path"], original)
            for safe in ((False, True) if fork else ()):
                server = ForkServer(scratch, [*args, *m["tests"]], env, safe=safe)
                if server.ready([*args, *m["tests"]]):
                    res.forked = "safe" if safe else "full"
                    break
                server.stop()
                server = None
            wrapped = shlex.join([sys.executable, "-m", "tests.mutation.selective", "--map", str(cover),
                                  "--module", str(scratch / m["path"]), "--original", str(original),
                                  "--paths", str(len(m["tests"])),
                                  *(["--server", server.socket] if server else []), "--",
                                  *shlex.split(test_cmd)])
            cfg.write_text(cosmic_ray_config(m["path"], wrapped, timeout, excluded))
            res.selective = True
        subprocess.run([*cr, "exec", str(cfg), str(db)], cwd=scratch, env=env, check=True, capture_output=True)
        dump = subprocess.run([*cr, "dump", str(db)], cwd=scratch, env=env, check=True, capture_output=True,
                              text=True).stdout
    except subprocess.CalledProcessError as e:
        res.error = f"{' '.join(e.cmd[:3])} exited {e.returncode}: {(e.stderr or b'')[-800:]!r}"
        return res
    finally:
        if server is not None:
            server.stop()
        res.seconds = round(time.perf_counter() - t0, 1)
    tally(res, [json.loads(line) for line in dump.splitlines() if line.strip()], equivalents)
    return res


def code_version() -> str:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                           text=True)
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def format_rate(rate: float, target: float) -> str:
    """One decimal, or two where one would round a rate below the target up to it (89.96% is not 90.0%);
    a rate below the target says so."""
    text = f"{rate:.1%}"
    if rate < target:
        if round(rate, 3) >= target:
            text = f"{rate:.2%}"
        text += " (below target)"
    return text


def render(results: list[ModuleResult], target: float, total_s: float) -> str:
    out = ["# Mutation testing (cosmic-ray)", "",
           f"Kill rate = killed / (killed + survived); a timeout counts as killed; equivalent mutants "
           f"(tests/mutation/modules.toml, with reasons) are left out. Target ≥ {target:.0%}. "
           f"Total {total_s / 60:.1f} min.", "",
           "Not run: `skipped` (operators the plan excludes) and `annot.` (mutants inside annotations, which "
           "`from __future__ import annotations` never evaluates).", "",
           "Selective (`sel.`): each mutant first ran the tests that executed its line (a coverage map); a survivor "
           "is always a survivor of the whole test command; `+ fork`: test runs were forks of a warm server. `code`: the commit measured (`+dirty`: with "
           "uncommitted changes). `base s`: one run of the whole test command. `carried`: with `--rerun-survivors`, "
           "killed in the earlier full run of the same source (`from`) and not run again.", "",
           "| module | mutants | killed | (timeouts) | survived | equivalent | incompetent | skipped | annot. | "
           "kill rate | time s | base s | sel. | code | carried | tests |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        rate = "not measured" if r.error else ("—" if r.kill_rate is None else format_rate(r.kill_rate, target))
        out.append(f"| {r.path} | {r.mutants} | {r.killed} | {r.timeouts} | {r.survived} | {r.equivalent} | "
                   f"{r.incompetent} | {r.skipped} | {r.annotations} | {rate} | {r.seconds:.0f} | {r.baseline_s:.1f} | "
                   f"{'yes' if r.selective else 'no'}{f' + fork ({r.forked})' if r.forked else ''} | {r.commit or '?'} | "
                   f"{f'{r.carried} from {r.carried_from}' if r.carried else '—'} | "
                   f"{', '.join(Path(t).name for t in r.tests)} |")
    for r in results:
        if r.error:
            out += ["", f"## {r.path}: not measured", "", "```", r.error, "```"]
        if r.survivors:
            out += ["", f"## Surviving mutants: {r.path} ({len(r.survivors)})", ""]
            for s in r.survivors:
                out += [f"- line {s['line']} in `{s['function']}`: {s['operator']} #{s['occurrence']}", "",
                        "```diff", s["diff"].strip(), "```"]
        if r.equivalents:
            out += ["", f"## Equivalent mutants: {r.path}", ""]
            out += [f"- line {e['line']} `{e['operator']}`: {e['reason']}" for e in r.equivalents]
    return "\n".join(out) + "\n"


def previous_results(path: Path, keep_out: set[str]) -> list[ModuleResult]:
    """The modules of an earlier report.json in the same --out that this run does not measure again, so one
    report holds every module however the runs were split."""
    if not path.is_file():
        return []
    try:
        rows = json.loads(path.read_text()).get("modules", [])
    except (OSError, ValueError):
        return []
    fields = set(ModuleResult.__dataclass_fields__)
    out = [ModuleResult(**{k: v for k, v in r.items() if k in fields}) for r in rows if r.get("path") not in keep_out]
    for r in out:
        if isinstance(r.forked, bool):  # reports before the safe preload said only yes/no
            r.forked = "full" if r.forked else ""
    return out


def merge_reports(files: list[Path], out: Path, target: float, plan_order: list[str]) -> int:
    """--merge: one report from several runs' report.json (later files win per module), in the plan's order."""
    rows: dict[str, ModuleResult] = {}
    seconds = 0.0
    for f in files:
        for r in previous_results(f, set()):
            rows[r.path] = r
        seconds += float(json.loads(f.read_text()).get("seconds", 0.0))
    order = {p: i for i, p in enumerate(plan_order)}
    results = sorted(rows.values(), key=lambda x: order.get(x.path, len(order)))
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(render(results, target, seconds))
    (out / "report.json").write_text(json.dumps(
        {"tool": "cosmic-ray", "target": target, "seconds": round(seconds, 1), "merged_from": [str(f) for f in files],
         "modules": [{**asdict(x), "kill_rate": x.kill_rate} for x in results]}, indent=1))
    print(f"mutation: {len(results)} modules merged into {out / 'report.md'}")
    missing = [p for p in plan_order if p not in rows]
    if missing:
        print(f"mutation: not measured: {', '.join(missing)}")
    bad = [r for r in results if r.error or (r.kill_rate is not None and r.kill_rate < target)]
    return 1 if bad or missing else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modules", help="comma-separated module paths (or substrings) from modules.toml; default all")
    ap.add_argument("--out", default=str(ROOT / "results" / "mutation"))
    ap.add_argument("--keep", action="store_true", help="keep the scratch copies (their paths are printed)")
    ap.add_argument("--list", action="store_true", help="list the modules and their tests, run nothing")
    ap.add_argument("--all-operators", action="store_true",
                    help="ignore the plan's exclude-operators (every cosmic-ray operator; several times slower)")
    ap.add_argument("--jobs", type=int, default=2,
                    help="modules measured at once, each in its own scratch copy (default 2)")
    ap.add_argument("--no-selective", action="store_true",
                    help="run the whole test command for every mutant (no coverage map; slower, same verdicts)")
    ap.add_argument("--no-fork", action="store_true",
                    help="start every test run as a fresh interpreter instead of forking a warm server")
    ap.add_argument("--rerun-survivors", action="store_true",
                    help="run again only the survivors (and equivalents) of the earlier full run in --out, for each "
                         "module whose source is unchanged (tests added since); the others count as killed then. "
                         "For iterating on tests; quote figures from a full run")
    ap.add_argument("--merge", nargs="+", metavar="REPORT_JSON",
                    help="run nothing: combine the module rows of these report.json files (later files win for a "
                         "module) into --out's report (for runs split over machines or sessions)")
    ap.add_argument("--fresh", action="store_true",
                    help="drop the other modules' rows of an earlier report in --out instead of keeping them")
    a = ap.parse_args(argv)
    if a.jobs < 1:
        raise SystemExit("--jobs must be at least 1")
    defaults, modules, eq = load_plan()
    if a.merge:
        return merge_reports([Path(x) for x in a.merge], Path(a.out), float(defaults.get("target", 0.9)),
                             [m["path"] for m in modules])
    modules = select(modules, a.modules)
    if a.list:
        for m in modules:
            print(f"{m['path']}: {' '.join(m['tests'])}")
        return 0
    target = float(defaults.get("target", 0.9))
    eq_keys = equivalent_keys(eq)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    prior = {r.path: r for r in previous_results(out / "report.json", set())}
    earlier = [] if a.fresh else [r for p, r in prior.items() if p not in {m["path"] for m in modules}]
    order = {m["path"]: i for i, m in enumerate(load_plan()[1])}
    t0 = time.perf_counter()
    results: list[ModuleResult] = []
    lock = threading.Lock()
    scratches: list[Path] = []

    def one(m: dict[str, Any]) -> ModuleResult:
        scratch = Path(tempfile.mkdtemp(prefix="memrig-mutation-"))
        with lock:
            scratches.append(scratch)
        commit = code_version()  # when this module's copy was taken (a long batch may see later commits)
        scratch_copy(scratch)
        print(f"mutation: {m['path']} ...", flush=True)
        r = run_module(scratch, m, defaults, eq_keys, a.all_operators, selective=not a.no_selective,
                       previous=prior.get(m["path"]) if a.rerun_survivors else None, fork=not a.no_fork)
        r.commit = commit
        rate = "not measured" if r.error else (f"{r.kill_rate:.1%}" if r.kill_rate is not None else "—")
        print(f"mutation: {m['path']}: {r.mutants} mutants ({r.skipped} skipped by operator, {r.annotations} in "
              f"annotations), {r.killed} killed, {r.survived} survived, {r.equivalent} equivalent, "
              f"kill rate {rate}, {r.seconds:.0f} s", flush=True)
        with lock:
            results.append(r)
            rows = sorted(earlier + results, key=lambda x: order.get(x.path, len(order)))
            total = time.perf_counter() - t0
            (out / "report.md").write_text(render(rows, target, total))
            (out / "report.json").write_text(json.dumps(
                {"tool": "cosmic-ray", "target": target, "seconds": round(total, 1),
                 "modules": [{**asdict(x), "kill_rate": x.kill_rate} for x in rows]}, indent=1))
        if not a.keep:
            shutil.rmtree(scratch, ignore_errors=True)
        return r

    with ThreadPoolExecutor(max_workers=a.jobs) as pool:
        list(pool.map(one, modules))
    if a.keep:
        for s in scratches:
            print(f"mutation: scratch copy kept at {s}")
    print(f"mutation: report in {out / 'report.md'}")
    bad = [r for r in results if r.error or (r.kill_rate is not None and r.kill_rate < target)]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
