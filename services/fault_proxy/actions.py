"""The vocabulary of the fault proxy's decisions: the limits every fault attribute keeps to, the error a bad
definition raises, the request a fault sees and the actions a decision returns for the proxy to carry out
(services/fault_proxy/faults.py re-exports all of it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from services.common.errors import InputError

STAGES = ("request", "response")
MAX_MS = 86_400_000.0  # 24 h: no delay/timeout attribute beyond it (1e300 ms is a typo, not a plan)
MAX_S = MAX_MS / 1000.0


class FaultError(InputError):
    """A bad fault definition; `field` names the offending field (dotted path) as the 400 body does."""


# ---------------------------------------------------------------------------------------------------
# Request description and actions


@dataclass(frozen=True)
class RequestInfo:
    seq: int
    method: str
    path: str
    body: bytes = b""


@dataclass(frozen=True)
class Delay:
    """Wait `seconds` (cut short, and the request forwarded, when the fault is removed), then go on."""

    seconds: float


@dataclass(frozen=True)
class Respond:
    """Answer with this status instead of forwarding (request stage) or instead of the upstream answer
    (response stage), after waiting `after_s` (if the fault is removed during the wait, go on as if it
    had not fired)."""

    status: int
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    after_s: float = 0.0


@dataclass(frozen=True)
class Abort:
    """Abort the transport (TCP reset). At the response stage, `after_bytes` of the body go out first."""

    after_bytes: int = 0


@dataclass(frozen=True)
class Hold:
    """Blackhole: never answer; released (and forwarded) only when the fault is removed or updated."""


@dataclass(frozen=True)
class Throttle:
    """Stream the body at `bytes_per_s` in `chunk_bytes` slices (a removal sends the rest at once)."""

    bytes_per_s: float
    chunk_bytes: int


@dataclass(frozen=True)
class Truncate:
    """Send the headers with the full Content-Length, then only `after_bytes` of the body, then close."""

    after_bytes: int


@dataclass(frozen=True)
class ReplaceBody:
    body: bytes


@dataclass
class ConcurrencyState:
    """A concurrency limit's count of the requests it admitted that have not ended yet."""

    in_flight: int = 0

    def release(self) -> None:
        self.in_flight = max(0, self.in_flight - 1)


@dataclass(frozen=True)
class Admit:
    """Passed a concurrency limit: the proxy must call `state.release()` when the request ends."""

    state: ConcurrencyState


Action = Delay | Respond | Abort | Hold | Throttle | Truncate | ReplaceBody | Admit


@dataclass(frozen=True)
class Decision:
    """What one fault decided for one request: `action` None means it drew no effect."""

    action: Action | None
    drawn: dict[str, Any] = field(default_factory=dict)
