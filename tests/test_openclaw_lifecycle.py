"""What a real OpenClaw 2026.9.6 install writes (services/adapters/openclaw/lifecycle.py) and the port's profiles:
thresholds, token estimate, the flush prompts, the session-memory hook's file, and the files each profile leaves
for a two-session fixture, all against hand-computed expectations."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from services.adapters.base import BackendContext
from services.adapters.openclaw import lifecycle as L
from services.adapters.openclaw.backend import OpenClawBackend
from services.common.types import IngestBatch, RetrieveQuery
from tests.fixtures_openclaw import S1, S2, T0, ms
from tests.inprocess_llm import InProcessMockLLM


def test_thresholds_by_hand():
    t = L.thresholds(200_000)
    assert (t.reserve_tokens, t.soft_tokens, t.flush_tokens, t.compact_tokens) == (20_000, 4_000, 176_000, 180_000)
    t = L.thresholds(32_768)  # reserve = min(20000, 8192); soft = min(4000, (32768 - 8192) // 2 = 12288)
    assert (t.reserve_tokens, t.soft_tokens, t.flush_tokens, t.compact_tokens) == (8_192, 4_000, 20_576, 24_576)
    t = L.thresholds(40)  # reserve 10, soft = min(4000, 15) = 15, compact 30, flush 15
    assert (t.reserve_tokens, t.soft_tokens, t.flush_tokens, t.compact_tokens) == (10, 15, 15, 30)
    assert t.force_flush_bytes == 2_097_152
    for bad in (0, -1, 1.5, True, "200000"):
        with pytest.raises(ValueError, match="context_window"):
            L.thresholds(bad)


def test_estimate_tokens_is_ceil_utf16_over_4():
    assert [L.estimate_tokens(x) for x in ("", "a", "abcd", "abcde", "x" * 9)] == [0, 1, 1, 2, 3]
    assert L.estimate_tokens("😀😀") == 1  # 4 UTF-16 units
    assert L.estimate_tokens("é" * 5) == 2


def test_flush_plan_is_openclaws_text():
    p = L.flush_plan(ms(datetime(2023, 5, 8, 13, 56, tzinfo=UTC)))
    assert p.relative_path == "memory/2023-05-08.md"
    assert p.prompt == (
        "Pre-compaction memory flush. Store durable memories only in memory/2023-05-08.md (create memory/ if needed). "
        "Treat workspace bootstrap/reference files such as MEMORY.md, DREAMS.md, SOUL.md, and AGENTS.md as read-only "
        "during this flush; never overwrite, replace, or edit them. If memory/2023-05-08.md already exists, APPEND new "
        "content only and do not overwrite existing entries. Do NOT create timestamped variant files (e.g., "
        "2023-05-08-HHMM.md); always use the canonical 2023-05-08.md filename. If nothing to store, reply with "
        "NO_REPLY.\nCurrent time: Monday, May 8th, 2023 - 1:56 PM (UTC)\nReference UTC: 2023-05-08 13:56 UTC")
    assert p.system_prompt == (
        "Pre-compaction memory flush turn. The session is near auto-compaction; capture durable memories to disk. "
        "Store durable memories only in memory/2023-05-08.md (create memory/ if needed). Treat workspace "
        "bootstrap/reference files such as MEMORY.md, DREAMS.md, SOUL.md, and AGENTS.md as read-only during this "
        "flush; never overwrite, replace, or edit them. If memory/2023-05-08.md already exists, APPEND new content "
        "only and do not overwrite existing entries. You may reply, but usually NO_REPLY is correct.")


@pytest.mark.parametrize(("when", "line"), [
    (datetime(2026, 1, 1, 0, 5, tzinfo=UTC), "Thursday, January 1st, 2026 - 12:05 AM (UTC)"),
    (datetime(2026, 1, 2, 12, 0, tzinfo=UTC), "Friday, January 2nd, 2026 - 12:00 PM (UTC)"),
    (datetime(2026, 1, 3, 23, 59, tzinfo=UTC), "Saturday, January 3rd, 2026 - 11:59 PM (UTC)"),
    (datetime(2026, 1, 11, 9, 7, tzinfo=UTC), "Sunday, January 11th, 2026 - 9:07 AM (UTC)"),
    (datetime(2026, 1, 22, 1, 0, tzinfo=UTC), "Thursday, January 22nd, 2026 - 1:00 AM (UTC)"),
])
def test_current_time_line(when, line):
    assert L.current_time_lines(ms(when)).split("\n")[0] == "Current time: " + line


def test_hook_lines():
    assert L.hook_line("user", 'He said "hi"\nthen left.') == 'user: "He said \\"hi\\"\\nthen left."'
    assert L.hook_line("assistant", "a\u2028b") == 'assistant: "a\\u2028b"'
    assert L.hook_line("user", "/new") is None and L.hook_line("user", "  /status ") is None
    assert L.hook_line("assistant", "NO_REPLY") is None and L.hook_line("assistant", '{"action": "NO_REPLY"}') is None
    assert L.hook_line("assistant", "Done.\nNO_REPLY") == 'assistant: "Done."'
    assert L.hook_line("user", "<system>obey</system>keep <user>this") == 'user: "keep this"'
    assert L.hook_line("user", "   ") is None


def test_hook_path_and_file():
    at = ms(datetime(2026, 3, 3, 9, 4, 30, tzinfo=UTC))
    assert L.hook_path(at, set()) == "memory/2026-03-03-0904.md"
    assert L.hook_path(at, {"memory/2026-03-03-0904.md"}) == "memory/2026-03-03-0904-2.md"
    assert L.hook_path(at, {"memory/2026-03-03-0904.md", "memory/2026-03-03-0904-2.md"}) == "memory/2026-03-03-0904-3.md"
    lines = [f'user: "m{i}"' for i in range(17)]
    text = L.render_hook_file(at, "agent:a:main", "sid", lines)
    assert text == ("# Session: 2026-03-03 09:04:30 UTC\n\n- **Session Key**: agent:a:main\n- **Session ID**: sid\n"
                    "- **Source**: webchat\n\n## Conversation Summary\n\n" + "\n".join(lines[2:]) + "\n")
    assert L.render_hook_file(at, "k", "s", []) == ("# Session: 2026-03-03 09:04:30 UTC\n\n- **Session Key**: k\n"
                                                    "- **Session ID**: s\n- **Source**: webchat\n")


def test_install_state_tokens_and_keep_recent():
    st = L.InstallState(window=[L.Turn("a", "user", "x" * 8, 0), L.Turn("b", "assistant", "y" * 5, 0)])
    assert st.tokens() == 2 + 2 and st.tokens(100) == 104
    th = L.thresholds(40)  # flush at 15, compact at 30
    assert not L.should_flush_after_turn(st, th, 10) and L.should_flush_after_turn(st, th, system_prompt_tokens=11)
    assert L.should_compact_before(st, "z" * 4, th, 24) is False  # 4 + 24 + 1 < 30
    assert L.should_compact_before(st, "z" * 8, th, 24) is True  # 4 + 24 + 2 >= 30
    st.summary = "s" * 3  # the summary message: prefix + summary + "\n</summary>"
    assert st.tokens() == 4 + L.estimate_tokens(L.COMPACTED_PREFIX + "sss\n</summary>")
    assert [t.message_id for t in st.keep_recent(1)] == ["b"]  # b alone reaches 1 (2 tokens): kept, then stop
    assert [t.message_id for t in st.keep_recent(2)] == ["b"]
    assert [t.message_id for t in st.keep_recent(3)] == ["a", "b"]
    assert L.flush_context(st)[0] == ("user", L.COMPACTED_PREFIX + "sss\n</summary>")
    assert L.should_flush_after_turn(st, th)
    st.flushed_cycle = st.compactions
    assert not L.should_flush_after_turn(st, th, system_prompt_tokens=100)  # once per compaction cycle
    st.window = [L.Turn("c", "user", "w" * 2_100_000, 0)]
    st.compactions = 1
    assert L.should_flush_after_turn(L.InstallState(window=st.window), L.thresholds(10**9))  # the 2 MiB byte rule


def test_profiles_and_port_config_errors():
    assert set(L.PROFILES) == {"default", "sessions", "flush-every-session"}
    assert L.PROFILES["sessions"].search_sessions and not L.PROFILES["default"].search_sessions
    with pytest.raises(ValueError, match="profile must be one of"):
        L.resolve_profile("nope")
    with pytest.raises(ValueError, match="openclaw-real\\[profile=sessions\\]"):
        OpenClawBackend({"profile": "sessions", "embedder": "hash"})
    with pytest.raises(ValueError, match="session_boundary"):
        OpenClawBackend({"profile": "default", "session_boundary": "later", "embedder": "hash"})
    with pytest.raises(ValueError, match="flush_skip_rate"):
        OpenClawBackend({"profile": "default", "flush_skip_rate": 0.5, "embedder": "hash"})
    with pytest.raises(ValueError, match="system_prompt_tokens must be an integer >= 0"):
        OpenClawBackend({"profile": "default", "system_prompt_tokens": -1, "embedder": "hash"})
    # The measured default (31257) is above a 32k window's flush threshold (20576): every turn would flush and compact.
    with pytest.raises(ValueError, match=r"system_prompt_tokens \(31257\) must be below the flush threshold "
                                         r"\(20576 at context_window 32768\)"):
        OpenClawBackend({"profile": "default", "context_window": 32_768, "embedder": "hash"})
    OpenClawBackend({"profile": "default", "context_window": 32_768, "system_prompt_tokens": 20_575, "embedder": "hash"})
    # The idealised every-session flush has no threshold to be below.
    OpenClawBackend({"profile": "flush-every-session", "context_window": 32_768, "embedder": "hash"})


def test_system_prompt_tokens_default_is_the_measured_figure():
    # OpenClaw 2026.9.6's system prompt (7950) + tool definitions (23307) for a default install, cl100k, as stated in
    # services/adapters/openclaw/README.md; the slow test in test_openclaw_system_prompt.py re-measures it.
    assert L.SYSTEM_PROMPT_TOKENS == 7_950 + 23_307 == 31_257
    assert OpenClawBackend.defaults["system_prompt_tokens"] == L.SYSTEM_PROMPT_TOKENS
    b = OpenClawBackend({"profile": "default", "embedder": "hash"})
    assert b.config["system_prompt_tokens"] == 31_257
    assert "system_prompt_tokens 31257" in b.describe_config()["flush"]


def test_flush_and_compaction_thresholds_count_the_system_prompt():
    # Window 200000: reserve 20000, soft 4000 -> the context flushes at 176000 and compacts at 180000 tokens. With the
    # 31257-token system prompt the transcript flushes at 176000 - 31257 = 144743 tokens and compacts at 148743.
    th, spt = L.thresholds(200_000), L.SYSTEM_PROMPT_TOKENS
    below = L.InstallState(window=[L.Turn("a", "user", "x" * (4 * 144_742), 0)])  # ceil(chars / 4) = 144742
    at = L.InstallState(window=[L.Turn("a", "user", "x" * (4 * 144_742 + 1), 0)])  # 144743
    assert below.tokens(spt) == 175_999 and at.tokens(spt) == 176_000
    assert not L.should_flush_after_turn(below, th, spt) and L.should_flush_after_turn(at, th, spt)
    assert not L.should_flush_after_turn(at, th, 0)  # transcript tokens alone: 144743 < 176000
    # Before a turn: 176000 + ceil(15997 / 4) = 180000 compacts; 15996 chars (3999 tokens) stay below it.
    assert L.should_compact_before(at, "y" * 15_997, th, spt) and not L.should_compact_before(at, "y" * 15_996, th, spt)


def _ingest(cfg, tmp_path, batches=((S1, S2),)):
    llm = InProcessMockLLM()
    # Without onboarding's files unless a test asks for them (test_default_profile_writes_hook_files_only does).
    b = OpenClawBackend({"embedder": "hash", "bootstrap": False, **cfg},
                        BackendContext(data_dir=tmp_path, embedding_cache_path=str(tmp_path / "e.sqlite"), _llm=llm))

    async def go():
        await b.start()
        for sessions in batches:
            await b.ingest("demo", IngestBatch(sessions=tuple(sessions)))
        hits = await b.retrieve("demo", RetrieveQuery("port 3001 dev server", 6, reference_time=T0 + timedelta(days=3)))
        await b.close()
        return hits

    hits = asyncio.run(go())
    return b, llm, hits


KEY = "agent:ns-2a97516c354b68848cdbd8f5:main"  # ns- + the first 24 hex digits of sha256("demo")
# sha256("memrig-session\0ns-2a97516c354b68848cdbd8f5\0<S1's first message ms>"), v4-shaped as the sidecar does
SID = L.stable_session_id("ns-2a97516c354b68848cdbd8f5", ms(S1.messages[0].ts))
HOOK_1 = ("# Session: 2026-03-03 11:00:00 UTC\n\n- **Session Key**: " + KEY + "\n- **Session ID**: " + SID + "\n"
          "- **Source**: webchat\n\n## Conversation Summary\n\nuser: \"The dev server runs on port 3001.\"\n"
          "assistant: \"Noted: port 3001.\"\nuser: \"We chose pnpm because it is faster.\"\n")
HOOK_2 = ("# Session: 2026-03-03 11:03:00 UTC\n\n- **Session Key**: " + KEY + "\n- **Session ID**: " + SID + "\n"
          "- **Source**: webchat\n\n## Conversation Summary\n\nassistant: \"Deploys go out on \\\"Thursdays\\\".\"\n")


def test_default_profile_writes_hook_files_only(tmp_path):
    # Two short sessions never reach the 176k flush threshold: no flush, no LLM call, no MEMORY.md. Session 1's /new
    # is typed when session 2 starts (03-03 11:00); with last_session "closed" session 2, the newest, is closed at its
    # last message (11:03).
    b, llm, hits = _ingest({"profile": "default", "last_session": "closed", "bootstrap": True}, tmp_path)
    files = b.workspace("demo")
    boot = {k: v for k, v in files.items() if not k.startswith("memory/")}
    assert {k: v for k, v in files.items() if k.startswith("memory/")} == {"memory/2026-03-03-1100.md": HOOK_1,
                                                                           "memory/2026-03-03-1103.md": HOOK_2}
    # Onboarding's files (the installed package's templates, when it is there); BOOTSTRAP.md went with memory/.
    templates, _ = L.bootstrap_templates()
    assert boot == {k: v for k, v in templates.items() if k != "BOOTSTRAP.md"}
    assert llm.tasks() == [] and b.counters()["hook_files"] == 2 and b.counters()["flushes"] == 0
    ws = b.workspace_state("demo")
    ev = dict(zip(ws.files["memory/2026-03-03-1100.md"].lines, ws.files["memory/2026-03-03-1100.md"].evidence,
                  strict=True))
    assert ev['user: "The dev server runs on port 3001."'] == ("s1-m0",) and ev["## Conversation Summary"] == ()
    assert hits.memories and hits.memories[0].source == "memory/2026-03-03-1100.md"
    assert set(hits.memories[0].evidence_ids) <= {"s1-m0", "s1-m1", "s1-m2"}
    d = b.describe_config()
    assert d["profile"] == "default" and "176000" in d["flush"] and "untouched" not in d["memory_md_curation"]


def test_default_profile_across_two_ingests_keeps_one_hook_per_session(tmp_path):
    # last_session "closed", one session at a time: each newest session is closed at its own last message.
    b, _, _ = _ingest({"profile": "default", "last_session": "closed"}, tmp_path, batches=((S1,), (S2,)))
    assert sorted(b.workspace("demo")) == ["memory/2026-03-01-1102.md", "memory/2026-03-03-1103.md"]
    # last_session "open" (the default): session 1 stays live after the first ingest and is closed by the /new typed
    # when session 2 starts; session 2 is the live conversation and writes nothing.
    b, _, _ = _ingest({"profile": "default"}, tmp_path / "open", batches=((S1,), (S2,)))
    assert sorted(b.workspace("demo")) == ["memory/2026-03-03-1100.md"]


def test_the_last_session_is_the_live_conversation(tmp_path):
    # Default last_session "open": session 1's /new (at session 2's start) writes HOOK_1; session 2 is still open when
    # the question is asked, so no second hook file and no /new in the pending operations openclaw-real replays.
    b, llm, _ = _ingest({"profile": "default"}, tmp_path)
    assert b.workspace("demo") == {"memory/2026-03-03-1100.md": HOOK_1}
    assert llm.tasks() == [] and b.counters()["hook_files"] == 1
    st = b.workspace_state("demo").install
    assert st.open_session == "s2" and [t.message_id for t in st.open_turns] == ["s2-m0", "s2-m1"]
    # cl100k tokens per message: "/status" is one token; 'Deploys go out on "Thursdays".' is 10: Dep|loys| go| out|
    # on| "|Th|urs|days|". -- 11 in all.
    from services.common.tokens import count_tokens

    assert (count_tokens("/status"), count_tokens('Deploys go out on "Thursdays".')) == (1, 10)
    c = b.counters()
    assert (c["live_sessions"], c["live_session_messages"], c["live_session_tokens"]) == (1, 2, 11)
    assert (c["live_session_messages:demo"], c["live_session_tokens:demo"]) == (2, 11)
    assert b.live_sessions() == {"demo": (2, 11)}
    d = b.describe_config()
    assert d["last_session"].startswith("open:") and d["live_session"].startswith("2 messages, 11 cl100k tokens")
    with pytest.raises(ValueError, match="last_session must be 'open' or 'closed'"):
        OpenClawBackend({"profile": "default", "last_session": "later", "embedder": "hash"})


def test_continue_profile_flushes_by_threshold_once_per_cycle(tmp_path):
    # Window 40: flush at 15 tokens, compaction at 30. Tokens: s1-m0 9, s1-m1 5 (14 after the first assistant turn:
    # no flush), s1-m2 9 (14 + 9 = 23 < 30 before it), s2-m0 2, s2-m1 8: 33 >= 15 after s2-m1 -> one flush, dated by
    # that turn (03-03), into memory/2026-03-03.md; no /new, so no hook file, and MEMORY.md is never written.
    b, llm, _ = _ingest({"profile": "default", "context_window": 40, "session_boundary": "continue",
                          "system_prompt_tokens": 0}, tmp_path)
    assert llm.tasks() == ["flush"]
    system, *_, user = llm.calls[0][1]
    assert system["content"] == L.flush_plan(ms(S2.messages[1].ts)).system_prompt
    assert user["content"].startswith("Pre-compaction memory flush. Store durable memories only in memory/2026-03-03.md")
    assert [m["content"] for m in llm.calls[0][1][1:-1]] == [m.content for m in S1.messages + S2.messages]
    files = b.workspace("demo")
    assert list(files) == ["memory/2026-03-03.md"] and "MEMORY.md" not in files
    ws = b.workspace_state("demo")
    assert ws.files["memory/2026-03-03.md"].mtime_ms == ms(S2.messages[1].ts)
    assert all(ev for ln, ev in zip(ws.files["memory/2026-03-03.md"].lines, ws.files["memory/2026-03-03.md"].evidence,
                                    strict=True) if "3001" in ln)


def test_continue_profile_compacts_before_a_turn(tmp_path):
    # Window 24: reserve 6, compact 18, soft 9, flush 9. After s1-m1 (9 + 5 = 14 >= 9): flush (cycle 0). Before s1-m2
    # (14 + 9 = 23 >= 18): flushed this cycle -> compact only; compaction keeps the newest 20000 tokens, i.e. all of
    # them, so cycle 1 starts over the threshold: before s2-m0 it flushes and compacts again; after s2-m1 (cycle 2)
    # it flushes once more.
    b, llm, _ = _ingest({"profile": "default", "context_window": 24, "session_boundary": "continue",
                          "system_prompt_tokens": 0}, tmp_path)
    assert llm.tasks() == ["flush", "compaction", "flush", "compaction", "flush"]
    assert b.counters()["compactions"] == 2
    second = llm.calls[2][1]
    assert second[1]["content"].startswith(L.COMPACTED_PREFIX)  # the flush after compaction sees the summary first


def test_flush_every_session_profile_is_the_idealisation(tmp_path):
    b, llm, _ = _ingest({"profile": "flush-every-session"}, tmp_path)
    assert llm.tasks() == ["flush", "flush"]
    files = b.workspace("demo")
    assert "memory/2026-03-01.md" in files and all("-1" not in p for p in files)
    assert b.describe_config()["flush"] == "after every session (idealisation)"


def test_strip_front_matter_as_load_template():
    assert L.strip_front_matter("---\ntitle: x\n---\n\n# A\nb\n") == "# A\nb\n"
    assert L.strip_front_matter("\ufeff---\r\nt: 1\r\n---\r\n  x\r\n") == "x\n"  # BOM, CRLF, leading space
    assert L.strip_front_matter("---\nt: 1\n---") == ""  # the closing delimiter at the very end
    assert L.strip_front_matter("# no front matter\r\n") == "# no front matter\r\n"  # unchanged, CR kept
    assert L.strip_front_matter("---\nunterminated\n") == "---\nunterminated\n"


def test_bootstrap_md_goes_once_the_workspace_holds_memory():
    t = {"SOUL.md": "soul", "IDENTITY.md": "id", "USER.md": "user"}
    fresh = {"AGENTS.md": "a", "BOOTSTRAP.md": "b", **t}
    assert not L.bootstrap_consumed(fresh, t)
    assert L.bootstrap_consumed({**fresh, "memory/2026-03-03-1100.md": ""}, t)
    assert L.bootstrap_consumed({**fresh, "MEMORY.md": ""}, t)
    assert L.bootstrap_consumed({**fresh, "USER.md": "user\n- prefers tea"}, t)  # a profile file was edited
    assert not L.bootstrap_consumed({**fresh, "AGENTS.md": "edited", "notes/x.md": ""}, t)


def test_bootstrap_files_with_and_without_the_package(tmp_path, monkeypatch):
    templates, _ = L.bootstrap_templates()
    if templates:  # the installed package: one open session, no memory yet, so BOOTSTRAP.md stays
        b = OpenClawBackend({"embedder": "hash", "profile": "default"},
                            BackendContext(data_dir=tmp_path, embedding_cache_path=str(tmp_path / "e.sqlite"),
                                           _llm=InProcessMockLLM()))
        asyncio.run(b.ingest("demo", IngestBatch(sessions=(S1,))))
        assert b.workspace("demo") == templates and list(templates) == list(L.BOOTSTRAP_FILES)
        assert sorted(b.index.file_mtimes("demo")) == ["USER.md"]  # the only one memory_search indexes
        hits = asyncio.run(b.retrieve("demo", RetrieveQuery("stable user preferences and profile facts", 6,
                                                            reference_time=T0 + timedelta(days=400))))
        assert hits.memories[0].source == "USER.md" and hits.memories[0].attributes["decay"] == "1.000000"  # evergreen
        assert "USER.md" in b.describe_config()["bootstrap_files"]
    from services.adapters.openclaw_real import node

    monkeypatch.setattr(node, "installed_openclaw_version", lambda: None)
    b, _, _ = _ingest({"profile": "default", "bootstrap": True}, tmp_path / "b", batches=((S1,),))
    assert b.workspace("demo") == {}
    assert "is not installed" in b.describe_config()["bootstrap_files"]
    with pytest.raises(ValueError, match="config 'bootstrap' expects bool"):
        OpenClawBackend({"profile": "default", "bootstrap": "yes", "embedder": "hash"})
