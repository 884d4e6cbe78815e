"""One HTTP call of the `http` adapter: auth/extra headers, a per-operation timeout, retries with
exponential backoff on the mapping's retryable statuses and on timeouts, and errors that say what failed."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

from services.adapters.http.mapping import Retries
from services.common.errors import DependencyError


class ServiceError(DependencyError):
    """A failed call after its retries. `kind` starts a degraded_reason (`http_503`, `timeout`, ...)."""

    dependency = "the memory service behind the http adapter"
    hint = "start it, or check the mapping's base_url"

    def __init__(self, kind: str, message: str, status: int = 0):
        super().__init__(message, status or None)
        self.kind = kind
        self.status = status


class HttpCaller:
    def __init__(self, base_url: str, retries: Retries, session: aiohttp.ClientSession | None = None):
        self.base_url = base_url.rstrip("/")
        self.retries = retries
        self._session = session
        self.requests = 0
        self.retried = 0

    def _s(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64))
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _once(self, method: str, url: str, body: Any, headers: dict[str, str], timeout_ms: int,
                    ok_status: list[int]) -> Any:
        data = None if body is None else json.dumps(body).encode()
        self.requests += 1
        try:
            async with asyncio.timeout(timeout_ms / 1000.0):
                async with self._s().request(method, url, data=data, headers=headers) as r:
                    raw = await r.read()
                    status = r.status
        except TimeoutError:
            raise ServiceError("timeout", f"{method} {url} timed out after {timeout_ms} ms") from None
        except aiohttp.ClientError as e:
            raise ServiceError("connection_error", f"{method} {url}: {type(e).__name__}: {e}") from None
        if not 200 <= status < 300:
            if status in ok_status:
                return {}
            raise ServiceError(f"http_{status}", f"{method} {url} -> {status}: "
                                                 f"{raw.decode('utf-8', 'replace')[:300]}", status)
        if not raw.strip():
            return {}
        try:
            return json.loads(raw)
        except ValueError as e:
            raise ServiceError("bad_response", f"{method} {url}: response is not JSON: {e}") from None

    def _retryable(self, e: ServiceError) -> bool:
        if e.kind == "timeout":
            return self.retries.on_timeout
        if e.kind == "connection_error":
            return True
        return e.status in self.retries.on_status

    async def call(self, method: str, path: str, body: Any, headers: dict[str, str], timeout_ms: int,
                   ok_status: list[int] | None = None) -> Any:
        url = self.base_url + path
        hdrs = {"Content-Type": "application/json", **headers}
        delay = self.retries.backoff_ms / 1000.0
        for attempt in range(1, self.retries.attempts + 1):
            try:
                return await self._once(method, url, body, hdrs, timeout_ms, ok_status or [])
            except ServiceError as e:
                if attempt == self.retries.attempts or not self._retryable(e):
                    if attempt > 1:
                        e.args = (f"{e.args[0]} (after {attempt} tries)",)
                    raise
                self.retried += 1
                await asyncio.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")
