"""Registers `octybot` (an Octybot-like graph memory, seed 003) with the backend registry (imported by
registry.all_specs()); not in bench-all by default."""
from services.adapters.registry import BackendSpec, register

register(BackendSpec(
    "octybot", "services.adapters.octybot", "services.adapters.octybot.backend:OctybotBackend",
    description="Octybot-like graph memory (seed 003): entities/facts/events/instructions/opinions + edges, "
                "Octybot's retrieve tools as a fixed plan, no LLM.",
    default=False,
))
