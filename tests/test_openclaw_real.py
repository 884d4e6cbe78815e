"""openclaw-real: OpenClaw 2026.9.6 itself behind the memrig contract. Skips with the reason when Node or the pinned
OpenClaw npm package is not installed (`make setup-openclaw`)."""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime, timedelta

import pytest

from services.adapters.base import BackendContext
from services.adapters.openclaw.backend import OpenClawBackend
from services.adapters.openclaw.lifecycle import agent_id
from services.adapters.openclaw.workspace import WFile, Workspace
from services.adapters.openclaw_real.backend import OpenClawRealBackend, line_evidence, safe_relpath
from services.adapters.openclaw_real.node import OPENCLAW_VERSION, availability, compile_cache_dir, node_ok
from services.common.types import Document, IngestBatch, RetrieveQuery, ValidationError

AVAIL = availability()
pytestmark = pytest.mark.slow  # starts OpenClaw's Node sidecar (~7 s a start)
needs_openclaw = pytest.mark.skipif(not AVAIL.ok, reason=f"[requires:openclaw] openclaw-real unavailable: {AVAIL.reason}")

DAY0 = datetime(2026, 1, 1, tzinfo=UTC)
DOCS = (
    Document("mem-pnpm", "# Memory\n\n- The team prefers pnpm over npm.\n- Deploys go out on Thursdays.",
             None, "MEMORY.md"),
    Document("d-0101", "- The billing service moved to PostgreSQL 16.", DAY0, "memory/2026-01-01.md"),
    Document("d-notes", "- The billing service moved to PostgreSQL 16.", None, "memory/notes.md"),
)


def test_pure_helpers():
    assert agent_id("team:x") != agent_id("team") and agent_id("a").startswith("ns-")
    assert len(agent_id("x" * 500)) == 27
    assert safe_relpath("memory/2026-01-01.md") == "memory/2026-01-01.md"
    for bad in ("../etc/passwd", "/abs.md", "memory/../../x.md"):
        with pytest.raises(ValidationError, match="documents"):
            safe_relpath(bad)
    ws = Workspace({"MEMORY.md": WFile(["# Memory", "", "- a", "- b"], [(), (), ("e1",), ("e2", "e1")])})
    assert line_evidence(ws, "MEMORY.md", 3, 4) == ["e1", "e2"]
    assert line_evidence(ws, "MEMORY.md", 1, 2) == []
    assert line_evidence(ws, "other.md", 1, 9) == []
    assert node_ok((24, 16, 0)) and node_ok((26, 1, 0)) and not node_ok((24, 15, 9)) and not node_ok((25, 0, 0))


def test_compile_cache_dir_follows_openclaws_launcher(tmp_path):
    pkg = tmp_path / "package.json"
    pkg.write_text('{"version": "2026.9.6"}')  # 23 bytes
    os.utime(pkg, ns=(1_700_000_000_123_456_789, 1_700_000_000_123_456_789))
    assert compile_cache_dir({}, tmp_path) == "/tmp/node-compile-cache/openclaw/2026.9.6/1700000000123-23"
    tmp, cache = str(tmp_path / "tmp"), str(tmp_path / "cache")
    assert compile_cache_dir({"TMPDIR": tmp + "/"}, tmp_path) == \
        f"{tmp}/node-compile-cache/openclaw/2026.9.6/1700000000123-23"  # os.tmpdir() drops the trailing "/"
    assert compile_cache_dir({"NODE_COMPILE_CACHE": cache, "TMPDIR": tmp}, tmp_path) == \
        f"{cache}/openclaw/2026.9.6/1700000000123-23"
    assert compile_cache_dir({"NODE_COMPILE_CACHE": cache, "NODE_DISABLE_COMPILE_CACHE": ""}, tmp_path) is None
    pkg.write_text('{"version": "1.0 beta/x"}')  # unsafe characters become one "_"
    os.utime(pkg, ns=(5_000_000, 5_999_999))
    assert compile_cache_dir({}, tmp_path).endswith("/openclaw/1.0_beta_x/5-25")
    assert compile_cache_dir({}, tmp_path / "none").endswith("/openclaw/unknown/no-package-json")


