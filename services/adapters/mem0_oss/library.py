"""Loading Mem0's own library (`mem0ai`, pinned 2.2.1) offline, and the rig's embedder as a Mem0 embedder.

Mem0 reads `MEM0_TELEMETRY` and `MEM0_DIR` when it is first imported (mem0/memory/telemetry.py,
mem0/configs/base.py @ 2.2.1), so `import_mem0` sets both before the import: telemetry off (no PostHog calls,
no first-run notices) and Mem0's home directory under the rig's data dir instead of ~/.mem0.

`RigEmbedding` is a Mem0 `EmbeddingBase` backed by the rig's process-wide embedder (and its one embedding
cache). It is registered as provider "memrig" in Mem0's own `EmbedderFactory.provider_to_class` table, so Mem0
builds and calls it through its normal embedder config path. Mem0's `EmbedderConfig` validator accepts only its
built-in provider names, so the config object is built with `model_construct` (no other field is skipped).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

MEM0_VERSION_PIN = "2.2.1"
PROVIDER = "memrig"
_SEARCHING = threading.local()


def searching(fn, *args, **kwargs):
    """`fn(*args, **kwargs)` with this thread's embeddings taken as a search query's: RigEmbedding then embeds anew,
    never through the shared cache (Embedder.encode_query). Mem0 labels its add-time lookups of existing memories
    "search" too, so its `memory_action` cannot tell a query apart; the backend wraps Memory.search in this."""
    _SEARCHING.on = True
    try:
        return fn(*args, **kwargs)
    finally:
        _SEARCHING.on = False


def import_mem0(home: Path):
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ.setdefault("MEM0_DIR", str(home))
    home.mkdir(parents=True, exist_ok=True)
    import mem0
    import mem0.memory.main as mem0_main
    import mem0.memory.telemetry as mem0_telemetry
    from mem0.embeddings.base import EmbeddingBase

    # Mem0 may have been imported before the variable was set (and main.py holds its own copy of the flag):
    # switch telemetry off in both places, whatever the import order was.
    mem0_telemetry.MEM0_TELEMETRY = False
    mem0_main.MEM0_TELEMETRY = False
    from mem0.utils.factory import EmbedderFactory

    if PROVIDER not in EmbedderFactory.provider_to_class:
        global RigEmbedding

        class RigEmbedding(EmbeddingBase):  # defined once, on first import of mem0
            """`config.model` is the rig's Embedder; vectors are its unit-norm float32 rows as lists."""

            def embed(self, text, memory_action=None):
                if getattr(_SEARCHING, "on", False):
                    return self.config.model.encode_query(text).tolist()
                return self.config.model.encode([text])[0].tolist()

            def embed_batch(self, texts, memory_action="add"):
                return [row.tolist() for row in self.config.model.encode(list(texts))]

        EmbedderFactory.provider_to_class[PROVIDER] = f"{__name__}.RigEmbedding"
    return mem0


RigEmbedding: Any = None  # set by import_mem0 (its base class lives in mem0, imported lazily)


def embedder_config(embedder) -> Any:
    from mem0.embeddings.configs import EmbedderConfig

    return EmbedderConfig.model_construct(provider=PROVIDER,
                                          config={"model": embedder, "embedding_dims": embedder.dim})
