"""Error base classes shared by adapters and servers, so common code can map an adapter's failure to a gRPC status
without importing the adapter (services/common/grpc_status.py)."""

from __future__ import annotations


class DependencyError(RuntimeError):
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
