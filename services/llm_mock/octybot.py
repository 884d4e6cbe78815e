"""Octybot's memory-pipeline calls (tbelfort/octybot @ 9d0d070, src/memory), answered deterministically, so that
`octybot-real` runs Octybot's own hooks offline against this mock.

A request is recognised by the output its system prompt asks for: the JSON field names of the schema (an interface,
like a tool's parameter names), never by its prose:
- `octybot_classify` (L1): the schema has `implied_facts` and `implied_processes`. Reply: one JSON object for the
  sentence being classified (see `classify`).
- `octybot_instructions` (instruction extraction): the schema has `"instructions"` and `subtype`. Reply:
  `{"instructions": [...]}`, one per sentence of the user message with an instruction cue.
- `octybot_store_filter` (storage gatekeeper): the schema has `store_items`. Reply: every extracted Fact/Event/
  Opinion item kept as a store item of that type (the classifier here already dropped questions and chit-chat).
- `octybot_curate` (per-section curation): the prompt names the `NO_RELEVANT_RECORDS` reply. Reply: the section's
  records verbatim, all of them (this stand-in judges every retrieved record relevant; a real model drops some).
- `octybot_reconcile` (instruction reconciliation): the schema has `verdict`. Reply: SUPERSEDES for a candidate that
  shares a name with the new instruction when the new one carries replacement wording, else NO_CONFLICT.
Every other Octybot call (the L1.5 search plan, the L2 retrieve/store tool loops) gets the default extractive answer
and no tool calls; Octybot then ends its tool loops and falls back to its own deterministic paths (the retrieve
safety nets: instruction pre-fetch, broad cosine search, global instructions; the store path's force-store).

The reply layouts read here (`Classify THIS specific sentence:`, `User message: "..."`, `Items:` lines, `Query:`)
are the user-message layouts Octybot's code builds; the mock reads them as a model would.
"""

from __future__ import annotations

import json
import re

from services.llm_mock.text import content, content_stems, tokens

TASKS = ("octybot_classify", "octybot_instructions", "octybot_store_filter", "octybot_curate", "octybot_reconcile")

_INSTRUCTION_RE = re.compile(r"\b(?:always|never|must|should|make sure|from now on|going forward|don't|do not|"
                             r"remember to|needs? to|has to|have to)\b", re.I)
_OPINION_RE = re.compile(r"\b(?:i think|i feel|i believe|i love|i hate|i prefer|i like|in my opinion|favou?rite)\b",
                         re.I)
_EVENT_RE = re.compile(r"\b(?:yesterday|today|last (?:week|month|year|night|weekend)|ago|this (?:morning|week)|"
                       r"on (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)|went|visited|attended|"
                       r"met|finished|started|happened)\b", re.I)
_REPLACE_RE = re.compile(r"\b(?:instead of|no longer|now handles|replacing|taking over|switched to|actually)\b", re.I)
_NAME_RE = re.compile(r"\b[A-Z][a-zA-Z0-9'’&.-]*[a-zA-Z0-9](?:\s+[A-Z][a-zA-Z0-9'’&.-]*[a-zA-Z0-9])*")
_NOT_NAMES = frozenset("""i a an the this that these those it its we our you your he she they my me his her their
hey hi hello thanks thank yes no ok okay so and but or if when what who where why how which is are was were do does
did can could would should will have has had please also just well oh wow great good nice sure let from now
actually always never make remember""".split())
MIN_WORDS = 4  # shorter sentences ("Thanks!", "Sounds good.") carry nothing to store


def detect(system_prompt: str) -> str | None:
    if "implied_facts" in system_prompt and "implied_processes" in system_prompt:
        return "octybot_classify"
    if "store_items" in system_prompt:
        return "octybot_store_filter"
    if '"instructions"' in system_prompt and "subtype" in system_prompt:
        return "octybot_instructions"
    if "NO_RELEVANT_RECORDS" in system_prompt:
        return "octybot_curate"
    if '"verdict"' in system_prompt:
        return "octybot_reconcile"
    return None


def names(sentence: str) -> list[str]:
    """Capitalised name spans, a span's leading non-name words dropped ("Hey Caroline" -> "Caroline")."""
    out: list[str] = []
    for m in _NAME_RE.finditer(sentence):
        words = m.group(0).split()
        while words and words[0].lower().strip("'’") in _NOT_NAMES:
            words = words[1:]
        name = " ".join(re.sub(r"['’]s$", "", w) for w in words)
        if name and name not in out:
            out.append(name)
    return out


def main_term(sentence: str) -> str:
    """The statement's most specific content word: the first code-like one (a path, a flag, `pnpm@9`), else the
    longest (first on ties)."""
    toks = content(tokens(sentence))
    code = [t.surface for t in toks if t.kind == "code"]
    if code:
        return code[0]
    words = [t.surface for t in toks if t.kind == "word"]
    return max(words, key=len) if words else ""


def sentence_kind(s: str) -> str:
    """question | trivial | instruction | opinion | event | fact."""
    if s.rstrip().endswith("?"):
        return "question"
    if len(s.split()) < MIN_WORDS:
        return "trivial"
    if _INSTRUCTION_RE.search(s):
        return "instruction"
    if _OPINION_RE.search(s):
        return "opinion"
    if _EVENT_RE.search(s):
        return "event"
    return "fact"


