"""Recall at a context budget: the share of gold evidence the agent is actually shown in the first B tokens of what a
backend injects, whatever the size of the backend's documents.

Rank-based recall@k counts evidence down a ranked list, so a backend that stores one message per document and one
that returns ten-message transcript chunks are compared at very different context sizes; the verdict then says
more about granularity than about memory. Here every backend is cut at the same number of tokens.

What the agent is shown (`injected`): the backend's `formatted_context` when it gives one, else the rig's default
formatting of its memories in rank order (context.default_format, the same for every backend that has none).
Counted in cl100k tokens (services/common/tokens).

**What was shown is decided by the rig** (metrics/shown.py), from the injected text cut at B and the corpus the rig
ingested, by one rule for every representation:
- `budget_recall@B` = |gold messages shown| / |gold|, a message shown when at least half of its word 3-grams are in
  the cut text (shown.MESSAGE_SHOWN);
- `answer_terms@B` = the share of the gold answer's terms in the cut text (no model; shown.answer_coverage);
- `shown@B` = the higher of the two on a 1 / 0.5 / 0 scale (shown.message_or_answer): the headline.
Which of them heads the verdict (HEADLINE_RULE) is decided by agreement with labels a blind reader wrote
(`memrig credit-agreement`, services/coordinator/credit_agreement.py); the kappa is reported beside the headline.

**What the backend claims** (`claimed_recall@B`, a diagnostic, never credit): where its `context_spans`, or its
memories' `evidence_spans` / `evidence_ids` located in the injected text, say the shown characters came from:
1. the backend's `context_spans` over formatted_context, when it gives them;
2. else each memory's text is found in the injected context (in rank order, each search starting where the previous
   memory ended; a memory found nowhere is *unlocated*, counted, and claims nothing) and its `evidence_spans` are
   carried over; a memory without spans claims a whole-text span for every one of its evidence ids;
- a message with explicit spans is claimed when the characters of its spans before `cut`, summed, are at least
  SHOWN_FRACTION of the message's length in the corpus (or of its spans' total length);
- a whole-text span is claimed when at least SHOWN_FRACTION of that memory's text lies before `cut`.
`claimed` beside `shown` per backend says how far a backend's own account of its evidence departs from its text.

The curve over the ladder BUDGETS and its area (`budget_recall_auc`: trapezoids over log2 B, divided by the
ladder's log2 width, so 1.0 means every gold message shown from the smallest budget on) sit beside it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from services.common.tokens import _encoding, count_tokens, token_ids, truncate_to_tokens
from services.common.types import ValidationError
from services.coordinator.metrics import shown as text_rule
from services.coordinator.metrics.registry import metric

BUDGETS = (250, 500, 1000, 2000, 4000)
SHOWN_FRACTION = 0.5
# The budget every evidence suite's verdict uses: what OpenClaw's `memory_search` puts in front of the agent with its
# defaults, maxResults 6 snippets of at most 700 characters (services/adapters/openclaw/presets.py): 4,200 characters,
# about 1,000 cl100k tokens of English text. A memory beats native memory when it shows more of the evidence in the
# room native memory itself takes.
HEADLINE_BUDGET = 1000
HEADLINE_WHY = ("OpenClaw's memory_search with its defaults shows at most 6 snippets of at most 700 characters "
                "(4,200 characters, about 1,000 cl100k tokens): the room native memory itself takes per search")


def budget_metric(budget: int) -> str:
    """The rig's own measure: gold messages shown (metrics/shown.py)."""
    return f"budget_recall@{budget}"


def answer_metric(budget: int) -> str:
    """The answer-side measure: the share of the gold answer's terms shown (metrics/shown.py)."""
    return f"answer_terms@{budget}"


def shown_metric(budget: int) -> str:
    """The headline: 1 / 0.5 / 0 as the gold is shown whole / in part / not, by messages or answer terms."""
    return f"shown@{budget}"


def claimed_metric(budget: int) -> str:
    """The backend's own claim (its evidence ids and spans): a diagnostic, never the credit."""
    return f"claimed_recall@{budget}"


# The candidate rules of `memrig credit-agreement`, by name: the metric family each puts at a budget.
RULE_METRICS = {"message": budget_metric, "answer": answer_metric, "message-or-answer": shown_metric,
                "claimed": claimed_metric}
# The rule that heads the verdict: the one whose per-probe values agree best with the blind reader's labels
# (services/coordinator/suites/data/credit_labels.agreement.json records the measurement; a test checks this
# constant against it).
HEADLINE_RULE = "message-or-answer"
HEADLINE_METRIC = RULE_METRICS[HEADLINE_RULE](HEADLINE_BUDGET)
HEADLINE_LABEL = f"shown @{HEADLINE_BUDGET:,} tok"
# Version of the credit rules: part of what a stored sample's `budget` account was computed under.
GRADER_VERSION = 2


class SpanError(ValidationError):
    """A span that does not fit the text it annotates; `field` names it (memories[2].evidence_spans[0].end)."""


