"""`memrig report` (re-score and re-render a run directory from its samples) and `memrig compare` (which figures
moved between two runs beyond their intervals: services/coordinator/compare.py)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from services.adapters.registry import split_names
from services.common.subcommand import Command
from services.common.types import ValidationError


def add_report_arguments(p: argparse.ArgumentParser) -> None:
    """`memrig report`'s flags."""
    p.add_argument("run_dir")
    p.add_argument("--no-rescore", action="store_true",
                   help="bench-all run: re-render the verdict and report from the suites' saved metrics only")
    p.add_argument("--merge", action="append", default=[], metavar="DIR",
                   help="write run_dir (new) from these suite runs of other backends, measured apart (other "
                        "sittings or commits), and report them together; repeat for each (services/coordinator/"
                        "merge.py says what must agree)")


def cmd_report(args) -> int:
    from services.coordinator.results import RunDir
    from services.coordinator.run_report import is_bench_all_dir, rerender
    from services.coordinator.runner import finalize

    if args.merge:
        from services.coordinator.merge import merge_runs

        out = merge_runs(args.merge, args.run_dir)
        print(f"merged {len(args.merge)} runs: {out / 'report.md'}")
        return 0
    if not Path(args.run_dir).is_dir():
        raise ValidationError(args.run_dir, "not a directory")
    if is_bench_all_dir(args.run_dir):  # a bench-all run: each suite re-scored, then the verdict and report
        print(f"re-rendered: {rerender(args.run_dir, rescore=not args.no_rescore)}")
        return 0
    rd = RunDir(args.run_dir)
    if not rd.run_json.exists():
        print(f"error: {args.run_dir} has neither run.json (a suite run) nor report.json (a bench-all run)",
              file=sys.stderr)
        return 2
    metrics, state = finalize(rd)
    print(f"{state}: {rd.path / 'report.md'}")
    return 0


def add_compare_arguments(p: argparse.ArgumentParser) -> None:
    """`memrig compare`'s flags."""
    p.add_argument("run_a", help="the reference run (a suite run dir or a bench-all run dir)")
    p.add_argument("run_b", help="the run to check against it")
    p.add_argument("--fail-on", action="append", default=[], metavar="SPEC",
                   help="exit 1 when one regressed: headline, any, METRIC or SUITE:METRIC (comma-separated or repeated)")
    p.add_argument("--backends", default="", help="only these backends (comma-separated)")
    p.add_argument("--json", action="store_true", help="JSON instead of Markdown")
    p.add_argument("--out", default=None, help="write the report to this file instead of stdout")


def cmd_compare(args) -> int:
    from services.coordinator.compare import CompareError, compare_runs, render_markdown

    try:
        res = compare_runs(args.run_a, args.run_b, fail_on=args.fail_on,
                           backends=split_names(args.backends) or None)
    except CompareError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    text = json.dumps(res, indent=2, default=str) if args.json else render_markdown(res)
    if args.out:
        Path(args.out).write_text(text)
        print(f"{'regression' if res['exit_status'] else 'no gated regression'}: {args.out}")
    else:
        print(text, end="")
    return res["exit_status"]


REPORT = Command(add_report_arguments, cmd_report)
COMPARE = Command(add_compare_arguments, cmd_compare)
