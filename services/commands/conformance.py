"""`memrig conformance`: check a MemoryBackendService at HOST:PORT (services/conformance.py)."""

from __future__ import annotations

import argparse


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """`memrig conformance`'s flags (services/common/subcommand.py)."""
    ap.add_argument("--target", required=True)


def run(args: argparse.Namespace) -> int:
    from services.conformance import main as conformance_main

    return conformance_main(args.target)
