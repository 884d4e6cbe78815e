"""Answer-quality metrics: LoCoMo's official token F1 (with its per-category rules), exact match, binary J.

LoCoMo's scoring (snap-research/locomo `task_eval/evaluation.py`, facts restated, code not copied):
- normalise: drop commas, lower-case, strip ASCII punctuation, replace the words a/an/the/and by spaces,
  collapse whitespace; the word boundaries are those of the third-party `regex` module, as upstream imports it
  (it counts combining marks as word characters and superscript digits as not, unlike `re`: "the\u0301" stays,
  "a²" loses its "a");
- token F1 over Porter-stemmed tokens (nltk `PorterStemmer`, no downloads) with multiset overlap;
- category 1 (multi-hop): split prediction and gold on ',' and average, over the gold parts, the best F1
  against any prediction part; category 3: only the gold's text before the first ';'; categories 2 and 4:
  plain F1; category 5 (adversarial): 1 when the prediction contains "no information available" or
  "not mentioned" (case-insensitive), else 0;
- exact match (`exact_match_score`): the SETS of normalised whitespace tokens are equal (order and repeats
  ignored, no stemming).
"""

from __future__ import annotations

import string
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

import regex

from services.coordinator.metrics.registry import metric

_PUNCT = set(string.punctuation)
_ARTICLES = regex.compile(r"\b(a|an|the|and)\b")
CAT5_PHRASES = ("no information available", "not mentioned")


@lru_cache(maxsize=1)
def _stemmer():
    from nltk.stem import PorterStemmer

    return PorterStemmer()


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return _stemmer().stem(word)


def normalize_answer(s: object) -> str:
    """LoCoMo normalisation: commas out, lower, punctuation out, articles/'and' out, spaces collapsed."""
    text = str(s).replace(",", "").lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _tokens(s: object) -> list[str]:
    return [_stem(w) for w in normalize_answer(s).split()]


@metric("token_f1", higher_is_better=True, unit="rate")
def token_f1(prediction: object, gold: object) -> float:
    """2PR/(P+R) over Porter-stemmed normalised tokens, P = overlap/|pred|, R = overlap/|gold|, overlap =
    multiset intersection size; 0 when nothing overlaps (including empty strings)."""
    p, g = _tokens(prediction), _tokens(gold)
    same = sum((Counter(p) & Counter(g)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


def multi_answer_f1(prediction: object, gold: object) -> float:
    """LoCoMo category 1: mean over gold parts (split on ',') of max over prediction parts of token_f1."""
    preds = [x.strip() for x in str(prediction).split(",")]
    golds = [x.strip() for x in str(gold).split(",")]
    return sum(max(token_f1(p, g) for p in preds) for g in golds) / len(golds)


def adversarial_score(prediction: object) -> float:
    """LoCoMo category 5: 1 if the prediction says 'no information available' or 'not mentioned', else 0."""
    low = str(prediction).lower()
    return 1.0 if any(ph in low for ph in CAT5_PHRASES) else 0.0


@metric("locomo_f1", higher_is_better=True, unit="rate")
def locomo_f1(prediction: object, gold: object, category: int) -> float:
    """LoCoMo official per-category score: cat 1 multi_answer_f1; cat 2/4 token_f1; cat 3 token_f1 against
    gold.split(';')[0]; cat 5 adversarial_score (gold ignored)."""
    category = int(category)
    if category not in (1, 2, 3, 4, 5):
        raise ValueError(f"category: {category} is not a LoCoMo QA category (1-5)")
    if category == 5:
        return adversarial_score(prediction)
    if category == 1:
        return multi_answer_f1(prediction, gold)
    if category == 3:
        gold = str(gold).split(";")[0].strip()
    return token_f1(prediction, gold)


@metric("exact_match", higher_is_better=True, unit="rate")
def exact_match(prediction: object, gold: object) -> float:
    """1 if the sets of whitespace tokens of normalize_answer(prediction) and normalize_answer(gold) are equal
    (LoCoMo's exact_match_score: order and repeats ignored, no stemming)."""
    return 1.0 if set(normalize_answer(prediction).split()) == set(normalize_answer(gold).split()) else 0.0


@metric("binary_j", higher_is_better=True, unit="rate")
def binary_j(labels: Sequence[bool]) -> float | None:
    """count(judge said CORRECT) / count(judged answers) (Mem0-style 'J'); None when nothing was judged."""
    return sum(1 for x in labels if x) / len(labels) if labels else None


@metric("f1_cats_1_4", higher_is_better=True, unit="rate")
def f1_cats_1_4(prediction: str, ground_truth: str, category: int) -> float | None:
    """LoCoMo's official token F1 (locomo_f1) for categories 1-4; None for category 5 (adversarial), which
    published systems (Mem0, Zep, A-Mem) leave out of the headline."""
    return None if int(category) == 5 else locomo_f1(prediction, ground_truth, int(category))


@metric("qa_accuracy", higher_is_better=True, unit="rate")
def qa_accuracy(correct: bool) -> float:
    """1 when the QA judge labels the answer CORRECT, else 0; the mean is QA accuracy (LongMemEval)."""
    return 1.0 if correct else 0.0


# LoCoMo's F1 over every category (f1_cats_1_4 leaves out category 5)
metric("f1", higher_is_better=True, unit="rate")(locomo_f1)
