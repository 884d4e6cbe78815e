"""What the agent was shown, decided by the rig from the text it injected: never from what a backend says.

A backend's `evidence_ids` / `evidence_spans` / `context_spans` are its own claims about where its text came from;
a memory that stores nothing and claims every message would otherwise be credited with all of them. The grader here
reads only two things the rig holds itself: the text it injected (cut at the budget) and the corpus it ingested.
One rule for every representation (one message per document, chunks, transcripts, notes, extracted or rewritten
facts); the backend's claims are kept beside it as a diagnostic (metrics/budget.py, `claimed_recall@B`).

**Words.** Text is HTML-unescaped (a backend that escapes its envelope, `&amp;`, shows the same words), backslash
escapes of line breaks (`\\n`, `\\u2028`) read as spaces, NFKC
normalised and lower-cased; a word is a maximal run of letters and digits (`[^\\W_]+`). Punctuation, markup,
bullets and line breaks separate words and are otherwise ignored, so formatting never decides credit: a header a
backend adds costs budget (tokens), never credit.

**Message shown** (`message_coverage`). A message's content is the set of its word 3-grams (a message of one or
two words: that whole word sequence). Its coverage at a budget is the share of those 3-grams that occur anywhere in
the first B tokens of the injected text. A message is *shown* when its coverage is at least MESSAGE_SHOWN (0.5):
at least half of what it says, in its own words, is in front of the agent. Sets, not counts: text shown twice
counts once. A sentence of a long message covers only that sentence's share; an extracted fact that rewrites its
sources covers the 3-grams it keeps. Limits: a faithful paraphrase (another word order, synonyms) is not credited
here, and a short message can be covered by other text that happens to repeat its words.

**Answer terms shown** (`answer_coverage`). The gold answer's terms: LoCoMo's answer normalisation
(metrics/qa.normalize_answer), Porter stems, less function words (ANSWER_STOPWORDS; month names and numbers stay),
number words up to twenty as digits. Coverage = the share of those terms found among the stems of the shown text's
words. No model: it says whether the words the answer needs are in front of the agent. Limits: an answer the
conversation states relative to a session ("last week" for "the week before 9 June 2023") or in other words is not
found; an answer of common words ("yes") is found in almost any text.

**Shown** (`message_or_answer`, the headline `shown@B`): per probe 1 when every gold message is shown or every
answer term is, 0.5 when some gold message is or at least half of the answer's terms are, else 0: the higher of the
two rules on the blind labels' 2 / 1 / 0 scale, halved. It is the rule that agreed best with a blind reader's labels
(`memrig credit-agreement`), and it needs both: the message rule misses a fact rewritten in other words, the answer
rule misses an answer the text states relative to a date.
"""

from __future__ import annotations

import html
import re
import unicodedata
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate

import numpy as np

from services.coordinator.metrics.qa import _stem, normalize_answer

NGRAM = 3
MESSAGE_SHOWN = 0.5
WORD_RE = re.compile(r"[^\W_]+")
# A backslash escape of a line break or control character, as an envelope that keeps content on one line writes it
# (the cortex adapter's strict escaping: "\\n", "\\u2028"): a separator, not the start of a word ("end\\nStart" is
# "end", "start", never "nstart"). Applied to every text alike, the corpus's included.
ESCAPE_RE = re.compile(r"\\(?:[nrtvf]|u[0-9a-fA-F]{4})")

# Function words only: a term list keeps every content word, month names ("may"), numbers and negations.
ANSWER_STOPWORDS = frozenset("""
a an the and or but nor of to in on at by for from with about as into onto over under than then so if
is are was were be been being am do does did has have had having will would shall should can could might must
i me my mine we us our ours you your yours he him his she her hers it its they them their theirs this that these
those there here which who whom whose what when where why how also just very too s t
""".split())
NUMBER_WORDS = {w: str(i) for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}


def words(text: str) -> list[str]:
    """The words of `text` (module docstring, Words)."""
    if not text:
        return []
    if text.isascii() and "&" not in text and "\\" not in text:  # nothing to unescape or normalise
        return WORD_RE.findall(text.lower())
    return WORD_RE.findall(unicodedata.normalize("NFKC", html.unescape(ESCAPE_RE.sub(" ", text))).lower())


