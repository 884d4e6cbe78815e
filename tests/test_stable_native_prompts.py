"""A rerun sends the model the same prompts: openclaw-real's session id (which OpenClaw's session-memory hook writes
into memory/*.md, and so into the answerer's context) is derived from the agent and the session's first message
time, not drawn at random, so two installs fed the same sessions hold byte-identical memory files. Needs Node and
the pinned OpenClaw (`make setup-openclaw`)."""

from __future__ import annotations

import asyncio
import hashlib

import pytest

from services.adapters.base import BackendContext
from services.adapters.openclaw.lifecycle import agent_id
from services.adapters.openclaw_real.backend import OpenClawRealBackend
from services.adapters.openclaw_real.node import availability
from services.common.types import IngestBatch
from tests.fixtures_openclaw import S1, S2, ms
from tests.inprocess_llm import InProcessMockLLM

AVAIL = availability()
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not AVAIL.ok, reason=f"[requires:openclaw] openclaw-real unavailable: {AVAIL.reason}")]


def expected_session_id(agent: str, t0_ms: int) -> str:
    h = hashlib.sha256(f"memrig-session\0{agent}\0{t0_ms}".encode()).hexdigest()
    variant = format((int(h[16], 16) & 3) | 8, "x")
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{variant}{h[17:20]}-{h[20:32]}"


async def _install(tmp_path, name):
    d = tmp_path / name
    b = OpenClawRealBackend({"embedder": "hash", "profile": "default"},
                            BackendContext(data_dir=d, embedding_cache_path=str(d / "e.sqlite"), _llm=InProcessMockLLM()))
    await b.start()
    try:
        await b.ingest("demo", IngestBatch(sessions=(S1, S2)))
        t = await b._call("POST", "/transcript", {"agent": agent_id("demo")})
        return t["sessionId"], b.workspace("demo")
    finally:
        await b.close()


async def _installs(tmp_path, *names):
    # two separate installs (own data dir, own sidecar) side by side: each sidecar is one Node process, the host has
    # two cores; every one finishes (and closes) before the first error is raised
    res = await asyncio.gather(*(_install(tmp_path, n) for n in names), return_exceptions=True)
    for r in res:
        if isinstance(r, BaseException):
            raise r
    return res


def test_two_installs_of_the_same_sessions_hold_the_same_files(tmp_path):
    (sid_a, files_a), (sid_b, files_b) = asyncio.run(_installs(tmp_path, "a", "b"))
    assert sid_a == sid_b == expected_session_id(agent_id("demo"), ms(S1.messages[0].ts))
    assert files_a == files_b and files_a  # the hook files, session id included, byte for byte
    assert all(sid_a in text for path, text in files_a.items() if path.startswith("memory/"))
