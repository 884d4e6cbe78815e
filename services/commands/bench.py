"""`memrig bench` (one suite over backends), `memrig bench-all` (every default suite and the cost scenarios, one
report: services/coordinator/bench_all.py) and `memrig bench-local` (the quality suites with the local model:
services/coordinator/bench_local.py). Each runs guarded: every process it starts is stopped even if it is killed."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os

from services.adapters.registry import default_backends, get_spec, split_names
from services.commands.common import llm_choices, llm_flags, state_dir
from services.common import interrupt
from services.common.subcommand import Command
from services.coordinator.plan import parse_csv, parse_options, parse_targets


def positive_seconds(text: str) -> float:
    """A flag's number of seconds, > 0 and finite (argparse names the flag in its error)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < v < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {text!r}")
    return v


def bench_flags(p: argparse.ArgumentParser) -> None:
    """The flags bench and bench-all share."""
    p.add_argument("--out", default=None, help="run directory (default results/<run-id>); reused = resume")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--option", action="append", default=[], help="suite option key=value (repeatable)")
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--lanes", type=int, default=2,
                   help="backends ingesting at the same time (each is its own process; 1 = one after another, "
                        "so each backend's cost table is its own)")
    p.add_argument("--judge-passes", type=int, default=1)
    p.add_argument("--embedder", default=None, help="minilm (default), wordllama, remote (MEMRIG_EMBED_BASE_URL), hash (tests only)")
    p.add_argument("--target", action="append", default=[],
                   help="backend=HOST:PORT of a running backend (repeatable; without --backends, the targets "
                        "are the backends)")
    p.add_argument("--in-process", action="store_true", help="run backends inside this process")
    p.add_argument("--deadline-s", type=positive_seconds, default=60.0,
                   help="deadline of each Describe, Reset, Retrieve and Stats call to a backend (a backend "
                        "that does not answer in time fails that call, named with the backend and the call)")
    p.add_argument("--ingest-deadline-s", type=positive_seconds, default=600.0,
                   help="deadline of each Ingest and Prepare call (Settle waits the settle timeout + 30 s)")
    p.add_argument("--fresh", action="store_true",
                   help="measure everything: discard existing samples in --out instead of resuming, and reuse "
                        "no stored result (without it, a suite × backend result whose key is unchanged is "
                        "copied from $MEMRIG_STATE_DIR/results-cache, default .memrig/results-cache, and that "
                        "backend is not started; results measured are stored either way)")
    llm_flags(p)


@contextlib.contextmanager
def guarded():
    """Every process this command starts is stopped even if it is killed by SIGKILL (services/coordinator/guard.py)."""
    from services.coordinator import guard

    g = guard.protect(log=state_dir() / "guard.log")
    try:
        yield g
    finally:
        g.close()


def _bench_config(args, suite: str, backends: list[str], out: str | None):
    from services.coordinator.runner import RunConfig

    return RunConfig(suite=suite, backends=backends, out_dir=out, seed=args.seed, options=parse_options(args.option),
                     resume=not args.fresh, concurrency=args.concurrency, lanes=args.lanes,
                     judge_passes=args.judge_passes, embedder=args.embedder, targets=parse_targets(args.target), in_process=args.in_process,
                     llm_roles=llm_choices(args), reuse=_reuse_mode(args), deadline_s=args.deadline_s,
                     ingest_deadline_s=args.ingest_deadline_s)


def _reuse_mode(args) -> str:
    """bench and bench-all reuse every stored result whose key is unchanged (services/coordinator/reuse.py);
    --fresh measures everything (and stores it)."""
    return "store" if args.fresh else "on"


def add_bench_arguments(p: argparse.ArgumentParser) -> None:
    """`memrig bench`'s flags."""
    p.add_argument("--suite", required=True)
    p.add_argument("--backends", default="")
    bench_flags(p)


