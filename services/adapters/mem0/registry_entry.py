"""Registers `mem0` and `mem0-raw` with the backend registry (imported by registry.all_specs()); neither is in
bench-all by default."""
from services.adapters.registry import BackendSpec, register

_MOD = "services.adapters.mem0"
_CLS = "services.adapters.mem0.backend:Mem0Backend"

register(BackendSpec(
    "mem0", _MOD, _CLS, config={"infer": True},
    description="Mem0 OSS v3: add(infer=True) LLM facts, ADD-only; search = cosine, threshold 0.1, no rerank.",
    default=False,
))
register(BackendSpec(
    "mem0-raw", _MOD, _CLS, config={"infer": False},
    description="Mem0 OSS v3 with add(infer=False): every message stored raw; same search.",
    default=False,
))
