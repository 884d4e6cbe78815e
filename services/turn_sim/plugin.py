"""The memory plugin as the agent host sees it, driven through the memrig backend API.

OpenClaw calls a memory plugin at two points of a turn (as the Cortex plugin uses them: Ubundi/openclaw-cortex,
src/features/recall/handler.ts for recall, its `agent_end` capture for the other):
- `before_agent_start(prompt)` → `{prependContext}`: recall (skipped when autoRecall is off or the prompt is
  shorter than 5 characters), formatted as the `<cortex_memories>` envelope unless the backend formats its own;
  any failure degrades silently to no context.
- `agent_end(messages)`: auto-capture of the turn, fire-and-forget (the turn does not wait for it).

The backend is any object with the `services.adapters.client` coroutines (`InProcessBackendClient`,
`GrpcBackendClient`), so the same host measures every backend. Plugin-level policy that belongs to a specific
plugin (Cortex's cold-start gate, recall timeout budget, RetryQueue) lives in that backend's adapter.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from services.common.types import IngestBatch, Message, RetrieveQuery, Session
from services.turn_sim.formatter import format_memories

MIN_PROMPT_CHARS = 5  # handler.ts: prompts shorter than this are not recalled


@dataclass
class PluginConfig:
    auto_recall: bool = True
    auto_capture: bool = True
    recall_mode: str = "fast"  # "fast" | "full"
    top_k: int = 5
    # Host-side cap on the recall call (None: trust the backend's own budget, as the real host does).
    host_timeout_s: float | None = None


@dataclass
class RecallOutcome:
    context: str = ""
    memories: int = 0
    seconds: float = 0.0
    called: bool = False  # a recall reached the backend API
    degraded: bool = False
    reason: str = ""
    memory_texts: list[str] = field(default_factory=list)


class MemoryPlugin:
    def __init__(self, client: Any, namespace: str, config: PluginConfig | None = None):
        self.client = client
        self.namespace = namespace
        self.config = config or PluginConfig()
        self._captures: set[asyncio.Task] = set()
        self.captures_ok = 0
        self.captures_failed = 0
        self.recalls = 0
        self.recall_failures = 0

    async def before_agent_start(self, prompt: str) -> RecallOutcome:
        t0 = time.perf_counter()
        if not self.config.auto_recall or len(prompt.strip()) < MIN_PROMPT_CHARS:
            return RecallOutcome(seconds=time.perf_counter() - t0, reason="recall off")
        q = RetrieveQuery(prompt, top_k=self.config.top_k, mode=self.config.recall_mode,
                          reference_time=datetime.now(UTC))
        self.recalls += 1
        try:
            call = self.client.retrieve(self.namespace, q)
            if self.config.host_timeout_s is not None:
                result, _ = await asyncio.wait_for(call, self.config.host_timeout_s)
            else:
                result, _ = await call
        except Exception as e:  # silent degradation: the agent proceeds without memories
            self.recall_failures += 1
            return RecallOutcome(seconds=time.perf_counter() - t0, called=True, degraded=True,
                                 reason=f"{type(e).__name__}: {e}"[:200])
        context = result.formatted_context or format_memories(result.memories)
        if result.degraded:
            self.recall_failures += 1
        return RecallOutcome(context=context, memories=len(result.memories), seconds=time.perf_counter() - t0,
                             called=True, degraded=result.degraded, reason=result.degraded_reason,
                             memory_texts=[m.text for m in result.memories])

    def agent_end(self, session_id: str, turn_id: str, messages: list[tuple[str, str]],
                  started_at: datetime | None = None, success: bool = True) -> None:
        """Schedule the capture of one turn (role, content pairs); returns at once."""
        if not (self.config.auto_capture and success and messages):
            return
        msgs = tuple(Message(f"{session_id}-{turn_id}-{i}", role, content)
                     for i, (role, content) in enumerate(messages))
        batch = IngestBatch(sessions=(Session(session_id, started_at or datetime.now(UTC), msgs),),
                            batch_id=f"{session_id}-{turn_id}")
        task = asyncio.create_task(self._capture(batch))
        self._captures.add(task)
        task.add_done_callback(self._captures.discard)

    async def _capture(self, batch: IngestBatch) -> None:
        try:
            await self.client.ingest(self.namespace, batch)
            self.captures_ok += 1
        except Exception:
            self.captures_failed += 1

    async def drain(self, timeout_s: float = 30.0) -> None:
        """Wait for scheduled captures (between sessions, and before closing)."""
        if self._captures:
            await asyncio.wait(set(self._captures), timeout=timeout_s)

    async def close(self) -> None:
        await self.drain()
        await self.client.close()
