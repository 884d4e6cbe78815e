"""A namespace-scoped suite (LongMemEval) runs each backend one namespace at a time: reset, ingest, settle, that
namespace's probes (Prepare right before the first), then Reset to release it, so a backend never holds two
haystacks; run.json records each namespace's costs in the order ingested, the raw material of the cost table."""

from __future__ import annotations

import contextlib
import dataclasses
import json

import pytest

from memrig.v1 import memory_backend_pb2_grpc as pb_grpc
from services.adapters.base import StoreBackedBackend
from services.adapters.host import BackendHost
from services.adapters.server import SERVICE_NAME, MemoryBackendServicer
from services.common.grpc_util import graceful_stop, start_server
from services.common.types import Memory, RetrieveResult
from services.coordinator.runner import RunConfig, run_suite
from services.launcher import Rig
from tests.test_suite_longmemeval_pipeline import ORACLE

MOCK_ROLES = {"answerer": "mock", "judge": "mock", "flush": "mock", "compaction": "mock"}


class Recorder(StoreBackedBackend):
    """Logs every call as (op, namespace); fails an ingest while another namespace still holds memories."""

    name = "recorder"

    def __init__(self, config=None, context=None):
        super().__init__(config, context)
        self.log: list[tuple[str, str]] = []
        self.max_held = 0
        self.settle_timeouts: dict[str, float] = {}

    async def reset(self, namespace):
        self.log.append(("reset", namespace))
        return self.store.reset(namespace)

    async def ingest(self, namespace, batch):
        held = [ns for ns in self.store.sessions if self.store.sessions[ns] and ns != namespace]
        assert not held, f"ingest of {namespace} while {held} still held"
        self.log.append(("ingest", namespace))
        self.store.apply(namespace, batch)
        self.max_held = max(self.max_held, len([ns for ns in self.store.sessions if self.store.sessions[ns]]))

    async def prepare(self, namespace):
        self.log.append(("prepare", namespace))
        return "ready"

    async def settle(self, namespace, timeout_s):
        self.settle_timeouts[namespace] = timeout_s
        return await super().settle(namespace, timeout_s)

    async def retrieve(self, namespace, query):
        self.log.append(("retrieve", namespace))
        mems = [Memory(id=m.id, text=m.content, score=1.0, evidence_ids=[m.id])
                for s in self.store.ordered_sessions(namespace) for m in s.messages][: query.top_k]
        return RetrieveResult(memories=mems)


@contextlib.asynccontextmanager
async def recorder_target(tmp_path):
    """The ORACLE file in tmp_path and a Recorder served over gRPC on 127.0.0.1: yields (backend, port)."""
    (tmp_path / "lme.json").write_text(json.dumps(ORACLE))
    backend = Recorder()
    host = BackendHost(backend)
    await host.start()
    server, health, port = await start_server(
        lambda s: pb_grpc.add_MemoryBackendServiceServicer_to_server(MemoryBackendServicer(host), s), [SERVICE_NAME])
    try:
        yield backend, port
    finally:
        await graceful_stop(server, health, 0.5)
        await host.close()


def lme_config(tmp_path, port) -> RunConfig:
    return RunConfig(suite="longmemeval", backends=["rec"], out_dir=str(tmp_path / "run"), embedder="hash",
                     options={"data_dir": str(tmp_path), "file": "lme.json", "full": True, "answer": False},
                     targets={"rec": f"127.0.0.1:{port}"}, llm_roles=MOCK_ROLES)


