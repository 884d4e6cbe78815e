"""`http` + the cortex-mock mapping against the real cortex-mock (in-process, hash embedder): the same results
as the `cortex` adapter on the same data, and `memrig conformance` passes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.adapters.cortex.backend import CortexBackend
from services.adapters.http.backend import HttpBackend
from services.common.types import Document, IngestBatch, Message, RetrieveQuery, Session
from services.cortex_mock.app import make_app
from services.cortex_mock.config import MockConfig
from tests.fixtures_conformance import conformance_in_process
from tests.fixtures_proxy import serve_app

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


def batch() -> IngestBatch:
    s1 = Session("s1", T0, (
        Message("s1:1", "user", "I switched the whole team to tabs for indentation in the billing service.", T0),
        Message("s1:2", "assistant", "Noted: the billing service uses tabs for indentation now.",
                T0 + timedelta(minutes=1)),
    ))
    s2 = Session("s2", T0 + timedelta(days=2), (
        Message("s2:1", "user", "Our deploy target for the billing service is Kubernetes on AWS in eu-west-1."),
        Message("s2:2", "assistant", "Got it, billing deploys to Kubernetes in eu-west-1."),
        Message("s2:3", "user", "Priya owns the on-call rotation for billing since March."),
    ))
    return IngestBatch((s1, s2), (Document("doc1", "The payments gateway times out after 30 seconds.",
                                           evidence_ids=("D1:3",)),))


QUERIES = ["Where does the billing service deploy?", "What indentation does billing use?",
           "Who owns the on-call rotation?", "payments gateway timeout"]


@pytest.fixture
async def mock_url(tmp_path):
    app = make_app(MockConfig(data_dir=str(tmp_path / "mock"), embedder="hash", workers=1))
    runner, port = await serve_app(app)
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def test_same_results_as_the_cortex_adapter(mock_url):
    cortex = CortexBackend({"base_url": mock_url, "mode": "query", "settle_poll_ms": 20})
    http = HttpBackend({"mapping": "cortex-mock", "base_url": mock_url})
    http.mapping.settle.poll_ms = 20
    try:
        await cortex.ingest("via-cortex", batch())
        await http.ingest("via-http", batch())
        sc, sh = await cortex.settle("via-cortex", 60), await http.settle("via-http", 60)
        assert sc.settled and sh.settled and sc.items_indexed == sh.items_indexed == 6
        compared = 0
        for q in QUERIES:
            for mode in ("fast", "full"):
                rq = RetrieveQuery(q, 5, mode, T0 + timedelta(days=3))
                rc, rh = await cortex.retrieve("via-cortex", rq), await http.retrieve("via-http", rq)
                assert not rc.degraded and not rh.degraded
                assert rc.memories, q
                assert [(m.text, round(m.score, 9), m.evidence_ids) for m in rh.memories] == \
                       [(m.text, round(m.score, 9), m.evidence_ids) for m in rc.memories], (q, mode)
                # created_at is when the mock stored the fact (its clock at each ingest, not the message time): the two ingests
                # may straddle a second on a loaded host, so the same memory's times agree within a few seconds
                for a, b in zip(rh.memories, rc.memories, strict=True):
                    assert abs((a.created_at - b.created_at).total_seconds()) < 5, (q, mode, a.created_at, b.created_at)
                compared += len(rc.memories)
        assert compared >= 8
        # reset forgets the same sessions
        assert await http.reset("via-http") == await cortex.reset("via-cortex") == 6
        assert (await http.retrieve("via-http", RetrieveQuery(QUERIES[0], 5))).memories == []
    finally:
        await cortex.close()
        await http.close()


async def test_conformance_passes_http_against_cortex_mock(mock_url):
    from services.conformance import render

    b = HttpBackend({"mapping": "cortex-mock", "base_url": mock_url})
    results = await conformance_in_process(b)
    assert not [r for r in results if r.status == "FAIL"], render(results, "http:cortex-mock")
    assert sum(r.status == "PASS" for r in results) >= 12
