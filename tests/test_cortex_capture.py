"""The cortex adapter captures a session the way the plugin's agent_end hook would: windows of whole turns, at most
20 messages and 50,000 characters (role + 2 + content + 2 per message) each, tiling the session in order, and a
message over 10,000 characters shortened to that. Before, a session went as one capture, and every BEAM chat batch
(82,000-450,000 characters) was refused by the API: these tests fail on that behaviour."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.adapters.cortex.backend import CortexBackend
from services.adapters.cortex.capture import capture_windows, fit_message, message_chars, turn_ends
from services.common.types import IngestBatch, Message, Session

T0 = datetime(2024, 3, 15, 9, 0, tzinfo=UTC)


def test_message_chars_is_role_colon_space_content_and_a_blank_line():
    assert message_chars("user", "hello") == 4 + 2 + 5 + 2 == 13
    assert message_chars("assistant", "") == 9 + 2 + 0 + 2 == 13


def test_a_turn_ends_at_an_assistant_message_that_a_user_message_follows():
    assert turn_ends(["user", "assistant", "user", "assistant", "assistant", "user", "user", "assistant"]) == [2, 5, 8]
    assert turn_ends(["assistant", "user", "assistant"]) == [1, 3]  # an opening reply is a turn of its own
    assert turn_ends(["user", "assistant", "user"]) == [2, 3]  # a session ending on a user message ends there
    assert turn_ends([]) == []


def test_windows_close_at_twenty_messages_on_a_turn_boundary():
    # 30 exchanges of 2 messages, 1,004 + 1,009 = 2,013 characters each, 60,390 in all: ten exchanges a window
    msgs = [("user" if i % 2 == 0 else "assistant", "x" * 996) for i in range(60)]
    assert sum(message_chars(r, c) for r, c in msgs) == 60_390
    assert capture_windows(msgs) == [(0, 20), (20, 40), (40, 60)]


def test_windows_close_before_fifty_thousand_characters():
    # 15 exchanges of 4,008 + 4,013 = 8,021 characters: six make 48,126 (fit), seven 56,147 (do not)
    msgs = [("user" if i % 2 == 0 else "assistant", "y" * 4_000) for i in range(30)]
    assert capture_windows(msgs) == [(0, 12), (12, 24), (24, 30)]
    # 50,000 exactly fits: 4 messages of 12,500 characters each by the estimate
    exact = [("user", "z" * 12_492), ("assistant", "z" * 12_487)] * 2
    assert sum(message_chars(r, c) for r, c in exact) == 50_000
    assert capture_windows(exact) == [(0, 4)]


def test_windows_keep_turns_whole_when_turns_have_several_messages():
    roles = ["user", "assistant", "assistant", "user", "user", "assistant"] * 4  # turns of 3: ends at 3, 6, ... 24
    msgs = [(r, "m") for r in roles]
    # 20 messages would cut the seventh turn (messages 18-20); the window closes after six turns, at 18
    assert capture_windows(msgs) == [(0, 18), (18, 24)]
    assert capture_windows(msgs, max_messages=5) == [(0, 3), (3, 6), (6, 9), (9, 12), (12, 15), (15, 18), (18, 21),
                                                      (21, 24)]


def test_a_turn_over_the_cap_by_itself_is_cut_between_messages_and_its_tail_joins_the_next_turn():
    msgs = [("user", "u")] * 25 + [("assistant", "a"), ("user", "u2"), ("assistant", "a2")]
    # one turn of 26 messages (0-26), then a turn of two (26-28): 0-20 goes alone, 20-26 and 26-28 share a window
    assert capture_windows(msgs) == [(0, 20), (20, 28)]


def test_a_message_longer_than_the_character_cap_goes_alone():
    msgs = [("user", "q" * 60_000), ("assistant", "short reply")]
    assert capture_windows(msgs) == [(0, 1), (1, 2)]
    with pytest.raises(ValueError, match="max_messages and max_chars must be >= 1"):
        capture_windows(msgs, max_messages=0)


def test_fit_message_strips_then_keeps_the_opening():
    assert fit_message("  kept as is  ", 20) == "  kept as is  "
    assert fit_message("  " + "y" * 12 + "\n", 10) == "y" * 10
    assert fit_message("w" * 50, 0) == "w" * 50  # 0: no limit


class Recorder:
    """The adapter's client: records each capture body and answers with a completed job."""

    def __init__(self):
        self.bodies: list[dict] = []

    async def submit_ingest_conversation(self, body, timeout_ms, key):
        self.bodies.append(body)
        return {"job_id": f"j{len(self.bodies)}", "status": "completed"}

    async def close(self):
        return None


