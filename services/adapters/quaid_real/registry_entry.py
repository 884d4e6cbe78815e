"""Registers `quaid-real` (Quaid itself, Quaid-Labs/quaid @ 9262e69) with the backend registry. Not in bench-all by
default; unavailable (no source, or `make setup-quaid` not run) -> skipped with the reason."""
from services.adapters.registry import BackendSpec, register


def _available() -> tuple[bool, str]:
    from services.adapters.quaid_real.source import availability

    a = availability()
    return a.ok, a.reason


register(BackendSpec(
    "quaid-real", "services.adapters.quaid_real", "services.adapters.quaid_real.backend:QuaidRealBackend",
    description="Quaid itself (Quaid-Labs/quaid @ 9262e69): store()/extraction and recall() in a Python sidecar, "
                "SQLite + sqlite-vec, embeddings through the rig's Ollama-shaped endpoint.",
    default=False, available=_available,
))
