"""`memrig conformance --target HOST:PORT`: the checks any MemoryBackendService must pass, in any language.

It speaks raw gRPC (so it can send malformed requests a well-behaved client never would), uses fresh random
namespaces, and prints one PASS/FAIL/N-A line per check. Exit code 0 only when nothing failed.
Checks that need exact recall are N/A for backends whose Describe declares ("recall", "lossy"|"none").
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memrig.v1 import memory_backend_pb2 as pb
from memrig.v1 import memory_backend_pb2_grpc as pb_grpc
from services.common.grpc_util import aio_channel
from services.common.types import dt_to_ts

DEADLINE = 60.0
UNLISTED_VIEW = "memrig-conformance-unlisted-view"
# No word a memory system's own write filter may refuse: Quaid drops any fact matching `\bpassword\b` (its
# prompt-injection blocklist, memory_graph.py @ 9262e69), so a fact about a password tested its policy, not the contract.
FACT = "The staging database snapshots rotate every 17 days, handled by the snapshot-rotator cron job."
FACT_QUERY = "How often do the staging database snapshots rotate?"
FILLER = [
    "We discussed the color scheme for the dashboard and settled on dark blue.",
    "The standup moved to 10:30 on Tuesdays.",
    "Lunch orders go through the shared spreadsheet.",
    "The frontend uses React with server components.",
    "Someone asked about the parking situation downtown.",
    "The design review for onboarding screens is next week.",
]


@dataclass
class Check:
    name: str
    status: str  # PASS | FAIL | N/A
    detail: str = ""


def _session(sid: str, texts: list[str], start: datetime, prefix: str) -> pb.Session:
    return pb.Session(
        session_id=sid,
        started_at=dt_to_ts(start),
        messages=[pb.Message(id=f"{prefix}-{i}", role="user" if i % 2 == 0 else "assistant", content=t)
                  for i, t in enumerate(texts)],
    )


class Conformance:
    def __init__(self, target: str):
        self.target = target
        self.results: list[Check] = []
        self.recall = "exact"
        self.views: list[str] = []  # Describe's "views" capability
        self.run = uuid.uuid4().hex[:8]
        self.t0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

    def ns(self, name: str) -> str:
        return f"conformance-{self.run}-{name}"

    async def _ingest(self, stub, ns: str, sessions: list[pb.Session], docs=()) -> pb.IngestResponse:
        return await stub.Ingest(pb.IngestRequest(namespace=ns, sessions=sessions, documents=list(docs)),
                                 timeout=DEADLINE * 5)

    async def _settle(self, stub, ns: str) -> pb.SettleResponse:
        return await stub.Settle(pb.SettleRequest(namespace=ns, timeout_seconds=120), timeout=DEADLINE * 3)

    async def _retrieve(self, stub, ns: str, q: str, k: int = 5, view: str = "") -> pb.RetrieveResponse:
        return await stub.Retrieve(pb.RetrieveRequest(namespace=ns, query=q, top_k=k,
                                                      mode=pb.RETRIEVE_MODE_FAST,
                                                      reference_time=dt_to_ts(self.t0 + timedelta(days=3)),
                                                      view=view),
                                   timeout=DEADLINE)

    async def check(self, name: str, fn: Callable[[], Awaitable[str]], needs_exact: bool = False) -> None:
        if needs_exact and self.recall != "exact":
            self.results.append(Check(name, "N/A", f"backend declares recall={self.recall}"))
            return
        try:
            detail = await fn()
            self.results.append(Check(name, "PASS", detail or ""))
        except AssertionError as e:
            self.results.append(Check(name, "FAIL", str(e)))
        except grpc.aio.AioRpcError as e:
            self.results.append(Check(name, "FAIL", f"unexpected {e.code().name}: {e.details()}"))
        except Exception as e:  # anything else is a failure of the backend under test
            self.results.append(Check(name, "FAIL", f"{type(e).__name__}: {e}"))

    async def expect_invalid(self, call: Awaitable, field_name: str) -> str:
        try:
            await call
        except grpc.aio.AioRpcError as e:
            assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, (
                f"expected INVALID_ARGUMENT, got {e.code().name}: {e.details()}")
            assert field_name in (e.details() or ""), f"error does not name the field {field_name!r}: {e.details()!r}"
            return f"INVALID_ARGUMENT: {e.details()}"
        raise AssertionError(f"expected INVALID_ARGUMENT naming {field_name!r}, but the call succeeded")

    async def _prepare_checks(self, stub, fact_ns: str) -> None:
        """Prepare is optional: UNIMPLEMENTED passes (the rig then prepares nothing) and makes its other checks
        N/A; implemented, it must leave a namespace searchable, accept an unknown one, and name a missing one."""
        implemented = True

        async def c_prepare():
            nonlocal implemented
            try:
                r = await stub.Prepare(pb.PrepareRequest(namespace=fact_ns), timeout=DEADLINE * 5)
            except grpc.aio.AioRpcError as e:
                if e.code() != grpc.StatusCode.UNIMPLEMENTED:
                    raise
                implemented = False
                return "not implemented (optional: the rig then has nothing to prepare)"
            if self.recall == "exact":
                res = await self._retrieve(stub, fact_ns, FACT_QUERY, 3)
                assert any(f"{self.run}-fact-2" in m.evidence_ids or "17 days" in m.text for m in res.memories), \
                    "after Prepare, retrieve no longer finds the fact"
            return f"{r.server_duration_ns / 1e6:.1f} ms server-side" + (f" ({r.note})" if r.note else "")

        await self.check("Prepare (optional) leaves the namespace searchable", c_prepare)
        unknown = "Prepare of an unknown namespace is not an error"
        missing = "Prepare without namespace → INVALID_ARGUMENT naming 'namespace'"
        if not implemented:
            self.results += [Check(unknown, "N/A", "Prepare not implemented"), Check(missing, "N/A", "Prepare not "
                                                                                                  "implemented")]
            return

        async def c_unknown():
            await stub.Prepare(pb.PrepareRequest(namespace=self.ns("never-prepared")), timeout=DEADLINE)
            return "OK"

        await self.check(unknown, c_unknown)
        await self.check(missing, lambda: self.expect_invalid(stub.Prepare(pb.PrepareRequest(namespace=""),
                                                                           timeout=DEADLINE), "namespace"))

    async def run_all(self) -> list[Check]:
        async with aio_channel(self.target) as ch:
            stub = pb_grpc.MemoryBackendServiceStub(ch)
            health = health_pb2_grpc.HealthStub(ch)

            async def c_health():
                r = await health.Check(health_pb2.HealthCheckRequest(service=""), timeout=10)
                assert r.status == health_pb2.HealthCheckResponse.SERVING, f"status {r.status}"
                return "SERVING"

            async def c_describe():
                d = await stub.Describe(pb.DescribeRequest(), timeout=DEADLINE)
                assert d.name, "Describe.name is empty"
                assert d.version, "Describe.version is empty"
                caps = {c.name: c.detail for c in d.capabilities}
                self.recall = caps.get("recall", "exact") or "exact"
                self.views = [v for v in caps.get("views", "").split(",") if v]
                return f"{d.name} {d.version}, recall={self.recall}, capabilities={sorted(caps)}"

            await self.check("health service reports SERVING", c_health)
            await self.check("Describe names the backend and its capabilities", c_describe)

            fact_ns = self.ns("fact")
            # the fact is the user's (message 2): a system may keep only what the user says (Octybot's Stop hook
            # stores user messages; the reply is context for them)
            fact_session = _session("s-fact", [FILLER[0], FILLER[1], FACT, FILLER[2]], self.t0, f"{self.run}-fact")

            async def c_exact():
                r = await self._ingest(stub, fact_ns, [fact_session,
                                                       _session("s-fill", FILLER[3:], self.t0 + timedelta(days=1),
                                                                f"{self.run}-fill")])
                assert r.messages_accepted == 7, f"messages_accepted={r.messages_accepted}, expected 7"
                await self._settle(stub, fact_ns)
                res = await self._retrieve(stub, fact_ns, FACT_QUERY, 3)
                found = [m for m in res.memories if "17 days" in m.text or f"{self.run}-fact-2" in m.evidence_ids]
                assert found, f"none of {len(res.memories)} memories holds the fact; got {[m.text[:60] for m in res.memories]}"
                return f"found at rank {list(res.memories).index(found[0]) + 1} of {len(res.memories)}"

            async def c_evidence():
                res = await self._retrieve(stub, fact_ns, FACT_QUERY, 3)
                ingested = {m.id for m in fact_session.messages} | {f"{self.run}-fill-{i}" for i in range(3)}
                with_ev = [m for m in res.memories if m.evidence_ids]
                assert with_ev, "no memory carries evidence_ids"
                bad = [e for m in res.memories for e in m.evidence_ids if e not in ingested]
                assert not bad, f"evidence ids that were never ingested: {bad[:5]}"
                assert any(f"{self.run}-fact-2" in m.evidence_ids for m in res.memories), \
                    "the memory holding the fact does not cite its message id"
                return f"{sum(len(m.evidence_ids) for m in res.memories)} evidence ids, all ingested"

            async def c_spans():
                from services.common.types import result_from_pb
                from services.coordinator.context import retrieval_record
                from services.coordinator.metrics import budget

                res = await self._retrieve(stub, fact_ns, FACT_QUERY, 3)
                rec = retrieval_record(result_from_pb(res), 0, [])
                budget.check_record(rec)  # raises SpanError naming the span that does not fit its text
                # a memory's spans name only ids it cites (context_spans may cover more: e.g. auto-loaded notes)
                stray = sorted({s.evidence_id for m in res.memories for s in m.evidence_spans
                                if s.evidence_id not in set(m.evidence_ids)})
                assert not stray, f"evidence_spans name ids their memory does not cite: {stray[:5]}"
                spans = [s for m in res.memories for s in m.evidence_spans] + list(res.context_spans)
                acc = budget.account(rec, (budget.HEADLINE_BUDGET,))
                return (f"{len(spans)} spans, all inside their texts; {acc['unlocated']} memories not found in the "
                        "injected context")

            await self.check("ingest → settle → retrieve finds an exact fact", c_exact, needs_exact=True)
            await self.check("evidence ids carried back", c_evidence, needs_exact=True)
            await self.check("evidence spans fit their texts (recall at a context budget)", c_spans, needs_exact=True)
            await self._prepare_checks(stub, fact_ns)

            async def c_topk_and_order():
                ns = self.ns("topk")
                texts = [f"Note {i}: the build of service alpha-{i} uses cache tier {i % 3} and port {4000 + i}."
                         for i in range(12)]
                await self._ingest(stub, ns, [_session("s-many", texts, self.t0, f"{self.run}-many")])
                await self._settle(stub, ns)
                details = []
                for k in (1, 3, 5):
                    res = await self._retrieve(stub, ns, "Which port does service alpha use for its build?", k)
                    assert len(res.memories) <= k, f"top_k={k} but {len(res.memories)} memories returned"
                    scores = [m.score for m in res.memories]
                    assert all(a >= b - 1e-9 for a, b in zip(scores, scores[1:], strict=False)), \
                        f"scores not non-increasing for top_k={k}: {scores}"
                    details.append(f"k={k}→{len(res.memories)}")
                return ", ".join(details)

            await self.check("top_k respected and scores non-increasing", c_topk_and_order)

            async def c_reset():
                a, b = self.ns("iso-a"), self.ns("iso-b")
                # each fact session is followed by a later one: a system may keep the newest session as the live
                # conversation rather than memory (OpenClaw does until the next /new)
                later = self.t0 + timedelta(days=1)
                await self._ingest(stub, a, [_session("s-a", [FACT], self.t0, f"{self.run}-isoa"),
                                             _session("s-a2", FILLER[3:4], later, f"{self.run}-isoa-next")])
                await self._ingest(stub, b, [_session("s-b", [FACT], self.t0, f"{self.run}-isob"),
                                             _session("s-b2", FILLER[3:4], later, f"{self.run}-isob-next")])
                await self._settle(stub, a)
                await self._settle(stub, b)
                await stub.Reset(pb.ResetRequest(namespace=a), timeout=DEADLINE)
                ra = await self._retrieve(stub, a, FACT_QUERY)
                assert not ra.memories, f"namespace {a} still returns {len(ra.memories)} memories after Reset"
                rb = await self._retrieve(stub, b, FACT_QUERY)
                leaked = [e for m in rb.memories for e in m.evidence_ids if e.startswith(f"{self.run}-isoa")]
                assert not leaked, f"namespace b returns memories of namespace a: {leaked}"
                if self.recall == "exact":
                    assert rb.memories, "Reset of namespace a emptied namespace b too"
                return "reset namespace is empty; the other keeps its memories"

            await self.check("Reset isolates namespaces", c_reset)

            async def c_unknown_ns():
                res = await self._retrieve(stub, self.ns("never-used"), FACT_QUERY)
                assert not res.memories, f"unknown namespace returned {len(res.memories)} memories"
                return "empty result, no error"

            await self.check("unknown namespace returns empty, not an error", c_unknown_ns)

            ns_v = self.ns("invalid")
            await self.check("empty query → INVALID_ARGUMENT naming 'query'",
                             lambda: self.expect_invalid(self._retrieve(stub, ns_v, ""), "query"))
            await self.check("query over 2000 characters → INVALID_ARGUMENT naming 'query'",
                             lambda: self.expect_invalid(self._retrieve(stub, ns_v, "x" * 2001), "query"))
            await self.check("top_k 0 → INVALID_ARGUMENT naming 'top_k'",
                             lambda: self.expect_invalid(self._retrieve(stub, ns_v, "ok", 0), "top_k"))
            await self.check("missing namespace → INVALID_ARGUMENT naming 'namespace'",
                             lambda: self.expect_invalid(self._retrieve(stub, "", "ok"), "namespace"))
            # the rig answers one configuration's probes from another's state only through a view the backend lists
            # (Describe "views"); a view it does not list must be refused, never searched as its own search
            await self.check("a view not in Describe's \"views\" → INVALID_ARGUMENT naming 'view'",
                             lambda: self.expect_invalid(self._retrieve(stub, fact_ns, FACT_QUERY,
                                                                        view=UNLISTED_VIEW), "view"))

            async def c_listed_views():
                if not self.views:
                    return "no views listed"
                for v in self.views:
                    await self._retrieve(stub, fact_ns, FACT_QUERY, 3, view=v)
                return f"answered: {', '.join(self.views)}"

            await self.check("every view Describe lists is answered", c_listed_views)
            no_id = pb.Session(session_id="s1", started_at=dt_to_ts(self.t0),
                               messages=[pb.Message(role="user", content="hello there")])
            await self.check("message without id → INVALID_ARGUMENT naming 'id'",
                             lambda: self.expect_invalid(self._ingest(stub, ns_v, [no_id]), "id"))
            no_sid = _session("", ["hello there"], self.t0, f"{self.run}-nosid")
            await self.check("session without session_id → INVALID_ARGUMENT naming 'session_id'",
                             lambda: self.expect_invalid(self._ingest(stub, ns_v, [no_sid]), "session_id"))
            no_time = pb.Session(session_id="s2", messages=[pb.Message(id="x1", role="user", content="hi")])
            await self.check("session without started_at → INVALID_ARGUMENT naming 'started_at'",
                             lambda: self.expect_invalid(self._ingest(stub, ns_v, [no_time]), "started_at"))
            await self.check("empty ingest batch → INVALID_ARGUMENT",
                             lambda: self.expect_invalid(self._ingest(stub, ns_v, []), "sessions"))

            async def c_atomic():
                ns = self.ns("atomic")
                good = _session("s-good", [FACT, FILLER[0]], self.t0, f"{self.run}-good")
                bad = _session("s-bad", [FILLER[1], "   "], self.t0, f"{self.run}-bad")
                await self.expect_invalid(self._ingest(stub, ns, [good, bad]), "content")
                st = await stub.Stats(pb.StatsRequest(namespace=ns), timeout=DEADLINE)
                items = sum(n.items + n.messages for n in st.namespaces if n.namespace == ns)
                assert items == 0, f"rejected batch left {items} items in the namespace"
                res = await self._retrieve(stub, ns, FACT_QUERY)
                assert not res.memories, f"rejected batch is searchable: {len(res.memories)} memories"
                return "nothing of the rejected batch is stored or searchable"

            await self.check("a rejected batch leaves nothing half ingested", c_atomic)

            async def c_concurrent():
                ns = self.ns("concurrent")
                batches = [[_session(f"s-c{i}", [f"Concurrent fact {i}: the widget-{i} quota is {100 + i} units.",
                                                 FILLER[i % len(FILLER)]], self.t0 + timedelta(hours=i),
                                     f"{self.run}-c{i}")] for i in range(8)]
                ingested_ids = {m.id for b in batches for s in b for m in s.messages}

                async def reader():
                    res = await self._retrieve(stub, ns, "What is the widget quota?", 5)
                    return [e for m in res.memories for e in m.evidence_ids]

                results = await asyncio.gather(*(self._ingest(stub, ns, b) for b in batches),
                                               *(reader() for _ in range(16)))
                acks = results[: len(batches)]
                assert all(a.messages_accepted == 2 for a in acks), "an ingest under concurrency lost messages"
                seen = [e for r in results[len(batches):] for e in r]
                bogus = [e for e in seen if e not in ingested_ids]
                assert not bogus, f"retrieve returned evidence ids never ingested: {bogus[:5]}"
                await self._settle(stub, ns)
                st = await stub.Stats(pb.StatsRequest(namespace=ns), timeout=DEADLINE)
                msgs = sum(n.messages for n in st.namespaces if n.namespace == ns)
                assert msgs == 16, f"Stats reports {msgs} messages after 8 concurrent batches of 2, expected 16"
                return "8 concurrent batches + 16 concurrent retrieves; all 16 messages counted"

            await self.check("concurrent ingest and retrieve stay consistent", c_concurrent)

            for name in ("fact", "topk", "iso-b", "concurrent"):
                try:
                    await stub.Reset(pb.ResetRequest(namespace=self.ns(name)), timeout=DEADLINE)
                except grpc.aio.AioRpcError:
                    pass
        return self.results


def render(results: list[Check], target: str) -> str:
    lines = [f"memrig conformance against {target}", ""]
    for r in results:
        lines.append(f"  {r.status:<4}  {r.name}" + (f" — {r.detail}" if r.detail else ""))
    failed = sum(r.status == "FAIL" for r in results)
    passed = sum(r.status == "PASS" for r in results)
    na = sum(r.status == "N/A" for r in results)
    verdict = "FAIL" if failed else "PASS"
    lines += ["", f"Result: {verdict} ({passed} checks passed, {failed} failed, {na} not applicable)"]
    return "\n".join(lines)


async def run_conformance(target: str) -> tuple[list[Check], str]:
    results = await Conformance(target).run_all()
    return results, render(results, target)


def main(target: str) -> int:
    results, text = asyncio.run(run_conformance(target))
    print(text)
    sys.stdout.flush()
    return 1 if any(r.status == "FAIL" for r in results) else 0
