"""A hand-made BEAM file of three conversations (one per size bucket) in the dev file's format, and a scripted
backend that shows, for each question, exactly the messages the script names (their texts, in that order): what
tests/test_suite_beam.py pins each ability's scoring on.

Every message says something in words no other message shares (no word 3-gram in common), so the grader (a message
is shown when half its 3-grams are in the cut text) finds exactly the scripted messages shown. FILLER is a long
message (150 distinct made-up words, 600 cl100k tokens): scripted first, it pushes the next message past 250
tokens but keeps it inside 1,000.
"""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path
from typing import Any

from services.adapters.base import MemoryBackend, SessionStore
from services.common.types import Memory, RetrieveResult

FILLER = " ".join(f"zq{i}x" for i in range(150))


def _m(mid: int, role: str, content: str, anchor: str | None = None, **extra: Any) -> dict[str, Any]:
    out = {"id": mid, "role": role, "content": content, **extra}
    if anchor is not None:
        out["time_anchor"] = anchor
    return out


C1 = {  # 100K: knowledge updates, an instruction, an abstention, an extraction
    "id": "beam-100K-1", "size": "100K", "chat": 1,
    "chat_batches": [
        {"batch_number": 1, "time_anchor": None, "turns": [
            [_m(0, "user", "I am starting a Flask budget tracker that keeps expenses in SQLite ->-> 1,1",
                "March-15-2024", index="1,1", question_type="main_question"),
             _m(1, "assistant", "Flask plus SQLite keeps your tracker small and easy to deploy")],
            [_m(2, "user", "The dashboard endpoint currently answers in roughly four hundred milliseconds"),
             _m(3, "assistant", "Profiling slow queries first would reveal where those delays come from")],
        ]},
        {"batch_number": 2, "time_anchor": "April-1-2024", "turns": [  # its first turn's own anchor wins
            [_m(4, "user", "After caching totals that dashboard route now averages two hundred fifty milliseconds",
                "April-2-2024"),
             _m(5, "assistant", "Caching monthly aggregates explains that nice drop")],
            [_m(6, "user", "Always include version numbers whenever I ask about Python libraries"),
             _m(7, "assistant", FILLER)],
            [_m(8, "user", "My monthly spending cap was nine hundred dollars at the start"),
             _m(9, "assistant", "Nine hundred leaves room for groceries and rent")],
            [_m(10, "user", "Raise the spending cap to fifteen hundred dollars from May onwards"),
             _m(11, "assistant", "Noted your cap climbs toward fifteen hundred")],
        ]},
    ],
    "probing_questions": {
        "knowledge_update": [
            {"question": "How fast is the dashboard endpoint now?", "answer": "about 250 ms",
             "rubric": ["LLM response should state: two hundred fifty milliseconds"],
             "source_chat_ids": {"original_info": [2], "updated_info": [4]}},
            {"question": "What is my monthly spending cap now?", "answer": "fifteen hundred dollars",
             "rubric": ["LLM response should mention: fifteen hundred dollars"],
             "source_chat_ids": {"original_info": [8], "updated_info": [10, 11]}},
        ],
        "instruction_following": [
            {"question": "Which library should I use for charts?", "rubric": ["LLM response should contain: versions"],
             "instruction_being_tested": "Always include version numbers", "source_chat_ids": [6]},
        ],
        "abstention": [
            {"question": "What journal mode has my SQLite tracker?", "ideal_response": "There is no information.",
             "rubric": ["Based on the provided chat, there is no information"], "source_chat_ids": None},
        ],
        "information_extraction": [
            {"question": "Which stack did I start the budget tracker with?", "answer": "Flask and SQLite",
             "rubric": ["LLM response should state: Flask", "LLM response should mention: SQLite storage engine"],
             "source_chat_ids": [0, 1]},
        ],
    },
}

C2 = {  # 500K: contradictions, event ordering, a preference, a summary without ids; a batch-level anchor
    "id": "beam-500K-1", "size": "500K", "chat": 1,
    "chat_batches": [
        {"batch_number": 1, "time_anchor": "May-20-2024", "turns": [
            [_m(20, "user", "I already obtained an OpenWeather key last week"),
             _m(21, "assistant", "Good the key unlocks forecast calls")],
            [_m(22, "user", "That key works with the hourly forecast tier"),
             _m(23, "assistant", "Hourly data needs the paid plan though")],
            [_m(24, "user", "I have never requested any weather credentials at all", "May-22-2024"),
             _m(25, "assistant", "Then signing up comes first")],
            [_m(26, "user", "Honestly no account exists for me on that provider"),
             _m(27, "assistant", "Registration takes only minutes")],
        ]},
        {"batch_number": 2, "turns": [
            [_m(30, "user", "First I wired the socket connection handler"),
             _m(31, "assistant", "Handlers should also listen for disconnects")],
            [_m(32, "user", "Next came reconnect backoff with jitter"),
             _m(33, "assistant", "Exponential delays avoid thundering herds")],
            [_m(34, "user", "Backoff caps at thirty seconds per attempt", "May-25-2024"),
             _m(35, "assistant", "Thirty is a sensible ceiling")],
            [_m(36, "user", "Finally message history gained pagination support"),
             _m(37, "assistant", "Cursor pages scale better than offsets")],
            [_m(38, "user", "I prefer tiny dependency free helpers over big frameworks"),
             _m(39, "assistant", "Vanilla helpers it is")],
        ]},
    ],
    "probing_questions": {
        "contradiction_resolution": [
            {"question": "Do I have an OpenWeather key?", "ideal_answer": "You said both.",
             "rubric": ["LLM response should state: there is contradictory information"],
             "source_chat_ids": {"first_statement": [20], "second_statement": [24]}},
            {"question": "Do I hold an account with the provider?", "ideal_answer": "You said both.",
             "rubric": ["LLM response should mention: hourly forecast tier"],
             "source_chat_ids": {"first_statement": [20, 22], "second_statement": [26]}},
        ],
        "event_ordering": [
            {"question": "In what order did I build the chat features?", "answer": "socket, backoff, pagination",
             "rubric": ["socket connection handler", "reconnect backoff", "pagination"],
             "source_chat_ids": [30, [32, 34], 36]},
            {"question": "Which came first, the socket handler or pagination?", "answer": "the socket handler",
             "rubric": ["socket handler first"], "source_chat_ids": [[30], 36, 30]},
        ],
        "preference_following": [
            {"question": "How should I add a date picker?", "rubric": ["LLM response should avoid: big frameworks"],
             "source_chat_ids": [38]},
        ],
        "summarization": [
            {"question": "Summarise how the chat app evolved.", "ideal_summary": "Sockets, then backoff.",
             "rubric": ["LLM response should mention: reconnect backoff with jitter",
                        "LLM response should contain: message history pagination",
                        "Response should not mention: databases"],
             "source_chat_ids": []},
        ],
    },
}

