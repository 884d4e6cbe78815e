"""The SYNTHETIC memories and queries of the scale benchmark (seeded; not real data — every report says so).

A memory is one short project note (~45 words): a dated fact sentence ("the <w> <w> uses <w> <n>") followed by
Zipf-sampled pseudo-words (the vocabulary and the Zipf exponent of the OpenClaw index benchmark,
services/studies/openclaw_port_speed.py, reused). Memories are generated in blocks of 1000, each from its own
seeded RNG, so the first n memories are the same whatever the largest size: growing a backend from 1k to 10k
ingests exactly memories 1000..9999.

How each backend receives them (one "memory" = one unit the backend indexes):
- openclaw*: one Document per memory with its own path `memory/notes/mNNNNNN.md`, so every memory is one file
  and one chunk (the note is far below the 1600-character chunk); the flush (one LLM call per session) is
  bypassed because documents are indexed directly — the backend's own documented Document path;
- cortex*: one Document per memory (`POST /v1/jobs/ingest`; the mock extracts facts from it);
- full-context / none: one message per memory, 10 messages per session.
Queries: three distinct words (longer than 2 letters) of a random memory already ingested, so the AND-joined
FTS query of OpenClaw has at least one hit.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import lru_cache

import numpy as np

from services.common.types import Document, IngestBatch, Message, Session
from services.studies.openclaw_port_speed import vocabulary

BLOCK = 1000
FILLER_WORDS = 36
MESSAGES_PER_SESSION = 10
T0 = datetime(2025, 1, 1, tzinfo=UTC)
REFERENCE_TIME = datetime(2026, 6, 1, tzinfo=UTC)  # the queries' "now" (fixed: decay is deterministic)


@lru_cache(maxsize=4)
def _vocab(seed: int) -> tuple[list[str], np.ndarray]:
    words = vocabulary(np.random.default_rng(seed))
    probs = 1.0 / np.arange(1, len(words) + 1) ** 1.07
    return words, probs / probs.sum()


def memory_block(block: int, seed: int = 0) -> list[str]:
    """The texts of memories block*1000 .. block*1000+999 (deterministic in (seed, block))."""
    words, probs = _vocab(seed)
    rng = np.random.default_rng([seed, block])
    idx = rng.choice(len(words), size=(BLOCK, FILLER_WORDS + 4), p=probs)
    nums = rng.integers(1, 1000, size=BLOCK)
    out = []
    for j in range(BLOCK):
        i = block * BLOCK + j
        day = (T0 + timedelta(hours=i)).date().isoformat()
        w = [words[k] for k in idx[j]]
        out.append(f"{day}: the {w[0]} {w[1]} uses {w[2]} {nums[j]}. " + " ".join(w[4:]) + ".")
    return out


def memories(n: int, seed: int = 0) -> list[str]:
    """The first n memory texts."""
    out: list[str] = []
    for b in range((n + BLOCK - 1) // BLOCK):
        out.extend(memory_block(b, seed))
    return out[:n]


def memory_time(i: int) -> datetime:
    return T0 + timedelta(hours=i)


def queries(texts: list[str], n_available: int, count: int, seed: int = 0) -> list[str]:
    """`count` queries drawn from the first `n_available` memories: three distinct words of one memory."""
    rng = np.random.default_rng([seed, n_available, 7])
    out = []
    for _ in range(count):
        words = [w for w in texts[int(rng.integers(n_available))].rstrip(".").split()
                 if len(w) > 2 and w.isalpha() and w not in ("the", "uses")]
        uniq = list(dict.fromkeys(words))
        out.append(" ".join(rng.choice(uniq, size=min(3, len(uniq)), replace=False)))
    return out


def documents(texts: list[str], start: int, stop: int, with_paths: bool) -> tuple[Document, ...]:
    return tuple(Document(id=f"m{i:07d}", text=texts[i], created_at=memory_time(i),
                          path=f"memory/notes/m{i:07d}.md" if with_paths else "")
                 for i in range(start, stop))


def sessions(texts: list[str], start: int, stop: int) -> tuple[Session, ...]:
    """Messages start..stop-1 as sessions of MESSAGES_PER_SESSION (start must be a multiple of it)."""
    out = []
    for s0 in range(start, stop, MESSAGES_PER_SESSION):
        msgs = tuple(Message(id=f"m{i:07d}", role="user" if i % 2 == 0 else "assistant", content=texts[i],
                             ts=memory_time(i)) for i in range(s0, min(stop, s0 + MESSAGES_PER_SESSION)))
        out.append(Session(session_id=f"s{s0 // MESSAGES_PER_SESSION:06d}", started_at=memory_time(s0),
                           messages=msgs))
    return tuple(out)


def batch_for(kind: str, texts: list[str], start: int, stop: int) -> IngestBatch:
    """kind: "documents_with_paths" (openclaw), "documents" (cortex), "sessions" (full-context, none)."""
    if kind == "sessions":
        return IngestBatch(sessions=sessions(texts, start, stop))
    return IngestBatch(documents=documents(texts, start, stop, with_paths=kind == "documents_with_paths"))
