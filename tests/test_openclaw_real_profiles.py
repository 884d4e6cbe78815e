"""openclaw-real's profiles of a real install on a two-session fixture: the files, transcript and hits OpenClaw's own
code leaves (its session-memory hook handler, its transcript store, buildMemoryFlushPlan), checked by hand and held
equal to the port's re-implementation (lifecycle.py). Needs Node and the pinned OpenClaw (`make setup-openclaw`)."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import pytest

from services.adapters.base import BackendContext
from services.adapters.openclaw import lifecycle as L
from services.adapters.openclaw.backend import OpenClawBackend
from services.adapters.openclaw.lifecycle import agent_id
from services.adapters.openclaw_real.backend import OpenClawRealBackend, transcript_evidence
from services.adapters.openclaw_real.node import availability
from services.common.types import IngestBatch, RetrieveQuery
from tests.fixtures_openclaw import S1, S2, T0, ms
from tests.inprocess_llm import InProcessMockLLM

AVAIL = availability()
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not AVAIL.ok, reason=f"[requires:openclaw] openclaw-real unavailable: {AVAIL.reason}")]
ASKED = T0 + timedelta(days=3)
MSG_LINES = {2: "s1-m0", 3: "s1-m1", 4: "s1-m2", 6: "s2-m0", 7: "s2-m1"}  # line 1 header, 5 the /new reset


# Every install this module reads: its settings and the batches it ingests into namespace "demo" (a batch is one
# Ingest call). They start together on one event loop, two at a time (each is one Node process starting OpenClaw,
# this host has two cores), when the module's first test asks for one; each is its own sidecar and data dir.
INSTALLS = {
    "default": ({"profile": "default"}, [(S1, S2)]),
    "sessions": ({"profile": "sessions"}, [(S1, S2)]),
    "closed": ({"profile": "default", "last_session": "closed"}, [(S1, S2)]),
    "one-session": ({"profile": "default"}, [(S1,)]),
    "flush-every-session": ({"profile": "flush-every-session"}, [(S1, S2)]),
    "continue": ({"profile": "default", "context_window": 40, "session_boundary": "continue",
                  "system_prompt_tokens": 0}, [(S1, S2)]),
}
AT_ONCE = 2


@pytest.fixture(scope="module")
def installs(tmp_path_factory):
    loop = asyncio.new_event_loop()
    made = {}
    for name, (cfg, _) in INSTALLS.items():
        d, llm = tmp_path_factory.mktemp("ocr"), InProcessMockLLM()
        made[name] = (OpenClawRealBackend({"embedder": "hash", **cfg},
                                          BackendContext(data_dir=d, embedding_cache_path=str(d / "e.sqlite"), _llm=llm)),
                      loop, llm)

    async def up(gate, b, batches):
        async with gate:
            await b.start()
            for sessions in batches:
                await b.ingest("demo", IngestBatch(sessions=tuple(sessions)))

    async def all_up():
        gate = asyncio.Semaphore(AT_ONCE)
        # every one finishes before the first error is raised, so none is left starting while the others close
        return await asyncio.gather(*(up(gate, made[n][0], INSTALLS[n][1]) for n in made), return_exceptions=True)

    try:
        for r in loop.run_until_complete(all_up()):
            if isinstance(r, BaseException):
                raise r
        yield made
    finally:
        for b, _, _ in made.values():
            loop.run_until_complete(b.close())
        loop.close()


@pytest.fixture(scope="module")
def default(installs):
    return installs["default"]


@pytest.fixture(scope="module")
def sessions(installs):
    return installs["sessions"]


def _stop(b, loop):
    loop.run_until_complete(b.close())  # the loop is the module's: `installs` closes it


def _transcript(b, loop):
    return loop.run_until_complete(b._call("POST", "/transcript", {"agent": agent_id("demo")}))


def _search(b, loop, q):
    return loop.run_until_complete(b.retrieve("demo", RetrieveQuery(q, 6, reference_time=ASKED))).memories


def test_default_transcript_is_openclaws_with_a_reset_at_each_new(default):
    b, loop, llm = default
    t = _transcript(b, loop)
    ev = t["events"]
    assert [e["type"] for e in ev] == ["session", "message", "message", "message", "reset", "message", "message"]
    assert [e["message"]["content"][0]["text"] for e in ev if e["type"] == "message"] == \
        [m.content for m in S1.messages + S2.messages]
    assert [e["message"]["role"] for e in ev if e["type"] == "message"] == ["user", "assistant", "user", "user",
                                                                              "assistant"]
    # Session 1's /new comes when session 2 starts; session 2, the newest, is the live conversation (last_session
    # "open"): its messages are in the transcript, no /new ends it.
    assert [(e["timestamp"], e["reason"]) for e in ev if e["type"] == "reset"] == [("2026-03-03T11:00:00.000Z", "new")]
    assert t["sessionKey"] == f"agent:{agent_id('demo')}:main"
    path = f"sessions/{agent_id('demo')}/{t['sessionId']}.jsonl"
    assert b.workspace_state("demo").install.transcript_lines == {path: MSG_LINES}
    assert llm.tasks() == []  # two short sessions never reach the flush threshold


def test_default_hook_files_equal_the_ports_rendering(default):
    # OpenClaw's own handler wrote these; the port's render_hook_file must give the same bytes for the same key/id.
    b, loop, _ = default
    t = _transcript(b, loop)
    key, sid = t["sessionKey"], t["sessionId"]
    files = {p: c for p, c in b.workspace("demo").items() if p.startswith("memory/")}
    assert files == {
        "memory/2026-03-03-1100.md": L.render_hook_file(ms(S2.started_at), key, sid, [
            'user: "The dev server runs on port 3001."', 'assistant: "Noted: port 3001."',
            'user: "We chose pnpm because it is faster."']),
    }  # session 2 is live: no hook file for it
    root = b.workspace_dir("demo")
    assert (root / "memory/2026-03-03-1100.md").read_text() == files["memory/2026-03-03-1100.md"]
    assert not (root / "MEMORY.md").exists()


def test_the_ports_hook_files_are_openclaws_byte_for_byte(default, tmp_path):
    # Same sessions, same profile: the port's re-implemented hook writes exactly the files OpenClaw's handler wrote,
    # session id included (both derive it from the agent and its first message), so both search the same text.
    b, loop, _ = default
    d = tmp_path / "port"
    port = OpenClawBackend({"embedder": "hash", "profile": "default"},
                           BackendContext(data_dir=d, embedding_cache_path=str(d / "e.sqlite"), _llm=InProcessMockLLM()))
    loop.run_until_complete(port.start())
    try:
        loop.run_until_complete(port.ingest("demo", IngestBatch(sessions=(S1, S2))))
        # The whole workspace: the hook file and onboarding's files (OpenClaw's ensureAgentWorkspace wrote them for
        # openclaw-real, the port read the package's templates).
        assert port.workspace("demo") == b.workspace("demo")
        assert sorted(b.workspace("demo")) == ["AGENTS.md", "IDENTITY.md", "SOUL.md", "USER.md",
                                               "memory/2026-03-03-1100.md"]
        assert f"- **Session ID**: {_transcript(b, loop)['sessionId']}" in port.workspace("demo")["memory/2026-03-03-1100.md"]
    finally:
        loop.run_until_complete(port.close())


def test_closed_last_session_ends_with_new_like_the_port(installs, tmp_path_factory):
    # last_session "closed" (the earlier replay): session 2 is closed at its last message by OpenClaw's /new (a second
    # reset and hook file, dated 11:03, the time of that /new); the port writes the same bytes.
    b, loop, _ = installs["closed"]
    try:
        t = _transcript(b, loop)
        assert [e["type"] for e in t["events"]].count("reset") == 2
        files = b.workspace("demo")
        assert files["memory/2026-03-03-1103.md"] == L.render_hook_file(
            ms(S2.messages[-1].ts), t["sessionKey"], t["sessionId"], ['assistant: "Deploys go out on \\"Thursdays\\"."'])
        d = tmp_path_factory.mktemp("port")
        port = OpenClawBackend({"embedder": "hash", "profile": "default", "last_session": "closed"},
                               BackendContext(data_dir=d, embedding_cache_path=str(d / "e.sqlite"),
                                              _llm=InProcessMockLLM()))
        loop.run_until_complete(port.ingest("demo", IngestBatch(sessions=(S1, S2))))
        assert port.workspace("demo") == files and sum(p.startswith("memory/") for p in files) == 2
        assert b.counters()["live_session_messages"] == 0
    finally:
        _stop(b, loop)


def test_onboardings_files_are_openclaws_and_bootstrap_md_goes_with_the_first_memory(default, installs,
                                                                                      tmp_path_factory):
    # OpenClaw's ensureAgentWorkspace wrote AGENTS.md, SOUL.md, IDENTITY.md, USER.md and BOOTSTRAP.md before the first
    # message; the hook file of session 1's /new made memory/, so its next run (the question's turn) deleted
    # BOOTSTRAP.md. The port's files (the package's templates, front matter stripped) are the same bytes.
    b, loop, _ = default
    root = b.workspace_dir("demo")
    templates, source = L.bootstrap_templates()
    assert "openclaw 2026.9.6 templates" in source
    assert sorted(p.name for p in root.glob("*.md")) == ["AGENTS.md", "IDENTITY.md", "SOUL.md", "USER.md"]
    for name in ("AGENTS.md", "IDENTITY.md", "SOUL.md", "USER.md"):
        assert (root / name).read_bytes() == templates[name].encode("utf-8"), name
    # One session, still open: no memory yet, so BOOTSTRAP.md stays, on both; then a reset and a fresh ingest (OpenClaw
    # forgets the workspace's setup state on /drop, as `agents delete` does, so the new workspace is not "vanished").
    b1, loop1, _ = installs["one-session"]
    try:
        r1 = b1.workspace_dir("demo")
        assert sorted(p.name for p in r1.glob("*.md")) == sorted(L.BOOTSTRAP_FILES)
        assert (r1 / "BOOTSTRAP.md").read_bytes() == templates["BOOTSTRAP.md"].encode("utf-8")
        d = tmp_path_factory.mktemp("port")
        port = OpenClawBackend({"embedder": "hash", "profile": "default"},
                               BackendContext(data_dir=d, embedding_cache_path=str(d / "e.sqlite"),
                                              _llm=InProcessMockLLM()))
        loop1.run_until_complete(port.ingest("demo", IngestBatch(sessions=(S1,))))
        assert port.workspace("demo") == b1.workspace("demo") and sorted(port.workspace("demo")) == sorted(
            L.BOOTSTRAP_FILES)
        loop1.run_until_complete(b1.reset("demo"))
        loop1.run_until_complete(b1.ingest("demo", IngestBatch(sessions=(S1, S2))))
        assert sorted(p.name for p in r1.glob("*.md")) == ["AGENTS.md", "IDENTITY.md", "SOUL.md", "USER.md"]
    finally:
        _stop(b1, loop1)


def test_memory_search_finds_user_md_only_of_onboardings_files(default):
    # listMemoryFiles indexes USER.md (evergreen) but not AGENTS.md, SOUL.md or IDENTITY.md.
    b, loop, _ = default
    hits = _search(b, loop, "stable user preferences and profile facts as directives")
    assert hits and hits[0].source == "USER.md" and hits[0].evidence_ids == []
    assert not any(h.source in ("AGENTS.md", "SOUL.md", "IDENTITY.md") for h in
                   _search(b, loop, "Who You Are core truths boundaries vibe continuity identity"))


def test_default_searches_memory_files_only(default):
    b, loop, _ = default
    hits = _search(b, loop, "which port does the dev server run on")
    assert hits and all(not h.source.startswith("sessions/") for h in hits)
    top = hits[0]
    assert top.source == "memory/2026-03-03-1100.md" and top.evidence_ids == ["s1-m0", "s1-m1", "s1-m2"]


def test_flush_plan_is_buildmemoryflushplan(default):
    b, loop, _ = default
    for when in (datetime(2023, 5, 8, 13, 56, tzinfo=UTC), datetime(2026, 1, 1, 0, 5, tzinfo=UTC),
                 datetime(2026, 12, 22, 23, 59, tzinfo=UTC)):
        assert loop.run_until_complete(b.flush_plan(ms(when))) == L.flush_plan(ms(when))
    for window in (200_000, 32_768):
        p = loop.run_until_complete(b._call("POST", "/flush-plan", {"nowMs": 0, "contextWindowTokens": window}))
        th = L.thresholds(window)
        assert (p["softThresholdTokens"], p["reserveTokensFloor"], p["forceFlushTranscriptBytes"]) == \
            (th.soft_tokens, th.reserve_tokens, th.force_flush_bytes)


def test_sessions_profile_cites_transcript_lines_by_message_id(sessions):
    b, loop, _ = sessions
    hits = _search(b, loop, "which port does the dev server run on")
    tr = [h for h in hits if h.source.startswith("sessions/")]
    assert tr, [h.source for h in hits]
    h = tr[0]
    start, end = int(h.attributes["start_line"]), int(h.attributes["end_line"])
    assert h.evidence_ids == [MSG_LINES[n] for n in range(start, end + 1) if n in MSG_LINES]
    assert "s1-m0" in h.evidence_ids
    assert b.describe_config()["transcripts"] == "indexed and searched (sources memory + sessions)"
    # Each message's line of OpenClaw's session text ("User: ..." / "Assistant: ...") is spanned with its id.
    assert h.evidence_spans and {s.evidence_id for s in h.evidence_spans} == set(h.evidence_ids)
    assert all(h.text[s.start:s.end] == EXPORTED[s.evidence_id] for s in h.evidence_spans)
    # OpenClaw indexes the live session's messages too (same transcript, after the last reset boundary), and plain
    # memory_search returns hits of the agent's own session: session 2 is still open, yet its message is found.
    live = [h for h in _search(b, loop, "when do deploys go out Thursdays") if h.source.startswith("sessions/")]
    assert any("s2-m1" in h.evidence_ids for h in live)
    assert b.counters()["live_session_messages:demo"] == 2


EXPORTED = {"s1-m0": "User: The dev server runs on port 3001.", "s1-m1": "Assistant: Noted: port 3001.",
            "s1-m2": "User: We chose pnpm because it is faster.", "s2-m0": "User: /status",
            "s2-m1": 'Assistant: Deploys go out on "Thursdays".'}


def test_file_hits_span_the_hook_lines_openclaw_returns(default):
    b, loop, _ = default
    res = loop.run_until_complete(b.retrieve("demo", RetrieveQuery("which port does the dev server run on", 6,
                                                                   reference_time=ASKED)))
    top = res.memories[0]
    shown = {s.evidence_id: top.text[s.start:s.end] for s in top.evidence_spans}
    assert shown == {"s1-m0": 'user: "The dev server runs on port 3001."', "s1-m1": 'assistant: "Noted: port 3001."',
                     "s1-m2": 'user: "We chose pnpm because it is faster."'}
    at = res.formatted_context.index(top.text)
    assert all(res.formatted_context[s.start + at:s.end + at] == shown[s.evidence_id] for s in top.evidence_spans)
    assert b.counters()["spans_misaligned"] == 0


def _hits(b, loop, ns, q="which port does the dev server run on"):
    res = loop.run_until_complete(b.retrieve(ns, RetrieveQuery(q, 6, reference_time=ASKED)))
    return [(m.id, m.text, m.channel_scores) for m in res.memories]


def test_a_search_after_the_client_sat_idle_past_nodes_keep_alive_is_answered(default):
    # The `make test` failure of issue 46: this module's loop sat idle while another fixture's backend ingested; Node
    # had closed the pooled keep-alive connection after 5 s (6 s measured), aiohttp keeps one for 15 s and reused it,
    # and the search was lost ("Can not write request body"), sidecar alive. The sidecar now never closes an idle
    # connection (keepAliveTimeout 0). 8 s with this loop stopped: inside that window, every time before the fix.
    b, loop, _ = default
    before = _hits(b, loop, "demo")
    time.sleep(8)
    assert _hits(b, loop, "demo") == before and before


def test_no_search_is_lost_to_openclaws_background_session_maintenance(default):
    # After each session entry write OpenClaw kicks its automatic session maintenance (kickSessionEntryMaintenanceAfter
    # Write): it plans in a reclamation Worker thread and commits only if no newer write came in, else logs "SQLite
    # reclamation Worker failed ... inputs changed before commit" and plans again. It usually skips the Worker while
    # its cached age fact holds; a write that moves the entry's updatedAt back drops that fact
    # (advanceSessionEntryMaintenanceAgeFact), so each append below, stamped a minute before the previous one, sends
    # the next plan to the Worker, and two appends back to back collide with it. Searches run in between, on the same
    # agent's database, until OpenClaw has refused at least one commit: every one answers the same hits as before.
    b, loop, _ = default
    loop.run_until_complete(b.ingest("maint", IngestBatch(sessions=(S1, S2))))
    agent, ws = agent_id("maint"), str(b.workspace_dir("maint"))
    call = lambda *a: loop.run_until_complete(b._call(*a))  # noqa: E731
    before = _hits(b, loop, "maint")
    assert before and before[0][0].startswith("memory/2026-03-03-1100.md")
    writes0, log0 = call("GET", "/diagnostics")["sessionWrites"], len(b._sidecar.log.read_text(errors="replace"))
    at, rounds, refused = ms(S2.messages[-1].ts), 0, 0
    while rounds < 8 or (refused == 0 and rounds < 60):
        for _ in range(2):
            at -= 60_000
            call("POST", "/session/append", {"agent": agent, "workspace": ws,
                                             "messages": [{"role": "user", "text": f"aside {rounds}", "ms": at}]})
        assert _hits(b, loop, "maint") == before, f"round {rounds}"
        rounds += 1
        refused = b._sidecar.log.read_text(errors="replace")[log0:].count("inputs changed before commit")

    # OpenClaw's exclusive session writes since the first append, by operation (its diagnostics channel): the
    # maintenance planned and handed work to its reclamation Worker while the searches ran.
    writes = call("GET", "/diagnostics")["sessionWrites"]
    ran = {op: writes.get(op, {}).get("ok", 0) - writes0.get(op, {}).get("ok", 0) for op in writes}
    assert refused >= 1 and ran["session.maintenance.plan"] >= 1 and ran["session.reclamation.retain"] >= 1, ran
    # The refused plan is planned again after the last append: keep searching until OpenClaw's writes settle.
    deadline, last = time.monotonic() + 60, None
    while writes != last and time.monotonic() < deadline:
        assert _hits(b, loop, "maint") == before
        time.sleep(1)
        last, writes = writes, call("GET", "/diagnostics")["sessionWrites"]
    assert writes == last, "OpenClaw's session maintenance did not settle in 60 s"
    assert b._sidecar.alive and _hits(b, loop, "demo") and _hits(b, loop, "maint") == before


def test_transcript_evidence_by_hand():
    from services.adapters.openclaw.workspace import Workspace

    ws = Workspace()
    ws.install.transcript_lines = {"sessions/a/x.jsonl": {2: "m0", 3: "m1", 6: "m2"}}
    assert transcript_evidence(ws, "sessions/a/x.jsonl", 1, 5) == ["m0", "m1"]
    assert transcript_evidence(ws, "sessions/a/x.jsonl", 4, 6) == ["m2"]
    assert transcript_evidence(ws, "sessions/a/y.jsonl", 1, 9) == [] and transcript_evidence(None, "x", 1, 2) == []


def test_flush_every_session_matches_the_port_and_writes_no_transcript(installs, tmp_path_factory):
    b, loop, _ = installs["flush-every-session"]
    try:
        assert _transcript(b, loop)["events"] == []
        real_files = b.workspace("demo")
    finally:
        _stop(b, loop)
    d = tmp_path_factory.mktemp("port")
    port = OpenClawBackend({"embedder": "hash", "profile": "flush-every-session"},
                           BackendContext(data_dir=d, embedding_cache_path=str(d / "e.sqlite"), _llm=InProcessMockLLM()))
    asyncio.run(port.ingest("demo", IngestBatch(sessions=(S1, S2))))
    assert real_files == port.workspace("demo")
    assert "MEMORY.md" in real_files and "memory/2026-03-01.md" in real_files


def test_continue_boundary_flushes_with_openclaws_plan(installs):
    # Window 40 (flush at 15 tokens): one flush after s2-m1, no /new, so no hook file and no reset in the transcript.
    b, loop, llm = installs["continue"]
    try:
        assert llm.tasks() == ["flush"]
        assert llm.calls[0][1][0]["content"] == L.flush_plan(ms(S2.messages[-1].ts)).system_prompt
        assert list(b.workspace("demo")) == ["AGENTS.md", "IDENTITY.md", "SOUL.md", "USER.md", "memory/2026-03-03.md"]
        assert [e["type"] for e in _transcript(b, loop)["events"]].count("reset") == 0
    finally:
        _stop(b, loop)


@pytest.mark.timeout(600)
def test_fidelity_run_covers_every_profile_the_port_models(tmp_path):
    # The real command's loop on a small workspace: Cortex V1's eight sessions, its first 6 prompts, both profiles the
    # port can read. Port and OpenClaw search the same files, so they agree on every query.
    from services.studies import fidelity

    summaries = asyncio.run(fidelity.run_study(["cortex-v1"], "openclaw", "hash", tmp_path,
                                         {"cortex-v1": {"limit": 6}}, seed=0))
    assert [s.workspace for s in summaries] == ["cortex-v1 (default)", "cortex-v1 (flush-every-session)"]
    assert all(s.queries == 6 and s.agreement == 1.0 and s.passes for s in summaries)
    md = (tmp_path / "fidelity.md").read_text()
    assert "| cortex-v1 (default) | 6 | 6 | 1.000 |" in md and "top-6" not in md
    with pytest.raises(ValueError, match="sessions"):
        asyncio.run(fidelity.run_study(["cortex-v1"], "openclaw", "hash", tmp_path / "x", {}, profiles=("sessions",)))


@pytest.mark.timeout(600)
def test_sensitivity_run_sets_min_score_on_both_and_the_port_alone_loses_decay(tmp_path):
    # The real command's loop, small: Cortex V1's first 6 prompts, one embedder, two minScores. Both search the same
    # files with the same minScore, so each cell of OpenClaw and the port agree; the what-if row is the port's alone.
    from services.studies import sensitivity

    cells = asyncio.run(sensitivity.run_study(["cortex-v1"], ["hash"], [0.35, 0.0], "openclaw", tmp_path,
                                        {"cortex-v1": {"limit": 6}}, seed=0))
    rows = [(c.system, c.min_score, c.top_k, c.queries) for c in cells]
    assert rows == [("openclaw-real", 0.35, 6, 6), ("openclaw-real", 0.0, 6, 6), ("port (openclaw)", 0.35, 6, 6),
                    ("port (openclaw)", 0.0, 6, 6), ("port (openclaw), what-if: no decay", 0.35, 6, 6)]
    by = {(c.system, c.min_score): (c.empty_rate, c.hit_rate, c.recall_any) for c in cells}
    assert by[("openclaw-real", 0.35)] == by[("port (openclaw)", 0.35)]
    assert by[("openclaw-real", 0.0)] == by[("port (openclaw)", 0.0)]
    assert "| cortex-v1 | port (openclaw), what-if: no decay | hash | 0.35 | 6 | 6 |" in (
        tmp_path / "sensitivity.md").read_text()
