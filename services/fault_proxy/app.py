"""The fault proxy's aiohttp applications: the reverse proxy and its toxiproxy-style admin API.

Admin API: served on the proxy port under the prefix `/__admin` (no Cortex path starts with `/__`), or,
with `--admin-port`, only on a separate listener (then `/__admin/*` on the proxy port is a 404):

    GET  /__admin/faults              list (application order)
    POST /__admin/faults              create → 201; 400 bad body (names the field); 409 exists
    GET|PATCH|DELETE /__admin/faults/{name}   200 / 200 / 204; 404 unknown
    GET  /__admin/faults/log?since=N&limit=M  per-request decisions with the drawn values
    POST /__admin/populate            create-or-replace a list, idempotent → 201
    POST /__admin/reset               remove every fault, restart numbering and log ({"seed": N} optional) → 204
    GET  /__admin/status              seed, upstream, request count, store
    GET  /__admin/metrics             Prometheus text (no token needed: read-only)

Everything else is forwarded to the upstream after the request-stage faults, and the answer goes back
after the response-stage faults.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web
from prometheus_client import REGISTRY
from prometheus_client.aiohttp import make_aiohttp_handler

from services.common.errors import http_status
from services.common.http_input import application, oversized
from services.fault_proxy.engine import FaultEngine
from services.fault_proxy.faults import (
    HEADER_PREFIX,
    Abort,
    Admit,
    CorruptBody,
    Delay,
    FaultError,
    FaultSpec,
    Hold,
    ReplaceBody,
    RequestInfo,
    Respond,
    Throttle,
    Truncate,
    header_faults,
    nesting_error,
    parse_fault,
)
from services.fault_proxy.metrics import FAULTS_INJECTED, INJECTED_DELAY, REQUESTS, UPSTREAM_DURATION
from services.fault_proxy.shards import Shard, shard_owner
from services.fault_proxy.store import FaultExists, FaultNotFound

ADMIN_PREFIX = "/__admin"
_HOP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "proxy-connection", "te",
        "trailer", "upgrade", "proxy-authorization", "proxy-authenticate"}


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


def _error(status: int, message: str, field_name: str = "") -> web.Response:
    body: dict[str, Any] = {"error": message, "status": status}
    if field_name:
        body["field"] = field_name
    return web.json_response(body, status=status)


def _too_long(status: int, field_name: str, message: str) -> web.Response:
    """A request line or header past the parser's limits (no handler ran): 414 / 431 in the admin API's shape."""
    return _error(status, message, field_name)


# ---------------------------------------------------------------------------------------------------
# Admin API


@web.middleware
async def _admin_auth(request: web.Request, handler):
    too_long = oversized(request)  # a URL or header past its limit: named here, not aiohttp's raw 400
    if too_long is not None:
        status, field_name, message = too_long
        return _error(status, message, field_name)
    st = request.app[STATE]
    token = st.config.admin_token
    is_admin = request.path.startswith(ADMIN_PREFIX)
    if is_admin and not st.config.admin_on_proxy_port and request.app.get(_IS_ADMIN_APP) is not True:
        return _error(404, "the admin API is on the admin port")
    if is_admin and token and request.path != f"{ADMIN_PREFIX}/metrics":
        given = request.headers.get("Authorization", "").encode("utf-8", "surrogateescape")
        if not hmac.compare_digest(given, f"Bearer {token}".encode("utf-8", "surrogateescape")):  # constant time
            return _error(401, "admin API needs 'Authorization: Bearer <token>'", "Authorization")
    return await handler(request)


_IS_ADMIN_APP = web.AppKey("is_admin_app", bool)


MAX_JSON_DEPTH = 64  # a fault definition is 3 levels deep; anything far deeper is not one


def _lone_surrogate(value: Any) -> str | None:
    """Dotted path of the first string (or key) that is not valid Unicode (a lone surrogate such as the
    JSON escape "\\ud800"), or None. Iterative, depth-checked: never a RecursionError."""
    stack: list[tuple[str, Any, int]] = [("", value, 0)]
    while stack:
        path, v, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise FaultError(path or "body", f"nested deeper than {MAX_JSON_DEPTH} levels")
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                return path or "body"
        elif isinstance(v, dict):
            for k, x in v.items():
                if _lone_surrogate(k) is not None:
                    return path or "body"
                stack.append((f"{path}.{k}" if path else k, x, depth + 1))
        elif isinstance(v, list):
            stack.extend((f"{path}[{i}]", x, depth + 1) for i, x in enumerate(v))
    return None


async def _json_body(request: web.Request, allow_empty: bool = False) -> Any:
    raw = await request.read()
    if not raw.strip():
        if allow_empty:
            return {}
        raise FaultError("body", "a JSON body is required")
    try:
        value = json.loads(raw)
    except RecursionError:
        raise nesting_error(raw) from None
    except ValueError as e:
        raise FaultError("body", f"not valid JSON: {e}") from None
    bad = _lone_surrogate(value)
    if bad is not None:
        raise FaultError(bad, "is not valid Unicode (a lone UTF-16 surrogate)")
    return value


async def list_faults(request: web.Request) -> web.Response:
    eng = request.app[STATE].engine
    await eng.refresh()
    return web.json_response([f.to_json() for f in eng.faults])


async def create_fault(request: web.Request) -> web.Response:
    eng = request.app[STATE].engine
    try:
        spec = parse_fault(await _json_body(request))
    except FaultError as e:
        return _error(http_status(e), str(e), e.field)
    spec = FaultSpec(**{**spec.__dict__, "created_at": eng.clock()})
    try:
        spec = await eng.store.create(spec)
    except FaultExists as e:
        return _error(http_status(e), e.message, e.field)
    await eng.refresh(force=True)
    return web.json_response(spec.to_json(), status=201)


async def _get(eng: FaultEngine, name: str) -> FaultSpec | None:
    await eng.refresh()
    return next((f for f in eng.faults if f.name == name), None)


async def get_fault(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    spec = await _get(request.app[STATE].engine, name)
    if spec is None:
        return _error(404, f"fault {name!r} not found", "name")
    return web.json_response(spec.to_json())


def merge_patch(old: FaultSpec, patch: Any) -> FaultSpec:
    """Apply a PATCH body: top-level fields replace, `attributes` and `match` merge key by key."""
    if not isinstance(patch, dict):
        raise FaultError("body", "must be a JSON object")
    if "name" in patch and patch["name"] != old.name:
        raise FaultError("name", "cannot be changed (delete and create instead)")
    d = old.definition()
    if "type" in patch and patch["type"] != old.type:
        # Another type reads other attributes: merging would carry stale ones over (now refused as unknown)
        # or silently drop them. A type change therefore states the new type's attributes in full.
        if not isinstance(patch.get("attributes"), dict):
            raise FaultError("attributes", f"changing type from {old.type!r} needs the new type's attributes "
                             "in the same PATCH (they replace the old ones)")
        d["attributes"] = {}
        if "stage" not in patch:
            d["stage"] = None  # the new type's default stage
    for k, v in patch.items():
        if k in ("attributes", "match") and isinstance(v, dict):
            d[k] = {**(d.get(k) or {}), **v}
        else:
            d[k] = v
    return parse_fault(d)


async def patch_fault(request: web.Request) -> web.Response:
    eng = request.app[STATE].engine
    name = request.match_info["name"]
    old = await _get(eng, name)
    if old is None:
        return _error(404, f"fault {name!r} not found", "name")
    try:
        spec = merge_patch(old, await _json_body(request))
    except FaultError as e:
        return _error(http_status(e), str(e), e.field)
    try:
        spec = await eng.store.replace(spec)
    except FaultNotFound as e:
        return _error(http_status(e), e.message, e.field)
    await eng.refresh(force=True)
    return web.json_response(spec.to_json())


async def delete_fault(request: web.Request) -> web.Response:
    eng = request.app[STATE].engine
    name = request.match_info["name"]
    try:
        await eng.store.delete(name)
    except FaultNotFound as e:
        return _error(http_status(e), e.message, e.field)
    await eng.refresh(force=True)
    return web.Response(status=204)


async def populate(request: web.Request) -> web.Response:
    """Create or replace each listed fault; one that is identical is left alone (so its outage clock, token
    bucket and hit count carry on): calling populate twice with the same list changes nothing."""
    eng = request.app[STATE].engine
    try:
        body = await _json_body(request)
        items = body.get("faults") if isinstance(body, dict) else body
        if not isinstance(items, list):
            raise FaultError("faults", "must be a list of faults (or {\"faults\": [...]})")
        specs = []
        for i, item in enumerate(items):
            try:
                specs.append(parse_fault(item))
            except FaultError as e:
                raise FaultError(f"faults[{i}].{e.field}", e.message) from None
        names = [s.name for s in specs]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup:
            raise FaultError("faults", f"name {dup!r} appears twice")
    except FaultError as e:
        return _error(http_status(e), str(e), e.field)
    await eng.refresh(force=True)
    current = {f.name: f for f in eng.faults}
    out = []
    for spec in specs:
        old = current.get(spec.name)
        if old is not None and old.definition() == spec.definition():
            out.append(old)
        elif old is not None:
            out.append(await eng.store.replace(spec))
        else:
            out.append(await eng.store.create(FaultSpec(**{**spec.__dict__, "created_at": eng.clock()})))
    await eng.refresh(force=True)
    return web.json_response({"faults": [f.to_json() for f in out]}, status=201)


async def reset(request: web.Request) -> web.Response:
    eng = request.app[STATE].engine
    try:
        body = await _json_body(request, allow_empty=True)
        seed = body.get("seed") if isinstance(body, dict) else None
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise FaultError("seed", "must be an integer")
    except FaultError as e:
        return _error(http_status(e), str(e), e.field)
    await eng.store.clear()
    await eng.refresh(force=True)
    eng.reset_run(seed)
    return web.Response(status=204)


async def fault_log(request: web.Request) -> web.Response:
    eng = request.app[STATE].engine
    params: dict[str, int | None] = {}
    for key, default in (("since", 0), ("limit", None)):
        raw = request.query.get(key)
        try:
            v = default if raw is None else int(raw)
        except ValueError:
            return _error(400, f"{key} must be an integer (got {raw!r})", key)
        if v is not None and v < 0:
            return _error(400, f"{key} must be >= 0 (got {v})", key)
        params[key] = v
    since, limit = params["since"], params["limit"]
    return web.json_response({"seed": eng.seed, "requests": eng.requests_seen,
                              "entries": eng.log_entries(since, limit)})


async def status(request: web.Request) -> web.Response:
    st = request.app[STATE]
    await st.engine.refresh()
    return web.json_response({
        "upstream": st.config.upstream, "shards": [{"name": x.name, "url": x.url} for x in st.config.shards],
        "seed": st.engine.seed, "requests": st.engine.requests_seen,
        "faults": len(st.engine.faults), "store": st.config.store_kind,
        "allow_header_faults": st.config.allow_header_faults,
    })


def add_admin_routes(app: web.Application) -> None:
    p = ADMIN_PREFIX
    app.router.add_get(f"{p}/faults", list_faults)
    app.router.add_post(f"{p}/faults", create_fault)
    app.router.add_get(f"{p}/faults/log", fault_log)  # before {name}: "log" is a reserved fault name
    app.router.add_get(f"{p}/faults/{{name}}", get_fault)
    app.router.add_patch(f"{p}/faults/{{name}}", patch_fault)
    app.router.add_delete(f"{p}/faults/{{name}}", delete_fault)
    app.router.add_post(f"{p}/populate", populate)
    app.router.add_post(f"{p}/reset", reset)
    app.router.add_get(f"{p}/status", status)
    app.router.add_get(f"{p}/metrics", make_aiohttp_handler(REGISTRY))


# ---------------------------------------------------------------------------------------------------
# The proxy


class _Done(Exception):
    """Carries the response that ends a request early."""

    def __init__(self, response: web.StreamResponse, outcome: str):
        self.response, self.outcome = response, outcome


def _respond(act: Respond) -> web.Response:
    return web.Response(status=act.status, body=act.body, headers=dict(act.headers),
                        content_type="application/json")


async def _send_partial(request: web.Request, status: int, headers: dict[str, str], body: bytes, n: int,
                        abort: bool) -> web.StreamResponse:
    """Headers with the full Content-Length, `n` bytes of body, then RST (abort) or FIN (close)."""
    resp = web.StreamResponse(status=status, headers=headers)
    resp.content_length = len(body)
    await resp.prepare(request)
    if n > 0:
        await resp.write(body[:n])
    tr = request.transport
    if tr is not None:
        tr.abort() if abort else tr.close()
    return resp


async def proxy_handler(request: web.Request) -> web.StreamResponse:
    return await _ProxiedRequest(request).handle()


class _ProxiedRequest:
    """One request through the proxy: request-stage faults, the upstream call, response-stage faults; then the log
    entry, the metrics, and the admission slots it held released. A stage that ends the request raises _Done."""

    def __init__(self, request: web.Request):
        self.request = request
        self.st = request.app[STATE]
        self.eng = self.st.engine
        self.admitted: list[Any] = []
        self.delayed = 0.0
        self.outcome = "forwarded"
        self.throttle: tuple[Any, Throttle] | None = None
        self.entry: dict[str, Any] = {}

    async def handle(self) -> web.StreamResponse:
        request, eng = self.request, self.eng
        seq = eng.next_seq()
        body = await request.read()
        info = RequestInfo(seq, request.method, request.path, body)
        await eng.refresh()
        self.entry = {"seq": seq, "t": round(time.time(), 3), "method": request.method, "path": request.path,
                      "faults": [], "upstream": False}
        try:
            try:
                await self._request_stage(info)
                resp = await self._forward(body)
                resp = await self._response_stage(info, resp)
                raise _Done(await self._send(resp), self.outcome)
            except _Done as d:
                self.outcome = d.outcome
                self.entry["status"] = None if self.outcome == "aborted" else d.response.status
                return d.response
        except asyncio.CancelledError:
            self.outcome = "client_gone"
            raise
        finally:
            for s in self.admitted:
                s.release()
            self.entry["outcome"] = self.outcome
            if self.delayed:
                self.entry["delay_s"] = round(self.delayed, 6)
            eng.record(self.entry)
            REQUESTS.labels(self.outcome).inc()

    async def _waited(self, spec, seconds) -> bool:
        t0 = time.perf_counter()
        released = await self.eng.wait(spec, seconds)
        dt = time.perf_counter() - t0
        self.delayed += dt
        INJECTED_DELAY.observe(dt)
        return released

    # -- request stage ----------------------------------------------------------------------------
    async def _request_stage(self, info: RequestInfo) -> None:
        if self.st.config.allow_header_faults:
            actions, seen = header_faults(dict(self.request.headers))
            if seen:
                self.entry["header_faults"] = seen
            for act in actions:
                await self._request_action(None, act, None)
        for spec in self.eng.matching(info, "request"):
            dec, drawn, _ = self.eng.decide(spec, info)
            dl = drawn.to_json()
            self.entry["faults"].append(dl)
            if isinstance(dec.action, Admit):
                self.admitted.append(dec.action.state)
            elif dec.action is not None:
                FAULTS_INJECTED.labels(spec.name, spec.type).inc()
                await self._request_action(spec, dec.action, dl)

    async def _request_action(self, spec, act, drawn_log) -> None:
        """Carry out one request-stage action; raise _Done to end the request here."""
        if isinstance(act, Delay):
            if await self._waited(spec, act.seconds) and drawn_log is not None:
                drawn_log["note"] = "released"
            self.outcome = "delayed"
        elif isinstance(act, Respond):
            if act.after_s > 0 and await self._waited(spec, act.after_s):
                if drawn_log is not None:
                    drawn_log["note"] = "released"
                return
            raise _Done(_respond(act), "injected")
        elif isinstance(act, Abort):
            if self.request.transport is not None:
                self.request.transport.abort()
            raise _Done(web.Response(status=500), "aborted")
        elif isinstance(act, Hold):
            await self._waited(spec, None)
            if drawn_log is not None:
                drawn_log["note"] = "released"

    # -- forward ----------------------------------------------------------------------------------
    async def _forward(self, body: bytes) -> tuple[int, dict[str, str], bytes]:
        """The upstream's (status, headers, body); a failed upstream ends the request with 502."""
        request, cfg = self.request, self.st.config
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP
                   and not (cfg.allow_header_faults and k.lower().startswith(HEADER_PREFIX))}
        base, shard = cfg.upstream_for(request.headers.get("x-api-key"))
        if shard is not None:
            self.entry["shard"] = cfg.shards[shard].name
        t0 = time.perf_counter()
        self.entry["upstream"] = True
        try:
            async with self.st.session.request(request.method, base + request.path_qs,
                                               data=body if body else None, headers=headers,
                                               allow_redirects=False) as up:
                rbody = await up.read()
                rstatus = up.status
                rheaders = {k: v for k, v in up.headers.items() if k.lower() not in _HOP}
        except (aiohttp.ClientError, TimeoutError) as e:
            UPSTREAM_DURATION.observe(time.perf_counter() - t0)
            raise _Done(web.json_response(
                {"detail": f"fault-proxy: upstream failed: {type(e).__name__}: {e}"}, status=502),
                "upstream_error") from None
        UPSTREAM_DURATION.observe(time.perf_counter() - t0)
        self.entry["upstream_status"] = rstatus
        return rstatus, rheaders, rbody

    # -- response stage ---------------------------------------------------------------------------
    async def _response_stage(self, info: RequestInfo, resp: tuple[int, dict[str, str], bytes]
                              ) -> tuple[int, dict[str, str], bytes]:
        for spec in self.eng.matching(info, "response"):
            dec, drawn, rng = self.eng.decide(spec, info)
            act = dec.action
            dl = drawn.to_json()
            self.entry["faults"].append(dl)
            if act is None:
                continue
            if isinstance(act, Admit):
                self.admitted.append(act.state)
                continue
            FAULTS_INJECTED.labels(spec.name, spec.type).inc()
            resp = await self._response_action(spec, act, dl, rng, resp)
        return resp

    async def _response_action(self, spec, act, dl: dict[str, Any], rng, resp: tuple[int, dict[str, str], bytes]
                               ) -> tuple[int, dict[str, str], bytes]:
        """Carry out one response-stage action on the response so far; returns the response it leaves (a throttle
        is kept for the send); raises _Done when the action ends the request (abort, truncate)."""
        rstatus, rheaders, rbody = resp
        if isinstance(act, Delay):
            if await self._waited(spec, act.seconds):
                dl["note"] = "released"
            self.outcome = "delayed"
        elif isinstance(act, Hold):
            await self._waited(spec, None)
            dl["note"] = "released"
        elif isinstance(act, Respond):
            if act.after_s > 0 and await self._waited(spec, act.after_s):
                dl["note"] = "released"
                return resp
            self.outcome = "injected"
            return act.status, {"Content-Type": "application/json", **dict(act.headers)}, act.body
        elif isinstance(act, Abort | Truncate):
            raise _Done(await _send_partial(self.request, rstatus, rheaders, rbody, act.after_bytes,
                                            isinstance(act, Abort)), "aborted")
        elif isinstance(act, ReplaceBody):
            rbody, extra = CorruptBody.corrupt(spec.attributes, rbody, rng)
            dl.setdefault("drawn", {}).update(extra)
            self.outcome = "modified"
            return rstatus, rheaders, rbody
        elif isinstance(act, Throttle):
            self.throttle = (spec, act)
            self.outcome = "modified"
        return resp

    async def _send(self, resp: tuple[int, dict[str, str], bytes]) -> web.StreamResponse:
        """The final response: whole, or written `chunk_bytes` at a time at the throttle's rate."""
        rstatus, rheaders, rbody = resp
        if self.throttle is None:
            return web.Response(status=rstatus, body=rbody, headers=rheaders)
        spec, act = self.throttle
        out = web.StreamResponse(status=rstatus, headers=rheaders)
        out.content_length = len(rbody)
        await out.prepare(self.request)
        pos = 0
        while pos < len(rbody):
            chunk = rbody[pos: pos + act.chunk_bytes]
            await out.write(chunk)
            pos += len(chunk)
            if pos < len(rbody) and await self._waited(spec, len(chunk) / act.bytes_per_s):
                await out.write(rbody[pos:])  # removed mid-stream: flush the rest at once
                break
        await out.write_eof()
        return out


