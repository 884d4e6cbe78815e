"""Scoring and ranking of OpenClaw's hybrid memory search, as small pure functions (OpenClaw's
src/memory/{hybrid,mmr,temporal-decay}.ts, later extensions/memory-core/src/memory/*).

Pipeline (vector + keyword hits already scored): `merge_hybrid` (union by chunk id) → `apply_temporal_decay`
→ `sort_results` → `mmr_rerank` over *all* candidates → `select_results` (strict, relaxed or spare-slots).
Features newer than the pinned late era are not modelled: exact-path tiers, importance multipliers and
active-project ranking (they need metadata OpenClaw's own workspace here never has).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

import regex

DAY_MS = 24 * 60 * 60 * 1000


@dataclass(frozen=True)
class VectorHit:
    id: str
    path: str
    start_line: int
    end_line: int
    snippet: str
    vector_score: float
    source: str = "memory"


@dataclass(frozen=True)
class KeywordHit:
    id: str
    path: str
    start_line: int
    end_line: int
    snippet: str
    text_score: float
    source: str = "memory"


@dataclass(frozen=True)
class Scored:
    id: str
    path: str
    start_line: int
    end_line: int
    snippet: str
    score: float
    vector_score: float = 0.0
    text_score: float = 0.0
    source: str = "memory"
    decay: float = 1.0  # the temporal-decay multiplier applied (diagnostic)
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def range_key(self) -> tuple[str, str, int, int]:
        return (self.source, self.path, self.start_line, self.end_line)


# ---------------------------------------------------------------------------------------------------
# merge


def merge_hybrid(
    vector: Sequence[VectorHit],
    keyword: Sequence[KeywordHit],
    vector_weight: float = 0.7,
    text_weight: float = 0.3,
    mode: str = "normalised",
) -> list[Scored]:
    """Union by chunk id. Vector rows seed {v, t=0}; keyword rows set t (and replace the snippet) or add {v=0}.

    mode "weighted-sum" (early): vw*v + tw*t. mode "normalised" (late): (vw*v + tw*t)/(vw+tw), which equals the
    weighted sum for weights that add up to 1 (the late code zeroes tw for non-text media paths; the rig
    indexes Markdown only, so that branch never fires).
    """
    rows: dict[str, dict] = {}
    for r in vector:
        rows[r.id] = dict(id=r.id, path=r.path, start_line=r.start_line, end_line=r.end_line, snippet=r.snippet,
                          source=r.source, v=r.vector_score, t=0.0)
    for r in keyword:
        e = rows.get(r.id)
        if e is not None:
            e["t"] = r.text_score
            if r.snippet:
                e["snippet"] = r.snippet
        else:
            rows[r.id] = dict(id=r.id, path=r.path, start_line=r.start_line, end_line=r.end_line,
                              snippet=r.snippet, source=r.source, v=0.0, t=r.text_score)
    out = []
    for e in rows.values():
        if mode == "weighted-sum":
            score = vector_weight * e["v"] + text_weight * e["t"]
        elif mode == "normalised":
            denom = vector_weight + text_weight
            score = (vector_weight * e["v"] + text_weight * e["t"]) / denom if denom > 0 else 0.0
        else:
            raise ValueError(f"unknown merge mode {mode!r}")
        out.append(Scored(e["id"], e["path"], e["start_line"], e["end_line"], e["snippet"], score, e["v"], e["t"],
                          e["source"]))
    return out


# ---------------------------------------------------------------------------------------------------
# temporal decay


def decay_multiplier(age_days: float, half_life_days: float) -> float:
    """exp(-ln2/halfLife * max(0, age)); a non-positive half-life disables decay."""
    if not math.isfinite(half_life_days) or half_life_days <= 0:
        return 1.0
    age = max(0.0, age_days)
    if not math.isfinite(age):
        return 1.0
    return math.exp(-(math.log(2) / half_life_days) * age)


def date_from_path(path: str, dated_re: str) -> int | None:
    """Epoch ms of UTC midnight of a dated memory file, or None (invalid dates are None too)."""
    import datetime as _dt

    norm = re.sub(r"^\./", "", path.replace("\\", "/"))
    m = re.search(dated_re, norm)
    if not m:
        return None
    try:
        d = _dt.datetime(int(m.group(1)), int(m.group(2)), int(m.group(3)), tzinfo=_dt.UTC)
    except ValueError:
        return None
    return int(d.timestamp() * 1000)


def is_evergreen(path: str, dated_re: str, evergreen_names: Iterable[str] = ("MEMORY.md",)) -> bool:
    norm = re.sub(r"^\./", "", path.replace("\\", "/"))
    if norm in tuple(evergreen_names):
        return True
    if not norm.startswith("memory/"):
        return False
    return re.search(dated_re, norm) is None


def file_timestamp_ms(
    path: str, source: str, dated_re: str, evergreen_names: Iterable[str], mtime_ms: int | None
) -> int | None:
    """The age source of a result: the date in a dated path; None for evergreen memory files; else the mtime."""
    ts = date_from_path(path, dated_re)
    if ts is not None:
        return ts
    if source == "memory" and is_evergreen(path, dated_re, evergreen_names):
        return None
    return mtime_ms


def apply_temporal_decay(
    results: Sequence[Scored],
    now_ms: int,
    half_life_days: float,
    dated_re: str,
    evergreen_names: Iterable[str],
    mtimes_ms: dict[str, int] | None = None,
) -> list[Scored]:
    evergreen_names = tuple(evergreen_names)
    out = []
    for r in results:
        ts = file_timestamp_ms(r.path, r.source, dated_re, evergreen_names, (mtimes_ms or {}).get(r.path))
        if ts is None:
            out.append(r)
            continue
        mult = decay_multiplier(max(0, now_ms - ts) / DAY_MS, half_life_days)
        out.append(replace(r, score=r.score * mult, decay=mult))
    return out


# ---------------------------------------------------------------------------------------------------
# sort


def _locale_key(s: str) -> tuple[str, str]:
    # Approximates String.prototype.localeCompare (ICU root collation): case-insensitive first, then exact.
    return (s.casefold(), s)


def sort_results(results: Sequence[Scored], tiebreak: str = "stable") -> list[Scored]:
    """Descending score. "stable" keeps merge order on ties (early `toSorted`); "path" breaks ties by path, start
    and end line (late `compareRankingScores`)."""
    if tiebreak == "path":
        return sorted(results, key=lambda r: (-r.score, _locale_key(r.path), r.start_line, r.end_line))
    return sorted(results, key=lambda r: -r.score)


# ---------------------------------------------------------------------------------------------------
# MMR

_ASCII_TOKEN_RE = re.compile(r"[a-z0-9_]+")
_CJK_RE = re.compile(r"[\u3040-\u309f\u30a0-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\u1100-\u11ff]")
_UNICODE_TOKEN_RE = regex.compile(r"[\p{L}\p{M}\p{N}_]+")


def mmr_tokens(text: str, tokenizer: str = "ascii+cjk") -> frozenset[str]:
    """MMR token sets. "ascii": lower-case /[a-z0-9_]+/ (upstream until PR #29396). "ascii+cjk": that plus CJK
    unigrams and bigrams of originally adjacent CJK characters (extensions/memory-core mmr.ts). "unicode": NFC
    lower-case [\\p{L}\\p{M}\\p{N}_]+ (PR #38945, never merged; kept for comparison only)."""
    lower = text.lower()
    if tokenizer == "ascii":
        return frozenset(_ASCII_TOKEN_RE.findall(lower))
    if tokenizer == "unicode":
        import unicodedata

        return frozenset(_UNICODE_TOKEN_RE.findall(unicodedata.normalize("NFC", lower)))
    if tokenizer != "ascii+cjk":
        raise ValueError(f"unknown MMR tokenizer {tokenizer!r}")
    toks = set(_ASCII_TOKEN_RE.findall(lower))
    if not lower.isascii():
        cjk = [(i, c) for i, c in enumerate(lower) if _CJK_RE.match(c)]
        toks.update(c for _, c in cjk)
        toks.update(a[1] + b[1] for a, b in zip(cjk, cjk[1:], strict=False) if b[0] == a[0] + 1)
    return frozenset(toks)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    if not a or not b:
        return 0.0
    inter = len(a & b)
    union = len(a) + len(b) - inter
    return inter / union if union else 0.0


def mmr_rerank(
    results: Sequence[Scored],
    lam: float = 0.7,
    tokenizer: str = "ascii+cjk",
    tokens: Callable[[str], frozenset[str]] | None = None,
    empty_by_text: bool = False,
) -> list[Scored]:
    """Greedy MMR over every candidate: pick argmax λ·normRel − (1−λ)·maxSim(selected), ties to the higher
    original score (first in order when equal). Relevance is min-max normalised (range 0 → 1); similarity is
    token Jaccard of snippets. λ is clamped to [0, 1]; λ = 1 is a plain descending sort.

    `empty_by_text` (2026.9.6 mmr.ts): two rows without tokens are similar (1) only when their lower-cased
    snippets are equal, instead of Jaccard's 1. This is the reference implementation; searches run the same
    selection vectorised (mmr_matrix.mmr_rerank_matrix) on token ids computed at index time."""
    items = list(results)
    if len(items) <= 1:
        return items
    lam = max(0.0, min(1.0, lam))
    if lam == 1.0:
        return sorted(items, key=lambda r: -r.score)
    tok = tokens or (lambda s: mmr_tokens(s, tokenizer))
    sets = [tok(r.snippet) for r in items]
    empty_text = [r.snippet.lower() if empty_by_text and not t else None for r, t in zip(items, sets, strict=True)]
    hi = max(r.score for r in items)
    lo = min(r.score for r in items)
    rng = hi - lo
    rel = [1.0 if rng == 0 else (r.score - lo) / rng for r in items]
    remaining = list(range(len(items)))  # insertion order, as a JS Set iterates
    max_sim = [0.0] * len(items)  # max similarity to the selected set, kept up to date incrementally
    selected: list[int] = []
    while remaining:
        best = -1
        best_mmr = -math.inf
        for i in remaining:
            m = lam * rel[i] - (1 - lam) * max_sim[i]
            if m > best_mmr or (m == best_mmr and items[i].score > (items[best].score if best >= 0 else -math.inf)):
                best_mmr, best = m, i
        selected.append(best)
        remaining.remove(best)
        for i in remaining:
            if empty_by_text and not sets[i] and not sets[best]:
                s = float(empty_text[i] == empty_text[best])
            else:
                s = jaccard(sets[i], sets[best])
            if s > max_sim[i]:
                max_sim[i] = s
    return [items[i] for i in selected]


# ---------------------------------------------------------------------------------------------------
# final selection


def select_results(
    merged: Sequence[Scored],
    keyword_keys: set[tuple[str, str, int, int]],
    max_results: int,
    min_score: float,
    mode: str = "spare-slots",
    text_weight: float = 0.3,
) -> list[Scored]:
    """The final cut, by era (§1.12b):
    - "strict": score >= minScore, first maxResults.
    - "relaxed" (#29112): strict; if nothing is strict, keyword-backed rows with score >= min(minScore, tw).
    - "spare-slots" (selectHybridSearchResults, PR #92524): strict rows own the window; spare places go to
      keyword-only rows (vector score 0) below minScore, in merged order; nothing strict → every keyword-backed
      row (score >= 0)."""
    strict = [r for r in merged if r.score >= min_score]
    selected = strict[:max_results]
    if mode == "strict":
        return selected
    if mode == "relaxed":
        if strict:
            return selected
        floor_ = min(min_score, text_weight)
        return [r for r in merged if r.range_key in keyword_keys and r.score >= floor_][:max_results]
    if mode != "spare-slots":
        raise ValueError(f"unknown selection mode {mode!r}")
    if not keyword_keys or len(selected) == max_results:
        return selected
    if not strict:
        return [r for r in merged if r.score >= 0 and r.range_key in keyword_keys][:max_results]
    seen = {r.range_key for r in selected}
    for r in merged:
        if len(selected) == max_results:
            break
        k = r.range_key
        if r.score < min_score and r.vector_score == 0 and k in keyword_keys and k not in seen:
            seen.add(k)
            selected.append(r)
    return selected


def select_fts_only(merged: Sequence[Scored], max_results: int, min_score: float, mode: str = "strict") -> list[Scored]:
    """FTS-only mode: strict; late: strict if any row qualifies, else every hit."""
    strict = [r for r in merged if r.score >= min_score]
    if mode == "strict-else-all" and not strict:
        return list(merged)[:max_results]
    return strict[:max_results]