_SPAN_RE = re.compile(r"&[#A-Za-z0-9]+;|" + ESCAPE_RE.pattern + r"|[^\W_]+")


def word_spans(text: str, upto: int | None = None) -> tuple[list[str], list[int]]:
    """(words, the character offset in `text` where each word ends). Offsets are in `text` itself, so a budget cut
    at a character position keeps exactly the words that end before it; unescaping is applied per word. With
    `upto`, only the words that end at or before that offset (the same as the whole text's list cut there: matches
    come in order, so the first one ending past it ends the scan)."""
    seg = text if upto is None else text[:upto + 1]  # a word ending past `upto` runs past this slice's end
    groups = _SPAN_RE.findall(seg)
    ends = [m.end() for m in _SPAN_RE.finditer(seg)]
    if upto is not None and ends and ends[-1] > upto:
        groups.pop()
        ends.pop()
    if not groups:
        return [], []
    # Nearly every match is a plain ASCII word, whose words() is itself lower-cased: all of them lower-cased in one
    # call, and only the others (an entity, an escape, a word with non-ASCII letters) read one by one.
    joined = "\x00".join(groups)
    low = joined.lower()
    lows = low.split("\x00") if len(low) == len(joined) else [g.lower() for g in groups]
    dirty = [m.start() for m in _DIRTY_RE.finditer(joined)]
    if not dirty:
        return lows, ends
    bounds = list(accumulate(len(g) + 1 for g in groups))  # one past each group's separator in `joined`
    special = sorted({bisect_right(bounds, pos) for pos in dirty})
    out: list[str] = []
    out_ends: list[int] = []
    prev = 0
    for i in special:
        out += lows[prev:i]
        out_ends += ends[prev:i]
        ws = words(groups[i])
        out += ws
        out_ends += [ends[i]] * len(ws)
        prev = i + 1
    out += lows[prev:]
    out_ends += ends[prev:]
    return out, out_ends


# A character that makes a match more than a plain ASCII word: non-ASCII, or an entity's or an escape's
_DIRTY_RE = re.compile(r"[^\x00-\x7f]|[&\\;#_]")


_MIX = np.uint64(0x9E3779B97F4A7C15)  # odd 64-bit constants of a multiply-xorshift mix (splitmix64's)
_MIX2 = np.uint64(0xBF58476D1CE4E5B9)


def _word_hashes(ws: Sequence[str]) -> np.ndarray:
    """One 64-bit hash per word (Python's string hash: stable within the process, which is where keys are compared)."""
    return np.fromiter(map(hash, ws), dtype=np.int64, count=len(ws)).view(np.uint64)


def _grams(h: np.ndarray, k: int) -> np.ndarray:
    """The key of every run of k consecutive words of word hashes `h` (k and the words in order decide it), as int64."""
    m = len(h) - k + 1
    if m <= 0:
        return np.zeros(0, np.int64)
    with np.errstate(over="ignore"):
        acc = np.full(m, np.uint64(k) * _MIX2, dtype=np.uint64)
        for j in range(k):
            acc = (acc ^ h[j:j + m]) * _MIX
            acc ^= acc >> np.uint64(31)
    return acc.view(np.int64)


def gram_key(ws: Sequence[str]) -> int:
    """The key of the one word sequence `ws` (what _gram_keys, text_keys and text_grams give it)."""
    return int(_grams(_word_hashes(ws), len(ws))[0])


def _gram_keys(ws: Sequence[str], n: int) -> np.ndarray:
    """Keys of the word n-grams of `ws` (the whole sequence when it is shorter than n)."""
    if not ws:
        return np.zeros(0, np.int64)
    h = _word_hashes(ws)
    return _grams(h, min(n, len(ws)))


@dataclass
class _Grams:
    keys: np.ndarray  # int64 hash of every distinct n-gram of every message, messages concatenated
    owner: np.ndarray  # message index of each key
    size: np.ndarray  # distinct n-grams per message