@pytest.mark.slow
async def test_each_namespace_is_ingested_probed_and_released_before_the_next(tmp_path, monkeypatch):
    from services.coordinator import runner

    monkeypatch.setattr(runner, "CHECKPOINT_S", 0.0)  # run.json after every namespace
    rig = Rig(tmp_path / "procs")
    events, seen = [], []

    def progress(ev):
        events.append(ev)
        if ev.get("phase") == "namespaces" and ev["done"] == 2:  # checkpointed before this event? no: right after
            seen.append(json.loads((tmp_path / "run" / "run.json").read_text()).get("ingest"))

    try:
        async with recorder_target(tmp_path) as (backend, port):
            cfg = lme_config(tmp_path, port)
            cfg.settle_s_per_message = 1_000.0  # so that a namespace's messages, not the 600 s floor, decide
            out = await run_suite(cfg, progress, rig=rig)
    finally:
        rig.stop_all()
    assert out.state == "succeeded", out.failures
    assert rig.env["MEMRIG_EMBEDDER"] == "hash"  # the run's embedder reaches every process the rig starts
    ids = sorted(q["question_id"] for q in ORACLE)  # the suite's fixed order
    expected = []
    for qid in ids:
        ns = f"longmemeval:{qid}"
        expected += [("reset", ns), ("ingest", ns), ("prepare", ns), ("retrieve", ns), ("reset", ns)]
    assert backend.log == expected
    assert backend.max_held == 1 and not any(backend.store.sessions.values())  # released: nothing left

    run = json.loads((out.run_dir / "run.json").read_text())
    lane = run["ingest"]["rec"]
    assert lane["mode"] == "streamed" and list(lane["namespaces"]) == ids
    for q in ORACLE:
        rec = lane["namespaces"][q["question_id"]]
        assert rec["messages"] == run["namespaces"][q["question_id"]]["messages"] > 0
        assert rec["messages_accepted"] == rec["messages"] and rec["settled"] is True
        assert len(rec["retrieve_ms"]) == 1 and rec["release_s"] >= 0 and rec["ingest_s"] >= 0
        assert rec["rss_bytes"] is None  # a --target: not a process this rig started
        # each namespace's Settle timeout: 1,000 s a message, at least 600 s
        assert backend.settle_timeouts[f"longmemeval:{q['question_id']}"] == max(600.0, 1_000.0 * rec["messages"])
    assert max(backend.settle_timeouts.values()) > 600.0
    progress = [e for e in events if e.get("phase") == "namespaces"]
    assert [e["done"] for e in progress] == [1, 2, 3, 4] and all(e["total"] == 4 for e in progress)
    assert progress[-1]["eta_seconds"] == 0
    # the checkpoint after the first namespace was on disk when the second one finished: an interrupt keeps it
    assert list(seen[0]["rec"]["namespaces"]) == ids[:1]
    metrics = json.loads((out.run_dir / "metrics.json").read_text())
    assert metrics["costs"]["rec"]["messages"] == sum(n["messages"] for n in run["namespaces"].values())
    assert metrics["costs"]["rec"]["marks"] == {}  # a few dozen messages reach no mark
    assert "## Cost per message as memory grows" in (out.run_dir / "report.md").read_text()
    assert "costs_by_group" not in metrics  # LongMemEval's haystacks come in one size
    assert "vectors_added" in run["embedding_cache"]


@pytest.mark.slow
async def test_beam_reports_what_a_conversation_of_each_size_bucket_cost(tmp_path):
    from tests.fixtures_beam import beam_file

    root = beam_file(tmp_path)  # three conversations, one per size bucket
    async with recorder_target(tmp_path) as (backend, port):
        cfg = RunConfig(suite="beam", backends=["rec"], out_dir=str(tmp_path / "run"), embedder="hash",
                        options={"data_dir": str(root), "conversations": 0, "answer": False},
                        targets={"rec": f"127.0.0.1:{port}"}, llm_roles=MOCK_ROLES)
        out = await run_suite(cfg, lambda ev: None)
    assert out.state == "succeeded", out.failures
    run = json.loads((out.run_dir / "run.json").read_text())
    ingest = run["ingest"]["rec"]["namespaces"]
    by = json.loads((out.run_dir / "metrics.json").read_text())["costs_by_group"]
    assert by["label"] == "size bucket" and list(by["backends"]["rec"]["groups"]) == ["100K", "500K", "1M"]
    for cid, size in run["data"]["size_of"].items():
        g = by["backends"]["rec"]["groups"][size]
        assert g["namespaces"] == 1 and g["messages"] == ingest[cid]["messages"]
        assert g["queries"] == len(ingest[cid]["retrieve_ms"]) > 0
    first = next(iter(ingest))  # the first conversation ingested pays the warm-up: no ingest figure for its bucket
    assert by["backends"]["rec"]["groups"][run["data"]["size_of"][first]]["ingest_ms_per_message"] is None
    assert "## Cost by size bucket" in (out.run_dir / "report.md").read_text()


