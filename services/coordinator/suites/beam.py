"""`beam`: BEAM, "Beyond a Million Tokens" (Tavakoli et al., ICLR 2026, arXiv:2510.27246), its dev split, loaded
from a path (default `beam/beam_dev.json.gz` under the data directory; the file's README there gives the format).
Long user–assistant conversations, most of them a developer building something, 20 probing questions each in ten
abilities. Only the file's conversations are ever read; the held-out ones are not in it and are never looked for.

**Corpus.** One namespace per conversation. Each chat batch is a session (`B<batch_number>`), its messages
ingested in order, one message per turn with message id = the turn's `id` (an integer in the file, kept as text)
and its content unchanged (the user turns' trailing `->-> n,m` index marker included: it is in the upstream chat),
except a message longer than the rig's ingest limit (services/common/types.MAX_CONTENT_CHARS, 200,000 characters):
its runs of whitespace are collapsed (a run with a line break to one line break, others to one space: its words,
all the grader reads, are kept) and, if it is still too long, it is cut at the limit; such messages are listed in
the data info (`fitted`). In the dev file that is 2 assistant messages padded by a generator gone wrong (beam-100K-4
#97, 348,853 characters, mostly spaces; beam-500K-28 #305, 246,463, mostly table borders), neither of them evidence;
collapsed, they are 4,714 and 19,913 characters.
**Dates.** A message is dated at its turn's `time_anchor` ("March-15-2024", read as that day at 00:00 UTC) when it
has one; a batch's own `time_anchor` dates the batch's first message (unless that has its own); every other message
takes the last anchor before it in the conversation, and a message before the conversation's first anchor takes that
first anchor (in the dev file every batch's first user turn carries an anchor and no batch has its own, so no
message there needs the fallback). A session starts at its first message's date. A conversation
without any anchor is malformed. **Probes**: every question of the conversation, asked after the whole conversation
(reference time: the last anchor + 1 day), in the conversation's namespace; category = the ability.
`sizes=100K,500K,1M` keeps those size buckets; `conversations=N` draws N of them with the seed, stratified by size
(C.stratified_sample: in proportion, at least one per bucket when N allows; 0 = all). Streamed per namespace
(`namespace_scoped`): a 1M conversation is ~1,800 messages, and a backend holds one conversation at a time.

**Evidence.** `source_chat_ids`, flattened, in first-mention order, as the gold messages: a list, a list of lists
(event ordering: one inner list per event), or a dict of lists (knowledge update `original_info` / `updated_info`,
contradiction `first_statement` / `second_statement`, temporal `first_event` / `second_event`; its groups are kept
in the probe's meta). Abstention questions and the few others without ids have no gold. An id that is not a message
of the conversation is an error naming the conversation, the question and the field.

**Scoring**, on what the rig finds in the injected text (metrics/budget.py, metrics/shown.py: a message is shown at
B tokens when half its word 3-grams are in the first B tokens of what the backend injects); every figure below is
read at the headline budget B = 1,000 tokens from the retrieval's `budget` account, which holds only the *set* of
messages shown at each budget (no order within one), so order is read only between rungs of the ladder (`stale_first`):
- `budget_recall@B` for the ladder 250 ... 4,000 (the share of gold messages shown), every ability with evidence;
  the suite's headline is `budget_recall@1000` over the questions with evidence, overall and per ability (the
  verdict reads the rig's headline metric, budget.HEADLINE_METRIC, from the same account: `shown@1000`, the
  message-or-answer rule, since the blind-label measurement; the report shows it beside evidence recall whenever it
  is not evidence recall itself);
- knowledge update: `update_shown` = some `updated_info` message is shown (None without one); `stale` = some
  `original_info` message that is not also an update message is shown while no `updated_info` message is (the agent
  sees the old value only; None without updates or without an original apart from them). `stale_first` also counts
  an original "ranked above" the update, as far as the budget ladder can tell: some original message is shown at a
  rung of the ladder up to B (250, 500, 1,000 tokens) where no update message is yet (the same None rule). Within
  250 tokens, or between two rungs, the order is not seen: an original 50 tokens ahead of the update is not counted;
- contradiction resolution: `both_statements_shown` = some `first_statement` and some `second_statement` message
  shown (None when either group is empty);
- event ordering: `order_all_shown` = every referenced message shown (all the events' messages);
- instruction and preference following: `instruction_shown` = some message that states the instruction (its
  `source_chat_ids`) is shown when the later question is asked (None without ids);
- abstention (nothing in the conversation answers it): `abstention_tokens` = the tokens injected, up to B;
  `abstention_topic` = the share of the question's content terms (shown.answer_terms of the question: normalised,
  stemmed, function words out) found among the shown text's terms; `abstention_on_topic` = 1 when that share is at
  least ON_TOPIC (0.5). Lower is less injected; they describe, they do not grade. Limits: BEAM's abstention questions
  ask for a missing detail of a topic the conversation does discuss, so on-topic text is expected from a good memory
  (the model must still say it does not know); a coding conversation repeats generic words ("project", "app") that
  match many questions; a paraphrase of the topic is not counted;
- `injected_tokens`: every token the backend injected for the question, before the cut at the budget (the budget
  account's `tokens`): every figure above reads the first B of them; this is what the turn would cost uncut;
- rubric nuggets offline (`nuggets@1000`): the share of a question's nuggets whose content the shown text (the
  sample's `shown_text`, the first 1,000 tokens of the injected text) carries. A nugget's content is its text after
  the "LLM response should <verb>:" prefix; its terms are shown.answer_terms of that; it is carried when at least
  NUGGET_CARRIED (0.5) of its terms are among the shown text's terms (shown.answer_coverage). Nuggets that forbid
  something ("should avoid", "should not mention") and nuggets without terms are left out. Scored for the abilities
  whose nuggets name conversation content; abstention, instruction following and preference following are left out
  (their nuggets describe the reply's behaviour: "includes numeric codes", "there is no information"). Limits: term
  overlap, not meaning (a paraphrase is missed, common words match anywhere; an ordering nugget is carried whatever
  the order); read at 1,000 tokens only (the sample keeps that text alone); contradiction's behavioural nuggets
  ("there is contradictory information", "which statement is correct?") and summaries' abstract ones cap the share
  below 1; BEAM's own judging (0 / 0.5 / 1 per nugget by a model, from an answer) is not this.
- with answers (`answer: true`): `answer_nuggets`, the same rule applied to the answer instead of the shown text (an
  llm-mock figure when the mock answered);
- with answers and a judge model (`--judge local` or an endpoint; not llm-mock, which has no nugget rule):
  `beam_judge`, BEAM's own way of grading: a model reads the answer and scores each rubric nugget 0 (not stated or
  contradicted), 0.5 (partly) or 1 (stated), and the question's score is the mean (judges.nugget_judge: memrig's
  own prompt, one call per nugget, prompts.NUGGET_JUDGE_ONE_SYSTEM; the median across judge passes; a reply it
  cannot read leaves the question unjudged, None, never 0, and is counted). Every ability is judged, abstention, instruction and
  preference following included: their nuggets describe the reply's behaviour ("there is no information", "includes
  numeric codes"), which a model can read from the answer, unlike the offline term rule. How far the judge agrees
  with a reader's labels: suites/data/judge_labels_beam.md.
Intervals by conversation (stats.interval, cluster-robust t; clusters = conversation), held-out check with 3 or
more conversations, scorecards against the suite's baseline as the other real-data suites.
"""

