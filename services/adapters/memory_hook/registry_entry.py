"""Registers `memory-hook` (LLM rerank on) and `memory-hook-no-rerank` (the bench's memory-no-rerank config) with the
backend registry (imported by registry.all_specs()); neither is in bench-all by default."""
from services.adapters.registry import BackendSpec, register

_MOD = "services.adapters.memory_hook"
_CLS = "services.adapters.memory_hook.backend:MemoryHookBackend"

register(BackendSpec(
    "memory-hook", _MOD, _CLS, config={"rerank": True},
    description="memory-hook: trigger/rule memories, vector search on triggers, LLM rerank, rules injected.",
    default=False,
))
register(BackendSpec(
    "memory-hook-no-rerank", _MOD, _CLS, config={"rerank": False},
    description="memory-hook without the LLM rerank (the bench's memory-no-rerank config).",
    default=False,
))