def test_search_params_set_openclaws_min_score_option_and_refuse_decay():
    b = OpenClawRealBackend({"embedder": "none", "min_score": 0.3})  # not started: the setting alone
    with b.search_params(min_score=0.15):
        assert b.config["min_score"] == 0.15
    assert b.config["min_score"] == 0.3
    with pytest.raises(ValueError, match="temporal decay"), b.search_params(decay=False):
        pass
    assert b.config["min_score"] == 0.3


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    if not AVAIL.ok:
        pytest.skip(f"[requires:openclaw] openclaw-real unavailable: {AVAIL.reason}")
    loop = asyncio.new_event_loop()
    b = OpenClawRealBackend({"embedder": "hash"},
                            BackendContext(data_dir=tmp_path_factory.mktemp("ocr"),
                                           embedding_cache_path=str(tmp_path_factory.mktemp("c") / "e.sqlite")))
    loop.run_until_complete(b.start())
    loop.run_until_complete(b.ingest("demo", IngestBatch(documents=DOCS)))
    yield b, loop
    loop.run_until_complete(b.close())
    loop.close()


def _search(real, q, ref=None, ns="demo", k=6):
    b, loop = real
    return loop.run_until_complete(b.retrieve(ns, RetrieveQuery(q, k, reference_time=ref))).memories


@needs_openclaw
def test_describe_names_the_release_and_the_embedder(real):
    b, loop = real
    d = b.describe_config()
    assert d["release"] == f"openclaw {OPENCLAW_VERSION}" and d["openclaw_version"] == OPENCLAW_VERSION
    assert d["node"].startswith("v24.")
    assert d["provider"] == "openai-compatible" and d["embedding_model"].startswith("hash-")


@needs_openclaw
def test_memory_md_bullet_is_its_own_chunk_found_by_keyword(real):
    # MEMORY.md lines: 1 "# Memory", 2 "", 3 "- The team prefers pnpm over npm.", 4 "- Deploys go out on Thursdays."
    ms = _search(real, "pnpm", ref=DAY0)
    top = ms[0]
    assert (top.attributes["path"], top.attributes["start_line"], top.attributes["end_line"]) == ("MEMORY.md", "3", "3")
    assert top.evidence_ids == ["mem-pnpm"]
    assert top.channel_scores["text"] > 0
    assert "pnpm" in top.text


@needs_openclaw
def test_each_search_embeds_its_query_anew(real):
    """OpenClaw asks its provider for every query's vector (memory-core's embedQueryWithRetry) and the bridge computes
    a request of one text anew (services/embeddings_api/service.py): a wrong vector planted in the shared cache under
    the query's key between two searches changes nothing, and each search embeds once."""
    from services.common.embeddings import EmbeddingCache

    b, loop = real
    q = "which package manager does the team prefer"
    emb = b.embedder
    true = emb.encode_query(q)
    first = [(m.id, m.score) for m in _search(real, q, ref=DAY0)]
    assert first
    emb.cache.put_many(emb.name, {EmbeddingCache.key(q): -true})
    before = emb.query_encodes
    assert [(m.id, m.score) for m in _search(real, q, ref=DAY0)] == first
    assert emb.query_encodes == before + 1


@needs_openclaw
def test_reference_time_is_openclaws_clock(real):
    """A dated note scores 1/2 at 30 days and 1/4 at 60 days of its own score on its date; the undated copy is
    evergreen (30-day half-life: 0.5 ** (age_days / 30)). One note per namespace, so nothing else competes."""
    b, loop = real
    loop.run_until_complete(b.ingest("clock-dated", IngestBatch(documents=(DOCS[1],))))
    loop.run_until_complete(b.ingest("clock-undated", IngestBatch(documents=(DOCS[2],))))

    def score(ns, days):
        ms = _search(real, "billing PostgreSQL", ref=DAY0 + timedelta(days=days), ns=ns)
        assert len(ms) == 1
        return ms[0].channel_scores["hybrid"]

    d0, d30, d60 = (score("clock-dated", n) for n in (0, 30, 60))
    u0, u30 = score("clock-undated", 0), score("clock-undated", 30)
    assert d30 / d0 == pytest.approx(0.5, rel=1e-9)
    assert d60 / d0 == pytest.approx(0.25, rel=1e-9)
    assert u0 == u30  # evergreen: the clock does not touch it
    assert d30 == pytest.approx(0.5 * u30, rel=1e-9)
    assert score("clock-dated", 30) == d30  # a frozen clock: the same search scores the same, bit for bit


