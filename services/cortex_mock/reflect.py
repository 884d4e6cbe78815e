"""Reflection (Cortex's MemoryReflector): synthesise one observation FACT per entity cluster.

An entity with >= 3 current (non-superseded, non-reflection) facts over visible MENTIONS edges gets an
observation FACT node (source "reflection", fact_type "observation") that summarises the cluster, newest
first, with MENTIONS -> entity and ELABORATES -> each source fact. Re-running with an unchanged cluster skips
the entity; a grown cluster gets a new observation that supersedes the previous one.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import numpy as np

from services.cortex_mock.store import TenantStore
from services.cortex_mock.temporal import iso
from services.cortex_mock.text import content_tokens, normalise

MIN_CLUSTER = 3
MAX_SUMMARY_FACTS = 4


def observation_text(name: str, cores_newest_first: list[str], n_facts: int, n_sessions: int,
                     first: str | None, last: str | None) -> str:
    span = f" from {first[:10]} to {last[:10]}" if first and last and first[:10] != last[:10] else (
        f" on {last[:10]}" if last else "")
    parts = [c.rstrip(".") for c in cores_newest_first[:MAX_SUMMARY_FACTS]]
    head = f"Observation about {name} ({n_facts} facts across {max(n_sessions, 1)} session"
    head += f"{'s' if n_sessions != 1 else ''}{span}): "
    return head + "latest: " + parts[0] + (". Earlier: " + "; ".join(parts[1:]) if len(parts) > 1 else "") + "."


def reflect(store: TenantStore, embedder, now: float | None = None) -> dict[str, Any]:
    """Blocking: run in a thread."""
    now = time.time() if now is None else now
    with store.lock:
        store.index(embedder)
        with store.write() as c:
            idx = store.index(embedder)
            m_fact, m_ent = idx.visible_mentions(now)
            # Clusters are per (entity, user_id): one user's facts are never summarised into another's.
            clusters: dict[tuple[int, str], list[int]] = {}
            for fp, ep in zip(m_fact.tolist(), m_ent.tolist(), strict=True):
                f = idx.facts[fp]
                if f.superseded_by is None and f.source != "reflection":
                    clusters.setdefault((ep, f.metadata.get("user_id") or ""), []).append(fp)
            existing: dict[tuple[str, str], tuple[str, str]] = {}  # (entity key, user) -> (observation id, sig)
            for f in idx.facts:
                if f.source == "reflection" and f.superseded_by is None:
                    existing[(f.metadata.get("entity_key", ""), f.metadata.get("user_id") or "")] = (
                        f.id, f.metadata.get("signature", ""))
            out = {"nodes_created": 0, "edges_created": 0, "entities_processed": 0, "entities_skipped": 0,
                   "synthesized_count": 0, "superseded_count": 0, "clusters": []}
            new_rows = []
            for (ep, user), members in sorted(clusters.items()):
                ent = idx.entities[ep]
                members = sorted(set(members))
                if len(members) < MIN_CLUSTER:
                    out["entities_skipped"] += 1
                    continue
                ids = sorted(idx.facts[p].id for p in members)
                sig = hashlib.sha256("|".join(ids).encode()).hexdigest()[:16]
                prev = existing.get((ent.key, user))
                if prev and prev[1] == sig:
                    out["entities_skipped"] += 1
                    out["clusters"].append({"entity": ent.name, "facts_analyzed": len(members),
                                            "observations_created": 0})
                    continue
                out["entities_processed"] += 1
                facts = sorted((idx.facts[p] for p in members), key=lambda f: (f.occurred_iso or "", f.created_at),
                               reverse=True)
                sessions = {s for f in facts for s in (f.metadata.get("session_ids") or [f.session_id]) if s}
                text = observation_text(ent.name, [f.content for f in facts], len(facts), len(sessions),
                                        facts[-1].occurred_iso, facts[0].occurred_iso)
                msg_ids: list[str] = []
                for f in facts:
                    msg_ids += [m for m in f.metadata.get("message_ids", []) if m not in msg_ids]
                new_rows.append((ent, facts, text, sig, prev, sorted(sessions), msg_ids, user))
                out["clusters"].append({"entity": ent.name, "facts_analyzed": len(members),
                                        "observations_created": 1})
            if new_rows:
                texts = [r[2] for r in new_rows]
                questions = [[f"What do we know about {r[0].name}?", f"What is the history of {r[0].name}?"]
                             for r in new_rows]
                emb = embedder.encode(texts)
                q_emb = embedder.encode([q for qs in questions for q in qs])
                for i, (ent, facts, text, sig, prev, sessions, msg_ids, user) in enumerate(new_rows):
                    oid = str(uuid.uuid4())
                    occurred = facts[0].occurred_iso or iso(datetime.fromtimestamp(now, UTC))
                    md = {"speaker": "system", "fact_type": "observation", "entity_refs": [ent.name],
                          "occurred_at": occurred, "session_id": None, "session_ids": sessions,
                          "message_ids": msg_ids, "source_fact_ids": [f.id for f in facts], "entity_key": ent.key,
                          "signature": sig, "mention_count": 1, "source_origin": "reflection"}
                    if user:
                        md["user_id"] = user
                    c.execute(
                        "INSERT INTO nodes(id, type, content, norm, tokens, source, confidence, session_id, speaker,"
                        " fact_type, occurred_at, created_at, metadata, emb, emb_model)"
                        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                        (oid, "FACT", text, normalise(text), " ".join(content_tokens(text)), "reflection", 0.7,
                         None, "system", "observation", occurred, now, json.dumps(md),
                         np.asarray(emb[i], np.float32).tobytes(), embedder.name))
                    c.executemany("INSERT INTO questions(fact_id, text, emb, emb_model) VALUES (?,?,?,?)",
                                  [(oid, q, np.asarray(q_emb[2 * i + j], np.float32).tobytes(), embedder.name)
                                   for j, q in enumerate(questions[i])])
                    edges = [(oid, ent.id, "MENTIONS")] + [(oid, f.id, "ELABORATES") for f in facts]
                    if prev:
                        c.execute("UPDATE nodes SET superseded_by=? WHERE id=?", (oid, prev[0]))
                        edges.append((oid, prev[0], "SUPERSEDES"))
                        out["superseded_count"] += 1
                    c.executemany("INSERT INTO edges(src, dst, type, weight, created_at, visible_at)"
                                  " VALUES (?,?,?,1.0,?,?)", [(s, d, t, now, now) for s, d, t in edges])
                    out["nodes_created"] += 1
                    out["edges_created"] += len(edges)
                    out["synthesized_count"] += 1
    return out
