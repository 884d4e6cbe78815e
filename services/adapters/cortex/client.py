"""An aiohttp client for the Cortex HTTP API, shaped like the plugin's `src/cortex/client.ts`.

Headers `x-api-key` and `Content-Type: application/json`; each call has its own timeout (the plugin's
per-endpoint budgets in that file); a non-2xx answer raises `CortexHTTPError` ("Cortex <label>
failed: <status> — <first 300 chars of body>"), a timeout raises `CortexTimeout` ("Cortex <label> timed out
after <ms>ms"), a broken connection or unreadable body raises `CortexError`.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import quote

import aiohttp

from services.common.errors import DependencyError


class CortexError(DependencyError):
    """Any failed call. `kind` is what a degraded_reason starts with."""

    kind = "error"
    dependency = "the Cortex API"
    hint = "start cortex-mock (`memrig up --services cortex-mock`) or set the cortex backend's base_url"


class CortexHTTPError(CortexError):
    def __init__(self, label: str, status: int, body: str):
        super().__init__(f"Cortex {label} failed: {status} — {body[:300]}", status)
        self.kind = f"http_{status}"


class CortexTimeout(CortexError):
    kind = "timeout"

    def __init__(self, label: str, ms: float):
        super().__init__(f"Cortex {label} timed out after {int(ms)}ms")


class CortexConnectionError(CortexError):
    kind = "connection_error"


class CortexBadResponse(CortexError):
    kind = "bad_response"


class CortexClient:
    def __init__(self, base_url: str, api_key: str = "", session: aiohttp.ClientSession | None = None):
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self._session = session
        self._own = session is None
        self.requests = 0

    async def close(self) -> None:
        if self._own and self._session is not None:
            await self._session.close()
            self._session = None

    def _s(self) -> aiohttp.ClientSession:
        if self._session is None:
            # No connection limit of our own: the proxy's concurrency_limit fault is what limits, not us.
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        return self._session

    async def call(self, method: str, path: str, label: str, timeout_ms: float, body: Any = None,
                   api_key: str | None = None) -> Any:
        headers = {"Content-Type": "application/json"}
        key = self.api_key if api_key is None else api_key
        if key:
            headers["x-api-key"] = key
        data = json.dumps(body).encode() if body is not None else None
        self.requests += 1
        try:
            async with asyncio.timeout(timeout_ms / 1000.0):
                async with self._s().request(method, self.base_url + path, data=data, headers=headers) as r:
                    raw = await r.read()
                    if not 200 <= r.status < 300:
                        raise CortexHTTPError(label, r.status, raw.decode("utf-8", "replace"))
        except TimeoutError:
            raise CortexTimeout(label, timeout_ms) from None
        except aiohttp.ClientPayloadError as e:
            raise CortexBadResponse(f"Cortex {label} failed: incomplete body: {e}") from None
        except aiohttp.ClientError as e:
            raise CortexConnectionError(f"Cortex {label} failed: {type(e).__name__}: {e}") from None
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except ValueError as e:
            raise CortexBadResponse(f"Cortex {label} failed: invalid JSON: {e}") from None

    # -- endpoints used by the adapter (api_key: per-call override, for a tenant per namespace) ------------
    async def retrieve(self, body: dict[str, Any], timeout_ms: float, api_key: str | None = None) -> dict[str, Any]:
        return await self.call("POST", "/v1/retrieve", "retrieve", timeout_ms, body, api_key)

    async def submit_ingest_conversation(self, body: dict[str, Any], timeout_ms: float,
                                         api_key: str | None = None) -> dict[str, Any]:
        return await self.call("POST", "/v1/jobs/ingest/conversation", "ingest conversation job", timeout_ms, body,
                               api_key)

    async def submit_ingest(self, body: dict[str, Any], timeout_ms: float, api_key: str | None = None) -> dict[str, Any]:
        return await self.call("POST", "/v1/jobs/ingest", "ingest job", timeout_ms, body, api_key)

    async def get_job(self, job_id: str, timeout_ms: float, api_key: str | None = None) -> dict[str, Any]:
        return await self.call("GET", f"/v1/jobs/{quote(job_id, safe='')}", "job status", timeout_ms, None, api_key)

    async def knowledge(self, user_id: str, timeout_ms: float, api_key: str | None = None) -> dict[str, Any]:
        return await self.call("GET", f"/v1/knowledge?user_id={quote(user_id, safe='')}", "knowledge", timeout_ms,
                               None, api_key)

    async def forget_session(self, session_id: str, timeout_ms: float, api_key: str | None = None) -> dict[str, Any]:
        return await self.call("DELETE", f"/v1/forget/session/{quote(session_id, safe='')}", "forget session",
                               timeout_ms, None, api_key)

    async def health(self, timeout_ms: float = 5000) -> bool:
        try:
            await self.call("GET", "/health", "health", timeout_ms)
            return True
        except CortexError:
            return False
