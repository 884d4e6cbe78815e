"""`memrig list`: the suites, the backends (those `make bench-all` runs marked) and the services the rig can start."""

from __future__ import annotations

import argparse

from services.adapters.registry import all_specs, load_errors
from services.launcher import SERVICES


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """`memrig list` has no flags of its own (services/common/subcommand.py)."""


def run(args: argparse.Namespace) -> int:
    from services.coordinator.suites.registry import all_suites

    print("suites:")
    for n, s in sorted(all_suites().items()):
        print(f"  {n:<18} {s.description[:100]}")
    print("backends (* = in make bench-all):")
    for n, s in all_specs().items():
        print(f"  {n:<18}{'*' if s.default else ' '} {s.description[:100]}")
    for folder, why in load_errors().items():
        print(f"  (services/adapters/{folder} did not load: {why})")
    print("services:")
    for n, s in SERVICES.items():
        print(f"  {n:<18} {s.description}")
    return 0
