"""An in-process stand-in for the llm-mock service: the same deterministic task behaviours, no HTTP."""

from __future__ import annotations

from dataclasses import dataclass

from services.llm_mock.tasks import detect_task, respond


@dataclass
class Reply:
    text: str


class InProcessMockLLM:
    """`chat()` answers exactly as the llm-mock would; `calls` records (task, messages); `override` maps a task
    name to a fixed reply (to simulate a misbehaving model)."""

    def __init__(self, override: dict[str, str] | None = None):
        self.calls: list[tuple[str, list[dict[str, str]]]] = []
        self.override = dict(override or {})

    async def chat(self, messages, temperature=0.0, **kw):
        task = detect_task(messages)
        self.calls.append((task, messages))
        return Reply(self.override[task] if task in self.override else respond(task, messages))

    def tasks(self) -> list[str]:
        return [t for t, _ in self.calls]

    async def close(self):
        pass


class CannedLLM:
    """`chat()` always replies `text` (a compaction summary, say); `calls` records the messages."""

    def __init__(self, text: str = "Worked on an API. Chose a port."):
        self.text = text
        self.calls: list[list[dict[str, str]]] = []

    async def chat(self, messages, temperature=0.0, **kw):
        self.calls.append(messages)
        return Reply(self.text)

    async def close(self):
        pass