@dataclass(frozen=True)
class Located:
    """A span in the injected context's coordinates. `whole`: a memory-level span (no explicit spans)."""

    evidence_id: str
    start: int
    end: int
    whole: bool = False


def _span(s: Any) -> tuple[str, int, int]:
    if isinstance(s, Mapping):
        return str(s["evidence_id"]), int(s["start"]), int(s["end"])
    return str(s.evidence_id), int(s.start), int(s.end)


def check_spans(spans: Iterable[Any], length: int, field: str) -> None:
    """Every span inside [0, length] with start <= end and an evidence id, else SpanError naming the span's field. A
    zero-length span says the memory cites the message but shows none of it (a snippet cut before its line)."""
    for j, s in enumerate(spans):
        eid, a, b = _span(s)
        where = f"{field}[{j}]"
        if not eid:
            raise SpanError(f"{where}.evidence_id", "empty")
        if a < 0:
            raise SpanError(f"{where}.start", f"{a} is negative")
        if b < a:
            raise SpanError(f"{where}.end", f"{b} is before start {a}")
        if b > length:
            raise SpanError(f"{where}.end", f"{b} is past the end of the text ({length} characters)")


def check_record(rec: Mapping[str, Any]) -> None:
    """The spans of one retrieval record fit their texts (see check_spans)."""
    ctx = rec.get("formatted_context") or ""
    check_spans(rec.get("context_spans") or [], len(ctx), "context_spans")
    for i, m in enumerate(rec.get("memories") or []):
        check_spans(m.get("evidence_spans") or [], len(m.get("text") or ""), f"memories[{i}].evidence_spans")


def locate(rec: Mapping[str, Any]) -> tuple[str, list[Located], int]:
    """(injected context, its spans, memories not found in it) of a retrieval record (module docstring, 1-2)."""
    ctx = rec.get("formatted_context") or ""
    given = rec.get("context_spans") or []
    if given:
        return ctx, [Located(*_span(s)) for s in given], 0
    out: list[Located] = []
    cursor, unlocated = 0, 0
    for m in rec.get("memories") or []:
        text = m.get("text") or ""
        if not text:
            continue
        pos = ctx.find(text, cursor)
        if pos < 0:
            pos = ctx.find(text)
        if pos < 0:
            unlocated += 1
            continue
        spans = m.get("evidence_spans") or []
        if spans:
            out += [Located(e, pos + a, pos + b) for e, a, b in map(_span, spans)]
        else:
            out += [Located(str(e), pos, pos + len(text), whole=True) for e in m.get("evidence_ids") or []]
        cursor = pos + len(text)
    return ctx, out, unlocated


def chars_within(text: str, budgets: Sequence[int]) -> tuple[int, list[int]]:
    """(tokens of `text`, for each budget the number of leading characters inside its first B tokens). A token
    prefix is a byte prefix of the UTF-8 text; a character split by the cut is not counted."""
    enc = _encoding()
    if enc is None:  # the labelled chars/4 fallback of services/common/tokens
        total = count_tokens(text)
        return total, [min(len(text), 4 * b) for b in budgets]
    ids = token_ids(text)
    if not ids:
        return 0, [0 for _ in budgets]
    raw = text.encode("utf-8")
    cuts = []
    for b in budgets:
        if b >= len(ids):
            cuts.append(len(text))
        elif b <= 0:
            cuts.append(0)
        else:  # the bytes of the first b tokens, the UTF-8 text's prefix up to there
            cuts.append(len(raw[: len(enc.decode_bytes(list(ids[:b])))].decode("utf-8", errors="ignore")))
    return len(ids), cuts


def credited(spans: Sequence[Located], cut: int, message_chars: Mapping[str, int] | None = None) -> set[str]:
    """The evidence ids shown before character `cut` (module docstring, Credit)."""
    shown: dict[str, int] = {}
    total: dict[str, int] = {}
    out: set[str] = set()
    for s in spans:
        inside = max(0, min(s.end, cut) - s.start)
        if s.whole:
            if inside > 0 and inside >= SHOWN_FRACTION * (s.end - s.start):
                out.add(s.evidence_id)
            continue
        shown[s.evidence_id] = shown.get(s.evidence_id, 0) + inside
        total[s.evidence_id] = total.get(s.evidence_id, 0) + (s.end - s.start)
    for e, n in shown.items():
        need = (message_chars or {}).get(e) or total[e]
        if n > 0 and n >= SHOWN_FRACTION * need:
            out.add(e)
    return out