@pytest.mark.slow
async def test_an_interrupt_writes_every_finished_namespaces_cost_record(tmp_path, monkeypatch):
    """No periodic checkpoint falls due (CHECKPOINT_S huge): what an interrupt runs (the hook run_streamed
    registers with services/common/interrupt.py) still puts every namespace finished so far into run.json."""
    from services.common import interrupt
    from services.coordinator import runner

    monkeypatch.setattr(runner, "CHECKPOINT_S", 1e9)
    seen = []
    before = list(interrupt._cleanups)

    def progress(ev):
        if ev.get("phase") == "namespaces" and ev["done"] == 2:
            seen.append(json.loads((tmp_path / "run" / "run.json").read_text()).get("ingest", {}))
            hooks = [fn for fn in interrupt._cleanups
                     if fn not in before and "run_streamed" in getattr(fn, "__qualname__", "")]
            assert len(hooks) == 1
            hooks[0]()  # as Ctrl-C or SIGTERM would, before the exit
            seen.append(json.loads((tmp_path / "run" / "run.json").read_text())["ingest"])

    async with recorder_target(tmp_path) as (_, port):
        out = await run_suite(lme_config(tmp_path, port), progress, rig=None)
    assert out.state == "succeeded", out.failures
    ids = sorted(q["question_id"] for q in ORACLE)
    assert "rec" not in seen[0]  # nothing checkpointed yet
    assert list(seen[1]["rec"]["namespaces"]) == ids[:2] and seen[1]["rec"]["namespaces"][ids[1]]["settled"]
    assert not [fn for fn in interrupt._cleanups if "run_streamed" in getattr(fn, "__qualname__", "")]  # gone


@pytest.mark.slow
@pytest.mark.parametrize("lanes", [1, 2])
async def test_lanes_run_backends_one_after_another_or_side_by_side(tmp_path, lanes):
    """lanes=1: every call of the first backend before any of the second; lanes=2: their calls interleave."""
    import asyncio

    (tmp_path / "lme.json").write_text(json.dumps(ORACLE))
    shared: list[str] = []

    class Slow(Recorder):
        async def ingest(self, namespace, batch):
            shared.append(self.tag)
            await asyncio.sleep(0.05)
            await super().ingest(namespace, batch)

    servers, targets = [], {}
    for tag in ("a", "b"):
        backend = Slow()
        backend.tag = tag
        host = BackendHost(backend)
        await host.start()
        server, health, port = await start_server(
            lambda s, h=host: pb_grpc.add_MemoryBackendServiceServicer_to_server(MemoryBackendServicer(h), s),
            [SERVICE_NAME])
        servers.append((server, health, host))
        targets[tag] = f"127.0.0.1:{port}"
    try:
        out = await run_suite(RunConfig(
            suite="longmemeval", backends=["a", "b"], out_dir=str(tmp_path / "run"), embedder="hash", lanes=lanes,
            options={"data_dir": str(tmp_path), "file": "lme.json", "full": True, "answer": False},
            targets=targets, llm_roles=MOCK_ROLES))
    finally:
        for server, health, host in servers:
            await graceful_stop(server, health, 0.5)
            await host.close()
    assert out.state == "succeeded", out.failures
    if lanes == 1:
        assert shared == ["a"] * 4 + ["b"] * 4
    else:
        assert sorted(shared) == ["a"] * 4 + ["b"] * 4 and shared != ["a"] * 4 + ["b"] * 4
    run = json.loads((out.run_dir / "run.json").read_text())
    assert list(run["ingest"]) == ["a", "b"] and run["ingest"]["a"]["lanes"] == lanes


def test_a_rig_stops_its_processes_on_ctrl_c_and_forgets_that_once_stopped(tmp_path):
    from services.common import interrupt

    rig = Rig(tmp_path / "procs")
    assert rig.stop_all in interrupt._cleanups
    rig.stop_all()
    assert rig.stop_all not in interrupt._cleanups
    rig.set_embedder(None)
    assert "MEMRIG_EMBEDDER" not in rig.env or rig.env["MEMRIG_EMBEDDER"] == __import__("os").environ.get(
        "MEMRIG_EMBEDDER")
    rig.set_embedder("wordllama")
    assert rig.env["MEMRIG_EMBEDDER"] == "wordllama"


def test_cache_rows_counts_vectors_per_model(tmp_path):
    import numpy as np

    from services.common.embeddings import EmbeddingCache, cache_rows

    path = tmp_path / "e.sqlite"
    assert cache_rows(path) == {}
    c = EmbeddingCache(path)
    c.put_many("a", {"h1": np.ones(3), "h2": np.ones(3), "h3": np.ones(3)})
    c.put_many("b", {"h1": np.ones(3)})
    c.put_many("a", {"h1": np.zeros(3)})  # a replace is no new vector
    c.close()
    assert cache_rows(path) == {"a": 3, "b": 1}


