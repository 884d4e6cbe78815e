"""Where fault definitions live: in this process (default) or in Redis, shared by every proxy replica.

Redis layout (prefix `memrig:fault_proxy:<proxy name>:`): `faults` is a hash name → fault JSON and
`version` a counter bumped by every change. A replica reads `version` before each decision (one round trip)
and reloads the hash only when it moved, so all replicas see an added or removed fault on their next
request. Counters that are per request (token buckets, in-flight counts, one-shot hit counts) stay per
replica: they are documented as such in the README of the service.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from services.common.errors import InputError
from services.fault_proxy.faults import FaultSpec


class FaultExists(InputError):
    """A fault of that name exists already (409); str(e) is the name."""

    status = 409

    def __init__(self, name: str):
        super().__init__("name", f"fault {name!r} already exists", text=name)


class FaultNotFound(InputError):
    """No fault of that name (404); str(e) is the name."""

    status = 404

    def __init__(self, name: str):
        super().__init__("name", f"fault {name!r} not found", text=name)


class FaultStore(Protocol):
    async def version(self) -> int: ...

    async def load(self) -> tuple[int, list[FaultSpec]]: ...

    async def create(self, spec: FaultSpec) -> FaultSpec: ...

    async def replace(self, spec: FaultSpec) -> FaultSpec: ...

    async def delete(self, name: str) -> None: ...

    async def clear(self) -> None: ...

    async def close(self) -> None: ...


class LocalStore:
    """A dict and a version counter; the order of a fault is the version at which it was created."""

    def __init__(self) -> None:
        self._faults: dict[str, FaultSpec] = {}
        self._version = 0

    async def version(self) -> int:
        return self._version

    async def load(self) -> tuple[int, list[FaultSpec]]:
        return self._version, sorted(self._faults.values(), key=lambda f: (f.order, f.name))

    async def create(self, spec: FaultSpec) -> FaultSpec:
        if spec.name in self._faults:
            raise FaultExists(spec.name)
        self._version += 1
        spec = _with(spec, generation=self._version, order=self._version)
        self._faults[spec.name] = spec
        return spec

    async def replace(self, spec: FaultSpec) -> FaultSpec:
        old = self._faults.get(spec.name)
        if old is None:
            raise FaultNotFound(spec.name)
        self._version += 1
        spec = _with(spec, generation=self._version, order=old.order, created_at=old.created_at)
        self._faults[spec.name] = spec
        return spec

    async def delete(self, name: str) -> None:
        if name not in self._faults:
            raise FaultNotFound(name)
        del self._faults[name]
        self._version += 1

    async def clear(self) -> None:
        self._faults.clear()
        self._version += 1

    async def close(self) -> None:
        pass


class RedisStore:
    """The same operations over a Redis hash + version counter (redis.asyncio)."""

    def __init__(self, url: str, proxy_name: str = "default") -> None:
        from services.common.redis_client import async_redis

        self._r = async_redis(url, decode_responses=True)
        base = f"memrig:fault_proxy:{proxy_name}:"
        self._hash, self._ver = base + "faults", base + "version"

    async def version(self) -> int:
        return int(await self._r.get(self._ver) or 0)

    async def load(self) -> tuple[int, list[FaultSpec]]:
        async with self._r.pipeline(transaction=True) as p:
            p.get(self._ver)
            p.hgetall(self._hash)
            ver, raw = await p.execute()
        faults = [FaultSpec.from_json(json.loads(v)) for v in raw.values()]
        return int(ver or 0), sorted(faults, key=lambda f: (f.order, f.name))

    async def create(self, spec: FaultSpec) -> FaultSpec:
        v = int(await self._r.incr(self._ver))
        spec = _with(spec, generation=v, order=v)
        if not await self._r.hsetnx(self._hash, spec.name, _dump(spec)):
            raise FaultExists(spec.name)
        await self._r.incr(self._ver)
        return spec

    async def replace(self, spec: FaultSpec) -> FaultSpec:
        raw = await self._r.hget(self._hash, spec.name)
        if raw is None:
            raise FaultNotFound(spec.name)
        old = json.loads(raw)
        v = int(await self._r.incr(self._ver))
        spec = _with(spec, generation=v, order=int(old.get("order", v)), created_at=float(old.get("created_at", 0)))
        await self._r.hset(self._hash, spec.name, _dump(spec))
        await self._r.incr(self._ver)
        return spec

    async def delete(self, name: str) -> None:
        if not await self._r.hdel(self._hash, name):
            raise FaultNotFound(name)
        await self._r.incr(self._ver)

    async def clear(self) -> None:
        await self._r.delete(self._hash)
        await self._r.incr(self._ver)

    async def close(self) -> None:
        await self._r.aclose()


def _dump(spec: FaultSpec) -> str:
    return json.dumps(spec.to_json(), sort_keys=True)


def _with(spec: FaultSpec, **kw: Any) -> FaultSpec:
    return FaultSpec(**{**spec.__dict__, **kw})
