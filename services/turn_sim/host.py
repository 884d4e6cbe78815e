"""The agent host: plays one turn = recall hook → format (prependContext) → LLM call → auto-capture.

The turn time is what the user waits for: recall + prompt assembly + the LLM call + scheduling the capture
(capture itself is fire-and-forget, as in the plugin). Each phase is timed with perf_counter and reported to the
latency collector; tokens injected are counted when a token collector is given.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime

from collectors.latency import TurnLatencyCollector
from collectors.tokens import TokenOverheadCollector
from services.common.llm_client import LLMClient
from services.common.prompts import ANSWER_SYSTEM, answer_user
from services.turn_sim.plugin import MemoryPlugin


@dataclass
class TurnRecord:
    session_id: str
    turn: int
    prompt: str
    reply: str = ""
    ok: bool = True
    error: str = ""
    total_s: float = 0.0
    recall_s: float = 0.0
    llm_s: float = 0.0
    capture_s: float = 0.0
    recall_called: bool = False
    memories: int = 0
    degraded: bool = False
    degraded_reason: str = ""
    tokens_injected: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    context: str = field(default="", repr=False)

    def to_json(self) -> dict:
        d = asdict(self)
        d.pop("context")
        return d


class AgentHost:
    def __init__(self, llm: LLMClient, plugin: MemoryPlugin | None, backend: str, state: str,
                 latency: TurnLatencyCollector | None = None, tokens: TokenOverheadCollector | None = None,
                 history_turns: int = 4, max_tokens: int = 256):
        self.llm = llm
        self.plugin = plugin
        self.backend = backend
        self.state = state
        self.latency = latency
        self.tokens = tokens
        self.history_turns = history_turns
        self.max_tokens = max_tokens
        self._history: dict[str, list[dict[str, str]]] = {}

    def new_session(self, session_id: str) -> None:
        self._history[session_id] = []

    async def turn(self, session_id: str, turn: int, prompt: str, record_latency: bool = True) -> TurnRecord:
        rec = TurnRecord(session_id, turn, prompt)
        history = self._history.setdefault(session_id, [])
        started = datetime.now(UTC)
        t0 = time.perf_counter()
        # 1. recall hook
        context = ""
        if self.plugin is not None:
            out = await self.plugin.before_agent_start(prompt)
            context = out.context
            rec.recall_s, rec.recall_called, rec.memories = out.seconds, out.called, out.memories
            rec.degraded, rec.degraded_reason = out.degraded, out.reason
        rec.context = context
        # 2. format: prependContext goes before the user's prompt; earlier turns of this session are the history
        messages = [{"role": "system", "content": ANSWER_SYSTEM}, *history[-2 * self.history_turns:],
                    {"role": "user", "content": answer_user(prompt, [context])}]
        # 3. LLM call
        t1 = time.perf_counter()
        try:
            res = await self.llm.chat(messages, max_tokens=self.max_tokens)
            rec.reply, rec.prompt_tokens, rec.completion_tokens = res.text, res.prompt_tokens, res.completion_tokens
        except Exception as e:
            rec.ok, rec.error = False, f"{type(e).__name__}: {e}"[:300]
        rec.llm_s = time.perf_counter() - t1
        # 4. auto-capture (scheduled, not awaited)
        t2 = time.perf_counter()
        if self.plugin is not None and rec.ok:
            self.plugin.agent_end(session_id, f"t{turn}", [("user", prompt), ("assistant", rec.reply)], started)
        rec.capture_s = time.perf_counter() - t2
        rec.total_s = time.perf_counter() - t0
        history += [{"role": "user", "content": prompt}, {"role": "assistant", "content": rec.reply}]
        del history[:-2 * self.history_turns]  # the host keeps only what it sends
        if self.tokens is not None and self.plugin is not None:
            rec.tokens_injected = self.tokens.observe(self.backend, self.plugin.config.top_k, context,
                                                      state=self.state)
        if self.latency is not None and record_latency:
            self.latency.observe(self.backend, self.state, rec.total_s,
                                 phases={"recall": rec.recall_s, "llm": rec.llm_s, "capture": rec.capture_s},
                                 turn=turn, session_id=session_id, ok=rec.ok, memories=rec.memories,
                                 degraded=rec.degraded, tokens_injected=rec.tokens_injected)
        return rec
