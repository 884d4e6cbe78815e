"""What an OpenClaw 2026.9.6 install writes while a user chats: the profiles of a real install and the rules that
decide when memory gets written, read off the package's own code (`dist/`, openclaw@2026.9.6):

- **The pre-compaction flush** runs when OpenClaw's own rule says so, not after every session. Its plan is
  `buildMemoryFlushPlan` (dist/extensions/memory-core/index.js, region flush-plan.ts): reserve =
  min(20000, floor(window / 4)) (`resolveEffectiveCompactionReserveTokens` with
  DEFAULT_AGENT_COMPACTION_RESERVE_TOKENS_FLOOR 20000), soft = min(4000, floor((window - reserve) / 2)),
  forceFlushTranscriptBytes 2 MiB. The runner (dist/agent-runner-memory-*.mjs) flushes after a turn when the
  context reaches `window - reserve - soft` tokens or the active transcript reaches 2 MiB, once per compaction
  cycle, and before a turn that would reach `window - reserve` it flushes (if it has not this cycle) and then
  compacts. At a 200k window that is 176,000 / 180,000 tokens; at 32,768 it is 20,576 / 24,576.
- **Tokens** are OpenClaw's estimate, ceil(chars / 4) per message (`estimateTokens`; chars in UTF-16 units; the
  CJK weighting is not modelled), over the active window (the last compaction summary + the messages after it).
  A real run adds the model's reported prompt usage, which includes the system prompt and tool schemas: that part
  is the stated variable `system_prompt_tokens`, by default `SYSTEM_PROMPT_TOKENS` = 31,257, what OpenClaw 2026.9.6
  itself builds for a default install's turn, counted in cl100k (services/adapters/openclaw_real/system_prompt.py).
  At a 200k window the transcript therefore flushes at 176,000 - 31,257 = 144,743 tokens.
- **The flush writes** the model's reply to `memory/<date of the flush>.md` only (OpenClaw creates the file before
  the turn, empty if the model stores nothing) with the 2026.9.6 prompts (`flush_prompts`); MEMORY.md is read-only
  to it. MEMORY.md is written by dreaming's deep promotion, which promotes only entries recalled by at least 3
  distinct searches: a replayed history has none, so a real install's MEMORY.md stays as it was.
- **The session-memory hook** (onboarding enables it: `DEFAULT_ONBOARDING_INTERNAL_HOOKS = ["session-memory"]`) runs
  on `/new` and `/reset` (dist/bundled/session-memory/handler.js): it writes `memory/YYYY-MM-DD-HHMM.md` with the
  departing session's last 15 user/assistant messages as `role: "<JSON-quoted text>"` lines (`render_hook_file`).
- **Transcripts**: every message is appended to the agent's session transcript (SQLite in 2026.9.6; `/new` keeps the
  session id and appends a reset boundary). `memory.search.rememberAcrossConversations` is on for a personal install,
  so transcripts are indexed; plain `memory_search` searches them only with `experimental.sessionMemory: true` and
  `sources: ["memory", "sessions"]` (the `sessions` profile).

- **The workspace starts with onboarding's files** (`BOOTSTRAP_FILES`, read from the installed package's templates by
  `bootstrap_templates`): AGENTS.md, SOUL.md, IDENTITY.md, USER.md, BOOTSTRAP.md; BOOTSTRAP.md goes once the workspace
  holds memory (`bootstrap_consumed`). memory_search indexes USER.md alone of them.

Profiles (`PROFILES`): `default` (2026.9.6 as installed with onboarding), `sessions` (default + transcript search)
and `flush-every-session` (the rig's earlier idealisation: a flush after every session, MEMORY.md curated by rule).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

from services.common.tokens import count_tokens

DEFAULT_CONTEXT_WINDOW = 200_000
RESERVE_TOKENS_FLOOR = 20_000  # DEFAULT_AGENT_COMPACTION_RESERVE_TOKENS_FLOOR
SOFT_THRESHOLD_TOKENS = 4_000  # DEFAULT_MEMORY_FLUSH_SOFT_TOKENS
FORCE_FLUSH_TRANSCRIPT_BYTES = 2 * 1024 * 1024  # DEFAULT_MEMORY_FLUSH_FORCE_TRANSCRIPT_BYTES ("2mb")
KEEP_RECENT_TOKENS = 20_000  # compaction keeps this much of the newest context (DEFAULT_COMPACTION_SETTINGS)
HOOK_MESSAGES = 15  # session-memory hook: hooks.internal.entries["session-memory"].messages default
HOOK_SOURCE = "webchat"  # the hook's "Source" line for a /new typed in the Control UI chat
SILENT_REPLY_TOKEN = "NO_REPLY"
COMPACTED_PREFIX = "The conversation history before this point was compacted into the following summary:\n\n<summary>\n"
# What a default install sends before the conversation on every turn, in cl100k tokens: OpenClaw 2026.9.6's system
# prompt (7,950, with AGENTS.md, SOUL.md, IDENTITY.md and USER.md injected as Project Context) + its 54 tool definitions
# under onboarding's `tools.profile: "full"` (23,307, each `{name, description, parameters}` as JSON), in the `steady`
# state (BOOTSTRAP.md consumed). Built by OpenClaw's own code and counted by services/adapters/openclaw_real/
# system_prompt.py (`python -m services.adapters.openclaw_real.system_prompt`); a slow test re-measures it.
SYSTEM_PROMPT_TOKENS = 31_257


@dataclass(frozen=True)
class Profile:
    name: str
    flush: str  # "threshold" (OpenClaw's rule) | "every-session" (the idealisation)
    memory_md: str  # "untouched" (dreaming promotes nothing in a replay) | "rules" (durable-language regex)
    hook: bool  # the session-memory hook writes memory/YYYY-MM-DD-HHMM.md at each /new
    transcripts: bool  # sessions are written to the agent's transcript store and indexed
    search_sessions: bool  # memory_search returns transcript hits
    port: bool  # the Python port can read the same state (it does not index transcripts)
    summary: str


PROFILES: dict[str, Profile] = {
    "default": Profile("default", "threshold", "untouched", True, True, False, True,
                       "OpenClaw 2026.9.6 as installed with onboarding: the flush only by its own threshold, "
                       "MEMORY.md left alone, the session-memory hook at each /new, transcripts indexed "
                       "(rememberAcrossConversations) but not searched"),
    "sessions": Profile("sessions", "threshold", "untouched", True, True, True, False,
                        "default + experimental.sessionMemory with sources [memory, sessions]: memory_search "
                        "searches the session transcripts too"),
    "flush-every-session": Profile("flush-every-session", "every-session", "rules", False, False, False, True,
                                   "idealisation (not a real install): a flush after every session, MEMORY.md "
                                   "curated by a durable-language rule, no hook, no transcripts"),
}
SESSION_BOUNDARIES = ("new", "continue")
LAST_SESSION = ("open", "closed")


def same_writes(a: Profile, b: Profile) -> bool:
    """Whether two profiles write the same state from the same conversation (flush rule, MEMORY.md, the hook's files,
    transcripts): then they differ only in what they search, and one replay can serve both."""
    return (a.flush, a.memory_md, a.hook, a.transcripts) == (b.flush, b.memory_md, b.hook, b.transcripts)


def resolve_profile(name: str) -> Profile:
    if name not in PROFILES:
        raise ValueError(f"openclaw: profile must be one of {', '.join(PROFILES)}; got {name!r}")
    return PROFILES[name]


# ---------------------------------------------------------------------------------------------- the workspace onboarding writes
# What `ensureAgentWorkspace` (dist/workspace-DDLxBwAa.mjs line 606, with ensureBootstrapFiles: onboarding and every
# reply) writes into a brand-new workspace, in its order: AGENTS.md, SOUL.md, IDENTITY.md, USER.md (each only if
# absent), then BOOTSTRAP.md (the first-run ritual) when setup is not complete. Not TOOLS.md or HEARTBEAT.md: their
# templates ship but 2026.9.6 does not write them. Of these memory_search indexes USER.md alone (`listMemoryFiles`,
# dist/internal-xwKaATp-.mjs line 129: MEMORY.md, USER.md, memory/**/*.md, plus extraPaths, empty by default), as an
# evergreen file (no decay); all but BOOTSTRAP.md-after-setup are injected into the system prompt as Project Context.
BOOTSTRAP_FILES = ("AGENTS.md", "SOUL.md", "IDENTITY.md", "USER.md", "BOOTSTRAP.md")
BOOTSTRAP_RITUAL = "BOOTSTRAP.md"
PROFILE_FILES = ("SOUL.md", "IDENTITY.md", "USER.md")  # WORKSPACE_ONBOARDING_PROFILE_FILENAMES
_FM_OPEN = re.compile(r"---[^\S\n]*\n")
_FM_CLOSE = re.compile(r"(?:^|\n)---[^\S\n]*(?:\n|(?![\s\S]))")
_JS_LEADING_SPACE = re.compile("^[\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]+")


def strip_front_matter(content: str) -> str:
    """workspace.ts `stripFrontMatter`: the body after a leading `---` ... `---` block (BOM dropped, line ends made
    \\n, leading whitespace removed); the content unchanged when it has no complete block."""
    norm = content.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    m = _FM_OPEN.match(norm)
    if not m:
        return content
    tail = norm[m.end():]
    c = _FM_CLOSE.search(tail)
    if not c:
        return content
    return _JS_LEADING_SPACE.sub("", tail[c.end():])


def bootstrap_templates() -> tuple[dict[str, str], str]:
    """The bootstrap files a fresh install writes, read at run time from the installed openclaw package's templates
    (`docs/reference/templates/<name>`, front matter stripped as `loadTemplate` does), and where they came from; ({},
    why not) when the pinned package is not installed."""
    from services.adapters.openclaw_real.node import OPENCLAW_VERSION, SIDECAR_DIR, installed_openclaw_version

    v = installed_openclaw_version()
    if v != OPENCLAW_VERSION:
        return {}, (f"openclaw {OPENCLAW_VERSION} is not installed ({'found ' + v if v else 'absent'}; "
                    "make setup-openclaw): the workspace starts without onboarding's files")
    d = SIDECAR_DIR / "node_modules" / "openclaw" / "docs" / "reference" / "templates"
    try:
        files = {name: strip_front_matter((d / name).read_text(encoding="utf-8")) for name in BOOTSTRAP_FILES}
    except OSError as e:
        return {}, f"openclaw {v}'s templates cannot be read ({e}): the workspace starts without onboarding's files"
    return files, f"openclaw {v} templates ({d})"


def bootstrap_consumed(files: dict[str, str], templates: dict[str, str]) -> bool:
    """Whether the next turn's ensureAgentWorkspace deletes BOOTSTRAP.md (`reconcileWorkspaceBootstrapCompletionState`:
    the workspace shows user content: memory/ exists, or MEMORY.md, or a profile file differs from its template)."""
    if any(p.startswith("memory/") or p == "MEMORY.md" for p in files):
        return True
    return any(name in files and name in templates and files[name] != templates[name] for name in PROFILE_FILES)


# ---------------------------------------------------------------------------------------------- flush plan
@dataclass(frozen=True)
class Thresholds:
    context_window: int
    reserve_tokens: int
    soft_tokens: int
    flush_tokens: int  # after a turn: flush once this cycle when the context reaches it
    compact_tokens: int  # before a turn: flush (if not yet) and compact when the context would reach it
    force_flush_bytes: int


def thresholds(context_window: int) -> Thresholds:
    """buildMemoryFlushPlan's numbers and the runner's two thresholds for a context window (in context tokens: the
    transcript plus `system_prompt_tokens`, see `InstallState.tokens`)."""
    if not isinstance(context_window, int) or isinstance(context_window, bool) or context_window <= 0:
        raise ValueError(f"openclaw: context_window must be a positive integer, got {context_window!r}")
    reserve = min(RESERVE_TOKENS_FLOOR, context_window // 4)
    soft = min(SOFT_THRESHOLD_TOKENS, (context_window - reserve) // 2)
    compact = max(0, context_window - reserve)
    return Thresholds(context_window, reserve, soft, max(0, compact - soft), compact, FORCE_FLUSH_TRANSCRIPT_BYTES)


def check_system_prompt_tokens(system_prompt_tokens: object, th: Thresholds | None = None) -> int:
    """A valid `system_prompt_tokens`: an integer >= 0, and below `th`'s flush threshold when the flush follows
    OpenClaw's rule (at or above it every turn would flush and compact, an install that cannot hold a conversation)."""
    spt = system_prompt_tokens
    if not isinstance(spt, int) or isinstance(spt, bool) or spt < 0:
        raise ValueError(f"openclaw: system_prompt_tokens must be an integer >= 0, got {spt!r}")
    if th is not None and spt >= th.flush_tokens:
        raise ValueError(f"openclaw: system_prompt_tokens ({spt}) must be below the flush threshold "
                         f"({th.flush_tokens} at context_window {th.context_window}); lower system_prompt_tokens or "
                         "raise context_window")
    return spt


