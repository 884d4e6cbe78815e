"""The keyword side of OpenClaw's memory search: FTS5 query building, BM25 rank → score, keyword extraction.

- `build_fts_query` (src/memory/hybrid.ts → extensions/memory-core/src/memory/hybrid.ts): tokens matched by the
  era's regex, trimmed, each wrapped in double quotes (quotes stripped) and joined with " AND "; no tokens →
  None and the keyword search is skipped.
- `bm25_rank_to_score`: FTS5's `bm25()` is negative, better matches more negative. The early mapping clamps
  it to 0 and returns 1/(1+0) = 1.0 for every hit (bug #5767); the late one maps rel = -rank to rel/(1+rel).
- `extract_keywords` (src/memory/query-expansion.ts) for FTS-only mode: lower-case, split on whitespace and
  punctuation, CJK runs → characters + adjacent bigrams, drop stop words, ASCII words shorter than 3 letters,
  pure numbers and pure punctuation/symbols, dedupe in order. Only the English stop list is used here (the
  upstream file also has ES/PT/AR/ZH/KO/JA/DA/NB/SV lists, and Korean particle stripping; stopwords.py holds the
  lists, this one included); the rig's data is English.
"""

from __future__ import annotations

import math

import regex

from services.adapters.openclaw.stopwords import STOP_WORDS_EN  # query-expansion.ts STOP_WORDS_EN (one home)

EARLY_TOKEN_RE = regex.compile(r"[A-Za-z0-9_]+")
LATE_TOKEN_RE = regex.compile(r"[\p{L}\p{N}_]+")


def fts_tokens(raw: str, token_regex: str) -> list[str]:
    rx = EARLY_TOKEN_RE if token_regex == EARLY_TOKEN_RE.pattern else (
        LATE_TOKEN_RE if token_regex == LATE_TOKEN_RE.pattern else regex.compile(token_regex)
    )
    return [t.strip() for t in rx.findall(raw) if t.strip()]


def build_fts_query(raw: str, token_regex: str = LATE_TOKEN_RE.pattern) -> str | None:
    tokens = fts_tokens(raw, token_regex)
    if not tokens:
        return None
    return " AND ".join('"' + t.replace('"', "") + '"' for t in tokens)


def bm25_rank_to_score(rank: float, mapping: str = "late") -> float:
    if mapping == "early":
        r = max(0.0, rank) if math.isfinite(rank) else 999.0
        return 1.0 / (1.0 + r)
    if mapping == "late":
        if not math.isfinite(rank):
            return 1.0 / (1.0 + 999.0)
        if rank < 0:
            rel = -rank
            return rel / (1.0 + rel)
        return 1.0 / (1.0 + rank)
    raise ValueError(f"unknown bm25 mapping {mapping!r}")



_SPLIT_RE = regex.compile(r"[\s\p{P}]+")
_KANA_RE = regex.compile(r"[\u3040-\u30ff]")
_HAN_RE = regex.compile(r"[\u4e00-\u9fff]")
_JP_PARTS_RE = regex.compile(r"[a-z0-9_]+|[\u30a0-\u30ffー]+|[\u4e00-\u9fff]+|[\u3040-\u309f]{2,}")
_ALPHA_RE = regex.compile(r"^[a-zA-Z]+$")
_DIGITS_RE = regex.compile(r"^[0-9]+$")
_PUNCT_RE = regex.compile(r"^[\p{P}\p{S}]+$")


def _tokenize_for_keywords(text: str) -> list[str]:
    out: list[str] = []
    for seg in (s for s in _SPLIT_RE.split(text.lower().strip()) if s):
        if _KANA_RE.search(seg):
            for part in _JP_PARTS_RE.findall(seg):
                out.append(part)
                if regex.fullmatch(r"[\u4e00-\u9fff]+", part):
                    out.extend(part[i] + part[i + 1] for i in range(len(part) - 1))
        elif _HAN_RE.search(seg):
            chars = [c for c in seg if _HAN_RE.match(c)]
            out.extend(chars)
            out.extend(chars[i] + chars[i + 1] for i in range(len(chars) - 1))
        else:
            out.append(seg)
    return out


def _valid_keyword(tok: str) -> bool:
    if not tok:
        return False
    if _ALPHA_RE.match(tok) and len(tok) < 3:
        return False
    if _DIGITS_RE.match(tok):
        return False
    return not _PUNCT_RE.match(tok)


def extract_keywords(query: str) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for tok in _tokenize_for_keywords(query):
        if tok in STOP_WORDS_EN or not _valid_keyword(tok) or tok in seen:
            continue
        seen.add(tok)
        out.append(tok)
    return out


# ---------------------------------------------------------------------------------------------------
# OpenClaw 2026.9.6 (dist/query-expansion-XZx6aBHC.mjs: tokenize, isQueryStopWordToken, extractKeywords)

_HANGUL_RE = regex.compile(r"[\uac00-\ud7af\u3131-\u3163]")
_HANGUL_SYLLABLE_RE = regex.compile(r"[\uac00-\ud7af]")
_ASCII_WORD_RE = regex.compile(r"^[a-z0-9_]+$", regex.IGNORECASE)


def _strip_korean_particle(token: str) -> str | None:
    from services.adapters.openclaw.stopwords import KO_TRAILING_PARTICLES

    for particle in KO_TRAILING_PARTICLES:
        if len(token) > len(particle) and token.endswith(particle):
            return token[: -len(particle)]
    return None


def _useful_korean_stem(stem: str) -> bool:
    if _HANGUL_SYLLABLE_RE.search(stem):
        return len(stem) >= 2
    return bool(_ASCII_WORD_RE.match(stem))


def _tokenize_for_keywords_2609(text: str) -> list[str]:
    """`tokenize` of 2026.9.6 (unicode61 tokenizer): the early CJK/Japanese rules plus Korean segments, which
    keep the segment unless it is a Korean stop word and add its stem with one trailing particle stripped."""
    from services.adapters.openclaw.stopwords import STOP_WORDS_KO

    out: list[str] = []
    for seg in (s for s in _SPLIT_RE.split(text.strip().lower()) if s):
        if _KANA_RE.search(seg) or _HAN_RE.search(seg):
            out.extend(_tokenize_for_keywords(seg))
        elif _HANGUL_RE.search(seg):
            stem = _strip_korean_particle(seg)
            stem_is_stop = stem is not None and stem in STOP_WORDS_KO
            if seg not in STOP_WORDS_KO and not stem_is_stop:
                out.append(seg)
            if stem and stem not in STOP_WORDS_KO and _useful_korean_stem(stem):
                out.append(stem)
        else:
            out.append(seg)
    return out


def extract_keywords_2609(query: str) -> list[str]:
    """`extractKeywords` of 2026.9.6: like the early one, but a token is dropped when it is a stop word of any
    of the seven languages (stopwords.ALL_STOP_WORDS), and Korean segments are stemmed."""
    from services.adapters.openclaw.stopwords import ALL_STOP_WORDS

    seen: set[str] = set()
    out: list[str] = []
    for tok in _tokenize_for_keywords_2609(query):
        if tok in ALL_STOP_WORDS or not _valid_keyword(tok) or tok in seen:
            continue
        seen.add(tok)
        out.append(tok)
    return out
