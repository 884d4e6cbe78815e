"""The `memrig` command line.

    memrig up [--backends a,b]           start llm-mock and backends in the background (state in .memrig/run)
    memrig down                          stop exactly what `up` started, by PID
    memrig bench --suite S --backends a,b [--out DIR]
    memrig bench-all [--out DIR]         every default suite over the default backends, plus costs, one report
    memrig bench-local [--out DIR]       the local-model profile (make setup-local-llm first)
    memrig ingest --backend B --namespace N FILE.jsonl
    memrig retrieve --backend B --namespace N --query Q [--top-k K] [--json]
    memrig reset --backend B (--namespace N | --all)   clear a namespace in the backend and the CLI's journal
    memrig conformance --target HOST:PORT
    memrig report RUN_DIR                re-score and re-render from samples.jsonl (no re-running; a suite
                                         run or a whole bench-all run with its verdict)
    memrig compare RUN_A RUN_B [--fail-on M] [--json]  what moved between two runs; exit 1 on a gated regression,
                                                      2 on bad input, 3 when incomplete
    memrig judge-agreement --labels FILE [--judge local]  every QA judge against human-labelled answers
    memrig serve SERVICE [--port P] ...  run one service in the foreground
    memrig list                          suites, backends, services
    memrig bench-perf | observe | load | load-bench | fidelity | sensitivity | power ...   CMD --help
Every command is a module's add_arguments/check/run (services/common/subcommand.py), named in MODULE_COMMANDS
below and imported only when its command is parsed; the ones above `bench-perf` live in services/commands/.
Exit codes: 0 success, 1 a check/run failed, 2 bad usage or bad input (compare: 3 incomplete), 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import sys


class CommandParser(argparse.ArgumentParser):
    """A subcommand's parser. With `module=`, the subcommand lives in that module (services/common/subcommand.py:
    add_arguments, check, run; "module:NAME" for the Command NAME of a module holding several), imported only
    when this parser parses: `import services.cli` and every other command leave it, and what it imports (aiohttp,
    numpy, a study's adapters, the launcher), unloaded. Locust never runs in
    this process either way: `memrig load` and `memrig load-bench` start it as processes of their own."""

    def __init__(self, *args, module: str | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.module = module
        self._loaded = None

    def load(self):
        """The module (or its Command), its flags added and its `run` set as the command (once)."""
        if self.module is not None and self._loaded is None:
            import importlib

            path, _, name = self.module.partition(":")
            try:
                mod = importlib.import_module(path)
            except ModuleNotFoundError as e:
                self.exit(2, f"error: {path} is not available in this checkout ({e})\n")
            command = getattr(mod, name) if name else mod
            command.add_arguments(self)
            self.set_defaults(fn=_module_run(command.run))
            self._loaded = command
        return self._loaded

    def parse_known_args(self, args=None, namespace=None):
        from services.common.subcommand import apply_check

        mod = self.load()
        ns, extra = super().parse_known_args(args, namespace)
        if mod is not None:
            ns.argv = list(sys.argv[1:] if args is None else args)
            apply_check(self, ns, getattr(mod, "check", None))
        return ns, extra


def _module_run(run):
    """The module's run(args) on its own flags (the CLI's `cmd` and `fn` left out); its return is the exit code.
    A passthrough command (`memrig serve`) is called with the flags it did not know too: run(args, extra)."""
    def call(args, *extra) -> int:
        own = argparse.Namespace(**{k: v for k, v in vars(args).items() if k not in ("cmd", "fn")})
        return int(run(own, *extra) or 0)

    return call


# `memrig CMD` → (module holding its add_arguments/check/run, or "module:NAME" for its Command NAME; the one-line
# help `memrig --help` shows), in the order `memrig --help` lists them
MODULE_COMMANDS = {
    "up": ("services.commands.rig:UP", "start llm-mock (or the local model) and backends in the background"),
    "down": ("services.commands.rig:DOWN", "stop what `memrig up` started"),
    "bench": ("services.commands.bench:BENCH", "run one suite over backends"),
    "bench-all": ("services.commands.bench:BENCH_ALL", "every default suite + costs, one report"),
    "bench-local": ("services.commands.bench:BENCH_LOCAL", "the quality suites with the local model in every LLM role"),
    "ingest": ("services.commands.namespace:INGEST", "ingest against one backend"),
    "retrieve": ("services.commands.namespace:RETRIEVE", "retrieve against one backend"),
    "conformance": ("services.commands.conformance", "check a MemoryBackendService at HOST:PORT"),
    "report": ("services.commands.runs:REPORT",
               "re-score and re-render a run directory (a suite run or a bench-all run)"),
    "compare": ("services.commands.runs:COMPARE",
                "which metrics moved between two runs beyond their intervals, what changed; exit 1 gated "
                "regression, 2 bad input, 3 incomplete (a suite or backend failing or missing in one run, errored "
                "probes, lost samples)"),
    "reset": ("services.commands.namespace:RESET", "clear a namespace in the backend and the CLI's journal"),
    "judge-agreement": ("services.commands.judge_agreement",
                        "every QA judge against human-labelled answers (kappa, CI, misses)"),
    "serve": ("services.commands.rig:SERVE", "run one service in the foreground (extra flags are passed on)"),
    "list": ("services.commands.catalog", "suites, backends and services"),
    "bench-perf": ("services.perf.scaling", "scale and overhead benchmark (ratios in one run)"),
    "observe": ("services.observe", "start Prometheus (and Grafana) against a running rig"),
    "load": ("loadtests.run", "locust master + workers against a local rig"),
    "load-bench": ("loadtests.capacity", "highest sustained retrieve rate and proxy overhead"),
    "fidelity": ("services.studies.fidelity", "port vs real OpenClaw, query by query"),
    "sensitivity": ("services.studies.sensitivity", "native baseline by embedder × minScore"),
    "power": ("services.coordinator.power", "what a run could detect, and the units a difference needs"),
    "drill": ("services.drills.rig_faults", "drills against the rig itself: `memrig drill rig-faults` kills, hangs, "
                                            "feeds garbage to and fills the disk of a small run's processes"),
    "credit-agreement": ("services.coordinator.credit_agreement",
                         "which rule of what the agent was shown agrees with blind labels (weighted kappa)"),
}


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="memrig", description="A measurement rig for AI coding agents' memory.")
    sub = ap.add_subparsers(dest="cmd", required=True, parser_class=CommandParser)
    for name, (module, helptext) in MODULE_COMMANDS.items():
        sub.add_parser(name, help=helptext, module=module)
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = build_parser()
    args, extra = ap.parse_known_args(argv)
    try:
        if getattr(args, "passthrough", False):
            code = args.fn(args, extra)
        else:
            if extra:
                ap.error(f"unrecognized arguments: {' '.join(extra)}")
            code = args.fn(args)
    except Exception as e:  # turned into one line; only unknown errors keep a traceback
        msg = _error_line(e, args)
        if msg is None:
            raise
        print(f"error: {msg}", file=sys.stderr)
        code = 2
    sys.exit(code)


def _error_line(e: Exception, args) -> str | None:
    """The one line of bad input (a ValidationError, an unknown name's KeyError, a missing file) or of an error a
    user causes (below); None for anything else. services.common.types is imported here, not at the top, so that
    `memrig --help` does not load protobuf."""
    from services.common.types import ValidationError

    if isinstance(e, ValidationError):
        return str(e)
    if isinstance(e, KeyError):
        return f"{e.args[0] if e.args else e}"
    if isinstance(e, FileNotFoundError):
        return str(e)
    return _friendly_error(e, args)


def _friendly_error(e: Exception, args) -> str | None:
    """One line for the errors a user causes (unreachable --target, a backend refusing the input), None for
    anything else (a bug keeps its traceback)."""
    import grpc

    from services.common.errors import BackendError, BackendUnavailable
    from services.coordinator.suites.base import SuiteUnavailable
    from services.launcher import LaunchError

    if isinstance(e, LaunchError) and str(e).startswith("local-llm cannot start"):
        return str(e)  # the local model is not set up: the message says what to run
    if isinstance(e, SuiteUnavailable):
        return str(e)  # its data is not here: the message says where to put it or what fetches it
    if isinstance(e, BackendError):
        where = getattr(args, "target", None) or e.backend
        if isinstance(e, BackendUnavailable):
            return f"cannot reach {where}: {e}"
        return f"{where} failed: {e}"
    if isinstance(e, grpc.aio.AioRpcError | grpc.RpcError):
        code = e.code() if callable(getattr(e, "code", None)) else None
        where = getattr(args, "target", None) or "the backend"
        details = e.details() if callable(getattr(e, "details", None)) else str(e)
        if code == grpc.StatusCode.UNAVAILABLE:
            return f"cannot reach {where}: {details}"
        if code == grpc.StatusCode.INVALID_ARGUMENT:
            return f"{where} refused the input: {details}"
        return f"{where} answered {code.name if code else 'an error'}: {details}"
    if isinstance(e, ConnectionError | TimeoutError):
        return f"cannot reach {getattr(args, 'target', None) or 'the service'}: {e}"
    from services.coordinator.results import ResultsWriteError

    if isinstance(e, ResultsWriteError):
        return str(e)  # names the file; what was written before is intact
    if isinstance(e, IsADirectoryError | PermissionError | UnicodeDecodeError):
        return str(e)
    return None


if __name__ == "__main__":
    main()
