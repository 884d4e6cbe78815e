"""Which language model plays which part in a run.

Four roles, each an OpenAI-compatible endpoint read from the environment under its own prefix:

| role | prefix | who calls it |
|---|---|---|
| answerer | `MEMRIG_LLM_*` | the coordinator: the answer to every probe |
| judge | `MEMRIG_JUDGE_*` | the coordinator: 0-3 rubric, binary and pairwise judgements |
| flush | `MEMRIG_FLUSH_*` | the backends' memory writers: OpenClaw's pre-compaction flush notes (and its in-session compaction), memory-hook / mem0 / cortex-mock extraction |
| compaction | `MEMRIG_COMPACTION_*` | the one-shot compaction summary: the coordinator's `compacted` context and the `compacted` backend |

A role whose prefix names no model and no URL is played by the answerer's endpoint (`MEMRIG_LLM_*`), and a role
that names a model but no URL reaches it at the answerer's URL, as `MEMRIG_JUDGE_*` always did. From the command
line, `--llm mock|local|env` chooses for every role and `--answerer/--judge/--flush/--compaction` for one:
`mock` is the offline llm-mock, `local` the rig's local model (services/local_llm), `env` whatever the
environment says.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from typing import Any

from services.common.llm_client import DEFAULT_MOCK_MODEL, LLMConfig

ROLES: dict[str, str] = {
    "answerer": "MEMRIG_LLM",
    "judge": "MEMRIG_JUDGE",
    "flush": "MEMRIG_FLUSH",
    "compaction": "MEMRIG_COMPACTION",
}
CHOICES = ("mock", "local", "env")
_FIELDS = ("BASE_URL", "MODEL", "API_KEY", "MODEL_DIGEST", "MODEL_QUANT", "MAX_TOKENS", "TIMEOUT_S")


def role_config(role: str, env: Mapping[str, str] | None = None) -> LLMConfig:
    if role not in ROLES:
        raise ValueError(f"role: {role!r} is not an LLM role; expected one of {', '.join(ROLES)}")
    env = os.environ if env is None else env
    answerer = LLMConfig.from_env(ROLES["answerer"], env=env)
    prefix = ROLES[role]
    if role == "answerer" or not (env.get(f"{prefix}_MODEL") or env.get(f"{prefix}_BASE_URL")):
        return answerer
    cfg = LLMConfig.from_env(prefix, env=env)
    if not env.get(f"{prefix}_BASE_URL"):
        cfg.base_url = answerer.base_url
    return cfg


def role_configs(env: Mapping[str, str] | None = None) -> dict[str, LLMConfig]:
    return {r: role_config(r, env) for r in ROLES}


def resolve_choices(llm: str | None = None, **per_role: str | None) -> dict[str, str]:
    """{role: mock|local|env} from `--llm` (every role) and the per-role flags (which win). Unknown roles or
    choices are errors naming the flag."""
    out: dict[str, str] = {}
    default = llm or "env"
    if default not in CHOICES:
        raise ValueError(f"--llm: {default!r} is not one of {', '.join(CHOICES)}")
    for role, choice in per_role.items():
        if role not in ROLES:
            raise ValueError(f"--{role}: not an LLM role; roles are {', '.join(ROLES)}")
        if choice is not None and choice not in CHOICES:
            raise ValueError(f"--{role}: {choice!r} is not one of {', '.join(CHOICES)}")
    for role in ROLES:
        out[role] = per_role.get(role) or default
    return out


def set_role(env: MutableMapping[str, str], role: str, base_url: str, model: str,
             extra: Mapping[str, str] | None = None) -> None:
    """Point `role` at an endpoint in `env` (a process environment or the rig's child environment): every field
    of the role's prefix is replaced, so nothing of a previous endpoint (a digest, a key) survives."""
    prefix = ROLES[role]
    for f in _FIELDS:
        env.pop(f"{prefix}_{f}", None)
    env[f"{prefix}_BASE_URL"] = base_url
    env[f"{prefix}_MODEL"] = model
    for k, v in (extra or {}).items():
        if k not in _FIELDS:
            raise ValueError(f"{prefix}_{k}: not a role setting; expected one of {', '.join(_FIELDS)}")
        env[f"{prefix}_{k}"] = v


def set_mock(env: MutableMapping[str, str], role: str, mock_url: str) -> None:
    set_role(env, role, mock_url, DEFAULT_MOCK_MODEL)


def identities(configs: Mapping[str, LLMConfig]) -> dict[str, dict[str, Any]]:
    return {r: c.identity() for r, c in configs.items()}


def short_name(ident: Mapping[str, Any]) -> str:
    """`model (Q4_K_M, sha256 cc324af070c2)` or `llm-mock (offline, not a model)`: for report lines."""
    if ident.get("offline_mock"):
        return "llm-mock (offline, not a model)"
    bits = [b for b in (ident.get("quantization"), f"sha256 {ident['sha256'][:12]}" if ident.get("sha256") else "")
            if b]
    return f"{ident.get('model')}" + (f" ({', '.join(bits)})" if bits else "")