class CorpusIndex:
    """The n-grams of every message of one namespace, for coverage against any shown text in one vectorised pass."""

    def __init__(self, messages: Iterable[tuple[str, str]], n: int = NGRAM):
        self.n = n
        self.ids: list[str] = []
        keys: list[np.ndarray] = []
        sizes: list[int] = []
        for mid, text in messages:
            k = np.unique(_gram_keys(words(text), n))
            self.ids.append(str(mid))
            keys.append(k)
            sizes.append(len(k))
        self._pos = {m: i for i, m in enumerate(self.ids)}
        size = np.asarray(sizes, dtype=np.int64)
        self._g = _Grams(np.concatenate(keys) if keys else np.zeros(0, np.int64),
                         np.repeat(np.arange(len(sizes)), size), size)
        # the distinct keys, sorted, and where each message key is among them: a text's keys are looked up here
        self._uniq, self._inv = np.unique(self._g.keys, return_inverse=True)

    def __contains__(self, mid: str) -> bool:
        return mid in self._pos

    def coverage_by_prefix(self, grams: TextGrams, lengths: Sequence[int]) -> list[np.ndarray]:
        """`coverage(text_keys(ws[:k]))` for each k of `lengths`, from one lookup of the corpus's n-grams among the
        text's (each key found at the fewest leading words that hold it)."""
        uniq = self._uniq
        need_u = np.full(len(uniq), np.iinfo(np.int64).max, dtype=np.int64)
        if len(grams.keys) and len(uniq):
            pos = np.minimum(np.searchsorted(uniq, grams.keys), len(uniq) - 1)
            hit = uniq[pos] == grams.keys
            need_u[pos[hit]] = grams.need[hit]
        need = need_u[self._inv]
        out = []
        for k in lengths:
            got = np.bincount(self._g.owner[need <= k], minlength=len(self.ids)).astype(np.float64)
            out.append(np.divide(got, self._g.size, out=np.zeros(len(self.ids)), where=self._g.size > 0))
        return out

    def coverage(self, shown_keys: np.ndarray) -> np.ndarray:
        """Per message (in self.ids order), the share of its n-grams among `shown_keys`; 0 for an empty message."""
        hit = np.isin(self._g.keys, shown_keys)
        got = np.bincount(self._g.owner[hit], minlength=len(self.ids)).astype(np.float64)
        return np.divide(got, self._g.size, out=np.zeros(len(self.ids)), where=self._g.size > 0)

    def shown(self, shown_keys: np.ndarray, threshold: float = MESSAGE_SHOWN) -> list[str]:
        """The ids of the messages whose coverage is at least `threshold` (and above 0)."""
        cov = self.coverage(shown_keys)
        return [self.ids[i] for i in np.flatnonzero((cov >= threshold) & (cov > 0))]

    def coverage_of(self, shown_keys: np.ndarray, ids: Iterable[str]) -> dict[str, float]:
        """{id: coverage} for the given ids the corpus holds."""
        cov = self.coverage(shown_keys)
        return {m: float(cov[self._pos[m]]) for m in ids if m in self._pos}


def text_keys(ws: Sequence[str], n: int = NGRAM) -> np.ndarray:
    """Every 1..n-gram key of a shown text's words (the short messages' whole sequences included)."""
    h = _word_hashes(ws)
    return np.unique(np.concatenate([_grams(h, k) for k in range(1, n + 1)]))


@dataclass
class TextGrams:
    keys: np.ndarray  # every distinct 1..n-gram key of a text's words, sorted (text_keys of all of them)
    need: np.ndarray  # for each key, the fewest leading words that contain it (text_keys(ws[:k]) holds it iff need <= k)


def text_grams(ws: Sequence[str], n: int = NGRAM) -> TextGrams:
    """The keys of text_keys(ws, n), each with the length of the shortest prefix of `ws` holding it."""
    if not ws:
        return TextGrams(np.zeros(0, np.int64), np.zeros(0, np.int64))
    h = _word_hashes(ws)
    ks_n = [k for k in range(1, n + 1) if len(ws) >= k]
    ka = np.concatenate([_grams(h, k) for k in ks_n])
    na = np.concatenate([np.arange(k, len(ws) + 1, dtype=np.int64) for k in ks_n])
    order = np.lexsort((na, ka))  # by key, then by prefix length: the first of each key is its shortest prefix
    ks = ka[order]
    first = np.ones(len(ks), dtype=bool)
    first[1:] = ks[1:] != ks[:-1]
    return TextGrams(ks[first], na[order][first])


def message_coverage(shown_text: str, message_text: str, n: int = NGRAM) -> float:
    """The share of `message_text`'s n-grams found in `shown_text` (0 for a message without words)."""
    idx = CorpusIndex([("m", message_text)], n)
    return float(idx.coverage(text_keys(words(shown_text), n))[0])


