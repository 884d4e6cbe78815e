"""The 5-session continuity arc (seed 000 V2.2): design → implement → test → debug → refactor.

Each session opens with the seed's prompt, first asks about what earlier sessions established (one probe per
earlier fact), then states its own new facts. Auto-capture ingests every turn; between sessions the host waits for
the captures and `settle`s the backend. Metrics (pure functions below, golden-tested):
- context_retained: share of session N's decisions whose probe in session N+1 is answered with the fact's keys.
- specific_detail_retained: share of detail probes (specific values, formats, thresholds; any earlier session)
  answered with their keys.
- redundant_questions: probe replies that ask for information already given (an abstention or a question back).
- continuity_score: the 1–5 continuity judge per session after the first, averaged. When the judge's reply has no
  parseable score (e.g. a model that does not know the prompt), the session's score is derived as
  1 + 4 × (probes retained / probes) and the result says `continuity_score_source: "derived"`.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import Any

from services.common.llm_client import LLMClient
from services.common.prompts import (
    ABSTAIN_TEXT,
    CONTINUITY_JUDGE_SYSTEM,
    continuity_judge_user,
)
from services.turn_sim.host import AgentHost
from services.turn_sim.plugin import MemoryPlugin, PluginConfig
from services.turn_sim.workload import FACTS, SESSION_NAMES, SESSION_OPENERS, Fact, facts_of_session, key_hit

_ASK_BACK_RE = re.compile(r"\?\s*$|\b(could|can) you (tell|remind|share)\b|\bwhat (is|was|were) the\b", re.I)


@dataclass(frozen=True)
class ProbeResult:
    session: int  # session in which the probe was asked
    fact_id: str
    fact_session: int
    kind: str
    reply: str
    retained: bool
    redundant: bool


def is_redundant(reply: str) -> bool:
    """The reply asks for information instead of using it: an abstention or a question back to the user."""
    return ABSTAIN_TEXT.lower() in reply.lower() or bool(_ASK_BACK_RE.search(reply.strip()))


def context_retained(probes: list[ProbeResult]) -> float | None:
    """Decisions of session N probed in session N+1: retained / probed."""
    sel = [p for p in probes if p.kind == "decision" and p.session == p.fact_session + 1]
    return sum(p.retained for p in sel) / len(sel) if sel else None


def specific_detail_retained(probes: list[ProbeResult]) -> float | None:
    sel = [p for p in probes if p.kind == "detail"]
    return sum(p.retained for p in sel) / len(sel) if sel else None


def redundant_questions(probes: list[ProbeResult]) -> int:
    return sum(1 for p in probes if p.redundant)


def parse_judge_score(text: str, lo: int = 1, hi: int = 5) -> int | None:
    """The integer `score` of a JSON reply (or of the first `"score": N` in the text) when it is in [lo, hi]."""
    try:
        v = json.loads(text.strip()).get("score")
    except (ValueError, AttributeError):
        m = re.search(r'"score"\s*:\s*(\d+)', text)
        v = int(m.group(1)) if m else None
    if isinstance(v, bool) or not isinstance(v, int | float) or int(v) != v or not lo <= v <= hi:
        return None
    return int(v)


def derived_score(probes: list[ProbeResult]) -> float | None:
    return 1 + 4 * sum(p.retained for p in probes) / len(probes) if probes else None


async def judge_session(judge: LLMClient, established: list[Fact], transcript: list[tuple[str, str]]) -> int | None:
    res = await judge.chat([{"role": "system", "content": CONTINUITY_JUDGE_SYSTEM},
                            {"role": "user", "content": continuity_judge_user([f.statement for f in established],
                                                                              transcript)}], max_tokens=200)
    return parse_judge_score(res.text)


async def run_continuity_arc(client: Any, backend: str, namespace: str, llm: LLMClient,
                             judge: LLMClient | None = None, top_k: int = 5, mode: str = "fast",
                             settle_timeout_s: float = 60.0) -> dict[str, Any]:
    await client.reset(namespace)
    plugin = MemoryPlugin(client, namespace, PluginConfig(recall_mode=mode, top_k=top_k))
    host = AgentHost(llm, plugin, backend, "continuity")
    probes: list[ProbeResult] = []
    sessions: list[dict[str, Any]] = []
    for n in range(1, len(SESSION_OPENERS) + 1):
        sid = f"arc-s{n}"
        host.new_session(sid)
        transcript: list[tuple[str, str]] = []
        turn = 0

        async def say(prompt: str) -> str:
            nonlocal turn
            rec = await host.turn(sid, turn, prompt, record_latency=False)  # noqa: B023 - sid is this session's
            turn += 1
            transcript.append(("user", prompt))  # noqa: B023
            transcript.append(("assistant", rec.reply))  # noqa: B023
            return rec.reply

        await say(SESSION_OPENERS[n - 1])
        earlier = [f for f in FACTS if f.session < n]
        session_probes = []
        for f in earlier:
            reply = await say(f.probe)
            session_probes.append(ProbeResult(n, f.id, f.session, f.kind, reply, key_hit(reply, f.keys),
                                              is_redundant(reply)))
        for f in facts_of_session(n):
            await say(f.statement)
        await plugin.drain()
        await client.settle(namespace, settle_timeout_s)
        probes += session_probes
        judged = await judge_session(judge or llm, earlier, transcript) if earlier else None
        sessions.append({"session": n, "name": SESSION_NAMES[n - 1], "probes": len(session_probes),
                         "retained": sum(p.retained for p in session_probes),
                         "redundant": sum(p.redundant for p in session_probes),
                         "judge_score": judged, "derived_score": derived_score(session_probes)})
    scored = [s for s in sessions if s["probes"]]
    judged_all = all(s["judge_score"] is not None for s in scored)
    per_session = [s["judge_score"] if judged_all else s["derived_score"] for s in scored]
    await plugin.drain()
    return {
        "backend": backend,
        "context_retained": context_retained(probes),
        "specific_detail_retained": specific_detail_retained(probes),
        "redundant_questions": redundant_questions(probes),
        "probes": len(probes),
        "continuity_score": sum(per_session) / len(per_session) if per_session else None,
        "continuity_score_source": "judge" if judged_all else "derived",
        "sessions": sessions,
        "probe_rows": [asdict(p) for p in probes],
        "captures_failed": plugin.captures_failed,
    }