def estimate_tokens(text: str) -> int:
    """OpenClaw's estimateTokens for a text message: ceil(UTF-16 length / 4)."""
    return math.ceil(len(text.encode("utf-16-le")) // 2 / 4)


def event_bytes(role: str, text: str, ms: int) -> int:
    """The size a message event adds to the active transcript (its JSON line + 1), as the byte rule counts it."""
    ev = {"type": "message", "id": "00000000-0000-4000-8000-000000000000", "parentId": None,
          "timestamp": iso_ms(ms), "message": {"role": role, "content": [{"type": "text", "text": text}],
                                                "timestamp": ms}}
    return len(json.dumps(ev, ensure_ascii=False, separators=(",", ":")).encode("utf-8")) + 1


def iso_ms(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


_FLUSH_TARGET = "Store durable memories only in memory/{d}.md (create memory/ if needed)."
_FLUSH_READ_ONLY = ("Treat workspace bootstrap/reference files such as MEMORY.md, DREAMS.md, SOUL.md, and AGENTS.md as "
                    "read-only during this flush; never overwrite, replace, or edit them.")
_FLUSH_APPEND = "If memory/{d}.md already exists, APPEND new content only and do not overwrite existing entries."


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def current_time_lines(now_ms: int) -> str:
    """resolveCronStyleNow's time line for the UTC zone and an en-US locale (12-hour clock)."""
    t = datetime.fromtimestamp(now_ms / 1000, UTC)
    hour = t.hour % 12 or 12
    return (f"Current time: {t.strftime('%A, %B')} {_ordinal(t.day)}, {t.year} - {hour}:{t.minute:02d} "
            f"{'AM' if t.hour < 12 else 'PM'} (UTC)\nReference UTC: {t.strftime('%Y-%m-%d %H:%M')} UTC")


@dataclass(frozen=True)
class FlushPlan:
    relative_path: str
    system_prompt: str
    prompt: str


def flush_plan(now_ms: int) -> FlushPlan:
    """buildMemoryFlushPlan's prompts for a flush at `now_ms` (timezone UTC)."""
    d = datetime.fromtimestamp(now_ms / 1000, UTC).date().isoformat()
    prompt = " ".join([
        "Pre-compaction memory flush.", _FLUSH_TARGET.format(d=d), _FLUSH_READ_ONLY, _FLUSH_APPEND.format(d=d),
        f"Do NOT create timestamped variant files (e.g., {d}-HHMM.md); always use the canonical {d}.md filename.",
        f"If nothing to store, reply with {SILENT_REPLY_TOKEN}."])
    system = " ".join([
        "Pre-compaction memory flush turn.", "The session is near auto-compaction; capture durable memories to disk.",
        _FLUSH_TARGET.format(d=d), _FLUSH_READ_ONLY, _FLUSH_APPEND.format(d=d),
        f"You may reply, but usually {SILENT_REPLY_TOKEN} is correct."])
    return FlushPlan(f"memory/{d}.md", system, prompt + "\n" + current_time_lines(now_ms))


# ---------------------------------------------------------------------------------------------- session-memory hook
_ROLE_BLOCK_RE = re.compile(r"<(system|assistant|user)\b[^>]*>[\s\S]*?</\1>", re.I)
_ROLE_TAG_RE = re.compile(r"</?(?:system|assistant|user)\b[^>]*>", re.I)
_TRAILING_NO_REPLY_RE = re.compile(r"(?:^|\n)\s*NO_REPLY\s*$", re.I)
_NO_REPLY_RE = re.compile(r'^(?:NO_REPLY|\{\s*"action"\s*:\s*"NO_REPLY"\s*\})$', re.I)


def hook_text(text: str) -> str | None:
    """The hook's sanitising of a message's text (role-directive blocks and tags and a trailing NO_REPLY removed);
    None when nothing is left or the message is a silent reply."""
    if _NO_REPLY_RE.match(text.strip()):
        return None
    t = _TRAILING_NO_REPLY_RE.sub("", _ROLE_TAG_RE.sub("", _ROLE_BLOCK_RE.sub("", text))).strip()
    return t or None


def quote(text: str) -> str:
    """JSON.stringify of a string, with U+0085, U+2028 and U+2029 escaped as the hook does."""
    s = json.dumps(text, ensure_ascii=False)
    for ch in ("\u0085", "\u2028", "\u2029"):
        s = s.replace(ch, f"\\u{ord(ch):04x}")
    return s


def hook_line(role: str, text: str) -> str | None:
    """A message as the hook writes it (`user: "..."`), or None when the hook leaves it out (a slash command, a
    silent reply, an empty text)."""
    t = hook_text(text)
    if t is None or t.startswith("/"):
        return None
    return f"{role}: {quote(t)}"


def hook_path(at_ms: int, taken: set[str]) -> str:
    """memory/YYYY-MM-DD-HHMM.md at the /new time (UTC), `-2`, `-3`, ... when the name is taken."""
    t = datetime.fromtimestamp(at_ms / 1000, UTC)
    base = f"memory/{t.strftime('%Y-%m-%d')}-{t.strftime('%H%M')}"
    name, n = f"{base}.md", 2
    while name in taken:
        name, n = f"{base}-{n}.md", n + 1
    return name


def render_hook_file(at_ms: int, session_key: str, session_id: str, lines: list[str]) -> str:
    """The session-memory hook's file for a /new at `at_ms` (UTC) over the departing session's rendered lines."""
    t = datetime.fromtimestamp(at_ms / 1000, UTC)
    parts = [f"# Session: {t.strftime('%Y-%m-%d %H:%M:%S')} UTC", "", f"- **Session Key**: {session_key}",
             f"- **Session ID**: {session_id}", f"- **Source**: {HOOK_SOURCE}", ""]
    if lines:
        parts += ["## Conversation Summary", "", "\n".join(lines[-HOOK_MESSAGES:]), ""]
    return "\n".join(parts)


def agent_id(namespace: str) -> str:
    """The OpenClaw agent id of a rig namespace (namespaces may hold any characters, agent ids may not); the port's
    hook files name the same agent as OpenClaw's."""
    return "ns-" + hashlib.sha256(namespace.encode("utf-8")).hexdigest()[:24]


def session_key(agent: str) -> str:
    return f"agent:{agent}:main"


def stable_session_id(agent: str, first_ms: int) -> str:
    """The id of an agent's main session as openclaw-real's sidecar creates it (sidecar.mjs `stableSessionId`:
    OpenClaw draws a random UUID, the rig derives a v4-shaped one from the agent and its first message's time so a
    replay is reproducible). The port uses the same, so its hook files hold the same bytes as OpenClaw's."""
    h = hashlib.sha256(f"memrig-session\0{agent}\0{first_ms}".encode()).hexdigest()
    variant = format((int(h[16], 16) & 3) | 8, "x")
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{variant}{h[17:20]}-{h[20:32]}"


# ---------------------------------------------------------------------------------------------- replay state
@dataclass
class Turn:
    """One message of the transcript as the replay sees it."""
    message_id: str
    role: str  # "user" | "assistant"
    text: str
    ms: int


@dataclass
class InstallState:
    """A namespace's live OpenClaw session between ingests: the active window since the last compaction or /new,
    the compaction count and whether this cycle has flushed, and the session still open (no /new yet)."""
    summary: str = ""  # the last compaction summary in the active window ("" when none)
    window: list[Turn] = field(default_factory=list)
    compactions: int = 0
    flushed_cycle: int = -1  # the compaction count at the last flush (-1: never)
    open_session: str | None = None
    open_turns: list[Turn] = field(default_factory=list)  # the open session's messages (for the hook)
    closed: list[str] = field(default_factory=list)  # sessions a /new has closed, in order
    transcript_lines: dict[str, dict[int, str]] = field(default_factory=dict)  # transcript path → line → message id
    first_ms: int | None = None  # the namespace's first message (its main session's id derives from it)
    transcript_turns: dict[str, tuple[str, str]] = field(default_factory=dict)  # message id → (role, text) written

    def copy(self) -> InstallState:
        return InstallState(self.summary, list(self.window), self.compactions, self.flushed_cycle,
                            self.open_session, list(self.open_turns), list(self.closed),
                            {k: dict(v) for k, v in self.transcript_lines.items()}, self.first_ms,
                            dict(self.transcript_turns))

    def tokens(self, system_prompt_tokens: int = 0) -> int:
        t = sum(estimate_tokens(x.text) for x in self.window) + system_prompt_tokens
        return t + (estimate_tokens(COMPACTED_PREFIX + self.summary + "\n</summary>") if self.summary else 0)

    def active_bytes(self) -> int:
        return sum(event_bytes(x.role, x.text, x.ms) for x in self.window)

    def flushed_this_cycle(self) -> bool:
        return self.flushed_cycle == self.compactions

    def reset_window(self) -> None:
        self.summary, self.window = "", []
        self.compactions, self.flushed_cycle = 0, -1

    def keep_recent(self, keep_tokens: int = KEEP_RECENT_TOKENS) -> list[Turn]:
        """The newest messages compaction keeps: findCutPoint walks back from the newest message and stops at the one
        that brings the total to `keep_tokens` (that one is kept)."""
        kept: list[Turn] = []
        total = 0
        for t in reversed(self.window):
            kept.append(t)
            total += estimate_tokens(t.text)
            if total >= keep_tokens:
                break
        return kept[::-1]


def flush_context(state: InstallState) -> list[tuple[str, str]]:
    """What the flush turn sees: the last compaction summary (as a user message) and the messages after it."""
    out = [("user", COMPACTED_PREFIX + state.summary + "\n</summary>")] if state.summary else []
    return out + [(t.role, t.text) for t in state.window]


def should_flush_after_turn(state: InstallState, th: Thresholds, system_prompt_tokens: int = 0) -> bool:
    if state.flushed_this_cycle():
        return False
    return state.tokens(system_prompt_tokens) >= th.flush_tokens or state.active_bytes() >= th.force_flush_bytes


def should_compact_before(state: InstallState, incoming: str, th: Thresholds, system_prompt_tokens: int = 0) -> bool:
    return state.tokens(system_prompt_tokens) + estimate_tokens(incoming) >= th.compact_tokens


def live_session_size(state: InstallState) -> tuple[int, int]:
    """The live (still open) session: its messages and their cl100k tokens (services.common.tokens, per message
    text, summed); (0, 0) when no session is open."""
    if state.open_session is None:
        return 0, 0
    return len(state.open_turns), sum(count_tokens(t.text) for t in state.open_turns)
