"""The gist-keeping compaction summariser (seed 000, V1.2: compaction keeps topics, loses specifics).

Input: session transcripts, `## Session <id> (<date>)` headers followed by `role: content` lines (any
Markdown header starts a new block, so documents rendered as `## path` count too; without headers the
paragraphs are the blocks). Output: one short clause per block, joined into one paragraph.

Per block:
1. Candidate sentences in order: the user's first (non-question) sentences, then anyone's, then questions.
2. Each candidate is scrubbed (`scrub`): backticked code, parentheticals, everything after a dash or a
   semicolon, and rationale clauses ("because ...", "since ...", "so that ...", "due to ...", "in order
   to ...", "given that ...") are removed; then tokens holding a digit or code punctuation (ports, TTLs,
   paths, key formats, `process.env`, `express-rate-limit`) are dropped together with the unit word next to
   a number ("port 3001", "300 seconds", "30 lines"); dangling function words at the end are trimmed and a
   leading "We're / We / I / Let's / Okay," is removed so the clause reads like a summary ("Chose Zod over
   Joi."). Named things without punctuation (TypeScript, WebSocket, Redis) survive: they are topics.
3. The first candidate whose clause keeps >= 2 content words is the block's clause, cut to a word cap.
Length is bounded: a word budget of 60 + 20*log2(n) for n blocks, at most 12 and at least 4 words per
clause; when n blocks at 4 words would overflow the budget, evenly spaced blocks are kept (first and last
always). Identical clauses are written once.
"""

from __future__ import annotations

import math
import re

from services.llm_mock.text import (
    STOP_WORDS,
    clean_line,
    content_stems,
    is_header,
    speaker_of,
    split_sentences,
)

MAX_CLAUSE_WORDS = 12
MIN_CLAUSE_WORDS = 4
EMPTY_SUMMARY = "No durable topics or decisions."

_RATIONALE_RE = re.compile(
    r"[,;]?\s*\b(?:because|since|so that|due to|in order to|given that|as a result of|which is why)\b.*$", re.I
)
_DASH_RE = re.compile(r"\s+(?:—|–|--|-)\s+.*$|—.*$|;.*$")
_BACKTICK_RE = re.compile(r"`[^`]*`")
_PAREN_RE = re.compile(r"\s*\([^()]*\)|\s*\[[^\[\]]*\]")
_CODE_INNER = set(":/{}[]()<>=@#$%^&*_\\|~.+")
_EDGE = "\"'.,;:!?*“”‘’"
UNIT_BEFORE = frozenset({"port", "ports", "ttl", "version", "v", "timeout", "limit", "max", "min", "size"})
UNIT_AFTER = frozenset(
    """s sec secs second seconds ms millisecond milliseconds minute minutes mins min hour hours h day days
    week weeks line lines char chars characters token tokens mb gb kb % percent x times items retries
    requests rps qps mins""".split()
)
TRAILING_FUNCTION = STOP_WORDS | {"-", "–", "—", ":"}
_LEADING_FILLER_RE = re.compile(
    r"^(?:(?:we're|we are|we've|we|i'm|i am|i've|i|let's|lets|okay|ok|so|now|hey|hi|please|also|and|then|"
    r"alright|right|well|yeah|yes)\b[,!]?\s+)+",
    re.I,
)


def _is_specific_token(tok: str) -> bool:
    core = tok.strip(_EDGE)
    if not core:
        return False
    if any(ch.isdigit() for ch in core):
        return True
    if core.count("-") >= 2:
        return True
    return any(ch in _CODE_INNER for ch in core[1:-1]) or core.startswith(("/", "~", "$", "@", "."))


