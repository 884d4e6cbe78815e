"""The cortex adapter → fault proxy → cortex-mock (the real mock, in-process, hash embedder), and the same
chain started by the launcher as processes (`Rig.start_backend("cortex")`)."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import pytest

from services.adapters.cortex.backend import CortexBackend
from services.common.types import Document, IngestBatch, Message, RetrieveQuery, Session
from services.cortex_mock.app import make_app
from services.cortex_mock.config import MockConfig
from services.fault_proxy.admin_client import FaultProxyAdmin
from tests.fixtures_proxy import running_proxy, serve_app

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


def sessions() -> tuple[Session, ...]:
    s1 = Session("s1", T0, (
        Message("s1:1", "user", "I switched the whole team to tabs for indentation in the billing service.",
                T0),
        Message("s1:2", "assistant", "Noted: the billing service uses tabs for indentation now.",
                T0 + timedelta(minutes=1)),
    ))
    s2 = Session("s2", T0 + timedelta(days=2), (
        Message("s2:1", "user", "Our deploy target for the billing service is Kubernetes on AWS in eu-west-1.",
                T0 + timedelta(days=2)),
        Message("s2:2", "assistant", "Got it, billing deploys to Kubernetes in eu-west-1.",
                T0 + timedelta(days=2, minutes=1)),
    ))
    return (s1, s2)


@pytest.fixture
async def chain(tmp_path):
    app = make_app(MockConfig(data_dir=str(tmp_path / "mock"), embedder="hash", workers=1))
    runner, port = await serve_app(app)
    made = []
    async with running_proxy(f"http://127.0.0.1:{port}", seed=3) as p:
        admin = FaultProxyAdmin(p.url)

        def make(**cfg):
            b = CortexBackend({"base_url": p.url, "settle_poll_ms": 20, **cfg})
            made.append(b)
            return b

        yield p, admin, make
        for b in made:
            await b.close()
        await admin.close()
    await runner.cleanup()


async def test_ingest_settle_retrieve_evidence_through_proxy(chain):
    p, admin, make = chain
    b = make(mode="full", debug=True)
    await b.ingest("conv-a", IngestBatch(sessions(), (Document("doc1", "The billing service owner is Priya.",
                                                                evidence_ids=("D1:3",)),)))
    st = await b.settle("conv-a", 60)
    assert st.settled and st.items_pending == 0 and st.items_indexed == 5 and st.counts["total_memories"] > 0
    r = await b.retrieve("conv-a", RetrieveQuery("Where does the billing service deploy?", 5, "full", T0 + timedelta(days=3)))
    assert not r.degraded and r.memories
    ev = {e for m in r.memories for e in m.evidence_ids}
    assert ev <= {"s1:1", "s1:2", "s2:1", "s2:2", "D1:3"} and ev & {"s2:1", "s2:2"}
    assert r.formatted_context.startswith("<cortex_memories>\n[NOTE: The following are recalled memories")
    assert any(m.channel_scores for m in r.memories)
    # namespaces are tenants: another namespace sees nothing
    other = await b.retrieve("conv-b", RetrieveQuery("Where does the billing service deploy?", 5))
    assert other.memories == [] and not other.degraded
    # reset forgets what this namespace sent
    assert await b.reset("conv-a") == 5
    after = await b.retrieve("conv-a", RetrieveQuery("Where does the billing service deploy?", 5))
    assert after.memories == []


async def test_mock_down_gate_and_recovery(chain):
    p, admin, make = chain
    b = make(mode="full")
    await b.ingest("ns", IngestBatch(sessions()))
    assert (await b.settle("ns", 60)).settled
    await admin.add_fault("down", "http_error", attributes={"status": 503}, match={"path_regex": "^/v1/retrieve$"})
    seen = p.engine.requests_seen
    for _ in range(3):
        assert (await b.retrieve("ns", RetrieveQuery("billing deploy target?", 5))).degraded
    assert p.engine.requests_seen == seen + 6  # full + fast retry each time
    for _ in range(5):
        assert (await b.retrieve("ns", RetrieveQuery("billing deploy target?", 5))).degraded_reason.startswith(
            "cold_start_gate")
    assert p.engine.requests_seen == seen + 6
    await admin.remove("down")
    b.gate.open_until = 0  # cooldown over (the clock-driven version is in test_cortex_adapter_proxy.py)
    r = await b.retrieve("ns", RetrieveQuery("billing deploy target?", 5))
    assert not r.degraded and r.memories


async def test_captures_during_outage_land_after_it(chain):
    p, admin, make = chain
    b = make()
    await admin.add_fault("down", "outage", attributes={"duration_s": 3600}, match={"path_regex": "^/v1/jobs"})
    await b.ingest("ns", IngestBatch(sessions()))
    st = await b.settle("ns", 0.2)
    assert not st.settled and st.items_pending == 4
    await admin.remove("down")
    for t in b.queue.tasks():
        t.next_attempt_at = 0  # skip the backoff wait (the clock-driven version is in the proxy tests)
    st = await b.settle("ns", 60)
    assert st.settled and st.items_indexed == 4 and st.items_pending == 0


async def test_a_refused_capture_is_dropped_after_its_five_attempts_without_the_backoff_wait(chain):
    """Sent whole (`capture_message_max_chars=0`, as v0.3's plugin sent it), a session holding a message over the
    API's 10,000 characters is refused (422) on every attempt. The plugin queues it, tries it five times and drops it;
    settle sends those attempts at once instead of waiting 2+4+8+16 s. The other session is stored, and what was lost
    is counted."""
    p, admin, make = chain
    b = make(mode="full", capture_message_max_chars=0)
    long = Session("long", T0, (Message("long:1", "user", "x" * 10_001, T0),
                                Message("long:2", "assistant", "That is a long paste.", T0)))
    await b.ingest("ns", IngestBatch((long, sessions()[1])))
    st = await b.settle("ns", 60)
    assert st.settled and st.items_indexed == 2 and st.items_pending == 0
    assert st.counts["queue_dropped_items"] == 2 and b.queue.stats["dropped_retries"] == 1
    # the capture's own attempt, then the queue's five (due at once, then after 2, 4, 8 and 16 s: all four waits skipped)
    assert b.stats["ingest_submit_failures"] == 1 and b.queue.stats["failed_attempts"] == 5
    assert b.queue.stats["fast_forwarded"] == 4


async def test_a_message_over_the_api_limit_is_shortened_to_it_and_stored(chain):
    """By default a message over 10,000 characters is shortened to 10,000 (the plugin's 2.22.1 compresses it to
    that size) and its capture is accepted: all four messages are stored, nothing is queued or dropped."""
    p, admin, make = chain
    b = make(mode="full")
    long = Session("long", T0, (Message("long:1", "user", "The deploy log follows. " + "x" * 10_001, T0),
                                Message("long:2", "assistant", "That is a long paste.", T0)))
    await b.ingest("ns", IngestBatch((long, sessions()[1])))
    st = await b.settle("ns", 60)
    assert st.settled and st.items_indexed == 4 and st.items_pending == 0
    assert st.counts["queue_dropped_items"] == 0 and b.stats["ingest_submit_failures"] == 0
    assert b.stats["capture_messages_shortened"] == 1


async def test_a_session_over_the_api_transcript_limit_is_stored_window_by_window(chain):
    """A 60-message session of 60,390 characters (over the API's 50,000) was one refused capture and stored
    nothing; sent in the plugin's windows of 20 messages, the mock stores every message."""
    p, admin, make = chain
    b = make(mode="full")
    msgs = tuple(Message(f"big:{i}", "user" if i % 2 == 0 else "assistant",
                         f"Step {i}: the billing service build {i} passed on runner r{i}. " + "z" * 940,
                         T0 + timedelta(minutes=i)) for i in range(60))
    assert sum(len(m.role) + len(m.content) + 4 for m in msgs) > 50_000
    await b.ingest("ns", IngestBatch((Session("big", T0, msgs),)))
    st = await b.settle("ns", 60)
    assert st.settled and st.items_indexed == 60 and st.items_pending == 0 and st.counts["total_memories"] > 0
    assert b.stats["ingest_submit_failures"] == 0 and b.stats["capture_windows"] == 3
    assert await b.reset("ns") == 60  # the windows share the session's id: one forget removes them all
    r = await b.retrieve("ns", RetrieveQuery("Which runner did build 7 pass on?", 5))
    assert r.memories == []


def test_only_a_refusal_is_retried_without_waiting():
    from services.adapters.cortex.backend import refused
    from services.adapters.cortex.client import CortexHTTPError, CortexTimeout

    assert [refused(CortexHTTPError("ingest", s, "")) for s in (400, 404, 413, 422, 408, 429, 500, 503)] == [
        True, True, True, True, False, False, False, False]
    assert not refused(CortexTimeout("ingest", 10)) and not refused(None) and not refused(ValueError("x"))


@pytest.mark.slow  # starts a server process
async def test_launcher_starts_mock_proxy_and_backend(tmp_path):
    """`Rig.start_backend("cortex")`: cortex-mock, then the fault proxy in front of it, then the backend."""
    from services.adapters.client import GrpcBackendClient
    from services.launcher import Rig

    env = dict(os.environ, MEMRIG_EMBEDDER="hash")
    async with Rig(tmp_path / "run", env=env) as rig:
        proc = await rig.start_backend("cortex")
        proxy_url = rig.address_of("fault-proxy")
        assert proxy_url and rig.address_of("cortex-mock")
        client = GrpcBackendClient(proc.url)
        try:
            d = await client.describe()
            assert d["config"]["base_url"] == proxy_url and d["config"]["mode"] == "full"
            await client.ingest("ns", IngestBatch(sessions()))
            assert (await client.settle("ns", 60)).settled
            r, _latency_ns = await client.retrieve("ns", RetrieveQuery("billing deploy target?", 5))
            assert r.memories and not r.degraded
            async with FaultProxyAdmin(proxy_url) as admin:
                log = await admin.log()
                assert any(e["path"] == "/v1/retrieve" for e in log)
        finally:
            await client.close()