from __future__ import annotations

import gzip
import json
import random
import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from services.common.errors import InputError
from services.common.types import MAX_CONTENT_CHARS, IngestBatch, Message, Session
from services.coordinator import judges
from services.coordinator.metrics import budget
from services.coordinator.metrics import shown as text_rule
from services.coordinator.metrics.latency import latency_summary
from services.coordinator.stats import held_out_check
from services.coordinator.suites import common as C
from services.coordinator.suites.base import (
    Condition,
    OptionError,
    Probe,
    ProbeValues,
    Suite,
    SuiteData,
    condition_backends,
)
from services.coordinator.suites.registry import register

SIZES = ("100K", "500K", "1M")
_ID_SIZE = re.compile(r"^beam-(100K|500K|1M)-\d+$")  # the dev file's conversation ids (its README)
ABILITIES = ("abstention", "contradiction_resolution", "event_ordering", "information_extraction",
             "instruction_following", "knowledge_update", "multi_session_reasoning", "preference_following",
             "summarization", "temporal_reasoning")
# the reference answer's field, by ability (instruction and preference following have none)
ANSWER_FIELDS = ("answer", "ideal_answer", "ideal_response", "ideal_summary")
# the named groups of a dict-shaped source_chat_ids, by ability
GROUPS = {"knowledge_update": ("original_info", "updated_info"),
          "contradiction_resolution": ("first_statement", "second_statement"),
          "temporal_reasoning": ("first_event", "second_event")}
# abilities whose rubric nuggets describe the reply's behaviour, not the conversation's content
BEHAVIOUR_NUGGETS = ("abstention", "instruction_following", "preference_following")
# abilities whose reference answer is not a fact the conversation states (answer terms left out)
NO_ANSWER_TERMS = ("abstention", "instruction_following", "preference_following")
AT = budget.HEADLINE_BUDGET
# evidence recall at the headline budget: the suite's own headline, overall and per ability (the verdict reads the
# rig's headline metric, budget.HEADLINE_METRIC, which the same account gives: the two coincide under the message rule)
RECALL = budget.budget_metric(AT)
NUGGETS = f"nuggets@{AT}"
NUGGET_CARRIED = 0.5
ON_TOPIC = 0.5
# ability -> its own figures (besides evidence recall), in the order the report lists them
ABILITY_METRICS = {
    "knowledge_update": ("update_shown", "stale", "stale_first"),
    "contradiction_resolution": ("both_statements_shown",),
    "event_ordering": ("order_all_shown",),
    "instruction_following": ("instruction_shown",),
    "preference_following": ("instruction_shown",),
    "abstention": ("abstention_tokens", "abstention_topic", "abstention_on_topic"),
}
# the direction and unit of every figure only this suite computes (the metric registry holds the rest; an undeclared,
# unregistered name is an error): lower is better (or: less injected) for the stale and abstention figures
SPECS = {"stale": (False, "rate"), "stale_first": (False, "rate"), "abstention_tokens": (False, "tokens"),
         "injected_tokens": (False, "tokens"),
         "abstention_topic": (False, "rate"),
         "abstention_on_topic": (False, "rate"),
         **{name: (True, "rate") for name in ("update_shown", "both_statements_shown", "order_all_shown",
                                               "instruction_shown", NUGGETS, "answer_nuggets", "beam_judge")}}
METRIC_LABELS = {"update_shown": "updated fact shown", "stale": "stale (original without update)",
                 "stale_first": "stale or original first (by budget rung)",
                 "both_statements_shown": "both statements shown", "order_all_shown": "every event shown",
                 "instruction_shown": "instruction shown", "abstention_tokens": "tokens injected",
                 "abstention_topic": "question terms shown", "abstention_on_topic": "on topic"}
HELD_OUT_METRICS = (RECALL, NUGGETS)
_DATE = "%B-%d-%Y"
_RUN = re.compile(r"[ \t\r\f\v]*\n\s*|[ \t\r\f\v]{2,}")
_NUGGET_PREFIX = re.compile(r"^\s*(?:llm\s+)?response\s+should\s+((?:not\s+)?[a-z]+)\s*:\s*", re.I)


