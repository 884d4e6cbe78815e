"""The one shape of the module behind each `memrig` subcommand (services/cli.py holds only the parser and the table).

    add_arguments(parser)   the flags, and the description `--help` shows
    check(args)             optional: rules across flags and values derived from them; raises an InputError naming
                            the flag, which the parser reports as a usage error (its usage line, exit 2)
    run(args) -> int        the command itself; the int is the exit code. `args.argv` is the command's own arguments
                            as typed (after `memrig CMD`, or after `python -m module`), for a record of the command
                            line; `flags(args)` is the parsed flags without it

services/cli.py registers such a module as a subparser and imports it only when its command is parsed (so
`import services.cli` and `memrig list` never import a load generator's dependencies); `python -m module` goes
through `main` below, so both command lines accept the same flags, print the same help and exit alike.

A module holding several commands (services/commands/: up and down, ingest, retrieve and reset, ...) gives each
its own `Command` (these three functions), registered as "module:NAME". A command that passes the flags it does
not know on (`memrig serve`) sets the default `passthrough=True` in add_arguments; its run is then run(args, extra).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, NamedTuple

from services.common.errors import InputError


class Command(NamedTuple):
    """One subcommand of a module that holds several: its flags, its run, and optionally its check (above)."""

    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[..., int]
    check: Callable[[argparse.Namespace], object] | None = None


def apply_check(parser: argparse.ArgumentParser, args: argparse.Namespace,
                check: Callable[[argparse.Namespace], object] | None) -> argparse.Namespace:
    """`check(args)`, with an InputError turned into `parser.error` (usage line, "PROG: error: FIELD: MESSAGE",
    exit 2) as argparse reports its own bad flags."""
    if check is not None:
        try:
            check(args)
        except InputError as e:
            parser.error(str(e))
    return args


def parse(module: ModuleType, argv: Sequence[str] | None, prog: str) -> argparse.Namespace:
    """The module's own parser (for `python -m module` and tests): `argv` (default sys.argv[1:]) parsed and checked."""
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog=prog)
    module.add_arguments(ap)
    args = ap.parse_args(argv)
    args.argv = argv
    return apply_check(ap, args, getattr(module, "check", None))


def flags(args: argparse.Namespace) -> dict[str, Any]:
    """The parsed flags (and values `check` derived) as a dict, without `argv`: what a run records as its config."""
    return {k: v for k, v in vars(args).items() if k != "argv"}


def main(module: ModuleType, argv: Sequence[str] | None, prog: str) -> int:
    """`python -m module ARGS`: parse, check, run; the exit code."""
    return int(module.run(parse(module, argv, prog)) or 0)