def test_backends_sharing_a_service_process_share_a_lane():
    from services.coordinator.runner import lane_groups

    names = ["bm25", "cortex", "cortex-fast", "openclaw-real", "someone-elses-target"]
    assert lane_groups(names) == [["bm25"], ["cortex", "cortex-fast"], ["openclaw-real"], ["someone-elses-target"]]
    assert lane_groups(["cortex-fast", "dense", "cortex"]) == [["cortex-fast", "cortex"], ["dense"]]
    assert lane_groups([]) == []


def test_the_heaviest_lanes_start_first():
    from services.coordinator.runner import heaviest_first, lane_groups

    # roles: bm25 ir-baseline, cortex memory, none control, openclaw-real native, an unknown target ranks as memory
    names = ["bm25", "cortex", "cortex-fast", "none", "openclaw-real", "someone-elses-target"]
    assert heaviest_first(lane_groups(names)) == [["openclaw-real"], ["cortex", "cortex-fast"],
                                                  ["someone-elses-target"], ["bm25"], ["none"]]
    # the rest keep their order; nothing heavy: unchanged
    assert heaviest_first([["none"], ["bm25"], ["dense"]]) == [["none"], ["bm25"], ["dense"]]
    assert heaviest_first([]) == []


async def test_stop_all_stops_a_child_that_is_still_starting(tmp_path):
    """Ctrl-C can land while a process is spawned but not READY yet: stop_all stops it too (by PID)."""
    import asyncio

    rig = Rig(tmp_path / "procs")
    # serves forever on loopback and never prints READY: it stays "starting"
    task = asyncio.ensure_future(rig.start("slow", "http.server", ["0", "--bind", "127.0.0.1"], timeout=60))
    for _ in range(100):
        if "slow" in rig._popen:
            break
        await asyncio.sleep(0.05)
    task.cancel()
    p = rig._popen["slow"]
    assert p.poll() is None and "slow" not in rig.procs
    rig.stop_all()
    assert p.poll() is not None and rig._popen == {}


@pytest.mark.slow
async def test_a_resumed_run_numbers_its_pass_on_every_new_cost_record(tmp_path):
    """A rerun with the same --out ingests only what is not done, in a new pass (fresh processes): its records say
    pass 1 and the rerun's lanes (1; the first ran with the default 2), the first pass's keep pass 0, so the cost
    table counts each pass from its start."""
    async with recorder_target(tmp_path) as (_, port):
        first = await run_suite(lme_config(tmp_path, port), rig=None)
        assert first.state == "succeeded", first.failures
        ids = sorted(q["question_id"] for q in ORACLE)
        rd = first.run_dir
        # as if interrupted after two namespaces: their samples and records kept, the rest gone
        kept = [ln for ln in (rd / "samples.jsonl").read_text().splitlines()
                if json.loads(ln)["probe_id"] in ids[:2]]
        assert len(kept) == 2
        (rd / "samples.jsonl").write_text("\n".join(kept) + "\n")
        run = json.loads((rd / "run.json").read_text())
        recs = run["ingest"]["rec"]["namespaces"]
        run["ingest"]["rec"]["namespaces"] = {k: recs[k] for k in ids[:2]}
        (rd / "run.json").write_text(json.dumps(run))
        again = await run_suite(dataclasses.replace(lme_config(tmp_path, port), lanes=1), rig=None)
    assert again.state == "succeeded", again.failures
    lane = json.loads((rd / "run.json").read_text())["ingest"]["rec"]
    assert list(lane["namespaces"]) == ids
    assert [(lane["namespaces"][i]["pass"], lane["namespaces"][i]["lanes"]) for i in ids] == [(0, 2)] * 2 + [(1, 1)] * 2


def test_the_eta_takes_each_lanes_own_pace_and_the_slowest_for_a_lane_not_yet_timed():
    from services.coordinator.runner import lane_eta

    # bm25 ingested 1,000 messages in 50 s (0.05 s each), 4,000 left; openclaw-real 300 in 150 s (0.5 s), 2,700 left
    lanes = {"bm25": (1_000, 4_000, 50.0), "openclaw-real": (300, 2_700, 150.0)}
    # its own lane: 2,700 x 0.5 = 1,350 s; all the work over two slots: (200 + 1,350) / 2 = 775 s -> 1,350
    assert lane_eta(lanes, 2) == pytest.approx(1_350.0)
    assert lane_eta(lanes, 1) == pytest.approx(1_550.0)  # one slot: everything in a row
    # cortex has not started: it takes the slowest pace seen (0.5 s) for its 3,000 messages
    lanes["cortex"] = (0, 3_000, None)
    assert lane_eta(lanes, 2) == pytest.approx((200 + 1_350 + 1_500) / 2)
    # a lane started but with no namespace done yet has no pace of its own either; its work counts as running
    assert lane_eta({"a": (100, 0, 10.0), "b": (0, 500, 3.0)}, 2) == pytest.approx(50.0)
    assert lane_eta({"a": (0, 500, 3.0)}, 2) is None  # no pace yet
    assert lane_eta({"a": (500, 0, 30.0), "b": (0, 0, None)}, 2) == 0.0  # nothing left


