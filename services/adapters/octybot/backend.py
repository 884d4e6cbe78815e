"""`octybot`: a reference backend after Octybot's memory system (seed 003; `tbelfort/octybot` @ 9d0d070,
../shared/reference/peers.md §4.1): a per-namespace graph of entities, facts, events, instructions and opinions with
relationship edges, stored from each conversation and retrieved by Octybot's retrieve tools.

Modelled:
- graph storage (graph.py): typed nodes, `about`/`related_to`/`supersedes` edges, an embedding per node,
  superseded nodes kept out of retrieval (store-then-retrieve corrections replace the old value);
- the retrieve tools, as one fixed plan: `search_entity` (entities named in the query, plus the top 5 entity
  embeddings above a threshold), `get_relationships` (nodes and entities one edge away), `search_facts`
  (facts + opinions, entity-scoped ones boosted), `search_events`, `search_processes`/`get_instructions`
  (instructions, boosted when the query asks how/what-should/rules);
- Octybot's assembly caps (src/memory/constants.ts: MAX_ENTITIES 15, MAX_FACTS 30, MAX_INSTRUCTIONS 15,
  MAX_EVENTS 15) and a `<memory>` context block with one section per node type, as the UserPromptSubmit hook
  injects.
Not modelled: the LLMs (L1 classification and extraction are cue-word rules here; the L2 agentic tool loop is
the fixed plan above; no L1.5 search plan, no per-section LLM curation, no follow-up pipeline), Voyage
embeddings (the rig's embedder instead), salience/scope, and SQLite persistence (the graph lives in memory).
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import numpy as np

from services.adapters.base import StoreBackedBackend
from services.adapters.octybot.graph import (
    Graph,
    Node,
    entity_names,
    is_correction,
    node_type,
    split_sentences,
)
from services.common.types import ChannelDiagnostics, IngestBatch, Memory, RetrieveQuery, RetrieveResult

SECTION_TITLES = {"instruction": "Instructions", "fact": "Facts", "opinion": "Opinions", "event": "Events"}
_INSTRUCTION_QUERY = re.compile(r"\b(how (?:do|should|to|can)|what should|rules?|policy|process|procedure|"
                                r"steps?|instructions?|allowed|supposed to|need to)\b", re.I)


class OctybotBackend(StoreBackedBackend):
    name = "octybot"
    version = "0.1.0 (after tbelfort/octybot 9d0d070)"
    description = "Octybot-like graph memory: entities, facts, events, instructions, opinions, relationship edges."
    capabilities = (("sessions", ""), ("documents", ""), ("recall", "exact"), ("graph", "entities+relations"),
                    ("formatted_context", "memory"))
    uses_embedder = True
    defaults: dict[str, Any] = {
        "max_entities": 15,  # src/memory/constants.ts
        "max_facts": 30,  # facts + opinions
        "max_instructions": 15,
        "max_events": 15,
        "entity_search_top_k": 5,  # tools.ts search_entity: "cosine search filtered to entities, returns top 5"
        "entity_match_threshold": 0.5,
        "entity_link_bonus": 0.15,  # a node one edge from a query entity (entity-scoped search_facts)
        "instruction_intent_bonus": 0.1,  # get_instructions when the query asks for rules/processes
        "supersede_threshold": 0.6,
        "store_roles": "user,assistant",  # Octybot's Stop hook stores the turn; which roles feed extraction
        "min_sentence_words": 3,  # acknowledgements ("Noted.") carry nothing to store
        "max_related_shown": 5,  # related entities listed per entity in the <memory> block
    }

    def __init__(self, config=None, context=None):
        super().__init__(config, context)
        self.graphs: dict[str, Graph] = {}
        self.roles = {r.strip() for r in self.config["store_roles"].split(",") if r.strip()}

    def describe_config(self) -> dict[str, Any]:
        d = dict(self.config)
        d["modelled"] = ("graph store (entity/fact/event/instruction/opinion nodes, about/related_to/supersedes "
                         "edges), retrieve tools as a fixed plan, Octybot's assembly caps, <memory> block, "
                         "supersede on correction")
        d["not_modelled"] = ("LLM L1 classification (cue-word rules instead), L2 agentic tool loop, L1.5 search "
                             "plan, per-section LLM curation, follow-up pipeline, Voyage embeddings (the rig's "
                             "embedder), salience/scope, SQLite persistence")
        return d

    def items_in(self, namespace: str) -> int | None:
        g = self.graphs.get(namespace)
        return None if g is None else sum(1 for n in g.nodes.values() if n.type != "entity")

    def counters(self) -> dict[str, int]:
        out = dict(self.n)
        for g in self.graphs.values():
            for k, v in g.counts().items():
                out[f"graph_{k}"] = out.get(f"graph_{k}", 0) + v
        return out

    # -- store ------------------------------------------------------------------------------------
    def _units(self, batch: IngestBatch) -> list[tuple[str, str, Any, list[str]]]:
        """(sentence, type, time, evidence ids) in ingest order."""
        out = []
        mw = self.config["min_sentence_words"]
        for s in sorted(batch.sessions, key=lambda s: s.started_at):
            for m in s.messages:
                if m.role not in self.roles:
                    continue
                for sent in split_sentences(m.content):
                    if len(sent.split()) >= mw:
                        out.append((sent, node_type(sent), s.message_time(m), [m.id]))
        for d in batch.documents:
            for sent in split_sentences(d.text):
                if len(sent.split()) >= mw:
                    out.append((sent, node_type(sent), d.created_at, list(d.evidence())))
        return out

    async def ingest(self, namespace: str, batch: IngestBatch) -> None:
        units = self._units(batch)
        names = [entity_names(u[0]) for u in units]
        g = self.graphs.get(namespace)
        new_names = sorted({n for ns in names for n in ns if g is None or n.lower() not in g.entity_by_name})
        emb = self.context.embedder
        # everything that can fail (embedding) happens before the graph changes
        vecs = await asyncio.to_thread(emb.encode, [u[0] for u in units] + new_names)
        self.store.apply(namespace, batch)
        g = self.graphs.setdefault(namespace, Graph(dim=emb.dim))
        self._apply(g, units, names, vecs[: len(units)], dict(zip(new_names, vecs[len(units):], strict=True)))

    def _apply(self, g: Graph, units, names, vecs: np.ndarray, name_vecs: dict[str, np.ndarray]) -> None:
        """Add the batch's nodes and edges. The embedding matrix grows once per batch (rows filled in order), so a
        supersede check mid-batch sees every earlier node without copying the matrix again."""
        base = len(g.vectors)
        g.vectors = np.concatenate([g.vectors, np.zeros((len(units) + len(name_vecs), g.dim), dtype=np.float32)])

        def add_node(node_id, type_, content, created, evidence, vec) -> Node:
            nonlocal base
            n = Node(node_id, type_, content, created, evidence, base)
            g.vectors[base] = vec
            base += 1
            g.nodes[node_id] = n
            return n

        for (sent, type_, created, evidence), ents, vec in zip(units, names, vecs, strict=True):
            ent_ids = []
            for name in ents:
                eid = g.entity_by_name.get(name.lower())
                if eid is None:
                    eid = f"e{len(g.nodes)}"
                    g.entity_by_name[name.lower()] = eid
                    add_node(eid, "entity", name, created, [], name_vecs[name])
                    self.n["entities_created"] = self.n.get("entities_created", 0) + 1
                ent_ids.append(eid)
            old = self._supersede_target(g, type_, vec, ent_ids) if ent_ids and is_correction(sent) else None
            nid = f"n{len(g.nodes)}"
            add_node(nid, type_, sent, created, evidence, vec)
            if old is not None:
                old.superseded_by = nid
                g.add_edge(nid, old.id, "supersedes")
                self.n["superseded"] = self.n.get("superseded", 0) + 1
            for eid in ent_ids:
                g.add_edge(eid, nid, "about")
            for i, a in enumerate(ent_ids):
                for b in ent_ids[i + 1:]:
                    g.add_edge(a, b, "related_to")
        g.vectors = g.vectors[:base]

    def _supersede_target(self, g: Graph, type_: str, vec: np.ndarray, ents: list[str]) -> Node | None:
        """The most similar live node of the same type about one of the entities (the entities' neighbours)."""
        ids = sorted({x for e in ents for x in g.links.get(e, ())}, key=lambda x: g.nodes[x].row)
        cands = [g.nodes[x] for x in ids if g.nodes[x].type == type_ and not g.nodes[x].superseded_by]
        if not cands:
            return None
        sims = g.vectors[[n.row for n in cands]] @ vec
        i = int(np.argmax(sims))
        return cands[i] if sims[i] >= self.config["supersede_threshold"] else None

    # -- retrieve ---------------------------------------------------------------------------------
    def query_entities(self, g: Graph, query: str, qv: np.ndarray) -> dict[str, float]:
        """search_entity: names in the query (1.0) and the nearest entity embeddings above the threshold."""
        found: dict[str, float] = {}
        ql = query.lower()
        for name, eid in g.entity_by_name.items():
            if re.search(rf"(?<!\w){re.escape(name)}(?!\w)", ql):
                found[eid] = 1.0
        ents = g.live(("entity",))
        if ents:
            sims = g.vectors[[n.row for n in ents]] @ qv
            for i in np.argsort(-sims, kind="stable")[: self.config["entity_search_top_k"]]:
                if sims[i] >= self.config["entity_match_threshold"]:
                    found.setdefault(ents[i].id, float(sims[i]))
        return dict(sorted(found.items(), key=lambda kv: -kv[1])[: self.config["max_entities"]])

    def rank(self, g: Graph, query: str, qv: np.ndarray) -> tuple[list[tuple[Node, float]], dict[str, float]]:
        c = self.config
        ents = self.query_entities(g, query, qv)
        linked: set[str] = set()
        for eid in ents:  # get_relationships: nodes about the entity and about its related entities
            for nb in g.links.get(eid, ()):
                if g.nodes[nb].type == "entity":
                    linked.update(x for x in g.links.get(nb, ()) if g.nodes[x].type != "entity")
                else:
                    linked.add(nb)
        ent_direct = {x for eid in ents for x in g.links.get(eid, ()) if g.nodes[x].type != "entity"}
        nodes = g.live(("fact", "event", "instruction", "opinion"))
        if not nodes:
            return [], ents
        sims = g.vectors[[n.row for n in nodes]] @ qv
        wants_rules = bool(_INSTRUCTION_QUERY.search(query))
        scored = []
        for n, s in zip(nodes, sims.tolist(), strict=True):
            bonus = c["entity_link_bonus"] if n.id in ent_direct else (c["entity_link_bonus"] / 2 if n.id in linked
                                                                     else 0.0)
            if wants_rules and n.type == "instruction":
                bonus += c["instruction_intent_bonus"]
            scored.append((n, s + bonus))
        scored.sort(key=lambda t: -t[1])
        caps = {"fact": c["max_facts"], "opinion": c["max_facts"], "event": c["max_events"],
                "instruction": c["max_instructions"]}
        used = {"fact": 0, "event": 0, "instruction": 0}
        out = []
        for n, s in scored:
            key = "fact" if n.type == "opinion" else n.type
            if used[key] >= caps[n.type]:
                continue
            used[key] += 1
            out.append((n, s))
        return out, ents

    def render(self, g: Graph, picked: list[tuple[Node, float]], ents: dict[str, float]) -> str:
        if not picked:
            return ""
        lines = ["<memory>"]
        if ents:
            lines.append("## Entities")
            for eid in ents:
                rel = sorted(g.nodes[x].content for x in g.links.get(eid, ())
                             if g.nodes[x].type == "entity")[: self.config["max_related_shown"]]
                lines.append(f"- {g.nodes[eid].content}" + (f" (related: {', '.join(rel)})" if rel else ""))
        for t in ("instruction", "fact", "opinion", "event"):
            sec = [n for n, _ in picked if n.type == t]
            if sec:
                lines.append(f"## {SECTION_TITLES[t]}")
                for n in sec:
                    when = f" [{n.created_at.date().isoformat()}]" if n.created_at and t == "event" else ""
                    lines.append(f"- {n.content}{when}")
        lines.append("</memory>")
        return "\n".join(lines)

    async def retrieve(self, namespace: str, query: RetrieveQuery) -> RetrieveResult:
        g = self.graphs.get(namespace)
        if g is None or not g.nodes:
            return RetrieveResult()
        t0 = time.perf_counter_ns()
        qv = (await asyncio.to_thread(self.context.embedder.encode, [query.query]))[0]
        ranked, ents = self.rank(g, query.query, qv)
        picked = ranked[: query.top_k]
        memories = [Memory(id=n.id, text=n.content, score=float(s), kind=n.type, created_at=n.created_at,
                           source="octybot-graph", evidence_ids=list(n.evidence_ids),
                           attributes={"entities": ",".join(sorted(g.nodes[x].content for x in g.links.get(n.id, ())
                                                                   if g.nodes[x].type == "entity"))})
                    for n, s in picked]
        dur = time.perf_counter_ns() - t0
        return RetrieveResult(memories=memories, formatted_context=self.render(g, picked, ents), channels=[
            ChannelDiagnostics("search_entity", len(ents), 0, ",".join(g.nodes[e].content for e in ents)[:200]),
            ChannelDiagnostics("graph+vector", len(ranked), dur, "")])

    async def reset(self, namespace: str) -> int:
        n = (await self.namespace_stats(namespace)).items
        self.graphs.pop(namespace, None)
        self.store.reset(namespace)
        return n