def scrub(sentence: str) -> str:
    """A sentence with its specifics and rationale removed (may return "")."""
    s = _BACKTICK_RE.sub(" ", sentence)
    s = _PAREN_RE.sub("", s)
    s = _DASH_RE.sub("", s)
    s = _RATIONALE_RE.sub("", s)
    words = s.split()
    drop = [False] * len(words)
    for i, w in enumerate(words):
        if _is_specific_token(w):
            drop[i] = True
            if any(ch.isdigit() for ch in w):
                if i > 0 and words[i - 1].strip(_EDGE).lower() in UNIT_BEFORE:
                    drop[i - 1] = True
                if i + 1 < len(words) and words[i + 1].strip(_EDGE).lower() in UNIT_AFTER:
                    drop[i + 1] = True
    kept = [w for w, d in zip(words, drop, strict=True) if not d]
    # A dropped token may have carried the clause's comma; commas left dangling are cleaned below.
    s = " ".join(kept)
    s = re.sub(r"\s+([,.;:!?])", r"\1", s)
    s = re.sub(r"([,;:])(?:\s*[,;:])+", r"\1", s)
    s = _LEADING_FILLER_RE.sub("", s.strip())
    return _trim_tail(s)


def _trim_tail(s: str) -> str:
    words = s.rstrip(" .,;:!?").split()
    while words and (words[-1].strip(_EDGE).lower() in TRAILING_FUNCTION or not words[-1].strip(_EDGE)):
        words.pop()
    return " ".join(words).rstrip(" ,;:")


def cap_words(clause: str, n: int) -> str:
    words = clause.split()
    if len(words) <= n:
        return clause
    return _trim_tail(" ".join(words[:n]))


def finish(clause: str) -> str:
    clause = clause.strip().rstrip(" ,;:")
    if not clause:
        return ""
    clause = clause[0].upper() + clause[1:]
    return clause if clause[-1] in ".!?" else clause + "."


def split_blocks(transcripts: str) -> list[list[str]]:
    """Lines of each block; a Markdown header starts a block, and without headers paragraphs are blocks."""
    lines = transcripts.splitlines()
    if any(is_header(ln) for ln in lines):
        blocks: list[list[str]] = [[]]
        for ln in lines:
            if is_header(ln):
                blocks.append([])
            elif ln.strip():
                blocks[-1].append(ln)
    else:
        blocks = [[ln for ln in p.splitlines() if ln.strip()] for p in re.split(r"\n\s*\n", transcripts)]
    return [b for b in blocks if b]


def block_sentences(lines: list[str]) -> list[tuple[str, str]]:
    """(speaker, sentence) pairs of a block; a line without a speaker continues the previous speaker."""
    out: list[tuple[str, str]] = []
    speaker = ""
    for ln in lines:
        sp = speaker_of(ln)
        if sp is not None:
            speaker = sp
        for s in split_sentences(clean_line(ln)):
            s = clean_line(s)
            if s:
                out.append((speaker, s))
    return out


def block_clause(lines: list[str], max_words: int) -> str:
    sents = block_sentences(lines)
    user = [s for sp, s in sents if sp in ("user", "human", "me") and not s.endswith("?")]
    rest = [s for sp, s in sents if sp not in ("user", "human", "me") and not s.endswith("?")]
    questions = [s for _, s in sents if s.endswith("?")]
    for s in user + rest + questions:
        clause = cap_words(scrub(s.rstrip("?")), max_words)
        if len(content_stems(clause)) >= 2:
            return finish(clause)
    return ""


def word_budget(n_blocks: int) -> int:
    return int(60 + 20 * math.log2(max(n_blocks, 2)))


def pick_blocks(n: int, budget: int) -> list[int]:
    """Indices of the blocks summarised: all of them, or evenly spaced ones (first and last kept)."""
    m = max(2, budget // MIN_CLAUSE_WORDS)
    if n <= m:
        return list(range(n))
    return sorted({round(i * (n - 1) / (m - 1)) for i in range(m)})


def summarize(transcripts: str) -> str:
    blocks = split_blocks(transcripts)
    if not blocks:
        return EMPTY_SUMMARY
    budget = word_budget(len(blocks))
    per_clause = max(MIN_CLAUSE_WORDS, min(MAX_CLAUSE_WORDS, budget // len(blocks)))
    clauses: list[str] = []
    seen: set[str] = set()
    for i in pick_blocks(len(blocks), budget):
        c = block_clause(blocks[i], per_clause)
        if c and c.lower() not in seen:
            seen.add(c.lower())
            clauses.append(c)
    return " ".join(clauses) if clauses else EMPTY_SUMMARY
