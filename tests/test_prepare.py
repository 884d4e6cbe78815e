"""Prepare, the untimed per-namespace setup before the first timed Retrieve: the runner calls it once per namespace
right before that namespace's first retrieve, back to back with it, and its time is setup (run.json `prepare`),
never in latency_ms; the in-process and gRPC clients carry it; a gRPC backend without it (UNIMPLEMENTED) still runs;
conformance checks it."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from memrig.v1 import memory_backend_pb2 as pb
from memrig.v1 import memory_backend_pb2_grpc as pb_grpc
from services.adapters.base import SessionStore, StoreBackedBackend
from services.adapters.client import GrpcBackendClient, InProcessBackendClient
from services.adapters.host import BackendHost
from services.adapters.server import SERVICE_NAME, MemoryBackendServicer
from services.common.grpc_util import graceful_stop, start_server
from services.common.types import Memory, RetrieveResult
from services.conformance import Conformance, render
from services.coordinator.context import ProbeContext
from services.coordinator.runner import RunConfig, run_suite
from services.coordinator.suites.longmemeval import LongMemEvalSuite
from tests.broken_backend import BrokenServicer
from tests.fixtures_suites import FakeLLM
from tests.test_suite_longmemeval_pipeline import ORACLE

PREPARE_S = 0.3  # what the backend's prepare costs: far above any retrieve here


class SlowFirstSearch(StoreBackedBackend):
    """Pays PREPARE_S in prepare; retrieve returns every message and fails if its namespace was never prepared.
    `log` records the order of calls across namespaces."""

    name = "slow-first-search"
    log: list[tuple[str, str]]

    def __init__(self, config=None, context=None):
        super().__init__(config, context)
        self.log, self.prepared = [], set()

    async def reset(self, namespace):
        self.prepared.discard(namespace)
        return self.store.reset(namespace)

    async def ingest(self, namespace, batch):
        self.store.apply(namespace, batch)

    async def prepare(self, namespace):
        self.log.append(("prepare", namespace))
        await asyncio.sleep(PREPARE_S)
        self.prepared.add(namespace)
        return "index built"

    async def retrieve(self, namespace, query):
        assert namespace in self.prepared, f"{namespace}: retrieve before prepare"
        self.log.append(("retrieve", namespace))
        await asyncio.sleep(0.01)
        mems = [Memory(id=m.id, text=m.content, score=1.0, evidence_ids=[m.id])
                for s in self.store.ordered_sessions(namespace) for m in s.messages][: query.top_k]
        return RetrieveResult(memories=mems)


async def _serve(servicer):
    server, health, port = await start_server(
        lambda s: pb_grpc.add_MemoryBackendServiceServicer_to_server(servicer, s), [SERVICE_NAME])
    return server, health, f"127.0.0.1:{port}"


def _check_log(log: list[tuple[str, str]], namespaces: set[str]) -> None:
    """One prepare per namespace, each immediately followed by a retrieve of the same namespace."""
    prepares = [ns for op, ns in log if op == "prepare"]
    assert sorted(prepares) == sorted(namespaces)
    for i, (op, ns) in enumerate(log):
        if op == "prepare":
            assert log[i + 1] == ("retrieve", ns), log


async def test_probe_context_prepares_each_namespace_once_back_to_back_and_outside_latency(tmp_path):
    suite = LongMemEvalSuite({"data_dir": str(tmp_path), "file": "lme.json", "full": True}, seed=0)
    (tmp_path / "lme.json").write_text(json.dumps(ORACLE))
    data = suite.load()
    backend = SlowFirstSearch()
    client = InProcessBackendClient(backend)
    llm = FakeLLM()
    ctx = ProbeContext({"b": client}, data.corpora, llm, llm, tmp_path / "run", suite.name)
    for ns, batch in data.corpora.items():
        await client.ingest(ctx.backend_namespace(ns), batch)
    # every probe twice, with two top_k (two cached retrievals each), all at once: 16 concurrent retrieves
    recs = await asyncio.gather(*(ctx.retrieve("b", p, top_k=k) for p in data.probes * 2 for k in (5, 6)))
    namespaces = {ctx.backend_namespace(p.namespace) for p in data.probes}
    _check_log(backend.log, namespaces)
    assert sum(op == "retrieve" for op, _ in backend.log) == 2 * len(namespaces)  # the cache still holds
    assert max(r["latency_ms"] for r in recs) < PREPARE_S * 1000 / 2  # the prepare is in no latency
    summary = ctx.prepare_summary()["b"]
    assert summary["namespaces"] == 4 and summary["implemented"] and summary["notes"] == ["index built"]
    assert summary["total_s"] >= 4 * PREPARE_S and summary["p50_ms"] >= PREPARE_S * 1000


async def test_grpc_client_prepares_and_tolerates_a_backend_without_prepare():
    host = BackendHost(SlowFirstSearch())
    await host.start()
    server, health, target = await _serve(MemoryBackendServicer(host))
    broken_server, broken_health, broken_target = await _serve(BrokenServicer())
    try:
        c = GrpcBackendClient(target, name="slow")
        r = await c.prepare("ns-a")
        assert r.implemented and r.note == "index built"
        assert r.server_duration_ns >= PREPARE_S * 1e9 and r.client_duration_ns >= r.server_duration_ns
        from services.common.types import ValidationError

        with pytest.raises(ValidationError, match="namespace"):
            await c.prepare("")
        await c.close()
        old = GrpcBackendClient(broken_target, name="old")
        r = await old.prepare("ns-a")
        assert not r.implemented and r.note == "" and r.server_duration_ns == 0
        await old.close()
    finally:
        await graceful_stop(server, health, 0.5)
        await graceful_stop(broken_server, broken_health, 0.5)
        await host.close()


async def test_conformance_knows_prepare():
    host = BackendHost(SlowFirstSearch())
    await host.start()
    server, health, target = await _serve(MemoryBackendServicer(host))
    broken_server, broken_health, broken_target = await _serve(BrokenServicer())
    try:
        ok = {r.name: r for r in await Conformance(target).run_all()}
        old = {r.name: r for r in await Conformance(broken_target).run_all()}
    finally:
        await graceful_stop(server, health, 0.5)
        await graceful_stop(broken_server, broken_health, 0.5)
        await host.close()
    for name in ("Prepare (optional) leaves the namespace searchable", "Prepare of an unknown namespace is not an error",
                 "Prepare without namespace → INVALID_ARGUMENT naming 'namespace'"):
        assert ok[name].status == "PASS", render(list(ok.values()), "slow")
    assert "(index built)" in ok["Prepare (optional) leaves the namespace searchable"].detail
    assert old["Prepare (optional) leaves the namespace searchable"].status == "PASS"
    assert old["Prepare (optional) leaves the namespace searchable"].detail.startswith("not implemented")
    assert old["Prepare of an unknown namespace is not an error"].status == "N/A"


@pytest.mark.slow
async def test_the_runner_records_prepare_as_setup_not_latency(tmp_path):
    """A whole run against a gRPC backend: run.json's `prepare` holds the setup, every sample's latency is the
    search alone; against a backend without Prepare the run still succeeds and says it is not implemented."""
    (tmp_path / "lme.json").write_text(json.dumps(ORACLE))
    backend = SlowFirstSearch()
    host = BackendHost(backend)
    await host.start()
    server, health, target = await _serve(MemoryBackendServicer(host))
    old_server, old_health, old_target = await _serve(_WorkingWithoutPrepare())
    options = {"data_dir": str(tmp_path), "file": "lme.json", "full": True, "answer": False}
    try:
        t0 = time.monotonic()
        out = await run_suite(RunConfig(suite="longmemeval", backends=["slow", "old"], out_dir=str(tmp_path / "run"),
                                        options=options, targets={"slow": target, "old": old_target},
                                        llm_roles={"answerer": "mock", "judge": "mock", "flush": "mock",
                                                   "compaction": "mock"}))
        assert time.monotonic() - t0 >= 4 * PREPARE_S
    finally:
        await graceful_stop(server, health, 0.5)
        await graceful_stop(old_server, old_health, 0.5)
        await host.close()
    assert out.state == "succeeded", out.failures
    run = json.loads((out.run_dir / "run.json").read_text())
    assert run["prepare"]["slow"]["namespaces"] == 4 and run["prepare"]["slow"]["total_s"] >= 4 * PREPARE_S
    assert run["prepare"]["old"]["implemented"] is False
    _check_log(backend.log, {f"longmemeval:{q['question_id']}" for q in ORACLE})
    samples = [json.loads(x) for x in (out.run_dir / "samples.jsonl").read_text().splitlines()]
    lat = [s["retrievals"]["slow"]["latency_ms"] for s in samples if s["condition"] == "slow"]
    assert len(lat) == 4 and max(lat) < PREPARE_S * 1000 / 2
    report = (out.run_dir / "report.md").read_text()
    assert "**Setup before the first search** (Prepare" in report
    assert "| slow | 4 |" in report and "| old | 4 |" in report and "not implemented (nothing to prepare)" in report


class _WorkingWithoutPrepare(BrokenServicer):
    """A backend written before Prepare existed (no Prepare method: UNIMPLEMENTED) that otherwise answers."""

    def __init__(self):
        super().__init__()
        self.store = SessionStore()

    async def Retrieve(self, request, context):
        return pb.RetrieveResponse(memories=[])
