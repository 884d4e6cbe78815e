"""Embedding throughput of each embedder (sentences/s), without the shared cache so the model really runs:
batch (the embedder's own batch size over many sentences) and single (one sentence per call, as a query)."""

from __future__ import annotations

import time
from typing import Any

from services.perf import synth


def embedder_throughput(name: str, batch_n: int = 512, single_n: int = 100, seed: int = 0) -> dict[str, Any]:
    from services.common.embeddings import get_embedder

    t0 = time.perf_counter()
    try:
        e = get_embedder(name, use_cache=False)
    except Exception as ex:  # a missing model is reported, not fatal
        return {"embedder": name, "status": "error", "reason": f"{type(ex).__name__}: {ex}"}
    load_s = time.perf_counter() - t0
    texts = synth.memories(max(batch_n, single_n) + 1000, seed)
    e.encode(texts[-8:])  # warm
    t0 = time.perf_counter()
    e.encode(texts[:batch_n])
    batch_s = time.perf_counter() - t0
    qs = synth.queries(texts, len(texts), single_n, seed)
    lat = []
    for q in qs:
        t = time.perf_counter()
        e.encode([q])
        lat.append(time.perf_counter() - t)
    single_s = sum(lat)
    return {"embedder": name, "model": e.name, "dim": e.dim, "status": "ok", "valid_for_reports": e.valid_for_reports,
            "load_s": load_s, "batch_size": e.batch_size, "batch_sentences": batch_n,
            "batch_sentences_per_s": batch_n / batch_s if batch_s > 0 else None,
            "single_sentences": single_n, "single_sentences_per_s": single_n / single_s if single_s > 0 else None,
            "single_p50_ms": sorted(lat)[len(lat) // 2] * 1e3,
            "texts": "batch: synthetic memories (~45 words); single: 3-word queries"}
