"""A hand-set embedder for the ranking pipeline tests, and the reference time their dated notes are aged at."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

REF = datetime(2026, 2, 2, tzinfo=UTC)


class MarkerEmbedder:
    """3-d unit vectors chosen by a marker word in the text; the query ("alpha") is e0."""

    name = "marker-3"
    dim = 3

    def __init__(self, vectors: dict[str, tuple[float, float, float]]):
        self.vectors = vectors

    def encode(self, texts, persist: bool = True):
        out = np.zeros((len(texts), 3), dtype=np.float32)
        for i, t in enumerate(texts):
            vec = next((v for marker, v in self.vectors.items() if marker in t.split()), (1.0, 0.0, 0.0))
            out[i] = vec
        return out

    async def aencode(self, texts, persist: bool = True):
        return self.encode(texts)

    async def aencode_query(self, text):  # a search query's vector (the rig's never cached)
        return self.encode([text])[0]