def load() -> None:
    """Load what the rule reads lazily, before any call is timed: NLTK's Porter stemmer (importing NLTK takes seconds)
    and the tokenizer. Loaded at a run's first grading instead, it stalled the coordinator's event loop inside the
    timings of every call in flight (prepare and retrieve latencies of up to 10 s under load)."""
    from services.common.tokens import _encoding
    from services.coordinator.metrics.qa import _stemmer

    _stemmer()
    _encoding()


# --------------------------------------------------------------------------------------------------------------
# Answer terms


@lru_cache(maxsize=65536)
def _term(word: str) -> str:
    return _stem(NUMBER_WORDS.get(word, word))


def answer_terms(answer: str) -> list[str]:
    """The distinct terms of a gold answer, in order (module docstring, Answer terms)."""
    return list(_answer_terms(answer))


@lru_cache(maxsize=8192)
def _answer_terms(answer: str) -> tuple[str, ...]:  # a probe's answer is graded once per backend
    out: list[str] = []
    for w in words(normalize_answer(answer)):
        if w in ANSWER_STOPWORDS:
            continue
        t = _term(w)
        if t not in out:
            out.append(t)
    return tuple(out)


def shown_terms(ws: Iterable[str]) -> set[str]:
    return {_term(w) for w in ws}


def answer_coverage(terms: Sequence[str], shown: set[str]) -> float | None:
    """The share of the answer's terms among the shown terms; None for an answer with no terms."""
    if not terms:
        return None
    return sum(1 for t in terms if t in shown) / len(terms)


# --------------------------------------------------------------------------------------------------------------
# The rules on the blind labels' scale (2 / 1 / 0: the answer can / partly / cannot be given from the text)


def ordinal_recall(r: float | None) -> int | None:
    """A share of gold messages shown: all 2, some 1, none 0."""
    if r is None:
        return None
    return 2 if r >= 1.0 else 1 if r > 0 else 0


def ordinal_share(s: float | None) -> int | None:
    """A share of answer terms shown: all 2, at least half 1, else 0."""
    if s is None:
        return None
    return 2 if s >= 1.0 else 1 if s >= 0.5 else 0


def message_or_answer(recall: float | None, answer_share: float | None) -> int | None:
    """The higher of the two rules' 0 / 1 / 2 (None when neither applies): the rule that agrees best with the blind
    labels (services/coordinator/credit_agreement.py)."""
    xs = [x for x in (ordinal_recall(recall), ordinal_share(answer_share)) if x is not None]
    return max(xs) if xs else None


# --------------------------------------------------------------------------------------------------------------
# One retrieval at every budget


def shown_at(text: str, cuts: Sequence[int], corpus: CorpusIndex | None, answer: str | None,
             threshold: float = MESSAGE_SHOWN) -> tuple[list[list[str]], list[float | None]]:
    """For each character cut of the injected `text` (one per budget): the messages shown (ids, corpus order) and
    the answer-term coverage (None without an answer or corpus-free answer terms)."""
    # Only the words up to the largest cut matter; each prefix's n-grams and terms are read off one pass over them.
    ws, ends = word_spans(text, upto=max(cuts, default=0))
    terms = answer_terms(answer) if answer else []
    end_at = np.asarray(ends, dtype=np.int64)
    lengths = [int(np.searchsorted(end_at, cut, side="right")) if ends else 0 for cut in cuts]
    shown_ids: list[list[str]] = []
    if corpus is not None:
        for cov in corpus.coverage_by_prefix(text_grams(ws, corpus.n), lengths):
            shown_ids.append([corpus.ids[i] for i in np.flatnonzero((cov >= threshold) & (cov > 0))])
    else:
        shown_ids = [[] for _ in cuts]
    answer_cov: list[float | None] = [None for _ in cuts]
    if terms:
        wanted = set(terms)
        first: dict[str, int] = {}  # each answer term at the fewest leading words that hold it
        for w in dict.fromkeys(ws):  # distinct words, in order of first use
            t = _term(w)
            if t in wanted:
                first[t] = min(first.get(t, len(ws) + 1), ws.index(w) + 1)
        answer_cov = [answer_coverage(terms, {t for t in terms if first.get(t, k + 1) <= k}) for k in lengths]
    return shown_ids, answer_cov
