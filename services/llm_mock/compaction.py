"""The gist-keeping compaction summariser (seed 000, V1.2: compaction keeps topics and decisions, loses
specifics).

Input: session transcripts, `## Session <id> (<date>)` headers followed by `role: content` lines (any
Markdown header starts a new block, so documents rendered as `## path` count too; without headers the
paragraphs are the blocks). Output: a few short clauses per block, joined into one paragraph.

Every candidate sentence is scrubbed (`scrub`): backticked code, parentheticals, everything after a dash or a
semicolon, rationale clauses ("because ...", "since ...", "so that ...", ", so ...", "due to ...", "in order
to ...", "given that ...") and the explanation after a colon that follows a clause of 4+ words are removed; then tokens holding a digit or code punctuation (ports, TTLs, paths, key
formats, `process.env`, `express-rate-limit`) are dropped together with the unit word next to a number
("port 3001", "300 seconds", "30 lines"); dangling function words at the end are trimmed and a leading
"We're / We / I / Let's / Okay," is removed so the clause reads like a summary ("Chose Zod over Joi.").
Named things without punctuation (TypeScript, WebSocket, Redis, Drizzle) survive: they are the topics.
A scrubbed clause counts only if it keeps >= 2 content words.

Per block:
1. Topic: the first clause from the user's non-question sentences (else anyone's, else a question), cut to
   `TOPIC_WORDS` (fewer when many blocks share the budget, never under `MIN_CLAUSE_WORDS`).
2. Decisions: clauses, in order, from non-question sentences with a decision or outcome cue (chose, decided,
   agreed, use/using, switched, migrate, prefer, always, never, plan, next sprint, found, fixed, built,
   added, moved), each cut to `DECISION_WORDS`, skipping any whose content words are already covered.
Length is bounded: a word budget of 60 + 20*log2(n) for n blocks (120 for 8 sessions). Topics come first;
decisions are then handed out round-robin across blocks (every block's first decision, then every block's
second, ...) while the total stays within the budget and a block within `MAX_BLOCK_WORDS`. When n blocks at
`MIN_CLAUSE_WORDS` would overflow the budget, evenly spaced blocks are kept (first and last always).
Clauses are written in block order; identical clauses once.
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
    strip_name,
)

TOPIC_WORDS = 10
DECISION_WORDS = 10
MAX_BLOCK_WORDS = 24
MIN_CLAUSE_WORDS = 4
EMPTY_SUMMARY = "No durable topics or decisions."

_RATIONALE_RE = re.compile(
    r"[,;]?\s*\b(?:because|since|so that|due to|in order to|given that|as a result of|which is why)\b.*$"
    r"|,\s*so\b.*$",
    re.I,
)
# "<a clause of 4+ words>: <explanation>" -> the clause; a short lead ("Next sprint: ...") is a label, kept.
_EXPLAIN_COLON_RE = re.compile(r"^((?:\S+\s+){3,}\S+?):\s.*$")
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
_DANGLING_PREP_RE = re.compile(r"\s+\b(?:with|using|via|in|on|at|to|from|of|by|for|under|over|into|as)([,;:])", re.I)
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
    s = _EXPLAIN_COLON_RE.sub(r"\1", s.strip())
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
    kept: list[str] = []
    for w, d in zip(words, drop, strict=True):
        if not d:
            kept.append(w)
        elif w[-1] in ",;" and kept and kept[-1][-1].isalnum():
            # the dropped token carried the list's comma: keep the comma, so items stay apart
            kept[-1] += w[-1]
    s = " ".join(kept)
    s = _DANGLING_PREP_RE.sub(r"\1", s)
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


_DECISION_RE = re.compile(
    r"\b(?:chose|choose|chosen|decided|decide|agreed|agree on|went with|picked|use|using|switched|switch to|"
    r"migrat\w*|prefer\w*|always|never|plan|planned|next sprint|found|fixed|built|added|moved)\b",
    re.I,
)
_USERS = ("user", "human", "me")


def _clause(sentence: str, max_words: int) -> str:
    """The scrubbed, capped clause of a sentence, or "" when fewer than 2 content words survive."""
    clause = cap_words(scrub(strip_name(sentence).rstrip("?")), max_words)
    return finish(clause) if len(content_stems(clause)) >= 2 else ""


def topic_clause(sents: list[tuple[str, str]], max_words: int) -> str:
    user = [s for sp, s in sents if sp in _USERS and not s.endswith("?")]
    rest = [s for sp, s in sents if sp not in _USERS and not s.endswith("?")]
    questions = [s for _, s in sents if s.endswith("?")]
    for s in user + rest + questions:
        c = _clause(s, max_words)
        if c:
            return c
    return ""


def decision_clauses(sents: list[tuple[str, str]], covered: set[str]) -> list[str]:
    """Clauses of the block's decision/outcome sentences, in order, each adding new content words."""
    out: list[str] = []
    covered = set(covered)
    for _, s in sents:
        if s.endswith("?") or not _DECISION_RE.search(s):
            continue
        c = _clause(s, DECISION_WORDS)
        stems = content_stems(c)
        if c and not stems <= covered:
            out.append(c)
            covered |= stems
    return out


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
    kept = pick_blocks(len(blocks), budget)
    topic_cap = max(MIN_CLAUSE_WORDS, min(TOPIC_WORDS, budget // len(kept)))
    sents = [block_sentences(blocks[i]) for i in kept]
    parts: list[list[str]] = []
    for ss in sents:
        t = topic_clause(ss, topic_cap)
        parts.append([t] if t else [])
    decisions = [decision_clauses(ss, content_stems(" ".join(p))) for ss, p in zip(sents, parts, strict=True)]
    used = sum(len(c.split()) for p in parts for c in p)
    # Decisions are shared out round-robin (each block's first, then each block's second, ...), so an early
    # block with a long topic cannot starve the later ones; the budget and the per-block cap bound it all.
    for r in range(max((len(d) for d in decisions), default=0)):
        for p, d in zip(parts, decisions, strict=True):
            if r >= len(d):
                continue
            w = len(d[r].split())
            if used + w <= budget and sum(len(c.split()) for c in p) + w <= MAX_BLOCK_WORDS:
                p.append(d[r])
                used += w
    clauses: list[str] = []
    seen: set[str] = set()
    for p in parts:
        for c in p:
            if c.lower() not in seen:
                seen.add(c.lower())
                clauses.append(c)
    return " ".join(clauses) if clauses else EMPTY_SUMMARY
