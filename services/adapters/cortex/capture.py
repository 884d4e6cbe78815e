"""How the cortex adapter cuts an ingested session into captures, the way the OpenClaw Cortex plugin's `agent_end`
hook would have sent it turn by turn.

The plugin never sends a whole conversation. After each agent turn it sends the last messages of the session:
the last 20 in v0.3.x (Ubundi/openclaw-cortex @ 22cc320, `src/features/capture/handler.ts`,
`RECENT_MESSAGES_COUNT = 20`), and from March 2026 the messages since its per-session watermark (the last capture),
at most 200, dropping the oldest until the transcript is at most 50,000 characters counted as role + 2 + content + 2
per message (`API_MAX_CHARS`, "the Cortex API rejects text > 50,000 chars"), with each message over 10,000 characters
(`API_MAX_MESSAGE_CHARS`) compressed to fit (2.22.1 @ 6c531b3; the capture cooldown of 180 s leaves the watermark
where it was, so the next capture carries the turns it suppressed).

A replayed session has no agent turns and no clock, so the adapter places the captures itself: a turn ends at an
assistant message followed by a user message (or the session's end), and a capture is the run of whole turns since
the previous capture, closed at the last turn that still fits both the message cap (20 by default, v0.3's window)
and the character cap. Each capture is therefore exactly the last N messages that the hook would send at the end of
its last turn with the watermark at the previous capture, the captures tile the session in order, and no message is
sent twice or left out. A single turn longer than either cap (a run of more than 20 messages without a reply, say)
is cut between messages: the plugin would drop its oldest messages, a replay keeps them in a capture of their own.

Not modelled: the plugin's "worth capturing" test (a user and an assistant message over 20 / 50 characters; a
window that fails it is skipped, and with the watermark those messages are never sent), its turn-fingerprint
dedupe and its low-signal filters. Each would drop messages from what the rig asks a backend to remember.
"""

from __future__ import annotations

from collections.abc import Sequence

# v0.3.x's RECENT_MESSAGES_COUNT; HEAD's own cap is 200 messages per capture.
WINDOW_MESSAGES = 20
# The plugin's API_MAX_CHARS and API_MAX_MESSAGE_CHARS (the cortex-mock enforces the same two limits).
MAX_CHARS = 50_000
MAX_MESSAGE_CHARS = 10_000


def message_chars(role: str, content: str) -> int:
    """A message's share of the transcript as the plugin estimates it: `role: content` plus the blank line."""
    return len(role) + 2 + len(content) + 2


def turn_ends(roles: Sequence[str]) -> list[int]:
    """Exclusive end index of each turn: after an assistant message that a user message follows, and at the end.
    A session that opens with assistant messages has them as its first turn; one that ends on a user message ends
    its last turn there (the replay's session end stands in for the hook that would fire after the reply)."""
    n = len(roles)
    ends = [i + 1 for i in range(n - 1) if roles[i] == "assistant" and roles[i + 1] == "user"]
    if n:
        ends.append(n)
    return ends


def capture_windows(messages: Sequence[tuple[str, str]], max_messages: int = WINDOW_MESSAGES,
                    max_chars: int = MAX_CHARS) -> list[tuple[int, int]]:
    """(start, end) slices of `messages` ((role, content) pairs, contents as they will be sent) that tile them in
    order, one per capture: whole turns, each slice at most `max_messages` messages and `max_chars` characters
    (`message_chars` summed) unless a single message is longer than `max_chars` by itself (it then goes alone, and
    the API refuses it: that loss is reported by the retry queue, not hidden here)."""
    if max_messages < 1 or max_chars < 1:
        raise ValueError(f"capture_windows: max_messages and max_chars must be >= 1, got {max_messages}, {max_chars}")
    sizes = [message_chars(r, c) for r, c in messages]
    out: list[tuple[int, int]] = []
    start = 0  # the watermark: the first message not yet captured
    fit_end = 0  # the end of the last whole turn since `start` that still fits one capture
    for end in turn_ends([r for r, _ in messages]):
        if _fits(sizes, start, end, max_messages, max_chars):
            fit_end = end
            continue
        if fit_end > start:  # the hook fires at the end of the last turn that fit
            out.append((start, fit_end))
            start = fit_end
        if not _fits(sizes, start, end, max_messages, max_chars):
            # one turn over a cap by itself: cut between messages; its last piece stays open for later turns
            while (j := _greedy_end(sizes, start, end, max_messages, max_chars)) < end:
                out.append((start, j))
                start = j
        fit_end = end
    if fit_end > start:
        out.append((start, fit_end))
    return out


def _greedy_end(sizes: list[int], i: int, end: int, max_messages: int, max_chars: int) -> int:
    """The end of the longest run from i (at least one message) within both caps."""
    j, chars = i + 1, sizes[i]
    while j < end and j - i < max_messages and chars + sizes[j] <= max_chars:
        chars += sizes[j]
        j += 1
    return j


def _fits(sizes: list[int], start: int, end: int, max_messages: int, max_chars: int) -> bool:
    return end - start <= max_messages and sum(sizes[start:end]) <= max_chars


def fit_message(content: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """A message's content within the API's per-message limit (0: no limit). The plugin (2.22.1) compresses a
    longer message into a content-aware summary of that size; this keeps its first `limit` characters after
    leading and trailing whitespace, which is shorter to state and keeps the message's opening, where BEAM's long
    messages (pasted code and logs) say what they are."""
    if not limit or len(content) <= limit:
        return content
    return content.strip()[:limit]
