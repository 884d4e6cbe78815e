"""What several `memrig` subcommands share: where the CLI keeps its state, and the flags that choose the model of
each LLM role (services/common/llm_roles.py)."""

from __future__ import annotations

import argparse
import os

from services.cli_state import state_dir  # read when a command runs: $MEMRIG_STATE_DIR as it is then
from services.common.types import ValidationError

__all__ = ["llm_choices", "llm_flags", "state_dir"]


def llm_flags(p: argparse.ArgumentParser) -> None:
    """Which model plays each LLM role (services/common/llm_roles.py) and the response cache."""
    choices = ("mock", "local", "env")
    p.add_argument("--llm", choices=choices, default=None,
                   help="every LLM role: mock (offline llm-mock), local (the local model, make setup-local-llm) or "
                        "env (MEMRIG_LLM_* / MEMRIG_<ROLE>_*; the default)")
    for role, what in (("answerer", "the answers"), ("judge", "the judgements"),
                       ("flush", "the backends' memory writers (OpenClaw flush notes, extraction)"),
                       ("compaction", "the compaction summary")):
        p.add_argument(f"--{role}", dest=f"llm_{role}", choices=choices, default=None,
                       help=f"the model for {what} (overrides --llm)")
    p.add_argument("--no-llm-cache", action="store_true",
                   help="call the model for every request and overwrite its response-cache entry")


def llm_choices(args) -> dict[str, str]:
    """{role: mock|local|env} from --llm and the per-role flags; with none given, {} (the environment decides).
    `--no-llm-cache` makes every LLM call of this command and its children refresh its cache entry."""
    from services.common.llm_roles import ROLES, resolve_choices

    if getattr(args, "no_llm_cache", False):
        os.environ["MEMRIG_LLM_CACHE"] = "refresh"
    per_role = {r: getattr(args, f"llm_{r}", None) for r in ROLES}
    if not args.llm and not any(per_role.values()):
        return {}
    try:
        return resolve_choices(args.llm, **per_role)
    except ValueError as e:
        flag, _, msg = str(e).partition(": ")
        raise ValidationError(flag, msg) from None
