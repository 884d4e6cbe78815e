"""Tenant sharding: which cortex-mock upstream owns a tenant, so the proxy sends every request of a tenant there.

A tenant of the Cortex API is its API key (cortex-mock keeps one SQLite database per key, services/cortex_mock
app.py `authenticate`), so the shard key is the `x-api-key` header, stripped of surrounding whitespace as
cortex-mock strips it (a request without the header is routed by the empty key; its owner answers 401 as any
cortex-mock would). A job's status request carries the same key, so it reaches the shard whose job table holds
the job.

The rule, `shard_owner`, is rendezvous (highest-random-weight) hashing over the shard names:

    weight(name, key) = the first 8 bytes of SHA-256(name + "\\n" + key), read as a big-endian integer
    owner(key)        = the shard with the largest weight (on a tie, the first in the map)

Every proxy replica computes the same owner from the same map, with no shared state. Adding or removing a shard
moves only the tenants that the new shard wins or the removed shard owned (a tenant's weight on the other shards
does not change); the data of a moved tenant stays on its old shard's volume (the rig's tenants live for a run).

The map is `--shard-map` / MEMRIG_PROXY_SHARD_MAP: comma-separated `NAME=URL` entries (the name is what is
hashed, so a shard keeps its tenants when its address changes), or bare URLs (the URL is then its name).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Shard:
    name: str
    url: str


def weight(name: str, key: str) -> int:
    """The rendezvous weight of shard `name` for tenant `key` (see the module docstring)."""
    return int.from_bytes(hashlib.sha256(f"{name}\n{key}".encode()).digest()[:8], "big")


def shard_owner(api_key: str | None, names: Sequence[str]) -> int:
    """Index in `names` of the shard that owns the tenant of `api_key` (the one rule every router uses)."""
    if not names:
        raise ValueError("shard map: no shard")
    key = (api_key or "").strip()
    best, best_w = 0, -1
    for i, name in enumerate(names):
        w = weight(name, key)
        if w > best_w:
            best, best_w = i, w
    return best


def parse_shard_map(text: str) -> tuple[Shard, ...]:
    """`NAME=URL,NAME=URL` or `URL,URL` into shards; a clear ValueError naming the entry otherwise."""
    shards: list[Shard] = []
    for raw in text.split(","):
        entry = raw.strip()
        if not entry:
            continue
        name, sep, url = entry.partition("=")
        if not sep:
            name, url = entry, entry
        name, url = name.strip(), url.strip().rstrip("/")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"shard map entry {entry!r}: the URL must be http(s)://host[:port]")
        if not name:
            raise ValueError(f"shard map entry {entry!r}: empty shard name")
        shards.append(Shard(name, url))
    if not shards:
        raise ValueError("shard map: no shard")
    names = [s.name for s in shards]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"shard map: shard name(s) {dup} appear more than once")
    return tuple(shards)