def session(n_exchanges: int, content_chars: int, sid: str = "B1") -> Session:
    msgs = []
    for i in range(2 * n_exchanges):
        role = "user" if i % 2 == 0 else "assistant"
        msgs.append(Message(f"{sid}:{i}", role, f"{i:04d} " + "c" * (content_chars - 5), T0 + timedelta(minutes=i)))
    return Session(sid, T0 - timedelta(hours=1), tuple(msgs))


async def test_a_60000_character_session_is_sent_in_plugin_sized_windows_nothing_lost():
    s = session(30, 996)  # 60 messages, 60,390 characters as the plugin counts them
    b = CortexBackend({"base_url": "http://127.0.0.1:9"})
    rec = Recorder()
    b.client = rec  # type: ignore[assignment]
    await b.ingest("ns", IngestBatch((s,)))
    assert [len(x["messages"]) for x in rec.bodies] == [20, 20, 20]
    sent = [m["id"] for x in rec.bodies for m in x["messages"]]
    assert sent == [m.id for m in s.messages]  # every message once, in order
    end = 0
    for x in rec.bodies:
        n = len(x["messages"])
        end += n
        # a capture is the last n messages of the session up to the turn it closes
        assert [m["id"] for m in x["messages"]] == [m.id for m in s.messages[end - n:end]]
        assert x["messages"][-1]["role"] == "assistant"
        assert sum(len(m["role"]) + len(m["content"]) + 4 for m in x["messages"]) <= 50_000
        assert x["session_id"] == "memrig:ns:B1"
    # the first window is dated by the session's start, the later ones by their first message
    assert [x["reference_date"] for x in rec.bodies] == [
        "2024-03-15T08:00:00.000Z", "2024-03-15T09:20:00.000Z", "2024-03-15T09:40:00.000Z"]
    assert b.indexed["ns"] == 60 and b.stats["capture_windows"] == 3
    assert (await b.namespace_stats("ns")).messages == 60
    await b.close()


async def test_long_messages_are_shortened_and_windows_stay_under_the_api_limits():
    # 8 exchanges whose user messages are 12,000 characters: shortened to 10,000 (10,008 by the estimate), an
    # exchange with its 2,000-character reply is 10,008 + 2,013 = 12,021; four make 48,084, five 60,105
    msgs = []
    for i in range(8):
        msgs.append(Message(f"m{2 * i}", "user", "p" * 12_000, T0))
        msgs.append(Message(f"m{2 * i + 1}", "assistant", "r" * 2_000, T0))
    b = CortexBackend({"base_url": "http://127.0.0.1:9"})
    rec = Recorder()
    b.client = rec  # type: ignore[assignment]
    await b.ingest("ns", IngestBatch((Session("s", T0, tuple(msgs)),)))
    assert [len(x["messages"]) for x in rec.bodies] == [8, 8]
    assert all(len(m["content"]) == 10_000 for x in rec.bodies for m in x["messages"] if m["role"] == "user")
    assert b.stats["capture_messages_shortened"] == 8
    await b.close()


def test_capture_config_is_checked():
    for bad in ({"capture_window_messages": 0}, {"capture_max_chars": "50000"}, {"capture_message_max_chars": -1},
                {"capture_window_messages": 20.5}):
        with pytest.raises(ValueError, match="capture_"):
            CortexBackend({"base_url": "http://127.0.0.1:9", **bad})