C3 = {  # 1M: a first batch before any anchor; temporal, multi-session, an update without its update id, abstention
    "id": "beam-1M-1", "size": "1M", "chat": 1,
    "chat_batches": [
        {"batch_number": 1, "turns": [
            [_m(40, "user", "Today I finished the landing page wireframe"),
             _m(41, "assistant", "Wireframes first saves rework")],
        ]},
        {"batch_number": 2, "turns": [
            [_m(42, "user", "Two days later the signup form passed review", "June-3-2024"),
             _m(43, "assistant", "Reviews catch validation gaps early")],
            [_m(44, "user", "Our Lighthouse accessibility score sits at seventy two", "June-10-2024"),
             _m(45, "assistant", "Contrast fixes usually lift that quickly")],
        ]},
    ],
    "probing_questions": {
        "temporal_reasoning": [
            {"question": "How many days between the wireframe and the signup review?", "answer": "2 days",
             "rubric": ["LLM response should state: 2 days", "LLM response should state: landing page wireframe"],
             "source_chat_ids": {"first_event": [40], "second_event": [42]}},
        ],
        "multi_session_reasoning": [
            {"question": "Which pages did I work on?", "answer": "landing page and signup form",
             "rubric": ["LLM response should state: signup form"], "source_chat_ids": [40, 42, 44]},
        ],
        "knowledge_update": [
            {"question": "What is my accessibility score?", "answer": "seventy two",
             "rubric": ["LLM response should state: seventy two"],
             "source_chat_ids": {"original_info": [44], "updated_info": []}},
        ],
        "abstention": [
            {"question": "Which font did the signup form use?", "ideal_response": "There is no information.",
             "rubric": ["Based on the provided chat, there is no information"], "source_chat_ids": None},
        ],
    },
}

CONVERSATIONS = [C1, C2, C3]

# question text -> the message ids the scripted backend shows, in order (unlisted questions: nothing)
SCRIPT: dict[str, list[int]] = {
    "How fast is the dashboard endpoint now?": [2],  # the original only: stale
    "What is my monthly spending cap now?": [11, 8],  # one of the two update messages, and the original
    "Which library should I use for charts?": [7, 6],  # FILLER first: the instruction lands past 250 tokens
    "What journal mode has my SQLite tracker?": [0],
    "Which stack did I start the budget tracker with?": [1],
    "Do I have an OpenWeather key?": [24, 20],
    "Do I hold an account with the provider?": [22],
    "In what order did I build the chat features?": [30, 32, 36],
    "Which came first, the socket handler or pagination?": [36, 30],
    "Summarise how the chat app evolved.": [32, 37],
    "How many days between the wireframe and the signup review?": [40],
    "Which pages did I work on?": [44, 42, 40],
}


def beam_file(root: Path, conversations: list[dict[str, Any]] | None = None, name: str = "beam_dev.json.gz") -> Path:
    """Write the file (gzip when `name` ends in .gz) under root/beam; returns the data root."""
    doc = {"source": "github.com/mohammadtavakoli78/BEAM", "commit": "b2a3ee8ba12d68f83143dda191097dc3e028ddd3",
           "split": "dev", "conversations": copy.deepcopy(conversations if conversations is not None
                                                           else CONVERSATIONS)}
    (root / "beam").mkdir(parents=True, exist_ok=True)
    path = root / "beam" / name
    if name.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as f:
            json.dump(doc, f)
    else:
        path.write_text(json.dumps(doc))
    return root


class ScriptedBackend(MemoryBackend):
    """Shows, for each question of SCRIPT, the scripted messages' texts one per memory and one per line of its
    formatted context; each memory claims its own message id."""

    name = "scripted"
    capabilities = (("sessions", ""),)

    def __init__(self, config=None, context=None):
        super().__init__(config, context)
        self.store = SessionStore()

    async def reset(self, namespace):
        return self.store.reset(namespace)

    async def ingest(self, namespace, batch):
        self.store.apply(namespace, batch)

    async def retrieve(self, namespace, query):
        texts = {m.id: m.content for s in self.store.ordered_sessions(namespace) for m in s.messages}
        ids = [str(i) for i in SCRIPT.get(query.query, []) if str(i) in texts]
        mems = [Memory(id=i, text=texts[i], score=1.0 / (n + 1), evidence_ids=[i]) for n, i in enumerate(ids)]
        return RetrieveResult(memories=mems, formatted_context="\n".join(m.text for m in mems))

    async def namespace_stats(self, namespace):
        return self.store.stats(namespace)

    def namespaces(self):
        return self.store.namespaces()
