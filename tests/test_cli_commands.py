"""One CLI style for every subcommand (services/cli.py, services/common/subcommand.py): each `memrig CMD --help`
exits 0 and lists CMD's flags; a module-backed command parses its flags in memrig's parser, checks them as its own
`python -m` entry does, and hands its `run` only its own flags; importing the CLI loads neither locust nor gevent."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from services import cli

ROOT = Path(__file__).resolve().parent.parent


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    ap = cli.build_parser()
    action = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    """cli.main in this process: (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def _shown(positional: argparse.Action) -> str:
    """How help names a positional: its metavar, its choices in braces, or its dest."""
    if positional.metavar:
        return str(positional.metavar)
    return "{" + ",".join(positional.choices) + "}" if positional.choices else positional.dest


# flags each command must show, written out by hand from the modules' add_arguments (every command is one)
MODULE_FLAGS = {
    "up": ["--backends", "--services", "--embedder", "--llm", "--answerer", "--judge", "--flush", "--compaction",
           "--no-llm-cache"],
    "down": [],
    "bench": ["--suite", "--backends", "--out", "--seed", "--option", "--concurrency", "--lanes", "--judge-passes",
              "--embedder", "--target", "--in-process", "--deadline-s", "--ingest-deadline-s", "--fresh", "--llm"],
    "bench-all": ["--backends", "--suites", "--no-costs", "--target-wait-s", "--out", "--lanes", "--fresh", "--llm"],
    "bench-local": ["--out", "--suites", "--seed", "--concurrency", "--fresh", "--compare-with", "--no-llm-cache"],
    "ingest": ["--backend", "--namespace", "--target", "--embedder", "file"],
    "retrieve": ["--backend", "--namespace", "--target", "--embedder", "--query", "--top-k", "--mode",
                 "--reference-time", "--json"],
    "conformance": ["--target"],
    "report": ["run_dir", "--no-rescore"],
    "compare": ["run_a", "run_b", "--fail-on", "--backends", "--json", "--out"],
    "reset": ["--backend", "--namespace", "--all", "--target"],
    "judge-agreement": ["--labels", "--data", "--seed", "--judges", "--score-tokens", "--json", "--out", "--record",
                        "--llm"],
    "serve": ["service", "--port"],
    "list": [],
    "bench-perf": ["--sizes", "--million", "--backends", "--embedder", "--passes", "--openclaw-real-sizes"],
    "observe": ["--prometheus-port", "--grafana-port", "--targets", "--no-grafana", "--duration-s"],
    "load": ["--target", "--workers", "--users", "--shape", "--faults", "--metrics-port", "--out"],
    "load-bench": ["--out", "--memories", "--slo-p99-ms", "--processes", "--locust-workers", "--blas-threads"],
    "fidelity": ["{openclaw,quaid,octybot}", "--suites", "--preset", "--option", "--profiles"],
    "sensitivity": ["{openclaw}", "--embedders", "--min-scores", "--option"],
    "power": ["run_dir", "--delta", "--json"],
    "credit-agreement": ["--run", "--labels", "--record", "--draw", "--backends", "--per-suite"],
    "drill": ["{rig-faults}", "--cases", "--out", "--keep"],
}


def test_every_command_is_covered_and_the_module_ones_are_registered():
    names = set(_subparsers())
    assert set(cli.MODULE_COMMANDS) == set(MODULE_FLAGS) == names
    assert {"up", "down", "bench", "bench-all", "bench-local", "ingest", "retrieve", "reset", "conformance",
            "report", "compare", "judge-agreement", "serve", "list"} <= names
    # `memrig --help` lists them in the table's order, the inline ones of before first
    assert list(_subparsers())[:4] == ["up", "down", "bench", "bench-all"]


@pytest.mark.parametrize("cmd", sorted(_subparsers()))
def test_help_exits_0_and_lists_every_flag(cmd, capsys):
    code, out, _ = _run_cli([cmd, "--help"], capsys)
    assert code == 0
    assert out.startswith(f"usage: memrig {cmd} ")
    parser = _subparsers()[cmd]
    parser.load()  # a module-backed command's flags come from its module
    flags = [s for a in parser._actions if a.help != argparse.SUPPRESS for s in (a.option_strings or [_shown(a)])]
    assert flags, cmd
    for flag in flags:
        assert flag in out, (cmd, flag)
    for flag in MODULE_FLAGS.get(cmd, []):
        assert flag in out, (cmd, flag)


def test_module_command_parses_into_its_own_flags():
    args = cli.build_parser().parse_args(["power", "some/run", "--delta", "0.05", "--json"])
    assert (args.cmd, args.run_dir, args.delta, args.json) == ("power", "some/run", 0.05, True)
    assert args.argv == ["some/run", "--delta", "0.05", "--json"]
    # bench-perf's check derives its lists as `python -m services.perf.scaling` does
    args = cli.build_parser().parse_args(["bench-perf", "--sizes", "1000,100000", "--million", "--backends", "cortex"])
    assert args.size_list == [1000, 100000, 1000000] and args.backend_list == ["cortex"]
    assert args.ann_size_list == [1000, 100000, 1000000]


def test_run_gets_only_the_commands_flags(monkeypatch, capsys):
    from services.coordinator import power

    seen = {}

    def fake_run(args):
        seen.update(vars(args))
        return 3

    monkeypatch.setattr(power, "run", fake_run)
    code, _, _ = _run_cli(["power", "r", "--delta", "0.1"], capsys)
    assert code == 3  # run's return is the exit code
    assert seen == {"run_dir": "r", "delta": 0.1, "json": False, "argv": ["r", "--delta", "0.1"]}


@pytest.mark.parametrize(("argv", "message"), [
    (["bench-perf", "--sizes", "15"], "memrig bench-perf: error: --sizes: positive multiples of 10"),
    (["bench-perf", "--backends", "nope"], "memrig bench-perf: error: --backends: unknown ['nope']"),
    (["load", "--workers", "-1"], "memrig load: error: --workers must be >= 0"),
    (["fidelity", "openclaw", "--option", "x"], "memrig fidelity: error: --option 'x': expected suite.key=value"),
    (["sensitivity", "openclaw", "--min-scores", "0.2,1.5"], "memrig sensitivity: error: --min-scores: each must be"),
    (["power", "r", "--bogus"], "memrig: error: unrecognized arguments: --bogus"),
    (["load-bench"], "memrig load-bench: error: the following arguments are required: --out"),
])
def test_bad_flags_exit_2_with_the_usage_line(argv, message, capsys):
    code, _, err = _run_cli(argv, capsys)
    assert code == 2
    assert err.startswith("usage: memrig") and message in err


def test_power_exit_codes_through_the_cli(tmp_path, capsys):
    code, _, err = _run_cli(["power", str(tmp_path / "nothing")], capsys)
    assert code == 2 and err.startswith("error: ")
    code, _, err = _run_cli(["power", str(tmp_path), "--delta", "-1"], capsys)
    assert (code, err) == (2, "error: --delta: must be a positive number, got -1.0\n")


def test_a_command_of_a_module_holding_several_gets_only_its_own_flags(monkeypatch, capsys):
    # "services.commands.runs:COMPARE": the Command named after the colon, not the module's (absent) run
    from services.commands import runs

    seen = {}

    def fake_compare(args):
        seen.update(vars(args))
        return 1

    monkeypatch.setattr(runs, "COMPARE", runs.COMPARE._replace(run=fake_compare))
    code, _, _ = _run_cli(["compare", "a", "b", "--json", "--fail-on", "headline"], capsys)
    assert code == 1
    assert seen == {"run_a": "a", "run_b": "b", "fail_on": ["headline"], "backends": "", "json": True, "out": None,
                    "argv": ["a", "b", "--json", "--fail-on", "headline"]}


def test_a_commands_check_is_a_usage_error(monkeypatch, capsys):
    from services.commands import runs
    from services.common.errors import InputError

    def refuse(args):
        raise InputError("run_dir", f"{args.run_dir} refused")

    monkeypatch.setattr(runs, "REPORT", runs.REPORT._replace(check=refuse))
    code, _, err = _run_cli(["report", "x"], capsys)
    assert code == 2
    assert err.startswith("usage: memrig report") and err.endswith("memrig report: error: run_dir: x refused\n")


def test_serve_passes_the_flags_it_does_not_know_on(monkeypatch, capsys):
    from services.commands import rig

    execs = []
    monkeypatch.setattr(rig.os, "execv", lambda exe, argv: execs.append(argv))
    assert _run_cli(["serve", "llm-mock", "--port", "7", "--seed", "3"], capsys)[0] == 0
    # an adapter with a config gets it as --config unless one is given
    assert _run_cli(["serve", "bm25", "--flag"], capsys)[0] == 0
    assert _run_cli(["serve", "adapter:bm25", "--config", "{}"], capsys)[0] == 0
    assert execs == [[sys.executable, "-m", "services.llm_mock", "--port", "7", "--seed", "3"],
                     [sys.executable, "-m", "services.adapters.ir_baselines", "--port", "0", "--config",
                      '{"method": "bm25"}', "--flag"],
                     [sys.executable, "-m", "services.adapters.ir_baselines", "--port", "0", "--config", "{}"]]
    code, out, err = _run_cli(["serve", "nope", "--x"], capsys)
    assert (code, out) == (2, "") and err.startswith("error: unknown service 'nope'; known: llm-mock, ")
    # a command that is not passthrough still refuses what it does not know
    code, _, err = _run_cli(["down", "--x"], capsys)
    assert code == 2 and err.endswith("memrig: error: unrecognized arguments: --x\n")


def test_python_m_entry_points_keep_their_prog_and_checks(capsys):
    from loadtests import run as load_run
    from services.perf import scaling

    with pytest.raises(SystemExit) as e:
        load_run.main(["--workers", "-1"])
    assert e.value.code == 2 and "python -m loadtests.run: error: --workers must be >= 0" in capsys.readouterr().err
    a = scaling.parse_args(["--sizes", "100"])
    assert a.size_list == [100] and a.argv == ["--sizes", "100"]
    assert "argv" not in __import__("services.common.subcommand", fromlist=["flags"]).flags(a)


_NO_LOCUST = """
import json, sys
import services.cli as cli
after_import = sorted(m for m in sys.modules if m.split(".")[0] in ("locust", "gevent"))
ours = sorted(m for m in sys.modules if m.split(".")[0] in ("services", "loadtests", "google", "grpc"))
for argv in (["load", "--help"], ["load-bench", "--help"], ["list"]):
    try:
        cli.main(argv)
    except SystemExit:
        pass
after_parse = sorted(m for m in sys.modules if m.split(".")[0] in ("locust", "gevent"))
lazy = ("services.perf.scaling", "services.studies.fidelity", "services.commands.rig", "services.commands.bench",
        "services.commands.namespace", "services.commands.runs")
print(json.dumps({"import": after_import, "parse": after_parse, "ours": ours,
                  "lazy": [m for m in lazy if m in sys.modules]}))
"""


@pytest.mark.slow
def test_importing_the_cli_loads_neither_locust_nor_gevent():
    r = subprocess.run([sys.executable, "-c", _NO_LOCUST], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    # parsing `load` / `load-bench` imports their modules (loadtests/run.py, capacity.py), which start locust
    # as processes of their own; the commands not parsed are not imported at all. Importing the CLI itself loads
    # none of the commands, the launcher or protobuf: `memrig --help` stays cheap
    assert got == {"import": [], "parse": [], "ours": ["services", "services.cli"], "lazy": []}