def target_sentence(user_text: str) -> str:
    """The sentence L1 is asked to classify: the quoted one after `Classify THIS specific sentence:`, else the text
    after a conversation-context block (which ends at its last blank line), else the whole text."""
    marker = "Classify THIS specific sentence:\n"
    if marker in user_text:
        s = user_text.split(marker, 1)[1].strip()
        return s[1:-1] if len(s) >= 2 and s[0] == s[-1] == '"' else s
    if user_text.startswith("[Conversation context") and "\n\n" in user_text:
        return user_text.rsplit("\n\n", 1)[1].strip()
    return user_text.strip()


def classify(user_text: str) -> str:
    s = target_sentence(user_text)
    kind = sentence_kind(s)
    ents = [{"name": n, "type": "concept", "ambiguous": len(n.split()) == 1} for n in names(s)]
    stems = sorted(content_stems(s))
    if not ents and kind not in ("question", "trivial"):
        topic = main_term(s)  # a statement is about something even when it names nothing ("use pnpm ...")
        if topic:
            ents = [{"name": topic, "type": "concept", "ambiguous": True}]
    out = {"entities": ents, "implied_facts": [], "events": [], "plans": [], "opinions": [],
           "concepts": [" ".join(stems[:6])] if stems else [], "implied_processes": [],
           "intents": [], "operations": {"retrieve": False, "store": False}}
    if kind == "question":
        out["intents"] = ["information"]
    elif kind == "instruction":
        out["intents"] = ["instruction"]
    elif kind == "opinion":
        out["opinions"], out["intents"] = [s], ["opinion"]
    elif kind == "event":
        out["events"], out["intents"] = [s], ["recall"]
    elif kind == "fact":
        out["implied_facts"], out["intents"] = [s], ["information"]
    has_content = bool(ents or stems)
    out["operations"] = {"retrieve": has_content and kind != "trivial",
                         "store": kind in ("instruction", "opinion", "event", "fact")}
    return json.dumps(out)


def quoted_after(text: str, label: str) -> str:
    """The text of `label "..."` up to the closing quote that ends its line."""
    i = text.find(label + ' "')
    if i < 0:
        return ""
    rest = text[i + len(label) + 2:]
    j = rest.find('"\n')
    return rest[:j] if j >= 0 else rest.rstrip().rstrip('"')


def _sentences(text: str) -> list[str]:
    return [p.strip() for p in re.split(r"(?<=[.!?])\s+(?=[A-Z\"'(])", text) if p.strip()]


def instructions(user_text: str) -> str:
    msg = quoted_after(user_text, "User message:")
    found = [{"content": s, "subtype": "rule", "scope": 0.5, "reason": "instruction cue"}
             for s in _sentences(msg) if sentence_kind(s) == "instruction"]
    return json.dumps({"instructions": found})


def store_filter(user_text: str) -> str:
    items = []
    in_items = False
    for line in user_text.splitlines():
        if line.strip() == "Items:":
            in_items = True
            continue
        if in_items:
            if not line.startswith("- "):
                break
            label, _, content = line[2:].partition(": ")
            kind = label.strip().lower()
            if kind in ("fact", "event", "opinion") and content.strip():
                sub = {"fact": "definitional", "event": "action", "opinion": "user_opinion"}[kind]
                items.append({"content": content.strip(), "type": kind, "subtype": sub, "reason": "stated by the user",
                              "salience": 1.0})
    return json.dumps({"store_items": items, "skip_reason": "" if items else "nothing stated"})


def curate(user_text: str) -> str:
    """The section's records verbatim (everything after the `<label>:` line that follows the query)."""
    _, _, rest = user_text.partition("\n\n")
    _, _, records = rest.partition(":\n")
    return records.strip() or "NO_RELEVANT_RECORDS"


_CANDIDATE_RE = re.compile(r'^\d+\.\s+"(.*)"\s+\(id:\s*([^)]+)\)\s*$')


def reconcile(system_text: str) -> str:
    new = quoted_after(system_text, "New instruction:")
    replaces = bool(_REPLACE_RE.search(new))
    new_names = {n.lower() for n in names(new)}
    results = []
    for line in system_text.splitlines():
        m = _CANDIDATE_RE.match(line.strip())
        if not m:
            continue
        shared = new_names & {n.lower() for n in names(m.group(1))}
        verdict = "SUPERSEDES" if replaces and shared else "NO_CONFLICT"
        results.append({"id": m.group(2).strip(), "verdict": verdict,
                        "reason": "replacement wording about " + ", ".join(sorted(shared)) if verdict == "SUPERSEDES"
                        else "different rule"})
    return json.dumps({"results": results, "question": None})


def respond(task: str, messages: list[dict[str, str]]) -> str:
    system = next((m["content"] for m in messages if m["role"] in ("system", "developer")), "")
    user = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
    if task == "octybot_classify":
        return classify(user)
    if task == "octybot_instructions":
        return instructions(user)
    if task == "octybot_store_filter":
        return store_filter(user)
    if task == "octybot_curate":
        return curate(user)
    if task == "octybot_reconcile":
        return reconcile(system)
    raise ValueError(f"not an Octybot task: {task}")