def cmd_bench(args) -> int:
    from services.coordinator.results import RESULTS_ROOT, RunDir, new_run_id
    from services.coordinator.runner import TerminalProgress, mark_interrupted, run_suite

    targets = parse_targets(args.target)
    backends = split_names(args.backends) or list(targets) or default_backends()
    for b in backends:
        if b not in targets:  # a --target may be any memory system under a name of your own (README)
            get_spec(b)
    cfg = _bench_config(args, args.suite, backends, args.out)
    run_dir = RunDir(cfg.out_dir or (RESULTS_ROOT / new_run_id(cfg.suite)))
    cfg.out_dir = str(run_dir.path)
    with guarded():
        outcome = interrupt.run(run_suite(cfg, TerminalProgress()), lambda: mark_interrupted(run_dir))
    print(f"\n{outcome.state}: {outcome.run_dir}/report.md")
    for b, label in outcome.reused.items():
        print(f"  backend {b}: {label} (--fresh measures it again)")
    for b, reason in outcome.failures.items():
        print(f"  backend {b}: {reason}")
    return 0 if outcome.state == "succeeded" else 1


def bench_all_plan(args):
    """The bench-all run plan from `memrig bench-all`'s flags (services/coordinator/bench_all.py)."""
    from services.coordinator import bench_all

    return bench_all.plan(out=args.out, suites=parse_csv(args.suites), backends=split_names(args.backends),
                          options=parse_options(args.option), targets=parse_targets(args.target),
                          llm_roles=llm_choices(args), costs=not args.no_costs, target_wait_s=args.target_wait_s,
                          seed=args.seed, resume=not args.fresh, concurrency=args.concurrency, lanes=args.lanes,
                          judge_passes=args.judge_passes, embedder=args.embedder, in_process=args.in_process,
                          reuse=_reuse_mode(args), deadline_s=args.deadline_s,
                          ingest_deadline_s=args.ingest_deadline_s)


def add_bench_all_arguments(p: argparse.ArgumentParser) -> None:
    """`memrig bench-all`'s flags."""
    p.add_argument("--backends", default="")
    p.add_argument("--suites", default="", help="comma-separated suites (default: all default suites)")
    p.add_argument("--no-costs", action="store_true", help="skip the latency/resources/drills section")
    p.add_argument("--target-wait-s", type=float, default=0.0,
                   help="wait up to this long for each --target to report SERVING before the suites start")
    bench_flags(p)


def cmd_bench_all(args) -> int:
    from services.coordinator.bench_all import run_bench_all

    with guarded():
        return asyncio.run(run_bench_all(bench_all_plan(args)))


def bench_local_plan(args):
    """The bench-local run plan from `memrig bench-local`'s flags (services/coordinator/bench_local.py)."""
    from services.coordinator import bench_local

    if args.no_llm_cache:
        os.environ["MEMRIG_LLM_CACHE"] = "refresh"
    return bench_local.plan(out=args.out, suites=parse_csv(args.suites), compare_with=args.compare_with, seed=args.seed,
                            resume=not args.fresh, concurrency=args.concurrency)


def add_bench_local_arguments(p: argparse.ArgumentParser) -> None:
    """`memrig bench-local`'s flags."""
    p.description = ("The quality suites with a real language model, offline "
                     "(services/coordinator/bench_local.py).")
    p.add_argument("--out", default=None, help="results directory (default results/bench-local-<time>)")
    p.add_argument("--suites", default="", help="comma-separated subset of cortex-v1, locomo, longmemeval")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--concurrency", type=int, default=2,
                   help="probes in flight (the model decodes one request at a time; 2 keeps it busy)")
    p.add_argument("--fresh", action="store_true", help="discard samples already in --out instead of resuming")
    p.add_argument("--compare-with", default=None,
                   help="a previous bench-local directory: every table must be identical (timings apart)")
    p.add_argument("--no-llm-cache", action="store_true", help="call the model for every request (refresh the cache)")


def cmd_bench_local(args) -> int:
    from services.coordinator.bench_local import run_bench_local

    with guarded():
        return asyncio.run(run_bench_local(bench_local_plan(args)))


BENCH = Command(add_bench_arguments, cmd_bench)
BENCH_ALL = Command(add_bench_all_arguments, cmd_bench_all)
BENCH_LOCAL = Command(add_bench_local_arguments, cmd_bench_local)
