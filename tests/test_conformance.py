"""`memrig conformance` passes against the shipped adapters and fails, readably, against a broken one."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest

from memrig.v1 import memory_backend_pb2 as pb
from memrig.v1 import memory_backend_pb2_grpc as pb_grpc
from services.adapters.compacted.backend import CompactedBackend
from services.adapters.full_context.backend import FullContextBackend
from services.adapters.none.backend import NoMemoryBackend
from services.common.grpc_util import graceful_stop, start_server
from services.conformance import Conformance, render
from services.launcher import Rig
from tests.broken_backend import BrokenServicer
from tests.fixtures_conformance import conformance_in_process
from tests.inprocess_llm import CannedLLM


@pytest.mark.parametrize("factory", [FullContextBackend, NoMemoryBackend])
async def test_control_backends_pass(factory):
    results = await conformance_in_process(factory())
    failed = [r for r in results if r.status == "FAIL"]
    assert not failed, render(results, "in-process")
    assert sum(r.status == "PASS" for r in results) >= 12


async def test_none_marks_recall_checks_not_applicable():
    results = await conformance_in_process(NoMemoryBackend())
    na = {r.name for r in results if r.status == "N/A"}
    assert "ingest → settle → retrieve finds an exact fact" in na


async def test_views_are_refused_unless_listed_and_answered_when_listed():
    class WithView(FullContextBackend):
        def views(self):
            return ("alt",)

    plain = {r.name: r for r in await conformance_in_process(FullContextBackend())}
    listed = {r.name: r for r in await conformance_in_process(WithView())}
    refused = "a view not in Describe's \"views\" → INVALID_ARGUMENT naming 'view'"
    for by in (plain, listed):
        assert by[refused].status == "PASS" and "memrig-conformance-unlisted-view" in by[refused].detail
    answered = "every view Describe lists is answered"
    assert (plain[answered].status, plain[answered].detail) == ("PASS", "no views listed")
    assert (listed[answered].status, listed[answered].detail) == ("PASS", "answered: alt")


async def test_compacted_passes_with_an_llm():
    b = CompactedBackend()
    b.context._llm = CannedLLM()
    results = await conformance_in_process(b)
    assert not [r for r in results if r.status == "FAIL"], render(results, "compacted")


async def test_broken_backend_fails_with_a_readable_list():
    servicer = BrokenServicer()
    server, health, port = await start_server(
        lambda s: pb_grpc.add_MemoryBackendServiceServicer_to_server(servicer, s),
        [pb.DESCRIPTOR.services_by_name["MemoryBackendService"].full_name])
    try:
        results = await Conformance(f"127.0.0.1:{port}").run_all()
    finally:
        await graceful_stop(server, health, 0.5)
    by = {r.name: r for r in results}
    text = render(results, "broken")
    for name in ("top_k respected and scores non-increasing", "Reset isolates namespaces",
                 "unknown namespace returns empty, not an error", "empty query → INVALID_ARGUMENT naming 'query'",
                 "a rejected batch leaves nothing half ingested", "evidence ids carried back",
                 "evidence spans fit their texts (recall at a context budget)",
                 "a view not in Describe's \"views\" → INVALID_ARGUMENT naming 'view'"):
        assert by[name].status == "FAIL", text
    assert "evidence_spans[0].end" in by["evidence spans fit their texts (recall at a context budget)"].detail, text
    assert "FAIL  top_k respected" in text
    assert text.strip().splitlines()[-1].startswith("Result: FAIL")


@pytest.mark.slow  # starts a server process
def test_cli_conformance_against_an_adapter_process(tmp_path):
    """End to end as a user runs it: an adapter process, then `memrig conformance`, exit code 0."""
    async def start():
        rig = Rig(tmp_path / "procs")
        return rig, await rig.start("full-context", "services.adapters.full_context", ["--port", "0"],
                                    "127.0.0.1:{grpc}")

    rig, proc = asyncio.run(start())
    try:
        r = subprocess.run([sys.executable, "-m", "services.cli", "conformance", "--target", proc.url],
                           capture_output=True, text=True, timeout=180, env=os.environ.copy())
    finally:
        rig.stop_all()
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Result: PASS" in r.stdout
    assert not proc.alive()


@pytest.mark.slow
@pytest.mark.parametrize("backend, embedder", [
    ("openclaw", "minilm"), ("openclaw-2026-02", "minilm"), ("cortex", None), ("cortex-fast", None),
    # the opt-in reference systems
    ("quaid", "hash"), ("mem0", "hash"), ("mem0-raw", "hash"), ("memory-hook", "hash"),
    ("memory-hook-no-rerank", "hash"),
])
def test_shipped_adapters_pass_as_processes(tmp_path, backend, embedder):
    """Every shipped adapter, started the way `memrig up` starts it (cortex: adapter → fault-proxy → cortex-mock)."""
    async def go():
        rig = Rig(tmp_path / "procs")
        try:
            await rig.ensure_llm()
            # Quaid's installed threshold (cosine 0.6) holds back every hit of the hash test embedder: the contract
            # is checked at 0.2 (tests/test_adapter_quaid.py holds the 0.6 default and what it filters)
            config = {"min_similarity": 0.2} if backend == "quaid" else None
            proc = await rig.start_backend(backend, config=config, embedder=embedder)
            return await Conformance(proc.url).run_all()
        finally:
            rig.stop_all()

    results = asyncio.run(go())
    assert not [r for r in results if r.status == "FAIL"], render(results, backend)
    assert not [r for r in results if r.status == "N/A"], render(results, backend)


@pytest.mark.slow
@pytest.mark.parametrize("backend, requirement", [("quaid-real", "quaid"), ("octybot-real", "octybot")])
def test_real_peers_pass_as_processes(tmp_path, backend, requirement):
    """Quaid and Octybot themselves meet the contract at their own settings (Quaid's installed 0.6 threshold,
    Octybot's hooks), with the embedder the suites use."""
    if backend == "quaid-real":
        from services.adapters.quaid_real.source import availability
    else:
        from services.adapters.octybot_real.runtime import availability
    a = availability()
    if not a.ok:
        pytest.skip(f"[requires:{requirement}] {backend} unavailable: {a.reason}")

    async def go():
        rig = Rig(tmp_path / "procs")
        try:
            await rig.ensure_llm()
            proc = await rig.start_backend(backend, embedder="minilm")
            return await Conformance(proc.url).run_all()
        finally:
            rig.stop_all()

    results = asyncio.run(go())
    assert not [r for r in results if r.status in ("FAIL", "N/A")], render(results, backend)
