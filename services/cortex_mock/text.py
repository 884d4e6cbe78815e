"""Text helpers shared by extraction, BM25 and deduplication: tokenising, sentence splitting, overlap.

Small pure functions so every scored quantity can be checked by hand in tests.
"""

from __future__ import annotations

import re

_TOKEN_RE = re.compile(r"[a-z0-9][a-z0-9_.\-/]*[a-z0-9]|[a-z0-9]")
_NUMBER_RE = re.compile(r"\d+(?:\.\d+)?")
# Sentence ends: . ! ? followed by whitespace, or a line break. Dots inside tokens (file.py, v1.2) don't split.
_SENT_SPLIT_RE = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[`A-Z0-9])|\n+")
_BULLET_RE = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")

STOPWORDS = frozenset(
    """a an the and or but if then else of to in on at by for with from as is are was were be been being am
    do does did doing have has had having i me my we our us you your he she it its they them their this that
    these those there here what which who whom whose when where why how all any both each few more most other
    some such no nor not only own same so than too very can will just should would could shall may might must
    about into over under again further once up down out off also let lets okay ok yes yeah sure please thanks
    thank hi hello hey""".split()
)


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens; keeps code-ish tokens whole (`file.py`, `v1.2`, `snake_case`, `a/b`)."""
    out = []
    for t in _TOKEN_RE.findall(text.lower()):
        t = t.strip(".-/")
        if t:
            out.append(_light_stem(t))
    return out


def _light_stem(t: str) -> str:
    # Plural folding only ("caches" -> "cache", "keys" -> "key"); a real stemmer would over-merge code tokens.
    if len(t) > 4 and t.isalpha() and t.endswith("s") and not t.endswith("ss"):
        return t[:-1]
    return t


def content_tokens(text: str) -> list[str]:
    return [t for t in tokenize(text) if t not in STOPWORDS]


def numbers(text: str) -> frozenset[str]:
    return frozenset(_NUMBER_RE.findall(text))


def jaccard(a: set[str] | frozenset[str], b: set[str] | frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def normalise(text: str) -> str:
    """Canonical form for exact-duplicate detection: lower case, single spaces, no trailing punctuation."""
    return " ".join(tokenize(text))


def split_sentences(text: str) -> list[str]:
    out = []
    for part in _SENT_SPLIT_RE.split(text or ""):
        part = _BULLET_RE.sub("", part).strip()
        if part:
            out.append(part)
    return out
