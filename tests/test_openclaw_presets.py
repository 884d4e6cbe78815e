"""The OpenClaw presets' constants (services/adapters/openclaw/presets.py), pinned by hand and, when the sidecar's
openclaw@2026.9.6 package is installed (`make setup-openclaw`), read back from its bundled dist/ so a preset can
never drift from the release it names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from services.adapters.openclaw.presets import EARLY, LATE, PRESETS, V2026_09, candidate_count, resolve_preset
from services.adapters.openclaw_real.node import OPENCLAW_VERSION, SIDECAR_DIR, installed_openclaw_version

DIST = SIDECAR_DIR / "node_modules" / "openclaw" / "dist"
needs_dist = pytest.mark.skipif(installed_openclaw_version() != OPENCLAW_VERSION or not DIST.is_dir(),
                                reason=f"[requires:openclaw] openclaw@{OPENCLAW_VERSION} not installed in the sidecar (make setup-openclaw)")

# Shared by every era (the DEFAULT_* constants of openclaw/openclaw's memory search, src/agents/memory-search.ts).
COMMON_PINNED = {
    "chunk_tokens": 400, "chunk_overlap_tokens": 80, "chars_per_token": 4, "max_results": 6, "min_score": 0.35,
    "candidate_multiplier": 4, "candidate_cap": 200, "vector_weight": 0.7, "text_weight": 0.3,
    "hybrid_enabled": True, "snippet_max_chars": 700, "fts_tokenizer": "unicode61", "mmr_lambda": 0.7,
    "decay_half_life_days": 30.0, "flush_soft_tokens": 4000, "compaction_reserve_tokens_floor": 20000,
}


@pytest.mark.parametrize("preset", ["openclaw-2026-02", "openclaw-late", "openclaw-2026-09", "openclaw"])
def test_common_constants_in_every_preset(preset):
    p = resolve_preset(preset)
    assert {k: p[k] for k in COMMON_PINNED} == COMMON_PINNED


def test_2026_09_constants():
    p = resolve_preset("openclaw")
    assert p is not V2026_09 and p == V2026_09  # a copy: a caller's edit never reaches the preset
    assert (p["era"], p["release"], p["chunker"]) == ("2026.9", "openclaw 2026.9.6", "v5")
    assert (p["candidate_universe"], p["keyword_fallback_terms"], p["exact_path_candidates"]) == (200, 6, 200)
    assert (p["mmr_enabled"], p["decay_enabled"], p["selection"], p["fts_only_selection"]) == (
        True, True, "spare-slots", "strict-else-all")
    assert p["evergreen_paths"] == ("MEMORY.md", "USER.md") and p["per_entry_paths"] == ("MEMORY.md", "USER.md")


def test_early_and_late_differ_where_the_eras_did():
    assert (EARLY["bm25_mapping"], LATE["bm25_mapping"]) == ("early", "late")
    assert (EARLY["merge"], LATE["merge"]) == ("weighted-sum", "normalised")
    assert (EARLY["mmr_enabled"], EARLY["decay_enabled"]) == (False, False)
    assert (LATE["mmr_enabled"], LATE["decay_enabled"]) == (True, True)
    assert EARLY["knobs_configurable"] == ("vector_weight", "text_weight", "mmr_enabled", "decay_enabled")
    assert LATE["knobs_configurable"] == ()


def test_unknown_preset_names_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown preset 'openclaw-2027'.*'openclaw-2026-09'"):
        resolve_preset("openclaw-2027")
    assert PRESETS["openclaw"] is V2026_09


@pytest.mark.parametrize("kwargs, n", [
    ({"max_results": 6}, 24),                        # floor(6 × 4)
    ({"max_results": 0}, 1),                         # max(1, 0)
    ({"max_results": 50}, 200),                      # min(200, 200)
    ({"max_results": 51}, 200),                      # min(200, 204)
    ({"max_results": 49}, 196),
    ({"max_results": 6, "multiplier": 2.5}, 15),
    ({"max_results": 3, "multiplier": 0.5}, 1),      # floor(1.5)
    ({"max_results": 6, "universe": 200}, 200),      # 2026.9.6: max(200, 6) × 4, capped
    ({"max_results": 6, "universe": 200, "cap": 10_000}, 800),
    ({"max_results": 300, "universe": 200, "cap": 10_000}, 1200),
    ({"max_results": 0, "universe": 0}, 1),
])
def test_candidate_count(kwargs, n):
    assert candidate_count(**kwargs) == n


def test_candidate_count_rejects_a_negative_max_results():
    with pytest.raises(ValueError, match="max_results must be >= 0, got -1"):
        candidate_count(-1)


# ------------------------------------------------------------------------------------- against the release
def _const(path_glob: str, name: str, must_contain: str = "") -> str:
    """The literal assigned to `const NAME = <literal>;` in the one dist file matching the glob (and containing
    `must_contain`, where the name is defined in more than one bundle)."""
    hits = []
    for f in sorted(DIST.glob(path_glob)):
        text = f.read_text(encoding="utf-8", errors="replace")
        if must_contain and must_contain not in text:
            continue
        hits += re.findall(rf"(?:const |,|\b){re.escape(name)} ?= ?([0-9.e]+|true|false|!0|!1)\b", text)
    assert hits, f"{name} not found in {path_glob}"
    assert len(set(hits)) == 1, f"{name}: several values {hits} in {path_glob}"
    return hits[0]


def _num(lit: str) -> float:
    return float(lit)


@needs_dist
@pytest.mark.parametrize("name, glob, must_contain, key", [
    ("DEFAULT_CHUNK_TOKENS", "memory-search-*.mjs", "DEFAULT_HYBRID_VECTOR_WEIGHT", "chunk_tokens"),
    ("DEFAULT_CHUNK_OVERLAP", "memory-search-*.mjs", "DEFAULT_HYBRID_VECTOR_WEIGHT", "chunk_overlap_tokens"),
    ("DEFAULT_MAX_RESULTS", "memory-search-*.mjs", "DEFAULT_HYBRID_VECTOR_WEIGHT", "max_results"),
    ("DEFAULT_MIN_SCORE", "memory-search-*.mjs", "DEFAULT_HYBRID_VECTOR_WEIGHT", "min_score"),
    ("DEFAULT_HYBRID_VECTOR_WEIGHT", "memory-search-*.mjs", "", "vector_weight"),
    ("DEFAULT_HYBRID_TEXT_WEIGHT", "memory-search-*.mjs", "", "text_weight"),
    ("DEFAULT_HYBRID_CANDIDATE_MULTIPLIER", "memory-search-*.mjs", "", "candidate_multiplier"),
    ("DEFAULT_MMR_LAMBDA", "memory-search-*.mjs", "", "mmr_lambda"),
    ("DEFAULT_TEMPORAL_DECAY_HALF_LIFE_DAYS", "memory-search-*.mjs", "", "decay_half_life_days"),
    ("SNIPPET_MAX_CHARS", "extensions/memory-core/manager-runtime.js", "", "snippet_max_chars"),
    ("SEARCH_CANDIDATE_UNIVERSE", "extensions/memory-core/manager-runtime.js", "", "candidate_universe"),
    ("KEYWORD_FALLBACK_SEARCH_TERM_LIMIT", "extensions/memory-core/manager-runtime.js", "", "keyword_fallback_terms"),
    ("EXACT_PATH_CANDIDATE_LIMIT", "extensions/memory-core/manager-runtime.js", "", "exact_path_candidates"),
    ("DEFAULT_MEMORY_FLUSH_SOFT_TOKENS", "extensions/memory-core/index.js", "", "flush_soft_tokens"),
    ("DEFAULT_AGENT_COMPACTION_RESERVE_TOKENS_FLOOR", "openclaw-runtime-agent-*.mjs", "",
     "compaction_reserve_tokens_floor"),
])
def test_2026_09_numbers_are_the_release_numbers(name, glob, must_contain, key):
    assert _num(_const(glob, name, must_contain)) == V2026_09[key]


@needs_dist
def test_2026_09_switches_and_chunker_are_the_release_ones():
    assert _const("memory-search-*.mjs", "DEFAULT_MMR_ENABLED") in ("true", "!0") and V2026_09["mmr_enabled"]
    assert _const("memory-search-*.mjs", "DEFAULT_TEMPORAL_DECAY_ENABLED") in ("true", "!0")
    assert V2026_09["decay_enabled"]
    assert _const("memory-search-*.mjs", "DEFAULT_HYBRID_ENABLED") in ("true", "!0") and V2026_09["hybrid_enabled"]
    assert _const("markdown-chunks-*.mjs", "MEMORY_CHUNKING_VERSION") == "5" and V2026_09["chunker"] == "v5"
    # maxChars = max(32, tokens × 4): the chunker's characters per token
    chunks = "".join(f.read_text(encoding="utf-8") for f in sorted(DIST.glob("markdown-chunks-*.mjs")))
    assert re.search(r"Math\.max\(32, ?\w+(?:\.\w+)* ?\* ?4\)", chunks) and V2026_09["chars_per_token"] == 4


def test_dist_path_is_the_sidecars():
    assert DIST == Path(SIDECAR_DIR) / "node_modules" / "openclaw" / "dist"
