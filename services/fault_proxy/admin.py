"""The fault proxy's toxiproxy-style admin API (the proxy path is app.py).

Served on the proxy port under the prefix `/__admin` (no Cortex path starts with `/__`), or,
with `--admin-port`, only on a separate listener (then `/__admin/*` on the proxy port is a 404):

    GET  /__admin/faults              list (application order)
    POST /__admin/faults              create → 201; 400 bad body (names the field); 409 exists
    GET|PATCH|DELETE /__admin/faults/{name}   200 / 200 / 204; 404 unknown
    GET  /__admin/faults/log?since=N&limit=M  per-request decisions with the drawn values
    POST /__admin/populate            create-or-replace a list, idempotent → 201
    POST /__admin/reset               remove every fault, restart numbering and log ({"seed": N} optional) → 204
    GET  /__admin/status              seed, upstream, request count, store
    GET  /__admin/metrics             Prometheus text (no token needed: read-only)

`admin_auth` guards both apps: a request line or header past its limit is refused in the API's error shape, an
admin path on the proxy port is a 404 when the API has its own port, and with a token every admin path but
/metrics needs it.
"""

from __future__ import annotations

import hmac
import json
from typing import Any

from aiohttp import web
from prometheus_client import REGISTRY

from services.common.errors import http_status
from services.common.http_input import application, oversized
from services.common.metrics_http import metrics_handler
from services.fault_proxy.engine import FaultEngine
from services.fault_proxy.faults import FaultError, FaultSpec, nesting_error, parse_fault
from services.fault_proxy.state import ADMIN_PREFIX, STATE, error_response, too_long
from services.fault_proxy.store import FaultExists, FaultNotFound

IS_ADMIN_APP = web.AppKey("is_admin_app", bool)


@web.middleware
async def admin_auth(request: web.Request, handler):
    over = oversized(request)  # a URL or header past its limit: named here, not aiohttp's raw 400
    if over is not None:
        status, field_name, message = over
        return error_response(status, message, field_name)
    st = request.app[STATE]
    token = st.config.admin_token
    is_admin = request.path.startswith(ADMIN_PREFIX)
    if is_admin and not st.config.admin_on_proxy_port and request.app.get(IS_ADMIN_APP) is not True:
        return error_response(404, "the admin API is on the admin port")
    if is_admin and token and request.path != f"{ADMIN_PREFIX}/metrics":
        given = request.headers.get("Authorization", "").encode("utf-8", "surrogateescape")
        if not hmac.compare_digest(given, f"Bearer {token}".encode("utf-8", "surrogateescape")):  # constant time
            return error_response(401, "admin API needs 'Authorization: Bearer <token>'", "Authorization")
    return await handler(request)


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
        return error_response(http_status(e), str(e), e.field)
    spec = FaultSpec(**{**spec.__dict__, "created_at": eng.clock()})
    try:
        spec = await eng.store.create(spec)
    except FaultExists as e:
        return error_response(http_status(e), e.message, e.field)
    await eng.refresh(force=True)
    return web.json_response(spec.to_json(), status=201)


async def _get(eng: FaultEngine, name: str) -> FaultSpec | None:
    await eng.refresh()
    return next((f for f in eng.faults if f.name == name), None)


async def get_fault(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    spec = await _get(request.app[STATE].engine, name)
    if spec is None:
        return error_response(404, f"fault {name!r} not found", "name")
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
        return error_response(404, f"fault {name!r} not found", "name")
    try:
        spec = merge_patch(old, await _json_body(request))
    except FaultError as e:
        return error_response(http_status(e), str(e), e.field)
    try:
        spec = await eng.store.replace(spec)
    except FaultNotFound as e:
        return error_response(http_status(e), e.message, e.field)
    await eng.refresh(force=True)
    return web.json_response(spec.to_json())


async def delete_fault(request: web.Request) -> web.Response:
    eng = request.app[STATE].engine
    name = request.match_info["name"]
    try:
        await eng.store.delete(name)
    except FaultNotFound as e:
        return error_response(http_status(e), e.message, e.field)
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
        return error_response(http_status(e), str(e), e.field)
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
        return error_response(http_status(e), str(e), e.field)
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
            return error_response(400, f"{key} must be an integer (got {raw!r})", key)
        if v is not None and v < 0:
            return error_response(400, f"{key} must be >= 0 (got {v})", key)
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
    app.router.add_get(f"{p}/metrics", metrics_handler(REGISTRY))


async def not_found_admin(request: web.Request) -> web.Response:
    return error_response(404, f"no admin route {request.method} {request.path}")


def make_admin_app(proxy_app: web.Application) -> web.Application:
    """A separate admin-only app sharing the proxy app's state (for --admin-port)."""
    app = application(too_long, middlewares=[admin_auth])
    app[STATE] = proxy_app[STATE]
    app[IS_ADMIN_APP] = True
    add_admin_routes(app)
    app.router.add_route("*", "/{tail:.*}", not_found_admin)
    return app
