"""Registers `mem0-oss` (Mem0's own library) with the backend registry (imported by registry.all_specs()).
Not in bench-all by default. mem0ai 2.2.1 declares protobuf<7 while the rig runs protobuf 7, so `make setup`
installs it with `--no-deps` and its other dependencies through the `mem0-oss` extra."""
from services.adapters.registry import BackendSpec, register

register(BackendSpec(
    "mem0-oss", "services.adapters.mem0_oss", "services.adapters.mem0_oss.backend:Mem0OssBackend",
    config={"infer": "auto"},
    description="Mem0 itself (mem0ai 2.2.1 library): add/search, local Qdrant on disk, the rig's embedder; "
                "infer=True only with a real model at MEMRIG_LLM_*.",
    default=False,
))
