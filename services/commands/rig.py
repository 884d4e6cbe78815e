"""`memrig up`, `memrig down` and `memrig serve`: the rig's services and backends, started in the background (state
in $MEMRIG_STATE_DIR/run, stopped by PID) or one run in the foreground."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys

from services.adapters.registry import all_specs, default_backends, get_spec, split_names
from services.commands.common import llm_choices, llm_flags, state_dir
from services.common.subcommand import Command
from services.coordinator.plan import parse_csv
from services.launcher import SERVICES, Rig


def add_up_arguments(p: argparse.ArgumentParser) -> None:
    """`memrig up`'s flags."""
    p.add_argument("--backends", help="comma-separated backend names (default: the bench-all defaults)")
    p.add_argument("--services", default="", help="extra services to start (e.g. cortex-mock,fault-proxy)")
    p.add_argument("--embedder", default=None)
    llm_flags(p)


def cmd_up(args) -> int:
    backends = split_names(args.backends) or default_backends()
    choices = llm_choices(args)

    async def go():
        rig = Rig(state_dir() / "run")
        rig.load_state()
        try:
            roles = await rig.ensure_llm_roles(choices)
            for name in parse_csv(args.services):
                await rig.start_service(name)
            for b in backends:
                await rig.start_backend(b, embedder=args.embedder)
        finally:
            rig.save_state()
        for key, p in rig.procs.items():
            print(f"{key:<28} pid={p.pid:<8} {p.url or p.ports}")
        if choices:
            from services.common.llm_roles import ROLES, short_name

            print("\nLLM roles (export these to point other commands at the same endpoints):")
            for role, cfg in roles.items():
                print(f"  {role:<11} {short_name(cfg.identity())} at {cfg.base_url}")
                print(f"    {ROLES[role]}_BASE_URL={cfg.base_url} {ROLES[role]}_MODEL={cfg.model}"
                      + (f" {ROLES[role]}_MODEL_DIGEST={cfg.model_digest}" if cfg.model_digest else ""))
        print(f"\nstate: {rig.state_file}; stop with `memrig down`")

    asyncio.run(go())
    return 0


def add_down_arguments(p: argparse.ArgumentParser) -> None:
    """`memrig down` has no flags of its own."""


def cmd_down(args) -> int:
    rig = Rig(state_dir() / "run")
    rig.load_state()
    if not rig.procs:
        print("nothing to stop")
        return 0
    for key in rig.stop_order():
        pid = rig.procs[key].pid
        rig.stop(key)
        print(f"stopped {key} (pid {pid})")
    rig.clear_state()
    return 0


def running_backend(name: str) -> str | None:
    rig = Rig(state_dir() / "run")
    rig.load_state()
    return rig.address_of(f"backend/{name}")


def add_serve_arguments(p: argparse.ArgumentParser) -> None:
    """`memrig serve`'s flags; the ones it does not know are passed on to the service."""
    p.add_argument("service")
    p.add_argument("--port", type=int, default=0)
    p.set_defaults(passthrough=True)


def cmd_serve(args, extra: list[str]) -> int:
    if args.service in SERVICES:
        module = SERVICES[args.service].module
    elif args.service.startswith("adapter:") or args.service in all_specs():
        spec = get_spec(args.service.removeprefix("adapter:"))
        module = spec.module
        if spec.config and "--config" not in extra:
            extra = ["--config", json.dumps(spec.config), *extra]
    else:
        print(f"error: unknown service {args.service!r}; known: {', '.join([*SERVICES, *all_specs()])}",
              file=sys.stderr)
        return 2
    argv = [sys.executable, "-m", module, "--port", str(args.port), *extra]
    os.execv(sys.executable, argv)
    return 0  # pragma: no cover


UP = Command(add_up_arguments, cmd_up)
DOWN = Command(add_down_arguments, cmd_down)
SERVE = Command(add_serve_arguments, cmd_serve)