class BeamDataError(InputError):
    """A BEAM file that does not have the documented shape: `field` names the conversation and the field
    (`beam-100K-2.chat_batches[0].turns[3][1].role`), the message what is wrong and in which file."""


def parse_anchor(s: str) -> datetime:
    """'March-15-2024' -> that day at 00:00 UTC (ValueError otherwise)."""
    return datetime.strptime(s.strip(), _DATE).replace(tzinfo=UTC)


def conversation_of(probe_id: str) -> str:
    """The conversation a probe belongs to ("beam-100K-2:knowledge_update:1" -> "beam-100K-2"): the independent
    unit for statistics."""
    return probe_id.split(":", 1)[0]


def parse_sizes(option: Any) -> list[str]:
    """The size buckets an option names ("100K,1M", case-insensitive), in SIZES order; OptionError otherwise."""
    items = option if isinstance(option, list | tuple) else str(option).split(",")
    by_key = {s.lower(): s for s in SIZES}
    out = set()
    for item in (str(x).strip() for x in items):
        if not item:
            continue
        if item.lower() not in by_key:
            raise OptionError("sizes", f"{item!r} is not a size bucket; expected some of {', '.join(SIZES)}")
        out.add(by_key[item.lower()])
    if not out:
        raise OptionError("sizes", f"{option!r} names no size bucket; expected some of {', '.join(SIZES)}")
    return [s for s in SIZES if s in out]


