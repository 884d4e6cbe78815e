"""The rig's error root and its families, and the one mapping from a family to an HTTP status.

    MemrigError
    ├── InputError        bad input; `field` names it (dotted path, flag, file): ValidationError
    │                     (services/common/types.py) and every service's own bad-request class subclass it
    ├── DependencyError   a service or resource the code needs failed or is missing (an LLM endpoint, the Cortex
    │                     API, a sidecar, a data set, kubectl)
    │   └── LaunchError   a child process the rig started would not start or did not say READY in time
    │                     (services/common/process.py)
    └── BackendError      a memory backend called over gRPC failed the call (services/adapters/client.py)
        ├── BackendUnavailable   not reached in time (UNAVAILABLE, DEADLINE_EXCEEDED)
        └── BackendFailed        reached and failed for good (FAILED_PRECONDITION, CANCELLED, UNKNOWN, INTERNAL)

Each protocol maps the families in one place: gRPC in services/common/grpc_status.py (status_for) and
services/adapters/client.py (the reverse, a status to a class), HTTP in `http_status` below (each aiohttp service
keeps its own body shape and asks this function for the status). The coordinator's runner decides what a failed
probe means by these types (services/coordinator/runner.py run_one).

InputError subclasses ValueError and DependencyError / BackendError subclass RuntimeError, as their classes did
before the root existed, so `except ValueError` around a parser keeps catching them.
"""

from __future__ import annotations


class MemrigError(Exception):
    """The root of the rig's own errors."""


class InputError(MemrigError, ValueError):
    """Bad input. `field` names the offending field (dotted path, flag or file) so the caller can fix it; `message`
    says what is wrong with it; str(e) is "field: message" unless a subclass keeps another wording (`text`, e.g. an
    OpenAI-style error whose message already names its parameter). `status` is the HTTP status the input earns
    (400 unless the class says otherwise: 404 for a name that does not exist, 409 for one that does, 422 for
    valid JSON with invalid content)."""

    status = 400

    def __init__(self, field_name: str, message: str, *, text: str | None = None):
        super().__init__(text if text is not None else (f"{field_name}: {message}" if field_name else message))
        self.field = field_name
        self.message = message


class DependencyError(MemrigError, RuntimeError):
    """A service a backend needs failed a call. `dependency` names it for a person ("the Cortex API"), `hint` says
    how to bring it up, `status` is the HTTP status when the service answered (None when it was not reached). A 4xx
    other than 429 is a refusal for good; anything else is the dependency being unavailable."""

    dependency = "a dependency"
    hint = ""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status

    @property
    def refused(self) -> bool:
        return self.status is not None and 400 <= self.status < 500 and self.status != 429


class LaunchError(DependencyError):
    """A rig process that would not start or did not say READY in time; the message says which and why (with the
    tail of its log). Raised by services/common/process.py for every child the rig starts."""

    dependency = "a rig process"


class BackendError(MemrigError, RuntimeError):
    """A memory backend failed a call (crashed, unreachable, internal error, or a status the rig does not sort).
    `code` is the gRPC status name the backend answered."""

    def __init__(self, backend: str, code: str, message: str):
        super().__init__(f"{backend}: {code}: {message}")
        self.backend = backend
        self.code = code


class BackendUnavailable(BackendError):
    """The backend was not reached in time (UNAVAILABLE, DEADLINE_EXCEEDED): down, or too slow for the deadline."""


class BackendFailed(BackendError):
    """The backend was reached and failed for good (FAILED_PRECONDITION: a dependency refuses; CANCELLED; UNKNOWN;
    INTERNAL): no later call of the run will fare better."""


def http_status(e: BaseException) -> int:
    """The HTTP status an aiohttp service answers for `e` (RFC 9110 §15): an InputError its own `status` (4xx);
    BackendUnavailable 503; a DependencyError or another BackendError 502 (an upstream the service needs failed);
    anything else 500."""
    if isinstance(e, InputError):
        return int(e.status)
    if isinstance(e, BackendUnavailable):
        return 503
    if isinstance(e, DependencyError | BackendError):
        return 502
    return 500