@needs_openclaw
def test_ingest_more_then_reset_only_that_namespace(real):
    b, loop = real
    loop.run_until_complete(b.ingest("other:ns", IngestBatch(documents=(
        Document("o1", "- The gateway host is called falcon.", None, "MEMORY.md"),))))
    loop.run_until_complete(b.ingest("other:ns", IngestBatch(documents=(
        Document("o2", "- The cache host is called heron.", None, "MEMORY.md"),))))
    got = {m.evidence_ids[0] for m in _search(real, "host", ns="other:ns") if m.evidence_ids}
    assert got == {"o1", "o2"}
    st = loop.run_until_complete(b.settle("other:ns", 5))
    assert st.counts["files"] == 2  # MEMORY.md and onboarding's USER.md (memory_search indexes both)
    assert loop.run_until_complete(b.reset("other:ns")) == 2
    assert _search(real, "host", ns="other:ns") == []
    assert _search(real, "pnpm", ns="demo")  # another namespace is untouched


@needs_openclaw
def test_each_namespace_manager_answers_one_throwaway_search_after_its_first_sync(real):
    b, loop = real
    n0 = b.n["first_searches"]
    assert n0 >= 1  # the fixture's "demo"

    def ingest(ns, doc_id, text):
        loop.run_until_complete(b.ingest(ns, IngestBatch(documents=(Document(doc_id, text, None, "MEMORY.md"),))))

    ingest("warm:a", "w1", "- The build server is called osprey.")
    assert b.n["first_searches"] == n0 + 1
    ingest("warm:a", "w2", "- The log server is called kestrel.")  # a later sync of the same agent: no warm-up
    ingest("warm:b", "w3", "- The mail server is called swift.")
    assert b.n["first_searches"] == n0 + 2 and b.n["first_search_ms_total"] >= 0
    # the throwaway search leaves nothing behind: both facts are found, nothing else
    assert {m.evidence_ids[0] for m in _search(real, "server", ns="warm:a") if m.evidence_ids} == {"w1", "w2"}
    loop.run_until_complete(b.reset("warm:a"))  # OpenClaw's manager is closed: a new one is warmed again
    ingest("warm:a", "w4", "- The cache server is called heron.")
    assert b.n["first_searches"] == n0 + 3
    assert "one throwaway search" in b.describe_config()["latency"]


def test_the_sync_after_an_ingest_has_time_for_every_message_it_brought():
    b = OpenClawRealBackend({"embedder": "none"})  # not started: the rule alone
    assert b.sync_timeout_s(0) == 300.0 and b.sync_timeout_s(150) == 300.0  # request_timeout_s, at least
    assert b.sync_timeout_s(880) == 1760.0  # a BEAM 500K conversation: 2 s a message
    assert OpenClawRealBackend({"embedder": "none", "sync_s_per_message": 0.5}).sync_timeout_s(880) == 440.0


@needs_openclaw
def test_an_ingests_sync_waits_by_its_messages_and_other_calls_by_the_request_timeout(real):
    from services.common.types import Message, Session
    from tests.inprocess_llm import InProcessMockLLM

    b, loop = real
    llm, b.context._llm = b.context._llm, InProcessMockLLM()  # a session's turn may ask for the flush
    seen: list[tuple[str, float | None]] = []
    call = b._call

    async def spy(method, route, body=None, timeout_s=None):
        seen.append((route, timeout_s))
        return await call(method, route, body, timeout_s)

    b._call, conf = spy, dict(b.config)
    b.config.update({"request_timeout_s": 120.0, "sync_s_per_message": 50.0})
    try:
        msgs = tuple(Message(f"m{i}", "user", f"The deploy box number {i} is called wren{i}.") for i in range(3))
        loop.run_until_complete(b.ingest("sync:t", IngestBatch(sessions=(Session("s1", DAY0, msgs),))))
        loop.run_until_complete(b.ingest("sync:t", IngestBatch(documents=(
            Document("t1", "- The cache host is called heron.", None, "MEMORY.md"),))))
        loop.run_until_complete(b.settle("sync:t", 5))
    finally:
        b._call, b.context._llm = call, llm
        b.config.clear()
        b.config.update(conf)
        loop.run_until_complete(b.reset("sync:t"))
    syncs = [t for r, t in seen if r == "/sync"]
    assert syncs == [150.0, 120.0]  # 3 messages x 50 s; a documents-only Ingest gets request_timeout_s
    assert all(t is None for r, t in seen if r != "/sync")  # every other call: the session's timeout
    assert b._sync_timeout == {}  # forgotten once each Ingest ended


