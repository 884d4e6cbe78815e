"""What the fault proxy's two halves share: its configuration and per-app state (the proxy path in app.py, the admin
API in admin.py, both on one state when the admin API has its own port) and the JSON error shape they answer in.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from services.fault_proxy.engine import FaultEngine
from services.fault_proxy.shards import Shard, shard_owner

ADMIN_PREFIX = "/__admin"


@dataclass
class ProxyConfig:
    upstream: str
    allow_header_faults: bool = False
    admin_token: str = ""
    admin_on_proxy_port: bool = True
    upstream_timeout_s: float = 300.0
    refresh_interval_s: float = 0.25  # background refresh (Redis mode) so removals on other replicas release
    store_kind: str = "local"
    # Tenant sharding (services/fault_proxy/shards.py): when set, each request goes to the shard that owns its
    # x-api-key, and `upstream` is unused.
    shards: tuple[Shard, ...] = ()

    def upstream_for(self, api_key: str | None) -> tuple[str, int | None]:
        """(base URL, shard index or None) a request with this x-api-key is forwarded to."""
        if not self.shards:
            return self.upstream, None
        i = shard_owner(api_key, [s.name for s in self.shards])
        return self.shards[i].url, i


@dataclass
class ProxyState:
    config: ProxyConfig
    engine: FaultEngine
    session: aiohttp.ClientSession | None = None
    tasks: list[asyncio.Task] = field(default_factory=list)


STATE = web.AppKey("fault_proxy_state", ProxyState)


def error_response(status: int, message: str, field_name: str = "") -> web.Response:
    body: dict[str, Any] = {"error": message, "status": status}
    if field_name:
        body["field"] = field_name
    return web.json_response(body, status=status)


def too_long(status: int, field_name: str, message: str) -> web.Response:
    """A request line or header past the parser's limits (no handler ran): 414 / 431 in the admin API's shape."""
    return error_response(status, message, field_name)
