"""Registers `octybot-real` (Octybot 9d0d070 itself, its hooks run by Bun) with the backend registry."""
from services.adapters.registry import BackendSpec, register


def _available() -> tuple[bool, str]:
    from services.adapters.octybot_real.runtime import availability

    a = availability()
    return a.ok, a.reason


register(BackendSpec(
    "octybot-real", "services.adapters.octybot_real", "services.adapters.octybot_real.backend:OctybotRealBackend",
    description="Octybot (tbelfort/octybot 9d0d070) itself: its Stop hook stores each exchange, its UserPromptSubmit "
                "hook retrieves; Voyage and OpenRouter served by the rig (embeddings API, MEMRIG_LLM_BASE_URL).",
    default=False, available=_available,
))
