"""Text primitives shared by every llm-mock behaviour: tokens, stems, stop words, sentences, specifics.

Everything here is a small pure function so the behaviours built on top (answerer, judge, compaction, ...)
stay deterministic and can be checked by hand.

Tokenisation keeps code-like tokens whole: `cache:{entity}:{id}`, `src/validation/`, `localhost:3001`,
`types.ts`, `express-rate-limit` survive as one lower-cased token (a word with a single hyphen such as
`type-safe` is two ordinary words), and their alphanumeric parts are added as
well (`cache`, `entity`, `id`) so topic overlap still sees them. A number with a unit (`300s`, `30ms`) yields
the bare number (`300`) so "300 seconds" and "300s" agree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A hand-written English stop list plus the question/filler words and interjections chats are full of. Generic verbs
# such as "use" are here on purpose: "what do we use for X" must be matched on X, not on "use".
STOP_WORDS = frozenset(
    """
    a about above after again against all also am an and any are aren't as at be because been before being
    below between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down
    during each either else etc few for from further get gets getting got had hadn't has hasn't have haven't
    having he he'd he'll he's her here here's hers herself him himself his how how's however i i'd i'll i'm
    i've if in into is isn't it it's its itself just let let's like lets may me might more most much must
    mustn't my myself need needs no nor not now of off ok okay on once only or other ought our ours ourselves
    out over own per please same shall shan't she she'd she'll she's should shouldn't so some such than that
    that's the their theirs them themselves then there there's these they they'd they'll they're they've this
    those through thus to too under until up upon us use used uses using very via want wants was wasn't we
    we'd we'll we're we've were weren't what what's whats when when's where where's whether which while who
    who's whom whose why why's will with won't would wouldn't yes yet you you'd you'll you're you've your
    yours yourself yourselves e.g i.e eg ie one thing things really actually currently go going gonna
    hey hi hello wow thanks thank yeah yep oh ah lol haha hmm cool awesome nice glad
    """.split()
)

# Characters that make a token "code-like" when they sit inside it (not at its ends).
_CODE_INNER = set(":/{}[]()<>=@#$%^&*_\\|~.+-")
_EDGE_PUNCT = "\"'`.,;:!?()[]<>*“”‘’…"
_NUM_UNIT_RE = re.compile(r"^(\d+(?:\.\d+)?)([a-z%]{0,4})$")
_ALNUM_PART_RE = re.compile(r"[a-z0-9]+")
_WORD_RE = re.compile(r"^[a-z]+(?:'[a-z]+)?$")
_HYPHEN_WORD_RE = re.compile(r"^[a-z]{2,}-[a-z]{2,}$")


def stem(word: str) -> str:
    """A deliberately simple suffix stripper (lower-case input).

    Only alphabetic words longer than 3 letters are touched. Order: plural `-ies` -> `-y`, `-s` (not `-ss`,
    `-us`, `-is`), then `-ing` / `-ed` (undoubling a final double consonant: running -> run), then `-ly`,
    then `-ion` after t/s (migration -> migrat), then a final `-e`, so that cache/caches/caching -> cach,
    migrate/migrated/migration -> migrat, type/types -> typ.
    """
    w = word
    if len(w) <= 3 or not w.isalpha():
        return w
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("ied") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    for suf in ("ing", "ed"):
        if w.endswith(suf) and len(w) - len(suf) >= 3:
            w = w[: -len(suf)]
            if len(w) >= 4 and w[-1] == w[-2] and w[-1] not in "aeiouls":
                w = w[:-1]
            break
    if w.endswith("ly") and len(w) > 5:
        w = w[:-2]
    if w.endswith("ion") and len(w) >= 7 and w[-4] in "ts":
        w = w[:-3]
    if w.endswith("e") and len(w) > 3:
        w = w[:-1]
    return w


@dataclass(frozen=True)
class Token:
    """One normalised token. `kind` is "word", "number" or "code"; `norm` is what is compared."""

    norm: str
    kind: str
    surface: str  # the original text (edge punctuation removed), for case-sensitive checks


def is_code_like(s: str) -> bool:
    inner = s[1:-1]
    return any(ch in _CODE_INNER for ch in inner) and any(ch.isalnum() for ch in s)


def tokens(text: str) -> list[Token]:
    """All tokens of `text` in order (stop words included; callers filter with `content`)."""
    out: list[Token] = []
    for raw in text.split():
        surface = raw.strip(_EDGE_PUNCT)
        # An em dash or a trailing slash is never part of a token's meaning.
        surface = surface.strip("—–").rstrip("/")
        if not surface:
            continue
        low = surface.lower()
        low = re.sub(r"(?<=\d),(?=\d{3})", "", low)  # 1,000 -> 1000
        m = _NUM_UNIT_RE.match(low)
        if m:
            out.append(Token(m.group(1), "number", surface))
            if len(m.group(2)) >= 2:
                out.append(Token(m.group(2), "word", surface))
            continue
        if low in STOP_WORDS:
            out.append(Token(low, "word", surface))
            continue
        if _HYPHEN_WORD_RE.match(low):
            # type-safe, brute-force, TypeScript-first: ordinary words, not identifiers
            for part in low.split("-"):
                out.append(Token(part if part in STOP_WORDS else stem(part), "word", surface))
            continue
        if is_code_like(low) and not _WORD_RE.match(low):
            out.append(Token(low, "code", surface))
            for part in _ALNUM_PART_RE.findall(low):
                if part.isdigit():
                    out.append(Token(part, "number", surface))
                elif len(part) > 1 and part not in STOP_WORDS:
                    out.append(Token(stem(part), "word", surface))
            continue
        word = low.replace("’", "'")
        if any(ch.isdigit() for ch in word):
            # v2, 3xx, ipv4: an identifier with digits counts as code.
            out.append(Token(word, "code", surface))
            continue
        word = "".join(ch for ch in word if ch.isalnum() or ch == "'")
        if not word:
            continue
        out.append(Token(word if word in STOP_WORDS else stem(word.replace("'", "")), "word", surface))
    return out


def content(toks: list[Token]) -> list[Token]:
    """Tokens that carry meaning: numbers, code, and words that are neither stop words nor single letters."""
    keep = []
    for t in toks:
        if t.kind != "word":
            keep.append(t)
        elif t.norm not in STOP_WORDS and len(t.norm) > 1 and "'" not in t.norm:
            keep.append(t)
    return keep


def content_stems(text: str) -> set[str]:
    return {t.norm for t in content(tokens(text))}


def hard_specifics(text: str) -> set[str]:
    """Numbers and code-like tokens: the details compaction loses and a grounded answer must carry."""
    return {t.norm for t in tokens(text) if t.kind in ("number", "code")}


def _camel(s: str) -> bool:
    return bool(re.search(r"[a-z][A-Z]", s)) and s.isalnum()


def named_terms(text: str, include_initial: bool = False) -> set[str]:
    """Names of tools and things: CamelCase words anywhere, and Capitalised words that are not the first
    word of a sentence (unless `include_initial`: a short ground truth like "Drizzle" is all name).
    ALL-CAPS acronyms (API, ORM, JWT) are left out: they are usually generic."""
    out: set[str] = set()
    for sent in split_sentences(text):
        words = sent.split()
        for i, raw in enumerate(words):
            s = raw.strip(_EDGE_PUNCT)
            if not s or not s[0].isalpha():
                continue
            if _camel(s):
                out.add(stem(s.lower()))
                continue
            if not (s[0].isupper() and s[1:].islower() and s.isalpha() and len(s) > 1):
                continue
            if s.lower() in STOP_WORDS:
                continue
            if i == 0 and not include_initial:
                continue
            out.add(stem(s.lower()))
    return out


# --------------------------------------------------------------------------------------------------------
# Sentences and line cleaning

_SENT_SPLIT_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'`(\[*])")
_SPEAKER_RE = re.compile(
    r"^\s*(?:\*\*)?\[?(?:user|assistant|system|human|ai|bot|model|developer|tool|me|agent)\]?(?:\*\*)?\s*:\s*",
    re.I,
)
_BULLET_RE = re.compile(r"^\s*(?:[-*•+]|\d{1,3}[.)])\s+")
_SCORE_TAG_RE = re.compile(r"^\s*[\[(](?:score[:=]?\s*)?-?\d+(?:\.\d+)?[\])]\s*", re.I)
_OPEN_TAG_RE = re.compile(r"^\s*(?:<[A-Za-z_][\w.-]*(?:\s[^<>]*)?>\s*)+")
_CLOSE_TAG_RE = re.compile(r"(?:\s*</[A-Za-z_][\w.-]*>)+\s*$")
_HEADER_RE = re.compile(r"^\s*#{1,6}\s")
_NAME_PREFIX_RE = re.compile(r"^[A-Z][A-Za-z'.-]{1,30}(?: [A-Z][A-Za-z'.-]{1,30})?:\s+")
_BRACKET_NOTE_RE = re.compile(r"^\[[A-Z][A-Z _-]*:[^\]]*\]$")
_CITATION_RE = re.compile(r"^\[\d+\]\s+\S+#L\d+(?:-L\d+)?(?:\s+\(score [\d.]+\))?$")


def split_sentences(text: str) -> list[str]:
    """Split one line/paragraph into sentences at . ! ? followed by space and a capital, digit or quote."""
    return [s.strip() for s in _SENT_SPLIT_RE.split(text.strip()) if s.strip()]


def clean_line(line: str) -> str:
    """Remove the wrapping a memory or transcript line carries: XML-ish tags at the ends, list bullets,
    score tags like `[0.92]`, and speaker prefixes like `user:` (in any order, repeatedly). A person's name
    after the role (LoCoMo renders "user: Caroline: ...") stays: it tells who said it and helps matching;
    `strip_name` removes it for display."""
    s = _CLOSE_TAG_RE.sub("", _OPEN_TAG_RE.sub("", line.replace("&lt;/", "</"))).strip()
    while True:
        before = s
        s = _BULLET_RE.sub("", s)
        s = _SCORE_TAG_RE.sub("", s)
        s = _SPEAKER_RE.sub("", s)
        s = s.strip()
        if s == before:
            return s


def strip_name(sentence: str) -> str:
    """"Caroline: I went ..." -> "I went ..." (one or two Capitalised words, then a colon)."""
    return _NAME_PREFIX_RE.sub("", sentence, count=1)


def is_wrapper_line(line: str) -> bool:
    """Lines that frame memories rather than state anything: a bracketed note such as the Cortex envelope's
    "[NOTE: ... untrusted data.]", a citation line like "[1] memory/2026-01-05.md#L1-L5 (score 0.812)",
    or "(no results)"."""
    s = line.strip()
    return bool(_BRACKET_NOTE_RE.match(s) or _CITATION_RE.match(s)) or s.lower() == "(no results)"


def speaker_of(line: str) -> str | None:
    m = _SPEAKER_RE.match(line)
    if not m:
        return None
    return re.sub(r"[^a-z]", "", m.group(0).lower())


def is_header(line: str) -> bool:
    return bool(_HEADER_RE.match(line))


def sentences_of_text(text: str) -> list[str]:
    """Every candidate sentence of a block of text, in order: lines cleaned, Markdown headers skipped."""
    out: list[str] = []
    for line in text.splitlines():
        if not line.strip() or is_header(line) or is_wrapper_line(line):
            continue
        cleaned = clean_line(line)
        if not cleaned:
            continue
        for s in split_sentences(cleaned):
            s = clean_line(s)
            if s:
                out.append(s)
    return out


def named_sentences(text: str) -> list[tuple[str, str]]:
    """(speaker name or "", sentence) for every candidate sentence, the name of a line ("Caroline:") given to
    each of its sentences."""
    out: list[tuple[str, str]] = []
    for line in text.splitlines():
        if not line.strip() or is_header(line) or is_wrapper_line(line):
            continue
        cleaned = clean_line(line)
        body = strip_name(cleaned)
        name = cleaned[: len(cleaned) - len(body)].strip().rstrip(":")
        for sent in split_sentences(body):
            sent = clean_line(sent)
            if sent:
                out.append((name, sent))
    return out


def has_digit(s: str) -> bool:
    return any(ch.isdigit() for ch in s)


def parse_fields(text: str, labels: dict[str, tuple[str, ...]]) -> dict[str, str]:
    """Split a "Label: value" prompt into fields. `labels` maps a field name to the label spellings that
    start it (case-insensitive, at the start of a line). A value runs until the next recognised label, so
    it may span lines. Missing fields come back as ""."""
    alts = {lab.lower(): name for name, labs in labels.items() for lab in labs}
    pattern = re.compile(
        r"^[ \t]*(" + "|".join(re.escape(a) for a in sorted(alts, key=len, reverse=True)) + r")[ \t]*:", re.I | re.M
    )
    out = {name: "" for name in labels}
    matches = list(pattern.finditer(text))
    taken: set[str] = set()
    for i, m in enumerate(matches):
        name = alts[m.group(1).lower()]
        if name in taken:
            continue  # the first occurrence wins; a later "Answer:" inside a value stays in the value
        end = len(text)
        for m2 in matches[i + 1:]:
            if alts[m2.group(1).lower()] not in taken and alts[m2.group(1).lower()] != name:
                end = m2.start()
                break
        taken.add(name)
        out[name] = text[m.end():end].strip()
    return out


ABSTAIN_PHRASES = (
    "don't have", "do not have", "dont have", "no information", "not sure", "not mentioned", "i don't know",
    "i do not know", "don't know", "cannot find", "can't find", "no context", "not in the context",
    "not provided", "no record", "doesn't say", "does not say", "isn't mentioned", "is not mentioned",
    "not specified", "cannot determine", "can't determine", "not available", "don't recall", "no mention",
    "unable to answer", "unable to determine", "not enough information",
)


def is_abstention(answer: str) -> bool:
    """An answer that declines ("I don't have that information", "not mentioned", ...); empty counts too."""
    a = " ".join(answer.lower().replace("’", "'").split())
    return not a or any(p in a for p in ABSTAIN_PHRASES)
