"""Retrieval metrics, per query, as small pure functions (aggregate = mean over queries unless stated).

Two kinds of relevance:
- substring relevance (seeds 000/001/003): a returned memory is relevant when any expected string occurs in its
  text, case-insensitively (`relevance_flags`);
- evidence relevance (LoCoMo, LongMemEval, MADial): a ranked list of evidence ids (turns, sessions, memory ids)
  against a gold set.

Conventions shared by every function here: ranks are 1-based; `k` larger than the list just uses the whole
list (nothing is padded); an empty result list scores 0 (never None) so a system that returns nothing is not
dropped from the mean; a query without gold is the caller's to skip (the functions return None for it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

from services.coordinator.metrics.registry import metric


def _norm(s: str) -> str:
    return " ".join(s.lower().split())


def relevance_flags(texts: Sequence[str], expected: Sequence[str]) -> list[bool]:
    """Per result: True when any expected string occurs in it (case-insensitive, whitespace collapsed)."""
    exp = [_norm(e) for e in expected if e and e.strip()]
    out = []
    for t in texts:
        nt = _norm(t or "")
        out.append(any(e in nt for e in exp))
    return out


@metric("mrr", higher_is_better=True, unit="rate")
def reciprocal_rank(rels: Sequence[bool]) -> float:
    """1 / rank of the first relevant result (1-based), 0 when none is relevant; MRR = mean over queries."""
    for i, r in enumerate(rels):
        if r:
            return 1.0 / (i + 1)
    return 0.0


def hit_at_k(rels: Sequence[bool], k: int) -> float:
    """1 if any of the top-k results is relevant else 0 (seed 001's Recall@K: fraction of queries with a hit)."""
    return 1.0 if any(rels[:k]) else 0.0


@metric("recall_at_1", higher_is_better=True, unit="rate")
def recall_at_1(rels: Sequence[bool]) -> float:
    """hit_at_k(rels, 1): 1 when the first result is relevant."""
    return hit_at_k(rels, 1)


@metric("recall_at_3", higher_is_better=True, unit="rate")
def recall_at_3(rels: Sequence[bool]) -> float:
    """hit_at_k(rels, 3): 1 when any of the top 3 results is relevant."""
    return hit_at_k(rels, 3)


@metric("recall_at_5", higher_is_better=True, unit="rate")
def recall_at_5(rels: Sequence[bool]) -> float:
    """hit_at_k(rels, 5): 1 when any of the top 5 results is relevant."""
    return hit_at_k(rels, 5)


@metric("recall_at_k", higher_is_better=True, unit="rate")
def recall_at_k(rels: Sequence[bool], k: int) -> float:
    """hit_at_k(rels, k): 1 when any of the top k results is relevant."""
    return hit_at_k(rels, k)


@metric("precision_at_5", higher_is_better=True, unit="rate")
def precision_at_5(rels: Sequence[bool]) -> float:
    """count(relevant in top 5) / 5 — the denominator stays 5 when fewer than 5 results came back (seed 001)."""
    return precision_at_k(rels, 5)


def precision_at_k(rels: Sequence[bool], k: int) -> float:
    """count(relevant in top k) / k."""
    return sum(1 for r in rels[:k] if r) / k


@metric("ndcg_at_5", higher_is_better=True, unit="rate")
def ndcg_at_5(rels: Sequence[bool]) -> float:
    """ndcg_at_k(rels, 5)."""
    return ndcg_at_k(rels, 5)


def ndcg_at_k(rels: Sequence[bool], k: int) -> float:
    """Binary NDCG@k = DCG/IDCG with DCG = sum_{i=1..k} rel_i / log2(i + 1); IDCG is the DCG of the same
    results sorted relevant-first (substring relevance has no corpus-wide gold count). 0 when nothing relevant."""
    top = [1.0 if r else 0.0 for r in rels[:k]]
    dcg = sum(r / math.log2(i + 2) for i, r in enumerate(top))
    ideal = sorted((1.0 if r else 0.0 for r in rels), reverse=True)[:k]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


@metric("retrieval_hit_rate", higher_is_better=True, unit="rate")
def retrieval_hit_rate(hits: Sequence[bool | None]) -> float | None:
    """count(hit) / count(queries with expected strings); a hit = any retrieved text (or the formatted context)
    holds any expected string (seed 000, V1.4). None entries (no expected strings) are skipped."""
    vals = [1.0 if h else 0.0 for h in hits if h is not None]
    return sum(vals) / len(vals) if vals else None


@metric("relevance_density", higher_is_better=True, unit="rate")
def relevance_density(texts: Sequence[str], expected: Sequence[str]) -> float | None:
    """keyword_chars / total_result_chars over all results of one query (seed 001 §5.3): keyword_chars sums
    len(e) × occurrences(e) for each expected string e in each result (case-insensitive). A 1600-char chunk
    with one 10-char match scores 0.00625; a 30-char fact with the same match 0.333. None when no text came
    back (nothing to be dense about)."""
    total = sum(len(t or "") for t in texts)
    if total == 0:
        return None
    exp = sorted({e.lower() for e in expected if e and e.strip()}, key=len, reverse=True)
    kw = 0
    for t in texts:
        lt = (t or "").lower()
        for e in exp:
            kw += len(e) * lt.count(e)
    return min(1.0, kw / total)


# ------------------------------------------------------------------------------------------------------
# Evidence-id rankings


def ranked_unique(ids: Iterable[str]) -> list[str]:
    """Ids in first-seen order, duplicates dropped (a chunk citing a turn twice ranks it once): a dict keeps its
    keys in insertion order, and building one is a C loop."""
    return list(dict.fromkeys(ids))


@metric("evidence_recall_at_k", higher_is_better=True, unit="rate")
def evidence_recall_at_k(ranked: Sequence[str], gold: Iterable[str], k: int) -> float | None:
    """|gold ∩ top-k ranked| / |gold| (LoCoMo's `recall_acc`); None when the gold set is empty."""
    g = set(gold)
    if not g:
        return None
    return len(g & set(ranked[:k])) / len(g)


@metric("recall_any_at_k", higher_is_better=True, unit="rate")
def recall_any_at_k(ranked: Sequence[str], gold: Iterable[str], k: int) -> float | None:
    """1 if any gold id is in the top k (LongMemEval `evaluate_retrieval`), None without gold."""
    g = set(gold)
    if not g:
        return None
    return 1.0 if g & set(ranked[:k]) else 0.0


@metric("recall_all_at_k", higher_is_better=True, unit="rate")
def recall_all_at_k(ranked: Sequence[str], gold: Iterable[str], k: int) -> float | None:
    """1 if every gold id is in the top k (LongMemEval), None without gold."""
    g = set(gold)
    if not g:
        return None
    return 1.0 if g <= set(ranked[:k]) else 0.0


def _lme_dcg(rel: Sequence[float], k: int) -> float:
    # LongMemEval src/retrieval/eval_utils.py `dcg`: rel_1 + sum_{i>=2} rel_i / log2(i) — the first two ranks
    # carry equal weight (a known quirk of that formula, kept so numbers compare with the paper).
    r = list(rel)[:k]
    if not r:
        return 0.0
    return r[0] + sum(r[i] / math.log2(i + 1) for i in range(1, len(r)))


@metric("ndcg_any_at_k", higher_is_better=True, unit="rate")
def ndcg_any_at_k(ranked: Sequence[str], gold: Iterable[str], k: int, n_gold_in_corpus: int | None = None,
                  corpus: Iterable[str] | None = None) -> float | None:
    """LongMemEval ndcg_any@k: DCG(binary relevance of the top k) / DCG(ideal), with DCG = rel_1 +
    sum_{i=2..k} rel_i / log2(i). The ideal list holds one 1 per gold id found in the corpus (upstream sorts the
    corpus relevances), cut to k: `corpus` given -> |gold ∩ corpus|, else `n_gold_in_corpus`, else |gold|.
    A ranked id seen before counts 0 the second time, so the score never exceeds 1. None without gold."""
    g = set(gold)
    if not g:
        return None
    if corpus is not None:
        n = len(g & set(corpus))
    else:
        n = len(g) if n_gold_in_corpus is None else n_gold_in_corpus
    seen: set[str] = set()
    rel = []
    for x in ranked[:k]:
        rel.append(1.0 if x in g and x not in seen else 0.0)
        seen.add(x)
    ideal = _lme_dcg([1.0] * min(max(n, int(sum(rel))), k), k)
    return _lme_dcg(rel, k) / ideal if ideal > 0 else 0.0


def lme_turn2session_at_k(turn_ranking: Sequence[str], gold_turns: Iterable[str], corpus_turns: Sequence[str],
                          k: int, session_of: Callable[[str], str]) -> tuple[float, float, float] | None:
    """LongMemEval's official turn->session figures (`evaluate_retrieval_turn2session` on the turn corpus ids
    `run_retrieval.py` builds, restated). Those ids rename every user turn of an answer session that lacks
    has_answer (answer_x_3 -> noans_x_3), so once turn ids are cut to session ids only the gold turns (has_answer)
    map to their gold session; the other turns of that session map to a `noans` session of their own, which is
    never gold and counts as one more distinct session. Turns of other sessions keep their session. Then: grow the
    cut-off k' from k until the top k' turns span k distinct (renamed) sessions or the ranking ends;
    recall_any / recall_all over the gold sessions in the top k'; ndcg_any over the top k' turns, relevance 1
    for a gold turn only, against an ideal of one 1 per gold turn in the corpus, cut to k'. Turns outside the
    corpus or repeated are dropped from the ranking first (upstream ranks each corpus turn once). None without
    gold."""
    corpus = list(corpus_turns)
    in_corpus = set(corpus)
    gold_t = set(gold_turns)
    gold_s = {session_of(t) for t in gold_t}
    if not gold_s:
        return None

    def renamed(t: str) -> str | tuple[str, str]:
        s = session_of(t)
        return ("noans", s) if s in gold_s and t not in gold_t else s

    ranking = [renamed(t) for t in ranked_unique(t for t in turn_ranking if t in in_corpus)]
    eff = k
    while eff < len(ranking) and len(set(ranking[:eff])) < k:
        eff += 1
    top = set(ranking[:eff])
    any_ = 1.0 if gold_s & top else 0.0
    all_ = 1.0 if gold_s <= top else 0.0
    rel = [1.0 if s in gold_s else 0.0 for s in ranking[:eff]]
    n_ideal = sum(1 for t in corpus if renamed(t) in gold_s)
    ideal = _lme_dcg([1.0] * min(n_ideal, eff), eff)
    return any_, all_, (_lme_dcg(rel, eff) / ideal if ideal > 0 else 0.0)


@metric("memory_recall_at_k", higher_is_better=True, unit="rate")
def memory_recall_at_k(memory_evidence: Sequence[Sequence[str]], gold: Iterable[str], k: int,
                       mode: str = "fraction") -> float | None:
    """Recall at memory rank k: the gold ids cited by the first k MEMORIES, whatever their size (a 15-message
    chunk is one rank). mode "fraction" = |gold ∩ cited| / |gold|, "any" = 1 if any, "all" = 1 if every.
    None without gold; an unknown mode is an error naming it."""
    if mode not in ("fraction", "any", "all"):
        raise ValueError(f"mode: {mode!r}; expected 'fraction', 'any' or 'all'")
    g = set(gold)
    if not g:
        return None
    cited = {e for ev in memory_evidence[:k] for e in ev}
    hit = len(g & cited)
    if mode == "any":
        return 1.0 if hit else 0.0
    if mode == "all":
        return 1.0 if hit == len(g) else 0.0
    return hit / len(g)


@metric("evidence_mrr", higher_is_better=True, unit="rate")
def evidence_mrr(ranked: Sequence[str], gold: Iterable[str]) -> float | None:
    """1 / rank of the first gold id in the ranking (0 when absent); None without gold."""
    g = set(gold)
    if not g:
        return None
    return reciprocal_rank([x in g for x in ranked])


def mean(values: Iterable[float | None]) -> float | None:
    """Mean of the non-None values; None when there are none."""
    v = [float(x) for x in values if x is not None]
    return sum(v) / len(v) if v else None


# ------------------------------------------------------------------------------------------------------
# Per-probe headline indicators (the suite computes the flag; registered here for their direction and formula)


@metric("hit", higher_is_better=True, unit="rate")
def keyword_hit(hit: bool) -> float:
    """1 when any expected string occurs in what the backend retrieved (its texts or formatted context), else 0; the
    mean over probes is the keyword hit rate (Cortex V1, Arclight)."""
    return 1.0 if hit else 0.0


@metric("pass", higher_is_better=True, unit="rate")
def every_expected_present(passed: bool) -> float:
    """1 when EVERY expected string occurs in the retrieved context (Octybot's pass), else 0."""
    return 1.0 if passed else 0.0


@metric("doc_hit", higher_is_better=True, unit="rate")
def doc_hit(hit: bool) -> float:
    """1 when a gold document of the task is in the injected context (Next.js docs), else 0."""
    return 1.0 if hit else 0.0


@metric("uncontained", higher_is_better=False, unit="rate")
def uncontained(returned: bool, contained: bool) -> float:
    """1 when a poisoned memory came back outside a sound containment envelope, else 0 (lower is better)."""
    return 1.0 if returned and not contained else 0.0


# The cut-off families the suites report, each one of the formulas above at k (registry.get_metric reads
# "turn_recall@5" as "turn_recall@K" at k = 5). LoCoMo ranks turns, sessions and memories (evidence_recall_at_k,
# recall_any_at_k, memory_recall_at_k); LongMemEval sessions, turns, turns cut to sessions the official way
# (lme_turn2session_at_k: its recall_any, recall_all and ndcg_any) and memories (memory_recall_at_k, mode "all");
# MADial the gold and the primary messages.
for _name, _fn in (
        ("turn_recall@K", evidence_recall_at_k), ("session_recall@K", evidence_recall_at_k),
        ("recall@K", evidence_recall_at_k), ("memory_recall@K", memory_recall_at_k),
        ("turn_recall_any@K", recall_any_at_k), ("session_recall_any@K", recall_any_at_k),
        ("recall_any@K", recall_any_at_k), ("primary_hit@K", recall_any_at_k),
        ("turn_recall_all@K", recall_all_at_k), ("session_recall_all@K", recall_all_at_k),
        ("turn_ndcg_any@K", ndcg_any_at_k), ("session_ndcg_any@K", ndcg_any_at_k),
        ("t2s_recall_any@K", lme_turn2session_at_k), ("t2s_recall_all@K", lme_turn2session_at_k),
        ("t2s_ndcg_any@K", lme_turn2session_at_k),
        ("turn_memory_recall_all@K", memory_recall_at_k), ("session_memory_recall_all@K", memory_recall_at_k)):
    metric(_name, higher_is_better=True, unit="rate")(_fn)
metric("primary_mrr", higher_is_better=True, unit="rate")(evidence_mrr)  # MADial: the primary message's rank
# Octybot's pass split by what the probe tests (retrieving a stated fact, or a fact the agent was told to store)
metric("retrieval_pass", higher_is_better=True, unit="rate")(every_expected_present)
metric("store_pass", higher_is_better=True, unit="rate")(every_expected_present)