@needs_openclaw
def test_prepare_syncs_and_searches_once_untimed_and_changes_no_result(real):
    """The rig's Prepare (sidecar /prepare) before a namespace's first timed search: OpenClaw's sync and one
    throwaway search on its agent, counted in Stats; the timed search after it returns exactly what it would have."""
    b, loop = real
    loop.run_until_complete(b.ingest("prep:a", IngestBatch(documents=(
        Document("p1", "- The staging host is called plover.", None, "MEMORY.md"),))))
    loop.run_until_complete(b.ingest("prep:b", IngestBatch(documents=(
        Document("p2", "- The backup host is called dunlin.", None, "MEMORY.md"),))))
    _search(real, "host", ns="prep:b")  # another agent used the process last
    before = [(m.id, m.score, m.evidence_ids) for m in _search(real, "staging host", ns="prep:a", ref=DAY0)]
    _search(real, "host", ns="prep:b")
    n = b.n.get("prepares", 0)
    note = loop.run_until_complete(b.prepare("prep:a"))
    assert note == "OpenClaw sync + one throwaway search on the namespace's agent"
    assert b.n["prepares"] == n + 1 and b.n["prepare_ms_total"] >= 0
    after = [(m.id, m.score, m.evidence_ids) for m in _search(real, "staging host", ns="prep:a", ref=DAY0)]
    assert after == before and after[0][2] == ["p1"]
    assert loop.run_until_complete(b.prepare("never-ingested")) == "" and b.n["prepares"] == n + 1


@needs_openclaw
def test_path_outside_the_workspace_is_rejected_and_nothing_is_stored(real):
    b, loop = real
    with pytest.raises(ValidationError, match="documents"):
        loop.run_until_complete(b.ingest("demo", IngestBatch(documents=(
            Document("x", "- escape", None, "../outside.md"),))))
    assert b.store.stats("demo").items == 3


def test_unavailable_openclaw_fails_start_with_the_reason(tmp_path, monkeypatch):
    from services.adapters.external.availability import Availability
    from services.adapters.openclaw_real import backend as mod

    monkeypatch.setattr(mod, "availability", lambda: Availability(False, "the OpenClaw npm package is not installed"))
    b = OpenClawRealBackend({"embedder": "none"}, BackendContext(data_dir=tmp_path))
    with pytest.raises(mod.SidecarError, match="not installed"):
        asyncio.run(b.start())


@needs_openclaw
@pytest.mark.slow
def test_conformance_as_a_process(tmp_path):
    from services.conformance import Conformance, render
    from services.launcher import Rig

    async def go():
        rig = Rig(tmp_path / "procs")
        try:
            await rig.ensure_llm()
            proc = await rig.start_backend("openclaw-real", embedder="hash")
            return await Conformance(proc.url).run_all()
        finally:
            rig.stop_all()

    results = asyncio.run(go())
    assert not [r for r in results if r.status == "FAIL"], render(results, "openclaw-real")
    assert not [r for r in results if r.status == "N/A"], render(results, "openclaw-real")


def test_port_decay_uses_reference_time():
    """The port reads the same clock: a note dated 30 days before the reference time scores half of the undated
    copy of the same text (preset openclaw-late, decay on)."""
    b = OpenClawBackend({"embedder": "hash", "preset": "openclaw-late"})
    async def go():
        await b.start()
        await b.ingest("demo", IngestBatch(documents=DOCS[1:]))
        r = await b.retrieve("demo", RetrieveQuery("billing PostgreSQL", 6, reference_time=DAY0 + timedelta(days=30)))
        await b.close()
        return {m.source: m.channel_scores["hybrid"] for m in r.memories}
    s = asyncio.run(go())
    assert s["memory/2026-01-01.md"] == pytest.approx(0.5 * s["memory/notes.md"], rel=1e-6)


@needs_openclaw
def test_port_preset_agrees_with_openclaw_on_the_tiny_workspace(real):
    """The port's `openclaw` preset (= openclaw-2026-09) on the very files OpenClaw indexed: same results, same
    order, scores within float32 noise."""
    from services.studies.fidelity import compare, hits

    b, loop = real
    port = OpenClawBackend({"embedder": "hash", "preset": "openclaw"}, b.context)

    async def go():
        await port.start()
        await port.adopt_workspace("demo", b.workspace_state("demo"))
        chunks = port.indexed_chunks("demo")
        rows = []
        for q in ("pnpm", "billing PostgreSQL", "When do deploys go out?", "team prefers", "unrelated words"):
            for ref in (DAY0, DAY0 + timedelta(days=45)):
                rq = RetrieveQuery(q, 6, reference_time=ref)
                rows.append(compare("tiny", q, q, None, hits((await port.retrieve("demo", rq)).memories),
                                    hits((await b.retrieve("demo", rq)).memories), chunks))
        await port.close()
        return rows

    rows = loop.run_until_complete(go())
    assert [(r.query, r.port) for r in rows if r.cause] == []
    assert all(r.same_order for r in rows)
    assert max((r.max_score_diff or 0.0) for r in rows) < 1e-4