def read_file(path: Path) -> dict[str, Any]:
    """The BEAM file (gzip when the name ends in .gz): a JSON object with a `conversations` list."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        raw = json.load(f)
    if not isinstance(raw, dict) or not isinstance(raw.get("conversations"), list):
        raise BeamDataError(path.name, "expected a JSON object with a list under 'conversations'")
    return raw


def _ids(value: Any, where: str, bad) -> list[Any]:
    """A source_chat_ids list flattened (one level of inner lists: events), or `bad` naming `where`."""
    if not isinstance(value, list):
        bad(where, f"expected a list of message ids, got {type(value).__name__}")
    out = []
    for i, x in enumerate(value):
        if isinstance(x, list):
            for j, y in enumerate(x):
                if not isinstance(y, int) or isinstance(y, bool):
                    bad(f"{where}[{i}][{j}]", f"{y!r} is not a message id")
                out.append(y)
        elif isinstance(x, int) and not isinstance(x, bool):
            out.append(x)
        else:
            bad(f"{where}[{i}]", f"{x!r} is not a message id")
    return out


def fit(content: str, limit: int = MAX_CONTENT_CHARS) -> str:
    """`content` as the rig can ingest it (module docstring, Corpus): unchanged up to `limit` characters; longer, its
    whitespace runs collapsed, then cut at `limit`."""
    if len(content) <= limit:
        return content
    return _RUN.sub(lambda m: "\n" if "\n" in m.group() else " ", content)[:limit]


def conversation_batch(conv: dict[str, Any], source: str, fitted: list[dict[str, Any]] | None = None
                       ) -> tuple[IngestBatch, dict[str, str], datetime]:
    """(batch, {message id: role}, the last anchor) of one conversation (module docstring, Corpus and Dates), or
    BeamDataError naming the conversation and the field. Messages made to fit the ingest limit are appended to
    `fitted` ({conversation, id, chars, fitted_chars})."""
    cid = conv.get("id")

    def bad(where: str, what: str):
        raise BeamDataError(f"{cid}.{where}", f"{what} (in {source})")

    batches = conv.get("chat_batches")
    if not isinstance(batches, list) or not batches:
        bad("chat_batches", "expected a non-empty list of batches")
    # first pass: messages in order with their own (or their batch's) anchor
    flat: list[tuple[int, dict[str, Any], datetime | None]] = []
    seen: dict[str, str] = {}
    numbers: set[Any] = set()
    for j, b in enumerate(batches):
        if not isinstance(b, dict) or not isinstance(b.get("turns"), list):
            bad(f"chat_batches[{j}].turns", "expected a list of turns")
        num = b.get("batch_number", j + 1)
        if num in numbers:
            bad(f"chat_batches[{j}].batch_number", f"{num!r} repeats an earlier batch's")
        numbers.add(num)
        batch_anchor = _anchor(b.get("time_anchor"), f"chat_batches[{j}].time_anchor", bad)  # its first message's
        for k, turn in enumerate(b["turns"]):
            if not isinstance(turn, list):
                bad(f"chat_batches[{j}].turns[{k}]", "expected a list of messages")
            for i, m in enumerate(turn):
                where = f"chat_batches[{j}].turns[{k}][{i}]"
                if not isinstance(m, dict):
                    bad(where, "expected a message object")
                if m.get("role") not in ("user", "assistant"):
                    bad(f"{where}.role", f"{m.get('role')!r}: expected 'user' or 'assistant'")
                mid = m.get("id")
                if not isinstance(mid, int | str) or isinstance(mid, bool) or str(mid) == "":
                    bad(f"{where}.id", f"{mid!r} is not a message id")
                if str(mid) in seen:
                    bad(f"{where}.id", f"{mid!r} repeats an earlier message's id")
                if not isinstance(m.get("content"), str):
                    bad(f"{where}.content", f"expected text, got {type(m.get('content')).__name__}")
                seen[str(mid)] = m["role"]
                own = _anchor(m.get("time_anchor"), f"{where}.time_anchor", bad)
                flat.append((j, m, own if own is not None else batch_anchor))
                batch_anchor = None
    anchors = [a for _, _, a in flat if a is not None]
    if not anchors:
        bad("time_anchor", "no batch or turn has a time_anchor: the conversation cannot be dated")
    current = anchors[0]  # before the first anchor: the conversation's first anchor
    sessions: list[Session] = []
    msgs: list[Message] = []
    last_batch = None
    for j, m, own in flat:
        if own is not None:
            current = own
        if j != last_batch and msgs:
            sessions.append(_session(batches[last_batch], last_batch, msgs))
            msgs = []
        last_batch = j
        content = fit(m["content"])
        if content != m["content"] and fitted is not None:
            fitted.append({"conversation": cid, "id": str(m["id"]), "chars": len(m["content"]),
                           "fitted_chars": len(content)})
        msgs.append(Message(id=str(m["id"]), role=m["role"], content=content, ts=current))
    if msgs:
        sessions.append(_session(batches[last_batch], last_batch, msgs))
    return IngestBatch(sessions=tuple(sessions), batch_id=str(cid)), seen, anchors[-1]


def _anchor(value: Any, where: str, bad) -> datetime | None:
    if value in (None, ""):
        return None
    if not isinstance(value, str):
        bad(where, f"{value!r} is not a date like March-15-2024")
    try:
        return parse_anchor(value)
    except ValueError:
        bad(where, f"{value!r} is not a date like March-15-2024")
    return None


def _session(batch: dict[str, Any], j: int, msgs: list[Message]) -> Session:
    assert msgs[0].ts is not None  # every message is dated (conversation_batch)
    return Session(session_id=f"B{batch.get('batch_number', j + 1)}", started_at=msgs[0].ts, messages=tuple(msgs))


def question_probe(cid: str, ability: str, i: int, q: Any, roles: dict[str, str], reference: datetime,
                   size: str, source: str) -> Probe:
    """One probing question as a probe (module docstring, Evidence), or BeamDataError naming the field."""
    where = f"probing_questions.{ability}[{i}]"

    def bad(field: str, what: str):
        raise BeamDataError(f"{cid}.{where}{field}", f"{what} (in {source})")

    if not isinstance(q, dict):
        bad("", "expected a question object")
    if not isinstance(q.get("question"), str) or not q["question"].strip():
        bad(".question", "expected the question's text")
    src = q.get("source_chat_ids")
    groups: dict[str, list[str]] = {}
    events: list[list[str]] = []
    if src is None:
        flat: list[Any] = []
    elif isinstance(src, dict):
        flat = []
        for name, ids in src.items():
            got = _ids(ids, f"source_chat_ids.{name}", lambda f, w: bad(f".{f}", w))
            groups[name] = [str(x) for x in got]
            flat += got
    else:
        flat = _ids(src, "source_chat_ids", lambda f, w: bad(f".{f}", w))
        if ability == "event_ordering":
            events = [[str(y) for y in x] if isinstance(x, list) else [str(x)] for x in src]
    for x in flat:
        if str(x) not in roles:
            bad(".source_chat_ids", f"message id {x!r} is not a message of the conversation")
    if ability in GROUPS and src is not None:
        missing = [name for name in GROUPS[ability] if not isinstance(src, dict) or name not in src]
        if missing:
            bad(".source_chat_ids", f"expected an object with the groups {', '.join(GROUPS[ability])}; "
                                    f"{', '.join(missing)} missing")
    rubric = q.get("rubric") or []
    if not isinstance(rubric, list) or not all(isinstance(n, str) for n in rubric):
        bad(".rubric", "expected a list of nugget texts")
    answer = next((q[f] for f in ANSWER_FIELDS if isinstance(q.get(f), str)), "")
    gold = list(dict.fromkeys(str(x) for x in flat))
    return Probe(id=f"{cid}:{ability}:{i}", question=q["question"], category=ability, ground_truth=answer,
                 evidence_ids=gold, namespace=cid, reference_time=reference + timedelta(days=1),
                 meta={"conversation": cid, "size": size, "groups": groups, "events": events, "rubric": rubric})


# --------------------------------------------------------------------------------------------------------------
# Scoring (module docstring, Scoring): pure functions of one sample's parts


def shown_at(acc: dict[str, Any] | None, at: int = AT) -> set[str] | None:
    """The messages the rig found shown at `at` tokens (a budget account made by the rig's grader), else None."""
    if not acc or "grader" not in acc:
        return None
    return set((acc.get("shown") or {}).get(str(at)) or [])


def nugget_terms(nugget: str) -> list[str] | None:
    """The terms of a rubric nugget's content (after its "LLM response should <verb>:" prefix); None for a nugget
    that forbids something ("should avoid", "should not ...")."""
    m = _NUGGET_PREFIX.match(nugget)
    if m and (m.group(1).lower().startswith("not") or m.group(1).lower() == "avoid"):
        return None
    return text_rule.answer_terms(nugget[m.end():] if m else nugget)


def nugget_share(rubric: list[str], text: str | None) -> float | None:
    """The share of a rubric's nuggets carried by `text` (each: at least NUGGET_CARRIED of its terms among the
    text's terms); None without a text or without a nugget that has terms."""
    if text is None:
        return None
    terms = [t for t in (nugget_terms(n) for n in rubric) if t]
    if not terms:
        return None
    have = text_rule.shown_terms(text_rule.words(text))
    return sum(1 for t in terms if (text_rule.answer_coverage(t, have) or 0.0) >= NUGGET_CARRIED) / len(terms)


def topic_share(question: str, text: str | None) -> float | None:
    """The share of the question's content terms among the terms of `text` (None without terms or text)."""
    terms = text_rule.answer_terms(question)
    if text is None or not terms:
        return None
    return text_rule.answer_coverage(terms, text_rule.shown_terms(text_rule.words(text)))


def _any(ids: list[str], shown: set[str]) -> bool:
    return any(x in shown for x in ids)


def stale_first(acc: dict[str, Any] | None, orig: list[str], upd: list[str], at: int = AT) -> float | None:
    """1 when, at some rung of the budget ladder up to `at` that the account holds, an original message is shown and
    no update message is (module docstring, Scoring); None without an account from the grader, an update message,
    or an original apart from them."""
    if shown_at(acc, at) is None or not upd or not orig:
        return None
    rungs = [b for b in budget.BUDGETS if b <= at and str(b) in (acc or {}).get("shown", {})]
    return float(any(_any(orig, s) and not _any(upd, s) for s in (shown_at(acc, b) or set() for b in rungs)))


def ability_values(ability: str, meta: dict[str, Any], gold: list[str], acc: dict[str, Any] | None,
                   shown_text: str | None, question: str) -> dict[str, float | None]:
    """The ability's own figures for one probe (module docstring, Scoring), from its budget account and shown text;
    every value None when the retrieval has no account from the rig's grader (failed or an older run)."""
    shown = shown_at(acc)
    groups = meta.get("groups") or {}
    out: dict[str, float | None] = {}
    if ability == "knowledge_update":
        upd = groups.get("updated_info") or []
        orig = [x for x in groups.get("original_info") or [] if x not in upd]
        ok = shown is not None and bool(upd)
        out["update_shown"] = float(_any(upd, shown)) if ok else None
        out["stale"] = float(_any(orig, shown) and not _any(upd, shown)) if ok and orig else None
        out["stale_first"] = stale_first(acc, orig, upd)
    elif ability == "contradiction_resolution":
        a, b = groups.get("first_statement") or [], groups.get("second_statement") or []
        out["both_statements_shown"] = float(_any(a, shown) and _any(b, shown)) if shown is not None and a and b \
            else None
    elif ability == "event_ordering":
        out["order_all_shown"] = float(all(x in shown for x in gold)) if shown is not None and gold else None
    elif ability in ("instruction_following", "preference_following"):
        out["instruction_shown"] = float(_any(gold, shown)) if shown is not None and gold else None
    elif ability == "abstention":
        tokens = None if acc is None else float(min(AT, int(acc.get("tokens") or 0)))
        share = topic_share(question, shown_text) if acc is not None else None
        out["abstention_tokens"] = tokens
        out["abstention_topic"] = share
        out["abstention_on_topic"] = None if share is None else float(share >= ON_TOPIC)
    if ability not in BEHAVIOUR_NUGGETS:
        out[NUGGETS] = nugget_share(meta.get("rubric") or [], shown_text) if shown is not None else None
    return out


def render_judge(metrics: dict[str, Any], conds: list[str], abilities: list[str]) -> list[str]:
    """The BEAM judge's section: overall and per ability (mean [95% CI by conversation]), and what it left
    unjudged."""
    m = metrics["conditions"]
    j = metrics.get("judge") or {}
    who = f" by {j.get('model')}" if isinstance(j, dict) and j.get("model") else ""
    tag = C.mock_tag(metrics, "judge")
    out = ["", f"### BEAM's nugget judging{tag} (each nugget 0 / 0.5 / 1 from the answer{who}; the question's mean)",
           "", "Every ability, behaviour nuggets included (a model reads the reply); a judge reply that could not be "
           "read leaves its question unjudged (not 0). Agreement with a reader's labels: "
           "services/coordinator/suites/data/judge_labels_beam.md.", ""]
    out.append(C.md_table(["ability", *conds], [
        ["**overall**", *(C.fmt_ci(m[c]["overall"].get("beam_judge")) for c in conds)],
        *([a, *(C.fmt_ci(m[c]["by_ability"].get(a, {}).get("beam_judge")) for c in conds)] for a in abilities)]))
    counts = metrics.get("beam_judge_counts") or {}
    if counts:
        out += ["", "Judged / unjudged answers (unjudged nuggets): " + ", ".join(
            f"{c} {v['judged']} / {v['unjudged']} ({v['unjudged_nuggets']})" for c, v in sorted(counts.items()))
            + "."]
    return out


def judge_is_model(ctx: Any) -> bool:
    """Whether the run's judge is a model (the local one or an endpoint): llm-mock has no nugget rule, so with it
    nothing is judged (its config says `is_mock`; a client without a config, a test's scripted model, is a model)."""
    llm = getattr(ctx, "judge_llm", None)
    return llm is not None and not bool(getattr(getattr(llm, "config", None), "is_mock", False))


def judge_counts(samples: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per condition: answers the nugget judge saw, those it left unjudged (a reply it could not read), nuggets
    unjudged."""
    out: dict[str, dict[str, int]] = {}
    for r in samples:
        j = r.get("beam_judge")
        if not isinstance(j, dict):
            continue
        c = out.setdefault(r["condition"], {"judged": 0, "unjudged": 0, "unjudged_nuggets": 0})
        c["unjudged" if j.get("score") is None else "judged"] += 1
        c["unjudged_nuggets"] += int(j.get("unjudged") or 0)
    return out


@register
class BeamSuite(Suite):
    name = "beam"
    description = ("BEAM dev split (real data, ICLR 2026): 100K-1M-token user-assistant conversations, mostly "
                   "software projects; per-ability scoring on the budgeted context (evidence recall, updated fact "
                   "vs stale, both contradicting statements, every event, standing instructions, abstention), rubric "
                   "nuggets offline.")
    retrieval_headline = budget.HEADLINE_METRIC
    # BEAM's own nugget judging (beam_judge) is reported but is not the verdict's metric: with the local model it agreed
    # with a reader's nugget labels at kappa 0.31 [0.18, 0.45] (docs/results/beam.md); the verdict reads retrieval
    answer_headline = None
    answer_metrics = {"answer_nuggets": "answer", "beam_judge": "judge"}
    namespace_scoped = True  # 1M-token conversations: ingested, probed and released one at a time
    defaults = {"data_dir": None, "file": "beam/beam_dev.json.gz", "sizes": ",".join(SIZES), "conversations": 4,
                "top_k": 50, "mode": "fast", "answer": True}

    def load(self) -> SuiteData:
        sizes = parse_sizes(self.options["sizes"])
        path = C.resolve_data_file(self.options["data_dir"], self.options["file"])
        raw = read_file(path)
        source = path.name
        convs = []
        for n, conv in enumerate(raw["conversations"]):
            if not isinstance(conv, dict) or not isinstance(conv.get("id"), str) or not conv["id"]:
                raise BeamDataError(f"conversations[{n}].id", f"expected the conversation's id (in {source})")
            if conv.get("size") not in SIZES:
                raise BeamDataError(f"{conv['id']}.size", f"{conv.get('size')!r}: expected one of "
                                                          f"{', '.join(SIZES)} (in {source})")
            if conv["size"] in sizes:
                convs.append(conv)
        ids = [c["id"] for c in convs]
        if len(set(ids)) != len(ids):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise BeamDataError(f"{dup}.id", f"two conversations have this id (in {source})")
        in_file = len(convs)
        convs = C.stratified_sample(convs, lambda c: c["size"], int(self.options["conversations"]),
                                    random.Random(self.seed))
        corpora, probes = {}, []
        no_evidence: Counter[str] = Counter()
        fitted: list[dict[str, Any]] = []
        for conv in convs:
            cid = conv["id"]
            batch, roles, last = conversation_batch(conv, source, fitted)
            corpora[cid] = batch
            pq = conv.get("probing_questions")
            if not isinstance(pq, dict):
                raise BeamDataError(f"{cid}.probing_questions", f"expected an object of abilities (in {source})")
            for ability in pq:
                if ability not in ABILITIES:
                    raise BeamDataError(f"{cid}.probing_questions.{ability}",
                                        f"not a BEAM ability; expected {', '.join(ABILITIES)} (in {source})")
                if not isinstance(pq[ability], list):
                    raise BeamDataError(f"{cid}.probing_questions.{ability}", f"expected a list (in {source})")
            for ability in ABILITIES:
                for i, q in enumerate(pq.get(ability) or []):
                    p = question_probe(cid, ability, i, q, roles, last, conv["size"], source)
                    if not p.evidence_ids:
                        no_evidence[ability] += 1
                    probes.append(p)
        self._info = {
            "source": str(path), "file": self.options["file"], "commit": raw.get("commit"),
            "upstream": raw.get("source"), "split": raw.get("split"),
            "licence": "no licence file upstream; published on the Hugging Face Hub (Mohammadta/BEAM) for "
                       "evaluation; cite Tavakoli et al., ICLR 2026",
            "sizes": sizes, "conversations": [c["id"] for c in convs], "size_of": {c["id"]: c["size"] for c in convs},
            "by_size": dict(sorted(Counter(c["size"] for c in convs).items(), key=lambda kv: SIZES.index(kv[0]))),
            "conversations_in_file": in_file, "messages": sum(b.message_count for b in corpora.values()),
            "questions": len(probes), "by_ability": dict(sorted(Counter(p.category for p in probes).items())),
            "no_evidence": dict(sorted(no_evidence.items())), "fitted": fitted,
            "sampling": {"seed": self.seed, "conversations": self.options["conversations"],
                         "stratified_by": "size"},
        }
        return SuiteData(corpora=corpora, probes=probes, info=self._info)

    def conditions(self, backends: list[str], capabilities: dict[str, dict[str, str]]) -> list[Condition]:
        return C.answer_conditions(backends) if self.options["answer"] else C.retrieval_conditions(backends)

    async def run_probe(self, ctx, probe: Probe, condition: Condition) -> dict[str, Any]:
        backend = condition.backends[0]
        body, shown = await C.retrieval_body(ctx, probe, backend, 200)
        if condition.answer:
            body.update(await ctx.answer(probe.question, [shown]))
            rubric = (getattr(probe, "meta", None) or {}).get("rubric") or []
            if rubric and judge_is_model(ctx):
                body["beam_judge"] = await judges.nugget_judge(ctx, probe.question, rubric, body["answer"])
        return body

    def more_units(self, data: dict[str, Any]) -> tuple[str, int] | None:
        n = data.get("conversations_in_file")
        return ("conversations=0", int(n)) if n else None

    def cost_groups(self, data: dict[str, Any]) -> tuple[str, dict[str, str], tuple[str, ...]] | None:
        """The size buckets: a conversation's bucket from run.json's `size_of`; a run recorded before it was kept
        has only the ids, which in the dev file are `beam-<size>-<n>` (its README), so the bucket is read from
        those. None when no conversation has a bucket."""
        size_of = dict(data.get("size_of") or {})
        for cid in data.get("conversations") or []:
            m = _ID_SIZE.match(str(cid))
            if cid not in size_of and m:
                size_of[cid] = m.group(1)
        size_of = {c: s for c, s in size_of.items() if s in SIZES}
        return ("size bucket", size_of, SIZES) if size_of else None

    # ------------------------------------------------------------------------------------------------
    def per_probe(self, samples: list[dict[str, Any]]) -> ProbeValues:
        values: dict[str, dict[str, dict[str, float | None]]] = {}
        for cond, rows in C.by_condition(samples).items():
            vals: dict[str, dict[str, float | None]] = {}
            for r in rows:
                pid, rec, meta = r["probe_id"], C.retrieval_of(r) or {"memories": []}, r.get("meta") or {}
                ability, gold = r["category"], r.get("evidence_ids") or []
                C.budget_values(vals, pid, rec, gold, answerable=ability not in NO_ANSWER_TERMS)
                for name, v in ability_values(ability, meta, gold, rec.get("budget"), rec.get("shown_text"),
                                              r.get("question") or "").items():
                    vals.setdefault(name, {})[pid] = v
                if "answer" in r and ability not in BEHAVIOUR_NUGGETS:
                    vals.setdefault("answer_nuggets", {})[pid] = nugget_share(meta.get("rubric") or [], r["answer"])
                if isinstance(r.get("beam_judge"), dict):
                    vals.setdefault("beam_judge", {})[pid] = r["beam_judge"].get("score")
                vals.setdefault("token_spend", {})[pid] = float(r.get("context_tokens", 0))
                if isinstance(acc := rec.get("budget"), dict) and acc.get("tokens") is not None:
                    # everything the backend injected, before the cut at the budget: what a turn costs it
                    vals.setdefault("injected_tokens", {})[pid] = float(acc["tokens"])
                vals.setdefault("latency_ms", {})[pid] = rec.get("latency_ms")
            values[cond] = vals
        ids = {p for v in values.values() for m in v.values() for p in m}
        return ProbeValues(values, specs=dict(SPECS), clusters={p: conversation_of(p) for p in ids},
                           backend_of=condition_backends(samples))

    def score(self, samples: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {"suite": self.name, "conditions": {}, "abilities": list(ABILITIES),
                               "data": C.load_info(self)}
        pv = self.probe_values(samples)
        per_cond = pv.values
        unit = lambda m: pv.spec(m)[1]  # noqa: E731
        for cond, rows in C.by_condition(samples).items():
            vals = per_cond[cond]
            ability = {r["probe_id"]: r["category"] for r in rows}
            size = {r["probe_id"]: (r.get("meta") or {}).get("size", "") for r in rows}
            lat = [x for x in vals["latency_ms"].values() if x is not None]
            seed = C.stable_seed(self.seed, cond)
            clusters = {p: conversation_of(p) for p in ability}
            co: dict[str, Any] = {
                "n": len(rows), "latency": latency_summary(lat),
                "overall": {m: C.summary(v, seed, unit(m), clusters) for m, v in vals.items()},
                "by_ability": {}, "by_size": {}}
            for m, v in vals.items():
                for ab in sorted(set(ability.values())):
                    sub = {p: x for p, x in v.items() if ability[p] == ab}
                    if sub:
                        co["by_ability"].setdefault(ab, {})[m] = C.summary(sub, seed, unit(m), clusters)
            for m in (RECALL, NUGGETS, "token_spend"):
                for sz in sorted(set(size.values()), key=lambda s: (SIZES.index(s) if s in SIZES else 99, s)):
                    sub = {p: x for p, x in (vals.get(m) or {}).items() if size[p] == sz}
                    co["by_size"].setdefault(sz, {})[m] = C.summary(sub, seed, unit(m), clusters)
            out["conditions"][cond] = co
        all_ids = {p for v in per_cond.values() for m in v.values() for p in m}
        clusters = {p: conversation_of(p) for p in all_ids}
        out["statistics"] = {"unit": "conversation", "conversations": len(set(clusters.values())),
                             "method": C.CONVERSATION_STATISTICS}
        out["held_out"] = held_out_check(per_cond, clusters, HELD_OUT_METRICS, self.seed)
        if counts := judge_counts(samples):
            out["beam_judge_counts"] = counts
        baseline, out["baseline_rule"] = C.scorecard_baseline(pv, budget.HEADLINE_METRIC)
        out["baseline"] = baseline
        out["comparisons"] = C.compare_all(per_cond, baseline, [
            *dict.fromkeys((budget.HEADLINE_METRIC, RECALL)), "budget_recall_auc", (NUGGETS, True, "rate"),
            ("update_shown", True, "rate"),
            ("stale", False, "rate"), ("stale_first", False, "rate"), ("both_statements_shown", True, "rate"),
            ("order_all_shown", True, "rate"),
            ("instruction_shown", True, "rate"), ("token_spend", False, "tokens"), ("latency_ms", False, "ms")],
            seed=self.seed, clusters=clusters) if baseline else {}
        return out

    def render(self, metrics: dict[str, Any]) -> str:
        m = metrics["conditions"]
        conds = sorted(m)
        data = metrics.get("data") or {}
        hb = budget.HEADLINE_BUDGET
        out = ["## BEAM", ""]
        if data:
            sizes = ", ".join(f"{n} of {s}" for s, n in (data.get("by_size") or {}).items())
            out += [f"Data: `{data.get('file')}` (BEAM dev split, upstream commit {str(data.get('commit') or '?')[:7]}): "
                    f"{len(data.get('conversations') or [])} conversation(s) ({sizes}; a seeded sample stratified by "
                    f"size of the {data.get('conversations_in_file')} in the file's chosen sizes), "
                    f"{data.get('messages', 0):,} messages, {data.get('questions')} questions.", ""]
        out += [f"Every figure is read from what the rig finds in the first {hb} tokens the backend injects "
                "(a message is shown when half its word 3-grams are there). Evidence recall = the share of the "
                "question's `source_chat_ids` messages shown, over questions that have them. Per ability: knowledge "
                "update, the updated fact shown, *stale* = an original message shown without any update "
                "message, and *stale or original first* = that, or an original shown at a smaller budget rung "
                "(250, 500 tokens) than every update message (the account holds a set per rung: closer order is "
                "not seen); contradiction, both "
                "statements shown; event ordering, every referenced message shown; instruction / preference "
                "following, the instruction's message shown when the later question comes; abstention, the tokens "
                f"injected and whether at least {ON_TOPIC:.0%} of the question's content terms are in them. "
                f"Nuggets = the share of a question's rubric nuggets with at least {NUGGET_CARRIED:.0%} of their "
                "terms in the shown text (no model; abstention, instruction and preference nuggets describe the "
                "reply and are left out).", "",
                "### Headline (mean [95% CI by conversation])", ""]
        verdict_col = budget.HEADLINE_METRIC != RECALL  # the rig's headline rule, when it is not evidence recall
        rows = []
        for c in conds:
            o = m[c]["overall"]
            rows.append([c, m[c]["n"], *([C.fmt_ci(o.get(budget.HEADLINE_METRIC))] if verdict_col else []),
                         C.fmt_ci(o.get(RECALL)), C.fmt_ci(o.get(NUGGETS)),
                         C.fmt((o.get("update_shown") or {}).get("mean")), C.fmt((o.get("stale") or {}).get("mean")),
                         C.fmt((o.get("both_statements_shown") or {}).get("mean")),
                         C.fmt((o.get("order_all_shown") or {}).get("mean")),
                         C.fmt((o.get("instruction_shown") or {}).get("mean")),
                         C.fmt((o.get("abstention_tokens") or {}).get("mean"), 0),
                         C.fmt((o.get("token_spend") or {}).get("mean"), 0),
                         C.fmt((o.get("injected_tokens") or {}).get("mean"), 0), C.fmt(m[c]["latency"]["p50_ms"], 1)])
        out.append(C.md_table(["backend", "questions",
                               *([f"{budget.HEADLINE_METRIC} (verdict)"] if verdict_col else []),
                               f"recall @{hb} tok", f"nuggets @{hb}", "updated shown",
                               "stale (↓)", "both statements", "every event", "instruction shown",
                               "abstention tokens", "ctx tokens", "injected tokens", "p50 ms"], rows))
        out += ["", f"ctx tokens = the tokens the agent is shown, at most {hb}; injected tokens = everything the "
                "backend injected before the cut at the budget (mean a question): what a turn would cost it "
                "uncut."]
        if any("answer_nuggets" in m[c]["overall"] for c in conds):
            tag = C.mock_tag(metrics, "answer")
            out += ["", f"Answer nuggets{tag} (the same rule on the answer): " + ", ".join(
                f"{c} {C.fmt_ci(m[c]['overall'].get('answer_nuggets'))}" for c in conds) + "."]
            out += C.mock_note(metrics)
        abilities = [a for a in ABILITIES if any(a in m[c]["by_ability"] for c in conds)]
        if any("beam_judge" in m[c]["overall"] for c in conds):
            out += render_judge(metrics, conds, abilities)
        out += ["", f"### Evidence recall @{hb} tokens by ability", ""]
        out.append(C.md_table(["ability", *conds], [
            [a, *(C.fmt_ci(m[c]["by_ability"].get(a, {}).get(RECALL)) for c in conds)]
            for a in abilities if a != "abstention"]))
        out += ["", "### What memory did, by ability", ""]
        rows = []
        for a in abilities:
            for name in ABILITY_METRICS.get(a, ()):
                digits = 0 if name == "abstention_tokens" else 3
                rows.append([a, METRIC_LABELS[name] + (" (↓)" if SPECS.get(name, (True,))[0] is False else ""),
                             *(C.fmt_ci(m[c]["by_ability"].get(a, {}).get(name), digits) for c in conds)])
        out.append(C.md_table(["ability", "figure", *conds], rows))
        out += ["", f"### Rubric nuggets carried by the shown text (@{hb} tokens), by ability", ""]
        out.append(C.md_table(["ability", *conds], [
            [a, *(C.fmt_ci(m[c]["by_ability"].get(a, {}).get(NUGGETS)) for c in conds)]
            for a in abilities if a not in BEHAVIOUR_NUGGETS]))
        sizes = [s for s in SIZES if any(s in m[c]["by_size"] for c in conds)]
        if sizes:
            out += ["", "### By size bucket", ""]
            out.append(C.md_table(["backend", *(f"{s}: recall / nuggets / tokens" for s in sizes)], [
                [c, *(" / ".join([C.fmt((m[c]['by_size'].get(s, {}).get(RECALL) or {}).get('mean')),
                                  C.fmt((m[c]['by_size'].get(s, {}).get(NUGGETS) or {}).get('mean')),
                                  C.fmt((m[c]['by_size'].get(s, {}).get('token_spend') or {}).get('mean'), 0)])
                      for s in sizes)] for c in conds]))
        out += C.render_budget(metrics, conds, "the question's `source_chat_ids` messages")
        stat = metrics.get("statistics") or {}
        if stat:
            out += ["", f"Intervals: {stat['method']}; {stat['conversations']} conversation(s) behind them (the "
                        "20 questions of a conversation share its project and its people: the conversation is the "
                        "independent unit)."]
        held = metrics.get("held_out") or {}
        if held:
            rows = [[c, metric, f"{h['inside']} of {h['of']}", f"{h['inside_pi']} of {h['of']}"]
                    for c in sorted(held) for metric, h in held[c].items()]
            out += ["", "Leave-one-conversation-out check (each conversation's own mean against the others' CI and "
                        "prediction interval):", "",
                    C.md_table(["backend", "metric", "inside CI of the mean", "inside prediction interval"], rows)]
        if data.get("fitted"):
            out += ["", f"Messages over the ingest limit ({MAX_CONTENT_CHARS:,} characters), whitespace collapsed "
                        "(then cut at the limit if still over): " + ", ".join(
                            f"{f['conversation']} #{f['id']} {f['chars']:,} → {f['fitted_chars']:,}"
                            for f in data["fitted"]) + "."]
        if data.get("no_evidence"):
            out += ["", "Questions without evidence ids (no recall figure): "
                    + ", ".join(f"{a} {n}" for a, n in data["no_evidence"].items()) + "."]
        if metrics.get("comparisons"):
            out += C.baseline_note(metrics)
            out.append(C.render_comparisons(metrics["comparisons"]))
        return "\n".join(out)
