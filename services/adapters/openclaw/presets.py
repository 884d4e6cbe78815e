"""The constants of OpenClaw's builtin memory search, by era, as named presets.

Every number here is a fact of OpenClaw's source (reference/peers.md §1, with the corrections of §1.12b):
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
`openclaw` means `openclaw-late`.

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

PRESETS: dict[str, dict[str, Any]] = {
    "openclaw-2026-02": EARLY,
    "openclaw-late": LATE,
    "openclaw": LATE,
}


def resolve_preset(name: str) -> dict[str, Any]:
    if name not in PRESETS:
        raise ValueError(f"openclaw: unknown preset {name!r}; known: {sorted(PRESETS)}")
    return dict(PRESETS[name])


def candidate_count(max_results: int, multiplier: float = 4, cap: int = 200) -> int:
    """candidates = min(200, max(1, floor(maxResults × multiplier))) (src/memory/manager.ts)."""
    import math

    return min(cap, max(1, math.floor(max_results * multiplier)))
