"""How an Embedder splits texts into model calls (call_size) and that MiniLM's one-call-many-batches path gives the
vectors the per-batch path gives."""

from __future__ import annotations

import numpy as np
import pytest

from services.common.embeddings import Embedder


class Counting(Embedder):
    name, dim = "counting", 2

    def __init__(self, call_size=None):
        super().__init__(None, batch_size=2)
        self.call_size = call_size
        self.calls: list[int] = []

    def _encode_uncached(self, texts):
        self.calls.append(len(texts))
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)


def test_calls_follow_batch_size_unless_a_call_size_is_set():
    texts = ["a", "bb", "ccc", "dddd", "eeeee"]
    e = Counting()
    v = e.encode(texts)
    assert e.calls == [2, 2, 1]
    e2 = Counting(call_size=4)
    assert np.array_equal(e2.encode(texts), v) and e2.calls == [4, 1]


@pytest.mark.slow
def test_minilm_vectors_do_not_depend_on_how_texts_are_grouped_into_calls():
    from services.common.embeddings import MiniLMEmbedder

    rng = np.random.default_rng(0)
    words = "memory agent note search session user assistant reply question long short".split()
    # 150 texts of 1 to 99 words: three batches of 64 whose padding differs between the two groupings (the model
    # sorts a call's texts by length); lengths up to 200 words cost twice the encoding and test nothing more (no
    # text reaches the model's 256-token limit either way)
    texts = [" ".join(rng.choice(words, size=int(n))) for n in rng.integers(1, 100, size=150)]
    e = MiniLMEmbedder(None)
    assert e.call_size == 2048
    whole = e.encode(texts)
    e.call_size = None  # one call per batch of 64
    per_batch = e.encode(texts)
    assert np.abs(whole - per_batch).max() < 1e-4