def account(rec: Mapping[str, Any], budgets: Sequence[int] = BUDGETS,
            message_chars: Mapping[str, int] | None = None, corpus: text_rule.CorpusIndex | None = None,
            answer: str | None = None) -> dict[str, Any]:
    """What a retrieval record shows at each budget: {"tokens": tokens injected in all, "grader": GRADER_VERSION,
    "shown": {str(B): sorted ids of the corpus messages the rig finds shown (metrics/shown.py)}, "answer": {str(B):
    share of the answer's terms shown, or None}, "claimed": {str(B): sorted ids the backend's spans/ids claim},
    "unlocated": memories whose text was not found (they claim nothing), "shown_tokens": {str(B): min(B, tokens)}}.
    Stored in the sample, so every metric can be recomputed against any gold without the texts. Without `corpus`
    nothing is shown (the rig cannot tell which messages the text holds)."""
    check_record(rec)
    ctx, spans, unlocated = locate(rec)
    tokens, cuts = chars_within(ctx, budgets)
    shown_ids, answer_cov = text_rule.shown_at(ctx, cuts, corpus, answer)
    keys = [str(b) for b in budgets]
    return {"tokens": tokens, "grader": GRADER_VERSION, "unlocated": unlocated,
            "shown": {k: sorted(ids) for k, ids in zip(keys, shown_ids, strict=True)},
            "answer": dict(zip(keys, answer_cov, strict=True)),
            "claimed": {k: sorted(credited(spans, c, message_chars)) for k, c in zip(keys, cuts, strict=True)},
            "shown_tokens": {k: min(b, tokens) for k, b in zip(keys, budgets, strict=True)}}


def shown_context(rec: Mapping[str, Any], budget: int = HEADLINE_BUDGET) -> str:
    """The part of a retrieval's injected context the agent is shown at `budget` tokens: what it answers from."""
    return truncate_to_tokens(rec.get("formatted_context") or "", budget)


def recall_at_budget(shown: Iterable[str], gold: Sequence[str]) -> float | None:
    """|gold ∩ shown| / |gold|; None without gold."""
    g = set(gold)
    if not g:
        return None
    return len(g & set(shown)) / len(g)


def budget_auc(recalls: Sequence[float | None], budgets: Sequence[int] = BUDGETS) -> float | None:
    """Area under recall against log2(budget), trapezoids, divided by log2(max / min): in [0, 1]. None when any
    point is None or the ladder has fewer than two budgets."""
    if len(budgets) < 2 or any(r is None for r in recalls):
        return None
    xs = [math.log2(b) for b in budgets]
    area = sum((xs[i + 1] - xs[i]) * (recalls[i] + recalls[i + 1]) / 2 for i in range(len(xs) - 1))  # type: ignore[operator]
    return area / (xs[-1] - xs[0])


def probe_values(budget_rec: Mapping[str, Any] | None, gold: Sequence[str],
                 budgets: Sequence[int] = BUDGETS, answerable: bool = True) -> dict[str, float | None]:
    """{shown@B..., budget_recall@B..., answer_terms@B..., claimed_recall@B..., budget_recall_auc, budget_tokens,
    budget_unlocated} of one probe from its `account` record. `answerable` False (the gold answer is not a fact the
    conversation states: an adversarial or abstention question) leaves the answer terms out. A record made before
    the rig decided what was shown (no "grader" key: its "shown" was the backend's claim) gives the claimed values
    only."""
    rec = budget_rec or {}
    current = "grader" in rec
    shown = (rec.get("shown") or {}) if current else {}
    claimed = (rec.get("claimed") if current else rec.get("shown")) or {}
    answer = rec.get("answer") or {}
    out: dict[str, float | None] = {}
    recalls: list[float | None] = []
    for b in budgets:
        k = str(b)
        if current:
            r = recall_at_budget(shown.get(k) or [], gold)
            a = answer.get(k) if answerable else None
            out[budget_metric(b)] = r
            recalls.append(r)
            out[answer_metric(b)] = a
            both = text_rule.message_or_answer(r, a)
            out[shown_metric(b)] = None if both is None else both / 2
        out[claimed_metric(b)] = recall_at_budget(claimed.get(k) or [], gold)
    if current:
        out["budget_recall_auc"] = budget_auc(recalls, budgets)
    if budget_rec is not None:
        out["budget_tokens"] = float(shown_tokens(budget_rec))
        out["budget_unlocated"] = float(budget_rec.get("unlocated") or 0)
    return out


def unlocated_memories(budget_rec: Mapping[str, Any]) -> int:
    """Memories of one retrieval whose text was not found in what the backend injected (they credit nothing: the
    rig cannot tell what of them the agent saw); a backend that rewrites its memories' text when it formats them
    should send context_spans."""
    return int(budget_rec.get("unlocated") or 0)


def shown_tokens(budget_rec: Mapping[str, Any], budget: int = HEADLINE_BUDGET) -> int:
    """Tokens the agent is shown at `budget`: min(budget, tokens the backend injected)."""
    return min(budget, int(budget_rec.get("tokens") or 0))


def _register() -> None:
    for b in BUDGETS:
        metric(budget_metric(b), higher_is_better=True, unit="rate")(recall_at_budget)
        metric(answer_metric(b), higher_is_better=True, unit="rate")(text_rule.answer_coverage)
        metric(claimed_metric(b), higher_is_better=True, unit="rate")(recall_at_budget)
        metric(shown_metric(b), higher_is_better=True, unit="rate")(text_rule.message_or_answer)
    metric("budget_recall_auc", higher_is_better=True, unit="rate")(budget_auc)
    metric("budget_tokens", higher_is_better=False, unit="tokens")(shown_tokens)
    metric("budget_unlocated", higher_is_better=False, unit="count")(unlocated_memories)


_register()
