"""`http`: any HTTP memory service, driven by a declarative mapping file (see mapping.py for its keys).

The adapter renders the mapping's request templates with the batch/query values, sends them with the
mapping's auth header, timeouts and retries, and maps the service's results back to memrig memories.

- Ingest sends one request per message, per session or per batch (documents through their own request). If
  any request fails after its retries, the units already sent in that batch are forgotten again (when the
  mapping can reset per unit or item) and Ingest fails: nothing is half applied on the rig's side.
- Evidence ids come from a result field when the service echoes them; otherwise from the unit key or item
  id the adapter sent (the `ref` field), which it maps back to the message ids of that unit.
- Retrieve failures (after retries) degrade: no memories, `degraded=True`, a reason starting with the kind
  (`http_503`, `timeout`, `connection_error`, `bad_response`), as a memory plugin's recall hook would.
- Reset follows the mapping: per unit, per item, one namespace request, or (a service that cannot forget)
  a fresh `{{scope}}` for the namespace from then on.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from services.adapters.base import BackendContext, StoreBackedBackend
from services.adapters.http.client import HttpCaller, ServiceError
from services.adapters.http.mapping import Documents, Ingest, Request, load_mapping
from services.adapters.http.template import extract, render, render_string
from services.common.types import (
    ChannelDiagnostics,
    Document,
    IngestBatch,
    Memory,
    Message,
    RetrieveQuery,
    RetrieveResult,
    Session,
    SettleResult,
    ValidationError,
)

ADAPTER_VERSION = "0.1.0"


@dataclass
class Unit:
    """One thing sent to the service: its key, the id the service gave it, its job and its evidence."""

    key: str
    items: int
    evidence: list[str]
    item_id: str = ""
    job_id: str = ""
    status: str = "done"  # done | pending | failed


@dataclass
class NamespaceState:
    units: list[Unit] = field(default_factory=list)
    generation: int = 0


def _msg_vars(m: Message, i: int) -> dict[str, Any]:
    return {"id": m.id, "role": m.role, "content": m.content, "ts": m.ts, "index": i}


def _session_vars(s: Session) -> dict[str, Any]:
    return {"id": s.session_id, "started_at": s.started_at,
            "messages": [_msg_vars(m, i) for i, m in enumerate(s.messages)]}


def _doc_vars(d: Document) -> dict[str, Any]:
    return {"id": d.id, "text": d.text, "path": d.path, "created_at": d.created_at,
            "evidence_ids": list(d.evidence())}


def _as_str(v: Any) -> str:
    return "" if v is None or isinstance(v, dict | list) else str(v)


def _parse_dt(v: Any) -> datetime | None:
    if isinstance(v, int | float) and not isinstance(v, bool):
        return datetime.fromtimestamp(v, UTC)
    if not isinstance(v, str) or not v:
        return None
    try:
        dt = datetime.fromisoformat(v.replace("Z", "+00:00"))
    except ValueError:
        return None
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


class HttpBackend(StoreBackedBackend):
    name = "http"
    version = ADAPTER_VERSION
    description = "Any HTTP memory service, through a declarative mapping file."
    defaults: dict[str, Any] = {
        "mapping": "cortex-mock",  # a shipped mapping's name (services/adapters/http/mappings) or a file path
        "base_url": "",  # empty: the mapping's base_url
        "settle_timeout_s": 0.0,  # 0: the mapping's settle.timeout_s
    }

    def __init__(self, config: dict[str, Any] | None = None, context: BackendContext | None = None):
        super().__init__(config, context)
        self.mapping, self.mapping_path = load_mapping(self.config["mapping"])
        m = self.mapping
        self.name = f"http:{m.service}"
        self.version = f"{ADAPTER_VERSION} (service {m.service_version or 'unknown'})"
        self.capabilities = (("sessions", ""), ("documents", "" if m.documents or m.ingest.per == "batch" else "no"),
                             ("recall", m.recall), ("degradation", "silent"), ("reference_time", ""))
        self.base_url = self.config["base_url"] or m.base_url
        self.caller = HttpCaller(self.base_url, m.retries)
        self.secret = (os.environ.get(m.auth.env, "") if m.auth and m.auth.env else "") or (
            m.auth.default if m.auth else "")
        self.state: dict[str, NamespaceState] = defaultdict(NamespaceState)
        self.run_id = uuid.uuid4().hex[:8]
        self.evidence_by_ref: dict[str, dict[str, list[str]]] = defaultdict(dict)

    async def close(self) -> None:
        await self.caller.close()

    def describe_config(self) -> dict[str, Any]:
        d = dict(self.config)
        m = self.mapping
        d["mapping_file"] = str(self.mapping_path)
        d["mapping_sha256"] = hashlib.sha256(self.mapping_path.read_bytes()).hexdigest()[:16]
        d["base_url"] = self.base_url
        d["service"] = m.service
        d["service_version"] = m.service_version
        d["service_source"] = m.source
        d["mapping"] = m.model_dump(mode="json", exclude={"auth"})
        if m.auth:
            d["auth"] = {"header": m.auth.header, "value": m.auth.value, "env": m.auth.env,
                         "secret": "from env" if m.auth.env and os.environ.get(m.auth.env) else "default"}
        return d

    # -- variables ---------------------------------------------------------------------------------
    def scope(self, namespace: str) -> str:
        """The namespace as the service sees it. A service that cannot forget gets a fresh scope per process
        and per Reset (`<namespace>~<run>.<generation>`), so nothing of an earlier run is ever read back."""
        if self.mapping.reset.per != "none":
            return namespace
        g = self.state[namespace].generation if namespace in self.state else 0
        return f"{namespace}~{self.run_id}.{g}"

    def variables(self, namespace: str, **extra: Any) -> dict[str, Any]:
        v: dict[str, Any] = {"namespace": namespace, "scope": self.scope(namespace), "secret": self.secret, **extra}
        for k, t in self.mapping.vars.items():
            v[k] = render_string(t, v)
        return v

    def headers(self, v: dict[str, Any]) -> dict[str, str]:
        h = {k: _as_str(render(t, v)) for k, t in self.mapping.headers.items()}
        a = self.mapping.auth
        if a:
            value = _as_str(render(a.value, v))
            if value:
                h[a.header] = value
        return h

    async def send(self, r: Request, v: dict[str, Any], timeout_ms: int) -> Any:
        path = render_string(r.path, v, url_quote=True)
        body = render(r.body, v) if r.body is not None else None
        return await self.caller.call(r.method, path, body, self.headers(v), timeout_ms, r.ok_status)

    # -- ingest ------------------------------------------------------------------------------------
    async def _send_unit(self, spec: Ingest | Documents, v: dict[str, Any], items: int,
                         evidence: list[str]) -> Unit:
        resp = await self.send(spec.request, v, self.mapping.timeouts_ms.ingest)
        unit = Unit(key=_as_str(render(spec.key, v)) if spec.key else "", items=items, evidence=evidence)
        unit.item_id = _as_str(extract(resp, spec.item_id)) if spec.item_id else ""
        job = _as_str(extract(resp, spec.job_id)) if spec.job_id else ""
        if job:
            unit.job_id = job
            done = spec.done_field and _as_str(extract(resp, spec.done_field)) in spec.done_values
            unit.status = "done" if done else "pending"
        return unit

    async def ingest(self, namespace: str, batch: IngestBatch) -> None:
        m = self.mapping
        if batch.documents and not m.documents and m.ingest.per != "batch":
            raise ValidationError("documents", f"the {m.service} mapping has no `documents` request")
        sent: list[Unit] = []
        try:
            if m.ingest.per == "batch":
                v = self.variables(namespace, sessions=[_session_vars(s) for s in batch.sessions],
                                   documents=[] if m.documents else [_doc_vars(d) for d in batch.documents])
                ev = [x.id for s in batch.sessions for x in s.messages]
                if not m.documents:
                    ev += [e for d in batch.documents for e in d.evidence()]
                sent.append(await self._send_unit(m.ingest, v, len(ev), ev))
            else:
                for s in batch.sessions:
                    sv = _session_vars(s)
                    if m.ingest.per == "session":
                        v = self.variables(namespace, session=sv)
                        sent.append(await self._send_unit(m.ingest, v, len(s.messages), [x.id for x in s.messages]))
                    else:
                        for mv in sv["messages"]:
                            v = self.variables(namespace, session=sv, message=mv)
                            sent.append(await self._send_unit(m.ingest, v, 1, [mv["id"]]))
            if m.documents:
                for d in batch.documents:
                    v = self.variables(namespace, document=_doc_vars(d))
                    sent.append(await self._send_unit(m.documents, v, 1, list(d.evidence())))
        except ServiceError as e:
            self.n["ingest_failures"] = self.n.get("ingest_failures", 0) + 1
            undone = await self._forget_units(namespace, sent)
            # still the service's error (its kind and status say what failed), with the ingest and the rollback named
            raise ServiceError(e.kind, f"{m.service}: ingest failed ({e.kind}): {e}; "
                               f"{undone}/{len(sent)} units already sent were forgotten again", e.status) from e
        self.store.apply(namespace, batch)
        st = self.state[namespace]
        st.units.extend(sent)
        refs = self.evidence_by_ref[namespace]
        for u in sent:
            for ref in (u.key, u.item_id):
                if ref:
                    refs[ref] = u.evidence
        self.n["units_sent"] = self.n.get("units_sent", 0) + len(sent)

    # -- settle ------------------------------------------------------------------------------------
    async def settle(self, namespace: str, timeout_s: float) -> SettleResult:
        m, s = self.mapping, self.mapping.settle
        budget = self.config["settle_timeout_s"] or s.timeout_s
        budget = min(timeout_s, budget) if timeout_s else budget
        deadline = time.monotonic() + budget
        poll = s.poll_ms / 1000.0
        units = self.state[namespace].units if namespace in self.state else []
        if s.wait_s:
            await asyncio.sleep(min(s.wait_s, max(0.0, deadline - time.monotonic())))
        while s.job and any(u.status == "pending" for u in units):
            for u in units:
                if u.status != "pending":
                    continue
                try:
                    resp = await self.send(s.job.request, self.variables(namespace, job_id=u.job_id),
                                           m.timeouts_ms.settle)
                except ServiceError:
                    continue  # unknown for now; ask again next round
                state = _as_str(extract(resp, s.job.status))
                if state in s.job.done:
                    u.status = "done"
                elif state in s.job.failed:
                    u.status = "failed"
            if time.monotonic() >= deadline or not any(u.status == "pending" for u in units):
                break
            await asyncio.sleep(poll)
        pending = sum(u.items for u in units if u.status == "pending")
        stable_ok = s.stable is None
        counts: dict[str, int] = {}
        if s.stable and not pending:
            last, same = None, 0
            while time.monotonic() < deadline:
                try:
                    resp = await self.send(s.stable.request, self.variables(namespace), m.timeouts_ms.settle)
                    reading = tuple(_as_str(extract(resp, f)) for f in s.stable.fields)
                except ServiceError:
                    reading = None
                same = same + 1 if reading is not None and reading == last else 0
                last = reading
                if reading is not None and same >= s.stable.polls - 1:
                    stable_ok = True
                    counts.update({f: int(x) for f, x in zip(s.stable.fields, reading, strict=True)
                                   if x.lstrip("-").isdigit()})
                    break
                await asyncio.sleep(poll)
        counts["units_pending"] = sum(u.status == "pending" for u in units)
        counts["items_failed"] = sum(u.items for u in units if u.status == "failed")
        return SettleResult(settled=stable_ok and pending == 0,
                            items_indexed=sum(u.items for u in units if u.status == "done"),
                            items_pending=pending, counts=counts)

    # -- retrieve ----------------------------------------------------------------------------------
    def to_memories(self, namespace: str, resp: Any) -> tuple[list[Memory], int]:
        r = self.mapping.retrieve
        f = r.fields
        rows = extract(resp, r.results)
        if isinstance(rows, dict):
            rows = [rows]
        if rows is None:
            rows = []
        if not isinstance(rows, list):
            raise ServiceError("bad_response", f"retrieve: {r.results!r} is not a list")
        refs = self.evidence_by_ref.get(namespace, {})
        out: list[Memory] = []
        skipped = 0
        for i, row in enumerate(rows):
            text = extract(row, f.text)
            if not isinstance(text, str) or not text:
                skipped += 1
                continue
            score = extract(row, f.score) if f.score else None
            if isinstance(score, bool) or not isinstance(score, int | float):
                score = 1.0 / (1 + i)
            ev = extract(row, f.evidence_ids) if f.evidence_ids else None
            evidence = [str(x) for x in ev if x is not None] if isinstance(ev, list) else ([ev] if isinstance(ev, str)
                                                                                         and ev else [])
            rid = _as_str(extract(row, f.id)) if f.id else ""
            if not evidence:
                for ref in (_as_str(extract(row, f.ref)) if f.ref else "", rid):
                    if ref and ref in refs:
                        evidence = list(refs[ref])
                        break
            out.append(Memory(id=rid or f"result-{i}", text=text, score=float(score),
                              kind=(_as_str(extract(row, f.kind)).lower() if f.kind else "") or "memory",
                              created_at=_parse_dt(extract(row, f.created_at)) if f.created_at else None,
                              source=self.mapping.service, evidence_ids=evidence))
        out.sort(key=lambda mm: -mm.score)  # stable: the service's order among equal scores
        return out, skipped

    async def retrieve(self, namespace: str, query: RetrieveQuery) -> RetrieveResult:
        t0 = time.perf_counter_ns()
        q = {"text": query.query, "top_k": query.top_k, "mode": query.mode,
             "reference_time": query.reference_time or datetime.now(UTC)}
        try:
            resp = await self.send(self.mapping.retrieve.request, self.variables(namespace, query=q),
                                   self.mapping.timeouts_ms.retrieve)
            memories, skipped = self.to_memories(namespace, resp)
        except ServiceError as e:
            self.n["retrieve_degraded"] = self.n.get("retrieve_degraded", 0) + 1
            return RetrieveResult(degraded=True, degraded_reason=f"{e.kind}: {e}", channels=[
                ChannelDiagnostics(self.mapping.service, 0, time.perf_counter_ns() - t0, e.kind)])
        memories = memories[: query.top_k]
        note = f"{skipped} results without text skipped" if skipped else ""
        return RetrieveResult(memories=memories, channels=[
            ChannelDiagnostics(self.mapping.service, len(memories), time.perf_counter_ns() - t0, note)])

    # -- reset -------------------------------------------------------------------------------------
    async def _forget_units(self, namespace: str, units: list[Unit]) -> int:
        """Best effort (used to roll back a failed ingest): how many units were forgotten."""
        r = self.mapping.reset
        if r.per not in ("unit", "item") or r.request is None:
            return 0
        n = 0
        for u in units:
            try:
                await self.send(r.request, self.variables(namespace, unit={"key": u.key, "item_id": u.item_id},
                                                          item_id=u.item_id), self.mapping.timeouts_ms.reset)
                n += 1
            except ServiceError:
                pass
        return n

    async def reset(self, namespace: str) -> int:
        r = self.mapping.reset
        removed = self.store.stats(namespace).items
        st = self.state.get(namespace)
        units = st.units if st else []
        try:
            if r.per in ("unit", "item") and r.request is not None:
                for u in list(units):
                    await self.send(r.request, self.variables(namespace, unit={"key": u.key, "item_id": u.item_id},
                                                              item_id=u.item_id), self.mapping.timeouts_ms.reset)
                    units.remove(u)
            elif r.per == "namespace" and r.request is not None:
                await self.send(r.request, self.variables(namespace), self.mapping.timeouts_ms.reset)
        except ServiceError as e:
            raise ServiceError(e.kind, f"{self.mapping.service}: reset of {namespace!r} failed ({e.kind}): {e}",
                               e.status) from e
        self.state[namespace] = NamespaceState(generation=(st.generation if st else 0) + (r.per == "none"))
        self.evidence_by_ref.pop(namespace, None)
        self.store.reset(namespace)
        return removed

    def counters(self) -> dict[str, int]:
        return {**self.n, "http_requests": self.caller.requests, "http_retries": self.caller.retried}
