"""Registers `quaid` with the backend registry (imported by registry.all_specs()); not in bench-all by default."""
from services.adapters.registry import BackendSpec, register

register(BackendSpec(
    "quaid", "services.adapters.quaid", "services.adapters.quaid.backend:QuaidBackend",
    description="Quaid-style recall: LLM facts, semantic + FTS5 weighted RRF by intent, composite score, "
                "min-similarity filter with broadening, embedding MMR.",
    default=False,
))