async def not_found_admin(request: web.Request) -> web.Response:
    return _error(404, f"no admin route {request.method} {request.path}")


# ---------------------------------------------------------------------------------------------------
# Application wiring


async def _on_startup(app: web.Application) -> None:
    st = app[STATE]
    if st.session is None:
        st.session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=st.config.upstream_timeout_s), auto_decompress=False,
            connector=aiohttp.TCPConnector(limit=0, force_close=False))
    await st.engine.refresh(force=True)
    if st.config.store_kind != "local":
        st.tasks.append(asyncio.create_task(_refresh_loop(st)))


async def _refresh_loop(st: ProxyState) -> None:
    while True:
        await asyncio.sleep(st.config.refresh_interval_s)
        with contextlib.suppress(Exception):
            await st.engine.refresh()


async def _on_cleanup(app: web.Application) -> None:
    st = app[STATE]
    for t in st.tasks:
        t.cancel()
    st.engine.release_all()
    if st.session is not None:
        await st.session.close()
        st.session = None
    await st.engine.store.close()


def make_proxy_app(config: ProxyConfig, engine: FaultEngine | None = None) -> web.Application:
    """The proxy app; it serves the admin API under /__admin unless `config.admin_on_proxy_port` is False."""
    app = application(_too_long, middlewares=[_admin_auth], client_max_size=64 * 1024 * 1024)
    app[STATE] = ProxyState(config, engine or FaultEngine())
    app[_IS_ADMIN_APP] = False
    if config.admin_on_proxy_port:
        add_admin_routes(app)
    app.router.add_route("*", ADMIN_PREFIX + "/{tail:.*}", not_found_admin)
    app.router.add_route("*", "/{tail:.*}", proxy_handler)
    app.on_startup.append(_on_startup)
    app.on_cleanup.append(_on_cleanup)
    return app


def make_admin_app(proxy_app: web.Application) -> web.Application:
    """A separate admin-only app sharing the proxy app's state (for --admin-port)."""
    app = application(_too_long, middlewares=[_admin_auth])
    app[STATE] = proxy_app[STATE]
    app[_IS_ADMIN_APP] = True
    add_admin_routes(app)
    app.router.add_route("*", "/{tail:.*}", not_found_admin)
    return app
