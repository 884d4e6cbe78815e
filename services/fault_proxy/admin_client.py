"""A small async client for the fault proxy's admin API, for drills, locust timelines and tests.

    async with FaultProxyAdmin("http://127.0.0.1:8792") as admin:
        await admin.reset(seed=7)
        await admin.add_fault("slow", "latency", attributes={"latency_ms": 3000})
        async with admin.fault("down", "http_error", attributes={"status": 503}):
            ...                                  # removed on exit, even on error
        entries = await admin.log()

`base_url` is the proxy URL (the client adds `/__admin`), or the `--admin-port` listener's URL.
Errors raise `AdminError(status, message, field)`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from services.common.errors import DependencyError

ADMIN_PREFIX = "/__admin"


class AdminError(DependencyError):
    """The fault proxy's admin API refused or failed a call: `status` its HTTP status, `field` the field its
    answer named (a refused definition), if any."""

    dependency = "the fault proxy's admin API"

    def __init__(self, status: int, message: str, field: str = ""):
        super().__init__(f"fault-proxy admin: HTTP {status}: {message}", status)
        self.message, self.field = message, field


class FaultProxyAdmin:
    def __init__(self, base_url: str, token: str = "", session: aiohttp.ClientSession | None = None,
                 timeout_s: float = 10.0):
        self.base = base_url.rstrip("/") + ADMIN_PREFIX
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._session = session
        self._own = session is None
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)

    async def __aenter__(self) -> FaultProxyAdmin:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._own and self._session is not None:
            await self._session.close()
            self._session = None

    async def _call(self, method: str, path: str, body: Any = None, params: dict | None = None) -> Any:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        async with self._session.request(method, self.base + path, json=body, params=params,
                                         headers=self._headers, timeout=self._timeout) as r:
            raw = await r.read()
            if r.status >= 400:
                try:
                    d = await r.json(content_type=None)
                    raise AdminError(r.status, d.get("error", raw.decode()), d.get("field", ""))
                except (ValueError, aiohttp.ContentTypeError):
                    raise AdminError(r.status, raw.decode(errors="replace")) from None
            if not raw:
                return None
            if r.content_type == "application/json":
                return await r.json()
            return raw.decode()

    # -- faults -----------------------------------------------------------------------------------
    async def add_fault(self, name: str, type: str, *, stage: str | None = None, toxicity: float = 1.0,
                        match: dict[str, Any] | None = None, attributes: dict[str, Any] | None = None,
                        max_hits: int | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"name": name, "type": type, "toxicity": toxicity,
                                "attributes": attributes or {}, "match": match or {}}
        if stage:
            body["stage"] = stage
        if max_hits is not None:
            body["max_hits"] = max_hits
        return await self._call("POST", "/faults", body)

    async def update(self, name: str, /, **fields: Any) -> dict[str, Any]:
        """PATCH: top-level fields replace; `attributes` and `match` merge key by key."""
        return await self._call("PATCH", f"/faults/{name}", fields)

    async def remove(self, name: str, missing_ok: bool = False) -> None:
        try:
            await self._call("DELETE", f"/faults/{name}")
        except AdminError as e:
            if not (missing_ok and e.status == 404):
                raise

    async def get(self, name: str) -> dict[str, Any]:
        return await self._call("GET", f"/faults/{name}")

    async def list_faults(self) -> list[dict[str, Any]]:
        return await self._call("GET", "/faults")

    async def populate(self, faults: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return (await self._call("POST", "/populate", {"faults": faults}))["faults"]

    async def reset(self, seed: int | None = None) -> None:
        await self._call("POST", "/reset", {"seed": seed} if seed is not None else None)

    async def log(self, since: int = 0, limit: int | None = None) -> list[dict[str, Any]]:
        params = {"since": str(since)}
        if limit:
            params["limit"] = str(limit)
        return (await self._call("GET", "/faults/log", params=params))["entries"]

    async def status(self) -> dict[str, Any]:
        return await self._call("GET", "/status")

    async def metrics(self) -> str:
        return await self._call("GET", "/metrics")

    @contextlib.asynccontextmanager
    async def fault(self, name: str, type: str, **kw: Any) -> AsyncIterator[dict[str, Any]]:
        """Add a fault for the duration of a block (toxiproxy's `.apply { }`), removing it afterwards."""
        spec = await self.add_fault(name, type, **kw)
        try:
            yield spec
        finally:
            await self.remove(name, missing_ok=True)
