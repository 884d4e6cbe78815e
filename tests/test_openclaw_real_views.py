"""One replay, two profiles: `default` and `sessions` write the same state (lifecycle.same_writes) and OpenClaw
indexes the session transcripts in both, so the rig answers the `sessions` backend's probes from the `default`
backend's state with OpenClaw's own per-search source filter (RetrieveQuery.view, sidecar /search `sources`).
That is only allowed because the lists are the same to the last bit: each view's hits (path, lines, score, text,
evidence, spans) and formatted context equal a backend of that profile's own, on a real LoCoMo conversation.
Needs Node and the pinned OpenClaw (`make setup-openclaw`) and the shared LoCoMo data."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from services.adapters.base import BackendContext
from services.adapters.host import BackendHost
from services.adapters.openclaw import lifecycle as L
from services.adapters.openclaw_real.backend import OpenClawRealBackend
from services.adapters.openclaw_real.node import availability
from services.common.types import IngestBatch, RetrieveQuery, ValidationError
from services.coordinator.suites.common import default_data_dir
from services.coordinator.suites.locomo import LocomoSuite
from tests.inprocess_llm import InProcessMockLLM

AVAIL = availability()
DATA = default_data_dir()
HAVE_LOCOMO = (DATA / "locomo" / "locomo10_dev.json").exists()
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not AVAIL.ok, reason=f"[requires:openclaw] openclaw-real unavailable: {AVAIL.reason}"),
              pytest.mark.skipif(not HAVE_LOCOMO, reason=f"[requires:data] LoCoMo not found under {DATA}")]
SESSIONS = 8  # the first sessions of one conversation: several hook files, a flush, transcript hits
QUESTIONS = 12


def test_the_profiles_that_write_alike_are_each_others_views():
    assert L.same_writes(L.PROFILES["default"], L.PROFILES["sessions"])
    assert not L.same_writes(L.PROFILES["default"], L.PROFILES["flush-every-session"])
    ctx = BackendContext(embedder_name="hash")
    d = OpenClawRealBackend({"embedder": "hash", "profile": "default"}, ctx)
    s = OpenClawRealBackend({"embedder": "hash", "profile": "sessions"}, ctx)
    f = OpenClawRealBackend({"embedder": "hash", "profile": "flush-every-session"}, ctx)
    assert (d.views(), s.views(), f.views()) == (("sessions",), ("default",), ())
    assert d.replay_key() == s.replay_key() != f.replay_key()
    # any other setting that changes what is written or searched keeps the replays apart
    assert OpenClawRealBackend({"embedder": "hash", "profile": "sessions", "min_score": 0.2}, ctx).replay_key() \
        != d.replay_key()
    caps = dict(d.capabilities)
    assert caps["replay"] == d.replay_key() and caps["profile"] == "default"


def _conversation():
    suite = LocomoSuite({"data_dir": str(DATA), "conversations": 1, "questions": QUESTIONS, "answer": False}, seed=0)
    data = suite.load()
    ns = sorted(data.corpora)[0]
    batch = data.corpora[ns]
    probes = [p for p in data.probes if p.namespace == ns][:QUESTIONS]
    return IngestBatch(sessions=tuple(batch.sessions[:SESSIONS])), probes


def _shape(res):
    return ([(m.id, m.text, m.score, m.source, m.kind, m.created_at, tuple(m.evidence_ids),
              tuple(m.evidence_spans), tuple(sorted(m.channel_scores.items())), tuple(sorted(m.attributes.items())))
             for m in res.memories], res.formatted_context, tuple(res.context_spans))


def test_a_view_returns_what_a_backend_of_that_profile_returns(tmp_path):
    batch, probes = _conversation()
    assert len(batch.sessions) == SESSIONS and len(probes) == QUESTIONS

    async def replay(h):
        await h.ingest("conv", batch)
        await h.settle("conv", 60)
        await h.prepare("conv")

    async def both(make):
        # the two sidecars start and replay side by side (each is one Node process, this host has two cores); every
        # one finishes before the first error is raised, so none is left starting while the others close
        for r in await asyncio.gather(*(make(h) for h in hosts.values()), return_exceptions=True):
            if isinstance(r, BaseException):
                raise r

    hosts = {}

    async def main():
        for prof in ("default", "sessions"):
            d = tmp_path / prof
            b = OpenClawRealBackend({"embedder": "hash", "profile": prof},
                                    BackendContext(data_dir=d, embedding_cache_path=str(d / "e.sqlite"),
                                                   _llm=InProcessMockLLM()))
            hosts[prof] = BackendHost(b)
        try:
            await both(lambda h: h.start())
            await both(replay)
            transcript_hits = 0
            for p in probes:
                q = RetrieveQuery(p.question, 10, reference_time=p.reference_time)
                own = {prof: await h.retrieve("conv", q) for prof, h in hosts.items()}
                as_sessions = await hosts["default"].retrieve("conv", replace(q, view="sessions"))
                as_default = await hosts["sessions"].retrieve("conv", replace(q, view="default"))
                assert _shape(as_sessions) == _shape(own["sessions"]), p.question
                assert _shape(as_default) == _shape(own["default"]), p.question
                transcript_hits += sum(m.source.startswith("sessions/") for m in own["sessions"].memories)
            # the view is not vacuous: the sessions search found transcript hits the default one cannot
            assert transcript_hits > 0
            with pytest.raises(ValidationError, match="view.*no search view 'flush-every-session'"):
                await hosts["default"].retrieve("conv", RetrieveQuery("x", 3, view="flush-every-session"))
        finally:
            for h in hosts.values():
                await h.close()

    asyncio.run(main())
