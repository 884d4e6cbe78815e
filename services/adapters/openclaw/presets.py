"""The constants of OpenClaw's builtin memory search, by era, as named presets.

Every number here is a fact of OpenClaw's source of that era (files and functions named below and in the code):
- `openclaw-2026-02` — upstream as of February 2026 (`src/memory/*`): ASCII FTS tokens, the early
  `bm25RankToScore` that clamps FTS5's negative ranks to 0 and so scores every keyword hit 1.0 (bug #5767),
  the plain weighted sum `vw*v + tw*t`, MMR and temporal decay off (opt-in), ASCII MMR tokens, strict final
  selection (`score >= minScore`, first maxResults). Hybrid weights, MMR and decay stay configurable, as
  they were then.
- `openclaw-late` — late 2026 (`extensions/memory-core/*`): Unicode FTS tokens (`[\\p{L}\\p{N}_]+`), the fixed
  mapping (`rel/(1+rel)` for negative ranks), the normalised merge `(vw*v + tw*t)/(vw+tw)` (identical for
  0.7/0.3), MMR (λ 0.7, ASCII + CJK uni/bigram tokens) and decay (30-day half-life) on by default, and the
  "spare slots" final selection (`selectHybridSearchResults`, PR #92524). Knobs are hard-coded upstream
  (knob purge #111382), so the preset rejects overrides of them.
- `openclaw-2026-09` — the release users run in late 2026, openclaw@2026.9.6 (npm), read off its bundled
  dist/ (file and function names in keyword_search.py, ranking_2609.py, chunker.chunk_markdown_v5): chunking
  version 5 (MEMORY.md and USER.md one bullet or heading per chunk; blank chunks dropped), 200 candidates per
  leg whatever maxResults, body FTS rows boosted lexically (coverage, density, path, length), filename search
  over separately indexed paths (exact path / basename / stem first), per-keyword fallback searches when the
  AND query finds fewer than 200 rows, the un-normalised merge with exact-path tiers, importance multiplier
  (neutral when absent: the rig's workspace writes no importance annotations), 30-day decay of dated
  `YYYY-MM-DD.md` / `YYYY-MM-DD-<slug>.md` files at any depth under memory/ (MEMORY.md, USER.md and undated
  memory/ files evergreen), MMR, keyword preservation / spare slots. Where the 2026.9.6 docs and its code
  differ, the code is followed: the docs give the score as "hybrid relevance × recency decay × importance
  multiplier" (the package's docs/concepts/memory-search.md), but in the code an exact-path row scores 1 and a row whose
  content score is 0 scores 0 whatever its decay, and the lexical boost, the per-keyword fallback legs and
  the un-normalised merge are not documented at all.
`openclaw` means `openclaw-2026-09` (the release users run); `openclaw-late` stays selectable.

Pinned choices where the eras overlap: the dated-path regex is the one before PR #121103 (a date file directly
under `memory/`, no subfolders, no `-slug`); the 700-character snippet is cut with `truncateUtf16Safe`.
"""

from __future__ import annotations

from typing import Any

# Shared by both eras (src/agents/memory-search.ts DEFAULT_*; src/memory/manager.ts SNIPPET_MAX_CHARS).
COMMON: dict[str, Any] = {
    "chunk_tokens": 400,  # DEFAULT_CHUNK_TOKENS → maxChars = max(32, tokens*4) = 1600
    "chunk_overlap_tokens": 80,  # DEFAULT_CHUNK_OVERLAP → overlapChars = 320, capped at maxChars/2
    "chars_per_token": 4,
    "max_results": 6,  # DEFAULT_MAX_RESULTS
    "min_score": 0.35,  # DEFAULT_MIN_SCORE
    "candidate_multiplier": 4,  # DEFAULT_HYBRID_CANDIDATE_MULTIPLIER
    "candidate_cap": 200,  # candidates = min(200, max(1, floor(maxResults*4)))
    "vector_weight": 0.7,  # DEFAULT_HYBRID_VECTOR_WEIGHT
    "text_weight": 0.3,  # DEFAULT_HYBRID_TEXT_WEIGHT
    "hybrid_enabled": True,
    "snippet_max_chars": 700,  # SNIPPET_MAX_CHARS, UTF-16 code units
    "fts_tokenizer": "unicode61",  # store.fts.tokenizer default
    "mmr_lambda": 0.7,  # DEFAULT_MMR_CONFIG.lambda
    "decay_half_life_days": 30.0,  # DEFAULT_TEMPORAL_DECAY_CONFIG.halfLifeDays
    "dated_path_regex": r"(?:^|/)memory/(\d{4})-(\d{2})-(\d{2})\.md$",  # DATED_MEMORY_PATH_RE (pre-#121103)
    "flush_soft_tokens": 4000,  # DEFAULT_MEMORY_FLUSH_SOFT_TOKENS (recorded; the rig flushes once per session)
    "compaction_reserve_tokens_floor": 20000,  # DEFAULT_PI_COMPACTION_RESERVE_TOKENS_FLOOR (recorded)
}

