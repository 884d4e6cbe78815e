"""How the rig renders a session as transcript text, and the one-shot compaction of such text.

Shared by the control backends (`full-context`, `compacted`), the OpenClaw port's lifecycle and the coordinator's
compaction condition, so every one of them sees the same transcript and the same compaction prompt.
"""

from __future__ import annotations

from services.common import prompts
from services.common.types import Session


def render_session(s: Session) -> str:
    """A session as a Markdown block: `## Session <id> (<date>)` then one `role: content` line per message."""
    head = f"## Session {s.session_id} ({s.started_at.date().isoformat()})"
    return "\n".join([head, *(f"{m.role}: {m.content}" for m in s.messages)])


async def compact(llm, transcripts: str, temperature: float = 0.0) -> str:
    """One compaction summary of `transcripts` through `llm` (OpenClaw's `/compact` prompt)."""
    res = await llm.chat(
        [{"role": "system", "content": prompts.COMPACTION_SYSTEM}, {"role": "user", "content": transcripts}],
        temperature=temperature,
    )
    return res.text.strip()
