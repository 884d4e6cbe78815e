"""The size of what OpenClaw 2026.9.6 sends a model on every turn before the conversation: its system prompt (with the
workspace's bootstrap files injected as Project Context) and its tool definitions, for a default install.

OpenClaw decides on the pre-compaction memory flush from the provider's reported prompt usage, which holds this
overhead as well as the transcript; the replay counts transcript tokens, so this is the stated variable
`system_prompt_tokens` (services/adapters/openclaw/lifecycle.py `SYSTEM_PROMPT_TOKENS` is the measured default).

Method: `sidecar/system-prompt.mjs` has OpenClaw build them with its own code (a fresh install as local onboarding
leaves it: `tools.profile: "full"`, the workspace written by `ensureAgentWorkspace`, the system prompt and tools of a
main-session webchat turn by the `/context` estimate path, `resolveCommandsSystemPromptBundle`); this module counts
them in cl100k tokens (services/common/tokens.count_tokens): the system prompt text, plus each tool as a provider
request carries it, `JSON.stringify({name, description, parameters})`, counted one tool at a time and summed.
OpenClaw's own `/context` estimate (ceil(chars / 4), tool schemas = the parameters' JSON only) is reported beside it.
Two states: `first-run` (BOOTSTRAP.md still pending) and `steady` (after the first memory file OpenClaw deletes
BOOTSTRAP.md on the next turn); the default is `steady`, the state of every turn after the first /new.

Run: `python -m services.adapters.openclaw_real.system_prompt` (about 25 s; needs `make setup-openclaw`).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from services.adapters.openclaw_real.node import SIDECAR_DIR, availability
from services.common.errors import DependencyError
from services.common.tokens import count_tokens, tokenizer_name

SCRIPT = SIDECAR_DIR / "system-prompt.mjs"


def run_script(timeout_s: float = 600.0) -> dict[str, Any]:
    """Run sidecar/system-prompt.mjs with the rig's Node and return its JSON."""
    a = availability()
    if not a.ok:
        raise DependencyError(f"OpenClaw's system prompt cannot be built: {a.reason}")
    # A fixed, bare environment: the skills list depends on which binaries PATH holds, and OpenClaw reads ~/ for
    # user skills and config, so HOME is an empty temp dir and PATH the system's plus Node's.
    with tempfile.TemporaryDirectory(prefix="memrig-ocsp-home-") as home:
        env = {"PATH": f"{Path(a.runtime).parent}{os.pathsep}/usr/bin{os.pathsep}/bin", "TZ": "UTC", "HOME": home,
               "LANG": "C.UTF-8"}
        r = subprocess.run([a.runtime, str(SCRIPT)], cwd=SIDECAR_DIR, capture_output=True, text=True,
                           timeout=timeout_s, env=env)
    if r.returncode != 0:
        raise DependencyError(f"{SCRIPT.name} exited with {r.returncode}: {r.stderr[-1500:]}")
    return json.loads(r.stdout)


def state_tokens(state: dict[str, Any]) -> dict[str, int]:
    """cl100k tokens of one state's system prompt and tool definitions (total = their sum), and OpenClaw's own
    `/context` estimate of them (ceil(chars / 4) of the prompt and of the tools' parameter schemas)."""
    prompt = count_tokens(state["systemPrompt"])
    tools = sum(count_tokens(t["json"]) for t in state["tools"])
    return {"system_prompt": prompt, "tools": tools, "total": prompt + tools, "n_tools": len(state["tools"]),
            "system_prompt_chars": len(state["systemPrompt"]),
            "project_context_chars": int(state["report"]["systemPrompt"]["projectContextChars"]),
            "tool_json_chars": sum(len(t["json"]) for t in state["tools"]),
            "openclaw_estimate": math.ceil(len(state["systemPrompt"]) / 4)
            + math.ceil(int(state["report"]["tools"]["schemaChars"]) / 4)}


def measure(timeout_s: float = 600.0) -> dict[str, Any]:
    """Build both states with OpenClaw and count them: {state name: state_tokens(...) + files}, plus versions."""
    out = run_script(timeout_s)
    res: dict[str, Any] = {"openclaw": out["openclaw"], "node": out["node"], "tokenizer": tokenizer_name()}
    for st in out["states"]:
        res[st["state"]] = {**state_tokens(st), "files": st["files"],
                            "injected": [i["name"] for i in st["injected"]]}
    return res


if __name__ == "__main__":  # pragma: no cover - a measurement, run by hand
    json.dump(measure(), sys.stdout, indent=1)
    sys.stdout.write("\n")