EARLY: dict[str, Any] = {
    **COMMON,
    "era": "2026-02",
    "release": "openclaw 2026.2 (src/memory/*, February 2026)",
    "fts_token_regex": r"[A-Za-z0-9_]+",
    "bm25_mapping": "early",  # 1/(1+max(0,rank)) → 1.0 for every FTS5 hit
    "merge": "weighted-sum",  # vw*v + tw*t
    "mmr_enabled": False,
    "mmr_tokenizer": "ascii",  # /[a-z0-9_]+/g (before PR #29396)
    "decay_enabled": False,
    "evergreen_paths": ("MEMORY.md", "memory.md"),  # + undated memory/** files
    "selection": "strict",
    "fts_only_selection": "strict",
    "sort_tiebreak": "stable",  # toSorted((a, b) => b.score - a.score): merge order on ties
    "knobs_configurable": ("vector_weight", "text_weight", "mmr_enabled", "decay_enabled"),
}

LATE: dict[str, Any] = {
    **COMMON,
    "era": "late-2026",
    "release": "openclaw main of mid 2026 (extensions/memory-core, PR #92524; before 2026.9)",
    "fts_token_regex": r"[\p{L}\p{N}_]+",
    "bm25_mapping": "late",  # !finite → 1/1000; rank<0 → r/(1+r), r=-rank; else 1/(1+rank)
    "merge": "normalised",  # (vw*v + tw*t)/(vw+tw)
    "mmr_enabled": True,
    "mmr_tokenizer": "ascii+cjk",  # extensions/memory-core/src/memory/mmr.ts
    "decay_enabled": True,
    "evergreen_paths": ("MEMORY.md",),  # + undated memory/** files
    "selection": "spare-slots",  # selectHybridSearchResults (PR #92524)
    "fts_only_selection": "strict-else-all",
    "sort_tiebreak": "path",  # compareRankingScores: path, startLine, endLine
    "knobs_configurable": (),
}

# openclaw@2026.9.6: memory-search-D3rrM8mS.mjs DEFAULT_* (same numbers as COMMON), plus the rules above.
V2026_09: dict[str, Any] = {
    **LATE,
    "era": "2026.9",
    "release": "openclaw 2026.9.6",
    "chunker": "v5",  # MEMORY_CHUNKING_VERSION = 5
    "per_entry_paths": ("MEMORY.md", "USER.md"),  # prepareMemoryIndexChunks perEntry
    "memory_roots_only": True,  # listMemoryFiles: MEMORY.md, USER.md, memory/**/*.md; nothing else is indexed
    "candidate_universe": 200,  # SEARCH_CANDIDATE_UNIVERSE: search() asks for max(200, maxResults) candidates
    "keyword_search": "2026.9",  # boost + filename search + per-keyword fallback (keyword_search.py)
    "keyword_fallback_terms": 6,  # KEYWORD_FALLBACK_SEARCH_TERM_LIMIT
    "exact_path_candidates": 200,  # EXACT_PATH_CANDIDATE_LIMIT
    "merge": "2026.9",  # vw*v + tw*k, exact-path tiers first (ranking_2609.py)
    "importance": "neutral-when-absent",  # importanceMultiplier(null) = 1
    "mmr_empty_tokens": "equal-text",  # mmr.ts: two token-less snippets are similar only if equal
    "dated_path_regex": r"(?:^|/)memory/(?:[^/]+/)*(\d{4})-(\d{2})-(\d{2})(?:-[^/]+)?\.md$",  # DATED_MEMORY_PATH_RE
    "evergreen_paths": ("MEMORY.md", "USER.md"),  # isEvergreenMemoryPath (+ undated memory/** files)
    "fts_only_selection": "strict-else-all",  # selectScoredResults(ranked, max, minScore, 0)
}

PRESETS: dict[str, dict[str, Any]] = {
    "openclaw-2026-02": EARLY,
    "openclaw-late": LATE,
    "openclaw-2026-09": V2026_09,
    "openclaw": V2026_09,
}


def resolve_preset(name: str) -> dict[str, Any]:
    if name not in PRESETS:
        raise ValueError(f"openclaw: unknown preset {name!r}; known: {sorted(PRESETS)}")
    return dict(PRESETS[name])


def candidate_count(max_results: int, multiplier: float = 4, cap: int = 200, universe: int = 0) -> int:
    """candidates = min(200, max(1, floor(maxResults × multiplier))) (src/memory/manager.ts). 2026.9.6 calls
    that with maxResults = max(200, maxResults) (`universe` = 200), which is 200 for any request."""
    import math

    if max_results < 0:
        raise ValueError(f"openclaw: max_results must be >= 0, got {max_results}")
    n = max(universe, max_results)
    return min(cap, max(1, math.floor(n * multiplier)))
