"""`octybot`: a reference backend after Octybot's memory system (seed 003; `tbelfort/octybot` @ 9d0d070,
docs/memory.md and src/memory/): a per-namespace graph of entities, facts, events, instructions and opinions with
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
Two retrieval plans (`plan`): `fixed` (default) is the fixed tool plan above, standing for the L2 loop of a model
that calls tools; `safety-nets` is what Octybot 9d0d070 itself does deterministically on every prompt
(src/memory/retrieve.ts, and all it does when the L2 model calls no tool, as offline): an instruction pre-fetch
(cosine over instructions, top 150, at most 2 per capitalisation template, 15 kept), a broad cosine search over all
live nodes (top 20), global instructions (scope >= 0.8, cosine > 0.15, floored at 0.6); each node's best score as the
assembly reads it back (`toFixed(3)` parsed by a pattern without a minus sign: negative -> 0.5, 0 -> left out), then
src/memory/assemble.ts's caps and order (facts before opinions within MAX_FACTS). `memrig fidelity octybot` holds
this plan to the real code on the real code's own store (`adopt_nodes`).
Not modelled: the LLMs (L1 classification and extraction are cue-word rules here; the L2 agentic tool loop is
the fixed plan above; no L1.5 search plan, no per-section LLM curation, no follow-up pipeline), Voyage
embeddings (the rig's embedder instead), salience/scope, and SQLite persistence (the graph lives in memory).
"""

from __future__ import annotations

import asyncio
import functools
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

SAFETY_NET_INSTR_POOL = 150  # retrieve.ts: searchSimilar(..., MAX_INSTRUCTIONS * 10, {nodeType: "instruction"})
SAFETY_NET_TEMPLATE_MAX = 2  # constants.ts SAFETY_NET.templateMaxPerPattern
SAFETY_NET_BROAD_TOP_K = 20  # constants.ts SAFETY_NET.broadSearchTopK
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
        "plan": "fixed",  # "fixed" (the tool plan) | "safety-nets" (Octybot's deterministic retrieval)
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

    # -- Octybot's safety nets (src/memory/retrieve.ts, assemble.ts, constants.ts) ------------------------------
    @staticmethod
    def assembly_score(score: float) -> float:
        printed = f"{score:.3f}"  # JS toFixed(3); the assembly's /\[score:\s*([\d.]+)\]/ misses a minus sign
        return 0.5 if printed.startswith("-") else float(printed)

    @staticmethod
    def template_key(content: str) -> str:
        words = ["_" if re.match(r"[A-Z]", w) else w.lower() for w in content.split()][:15]
        return re.sub(r"_(\s_)*", "_", " ".join(words))

    def rank_safety_nets(self, g: Graph, qv: np.ndarray) -> list[tuple[Node, float]]:
        live = [n for n in g.nodes.values() if not n.superseded_by]
        if not live:
            return []
        m = g.vectors[[n.row for n in live]]
        norms = np.linalg.norm(m, axis=1) * float(np.linalg.norm(qv))
        cos = np.divide(m @ qv, norms, out=np.zeros(len(live)), where=norms > 0)
        order = sorted(range(len(live)), key=lambda i: -cos[i])  # stable: ties keep store order, as Octybot's sort
        best: dict[str, float] = {}

        def offer(i: int, score: float) -> None:
            s = self.assembly_score(score)
            if s > best.get(live[i].id, 0.0):
                best[live[i].id] = s

        seen: dict[str, int] = {}
        kept = 0
        for i in [i for i in order if live[i].type == "instruction"][: SAFETY_NET_INSTR_POOL]:
            key = self.template_key(live[i].content)
            if seen.get(key, 0) >= SAFETY_NET_TEMPLATE_MAX:
                continue
            seen[key] = seen.get(key, 0) + 1
            offer(i, float(cos[i]))
            kept += 1
            if kept >= self.config["max_instructions"]:
                break
        for i in order[:SAFETY_NET_BROAD_TOP_K]:
            offer(i, float(cos[i]))
        for i in order:
            n = live[i]
            if n.type == "instruction" and n.scope is not None and n.scope >= 0.8 and cos[i] > 0.15:
                offer(i, max(float(cos[i]), 0.6))
        ranked = sorted(((g.nodes[k], v) for k, v in best.items()), key=lambda t: -t[1])
        groups: dict[str, list[tuple[Node, float]]] = {}
        for n, sc in ranked:
            groups.setdefault(n.type, []).append((n, sc))
        instr = groups.get("instruction", [])
        # assemble.ts: score first; within 0.05, the broader scope first (JS sort with that comparator)
        def cmp(a, b):
            d = b[1] - a[1]
            if abs(d) > 0.05:
                return 1 if d > 0 else -1
            sa, sb = a[0].scope if a[0].scope is not None else 0.5, b[0].scope if b[0].scope is not None else 0.5
            return (sb > sa) - (sb < sa)

        instr = sorted(instr, key=functools.cmp_to_key(cmp))[: self.config["max_instructions"]]
        facts = (groups.get("fact", []) + groups.get("opinion", []))[: self.config["max_facts"]]
        picked = (groups.get("entity", [])[: self.config["max_entities"]] + instr + facts
                  + groups.get("event", [])[: self.config["max_events"]])
        return sorted(picked, key=lambda t: -t[1])

    def adopt_nodes(self, namespace: str, rows: list[tuple[str, str, str, Any, float | None, np.ndarray]],
                    evidence: dict[str, list[str]]) -> None:
        """Take over another store's live nodes as they are: (id, type, content, created_at, scope, vector) in
        store order, the vectors cut to the embedder's dimension (Octybot's are zero-padded to 1024)."""
        g = Graph(dim=self.context.embedder.dim)
        vecs = np.zeros((len(rows), g.dim), dtype=np.float32)
        for i, (nid, type_, content, created, scope, vec) in enumerate(rows):
            g.nodes[nid] = Node(nid, type_, content, created, list(evidence.get(nid, [])), i, scope=scope)
            if type_ == "entity":
                g.entity_by_name[content.lower()] = nid
            v = np.asarray(vec, dtype=np.float32)[: g.dim]
            vecs[i, : len(v)] = v
        g.vectors = vecs
        self.graphs[namespace] = g

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
        if self.config["plan"] == "safety-nets":
            ranked, ents = self.rank_safety_nets(g, qv), {}
        else:
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
