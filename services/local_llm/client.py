"""What the rest of the rig needs to know about a running local-llm: its URL, its identity, and the limits each
LLM role gets when it points at it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import aiohttp

# Output caps per role (tokens): every call that sets none gets its role's cap, so one runaway generation cannot
# hold the single decoding slot for minutes. Answers are short by instruction; a judgement is one JSON line; flush
# notes and a compaction summary are a few paragraphs at most.
ROLE_MAX_TOKENS = {"answerer": 200, "judge": 96, "flush": 400, "compaction": 600}
# Requests wait their turn for the one decoding slot: a call's timeout covers the queue in front of it.
ROLE_TIMEOUT_S = 1800


@dataclass(frozen=True)
class LocalLLM:
    url: str  # ".../v1"
    ident: dict[str, Any]
    pid: int


def root_of(base_url: str) -> str:
    base = base_url.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


async def fetch_identity(base_url: str, timeout_s: float = 10.0) -> dict[str, Any]:
    """GET /memrig/identity of a running local-llm."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as s, \
            s.get(root_of(base_url) + "/memrig/identity") as r:
        r.raise_for_status()
        return await r.json()


def local_role_settings(role: str, ident: dict[str, Any]) -> dict[str, str]:
    """The role settings (llm_roles.set_role `extra`) for a role played by the local model."""
    return {"MODEL_DIGEST": ident["sha256"], "MODEL_QUANT": ident["quantization"],
            "MAX_TOKENS": str(ROLE_MAX_TOKENS[role]), "TIMEOUT_S": str(ROLE_TIMEOUT_S)}


def identity_details(ident: dict[str, Any]) -> dict[str, Any]:
    """The identity fields a report prints beyond model / digest / quantisation."""
    return {k: ident[k] for k in ("name", "file", "source", "licence", "runtime", "n_ctx", "threads") if k in ident}
