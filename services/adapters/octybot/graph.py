"""Octybot's memory graph for one namespace: nodes (entity, fact, event, instruction, opinion), edges, and
an embedding per node, after the schema seed 003 and `tbelfort/octybot` docs/memory.md describe (tables
`nodes`, `edges`, `embeddings`; superseded nodes kept but never retrieved).

Store side (Octybot's L1 "extract entities / facts / events / opinions / intents" + storeLoop's
`store_memory` / `supersede_memory`), here deterministic instead of an LLM:
- every sentence of a message becomes one node, typed by cue words (instruction, event, opinion, else fact);
- entities are capitalised name spans (a sentence-initial common word is not a name); each gets one entity
  node per namespace, an `about` edge to every node that mentions it and `related_to` edges to the entities
  mentioned beside it;
- a sentence with a correction cue ("actually", "no longer", "now", ...) supersedes the most similar earlier
  live node of the same type that shares one of its entities (cosine >= the supersede threshold).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

NODE_TYPES = ("fact", "event", "instruction", "opinion")

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'])")
_NAME = re.compile(r"\b[A-Z][\w&'’.-]*[\w](?:\s+(?:of\s+|&\s+)?[A-Z][\w&'’.-]*[\w])*")
_INSTRUCTION = re.compile(r"\b(always|never|must|should|make sure|remember to|don't|do not|please|"
                          r"need to|needs to|has to|have to|to request|process:|steps?:)\b", re.I)
_EVENT = re.compile(r"\b(yesterday|today|tomorrow|last (?:week|month|year|night)|this (?:week|morning)|"
                    r"was (?:completed|launched|paused|held|moved)|happened|went|met|visited|attended|"
                    r"on (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)|"
                    r"\d{1,2} (?:january|february|march|april|may|june|july|august|september|october|"
                    r"november|december))\b", re.I)
_OPINION = re.compile(r"\b(i think|thinks|i feel|feels|i prefer|prefers|i love|loves|i hate|hates|"
                      r"in my opinion|i believe|believes|favou?rite|best|worst)\b", re.I)
_CORRECTION = re.compile(r"\b(actually|correction|no longer|instead|changed|now|updated?|from now on)\b", re.I)
# Words that start sentences in capitals without being names.
_COMMON = frozenset("""a about after all also always an and any are as at be because before but by can could did do
does don't during each every for from had has have he her here his how i if in is it its just last let many may
me monthly most my never new next no not now of on once one only or our out please she so some than that the
their them then there these they this those to today tomorrow was we weekly were what when where which while
who why will with yesterday yes you your actually remember make sure note noted got thanks understood hi hello
hey ok okay well sorry great good morning correction update from""".split())
_MONTHS_DAYS = frozenset("""january february march april may june july august september october november december
monday tuesday wednesday thursday friday saturday sunday""".split())


def split_sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text.strip()) if len(s.strip()) > 1]


def node_type(sentence: str) -> str:
    if _INSTRUCTION.search(sentence):
        return "instruction"
    if _OPINION.search(sentence):
        return "opinion"
    if _EVENT.search(sentence):
        return "event"
    return "fact"


def is_correction(sentence: str) -> bool:
    return bool(_CORRECTION.search(sentence))


def entity_names(sentence: str) -> list[str]:
    """Capitalised name spans; a span's leading common words (sentence starts, "The", "Our") are dropped."""
    out: list[str] = []
    for m in _NAME.finditer(sentence):
        words = m.group(0).split()
        while words and (words[0].lower() in _COMMON or words[0].lower() in _MONTHS_DAYS):
            words = words[1:]
        words = [re.sub(r"['’]s$", "", w).rstrip(".'’") for w in words]  # "Brightwell's" is Brightwell
        name = " ".join(w for w in words if w)
        if name and name.lower() not in _COMMON and name.lower() not in _MONTHS_DAYS and name not in out:
            out.append(name)
    return out


@dataclass
class Node:
    id: str
    type: str  # entity | fact | event | instruction | opinion
    content: str
    created_at: datetime | None
    evidence_ids: list[str]
    row: int  # row in the namespace's embedding matrix
    superseded_by: str = ""
    scope: float | None = None  # an instruction's breadth (Octybot's `scope`; 1.0 universal), when known


@dataclass
class Edge:
    src: str
    dst: str
    type: str  # about | related_to | supersedes


@dataclass
class Graph:
    dim: int
    nodes: dict[str, Node] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)
    entity_by_name: dict[str, str] = field(default_factory=dict)  # lower-cased name -> node id
    vectors: np.ndarray | None = None
    links: dict[str, set[str]] = field(default_factory=dict)  # node id -> neighbour ids (both directions)

    def __post_init__(self) -> None:
        if self.vectors is None:
            self.vectors = np.zeros((0, self.dim), dtype=np.float32)

    def add_edge(self, src: str, dst: str, type_: str) -> None:
        if dst in self.links.get(src, ()):
            return
        self.edges.append(Edge(src, dst, type_))
        self.links.setdefault(src, set()).add(dst)
        self.links.setdefault(dst, set()).add(src)

    def live(self, types: tuple[str, ...]) -> list[Node]:
        return [n for n in self.nodes.values() if n.type in types and not n.superseded_by]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for n in self.nodes.values():
            k = f"{n.type}_superseded" if n.superseded_by else n.type
            out[k] = out.get(k, 0) + 1
        out["edges"] = len(self.edges)
        return out