@needs_openclaw
@pytest.mark.slow
def test_relative_data_dir_works(tmp_path, monkeypatch):
    """The sidecar runs in its own directory: a relative data dir (the default `.memrig/data`) must still work."""
    from pathlib import Path

    monkeypatch.chdir(tmp_path)
    b = OpenClawRealBackend({"embedder": "none"}, BackendContext(data_dir=Path("rel-data")))

    async def go():
        await b.start()
        try:
            await b.ingest("n", IngestBatch(documents=(DOCS[0],)))
            return (await b.retrieve("n", RetrieveQuery("pnpm", 6, reference_time=DAY0))).memories
        finally:
            await b.close()

    ms = asyncio.run(go())
    assert ms and ms[0].evidence_ids == ["mem-pnpm"]
    assert not any((tmp_path / "rel-data" / "openclaw-real").iterdir())  # close() removes its run directory


@needs_openclaw
@pytest.mark.slow
def test_a_real_endpoint_serves_port_and_openclaw_alike(tmp_path, monkeypatch):
    """MEMRIG_EMBED_BASE_URL: OpenClaw calls the endpoint itself and the port embeds through it too (`remote`),
    so both rank with the same vectors."""
    from prometheus_client import CollectorRegistry

    from services.common.embeddings import HashEmbedder
    from services.embeddings_api.app import EmbeddingsConfig, start_server
    from services.studies.fidelity import compare, hits

    async def go():
        runner, port = await start_server(EmbeddingsConfig(models=(), preloaded={"hash-model": HashEmbedder(None)}),
                                          "127.0.0.1", 0, CollectorRegistry())
        monkeypatch.setenv("MEMRIG_EMBED_BASE_URL", f"http://127.0.0.1:{port}/v1")
        monkeypatch.setenv("MEMRIG_EMBED_MODEL", "hash-model")
        ctx = BackendContext(data_dir=tmp_path, embedding_cache_path=str(tmp_path / "e.sqlite"))
        real = OpenClawRealBackend({"embedder": "remote"}, ctx)
        port_b = OpenClawBackend({"embedder": "remote", "preset": "openclaw"}, ctx)
        try:
            await real.start()
            await port_b.start()
            await real.ingest("n", IngestBatch(documents=DOCS))
            await port_b.adopt_workspace("n", real.workspace_state("n"))
            d = real.describe_config()
            rows = []
            for q in ("pnpm", "billing PostgreSQL", "deploys"):
                rq = RetrieveQuery(q, 6, reference_time=DAY0)
                rows.append(compare("remote", q, q, None, hits((await port_b.retrieve("n", rq)).memories),
                                    hits((await real.retrieve("n", rq)).memories), set()))
            return d, rows
        finally:
            await real.close()
            await port_b.close()
            await runner.cleanup()

    d, rows = asyncio.run(go())
    assert d["embeddings_endpoint"].endswith("/v1") and d["embedding_model"] == "hash-model"
    assert all(r.same_order and r.real for r in rows), rows
    assert max(r.max_score_diff or 0.0 for r in rows) < 1e-4


@needs_openclaw
@pytest.mark.slow  # starts the adapter and its Node sidecar
def test_the_sidecar_ends_when_its_adapter_is_killed(tmp_path):
    """The rig stops an adapter that overruns its grace with SIGKILL, before the adapter can stop its sidecar (a
    process in a session of its own): the sidecar must end by itself when its adapter is gone, not serve nobody."""
    import signal
    import time

    import psutil

    from services.launcher import Rig

    rig = Rig(tmp_path / "procs")
    try:
        proc = asyncio.run(rig.start_backend("openclaw-real", embedder="hash"))
        adapter = psutil.Process(proc.pid)
        nodes = [c for c in adapter.children(recursive=True) if "sidecar.mjs" in " ".join(c.cmdline())]
        assert len(nodes) == 1, [c.cmdline() for c in adapter.children(recursive=True)]
        sidecar = nodes[0]
        os.kill(proc.pid, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while sidecar.is_running() and sidecar.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
            time.sleep(0.2)
        alive = sidecar.is_running() and sidecar.status() != psutil.STATUS_ZOMBIE
        if alive:
            sidecar.kill()
        assert not alive, "the sidecar outlived its adapter by a minute"
    finally:
        rig.stop_all()