async def test_ingest_records_what_the_embedder_embedded_and_what_the_cache_answered(tmp_path):
    """Around each namespace the runner reads the backend's embedder counters from Stats (through gRPC here):
    a namespace whose texts an earlier one embedded finds them all in the cache; a backend without an embedder
    records neither field."""
    from datetime import UTC, datetime

    from services.adapters.base import BackendContext
    from services.adapters.client import GrpcBackendClient, InProcessBackendClient
    from services.adapters.ir_baselines.backend import IRBaselineBackend
    from services.common.types import IngestBatch, Message, Session
    from services.coordinator.runner import ingest_namespace

    t0 = datetime(2026, 3, 2, tzinfo=UTC)
    batch = IngestBatch(sessions=(Session("s", t0, (Message("m0", "user", "alpha beta"),
                                                     Message("m1", "assistant", "gamma delta"),
                                                     Message("m2", "user", "epsilon zeta"))),))
    ctx = BackendContext(embedder_name="hash", embedding_cache_path=str(tmp_path / "e.sqlite"))
    dense = BackendHost(IRBaselineBackend({"method": "dense"}, ctx))
    await dense.start()
    server, health, port = await start_server(
        lambda s: pb_grpc.add_MemoryBackendServiceServicer_to_server(MemoryBackendServicer(dense), s), [SERVICE_NAME])
    client = GrpcBackendClient(f"127.0.0.1:{port}", name="dense")
    try:
        first = await ingest_namespace(client, "a", batch, 10.0)
        again = await ingest_namespace(client, "b", batch, 10.0)
    finally:
        await client.close()
        await graceful_stop(server, health)
        await dense.close()
    assert (first["texts_embedded"], first["texts_cached"]) == (3, 0)
    assert (again["texts_embedded"], again["texts_cached"]) == (0, 3)
    bm25 = InProcessBackendClient(IRBaselineBackend({"method": "bm25"}, BackendContext(embedder_name="hash")))
    rec = await ingest_namespace(bm25, "a", batch, 10.0)
    assert "texts_embedded" not in rec and "texts_cached" not in rec and rec["messages_accepted"] == 3


def test_the_settle_timeout_grows_with_the_namespaces_messages():
    cfg = RunConfig(suite="beam", backends=["b"])
    assert (cfg.settle_timeout_s, cfg.settle_s_per_message) == (600.0, 1.0)
    assert cfg.settle_timeout_for(290) == 600.0  # a 100K conversation: the floor
    assert cfg.settle_timeout_for(2_088) == 2_088.0  # BEAM's largest 1M conversation: 1 s a message
    assert cfg.settle_timeout_for(-5) == 600.0


async def test_ingest_corpora_gives_each_namespace_its_own_settle_timeout():
    from services.coordinator.runner import ingest_corpora

    class Client:
        def __init__(self):
            self.timeouts = {}

        async def reset(self, ns):
            return 0

        async def ingest(self, ns, batch):
            return {"messages_accepted": batch.message_count}

        async def settle(self, ns, timeout_s):
            import types

            self.timeouts[ns] = timeout_s
            return types.SimpleNamespace(settled=True, items_indexed=0, items_pending=0)

    from datetime import UTC, datetime

    from services.common.types import IngestBatch, Message, Session

    def batch(n):
        t = datetime(2026, 1, 1, tzinfo=UTC)
        return IngestBatch(sessions=(Session("s", t, tuple(Message(f"m{i}", "user", f"text {i}") for i in range(n))),))

    c = Client()
    cfg = RunConfig(suite="x", backends=["b"], settle_timeout_s=10.0, settle_s_per_message=2.0)
    info = await ingest_corpora(c, {"a": batch(3), "b": batch(8)}, lambda ns: f"x:{ns}", cfg.settle_timeout_for)
    assert c.timeouts == {"x:a": 10.0, "x:b": 16.0}
    assert info["namespaces"]["b"]["messages_accepted"] == 8
