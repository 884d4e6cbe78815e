"""The system prompt + tool definitions OpenClaw 2026.9.6 sends on every turn of a default install, re-measured from the
installed package (services/adapters/openclaw_real/system_prompt.py, sidecar/system-prompt.mjs) against the figure the
flush threshold uses by default (lifecycle.SYSTEM_PROMPT_TOKENS). Slow: builds OpenClaw's prompt in Node (~25 s)."""

from __future__ import annotations

import pytest

from services.adapters.openclaw import lifecycle as L
from services.adapters.openclaw_real.node import availability
from services.adapters.openclaw_real.system_prompt import state_tokens


def test_state_tokens_counts_prompt_and_each_tool():
    st = {"systemPrompt": "hello world", "tools": [{"name": "a", "json": '{"name":"a"}'}, {"name": "b", "json": "b"}],
          "report": {"systemPrompt": {"projectContextChars": 0}, "tools": {"schemaChars": 9}}}
    # cl100k: "hello world" = 2 tokens; '{"name":"a"}' = {" name ":" a "} = 5; "b" = 1. OpenClaw's estimate:
    # ceil(11 / 4) + ceil(9 / 4) = 3 + 3.
    assert state_tokens(st) == {"system_prompt": 2, "tools": 6, "total": 8, "n_tools": 2, "system_prompt_chars": 11,
                                "project_context_chars": 0, "tool_json_chars": 13, "openclaw_estimate": 6}


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(not availability().ok, reason="OpenClaw's package is not installed (make setup-openclaw)")
def test_the_default_is_what_openclaw_builds():
    from services.adapters.openclaw_real.system_prompt import measure

    m = measure()
    assert m["openclaw"] == "2026.9.6"
    steady, first = m["steady"], m["first-run"]
    # The workspace paths in the prompt are temp dirs of the same length each run; allow 0.5 % for host details.
    assert abs(steady["total"] - L.SYSTEM_PROMPT_TOKENS) <= L.SYSTEM_PROMPT_TOKENS // 200, steady
    assert steady["n_tools"] == 54
    # What onboarding writes and OpenClaw injects: BOOTSTRAP.md only until the first memory file exists.
    assert first["files"] == ["AGENTS.md", "BOOTSTRAP.md", "IDENTITY.md", "SOUL.md", "USER.md"]
    assert first["injected"] == ["AGENTS.md", "SOUL.md", "IDENTITY.md", "USER.md", "BOOTSTRAP.md"]
    assert steady["files"] == ["AGENTS.md", "IDENTITY.md", "SOUL.md", "USER.md"]
    assert first["tools"] == steady["tools"] and first["system_prompt"] > steady["system_prompt"]
