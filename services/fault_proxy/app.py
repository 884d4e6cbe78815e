"""The fault proxy's reverse-proxy path: request-stage faults, the upstream call, response-stage faults.

The admin API (admin.py) is served on the proxy port under `/__admin` or on its own port (`make_admin_app`).
Every other request is forwarded to the upstream after the request-stage faults, and the answer goes back
after the response-stage faults.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import aiohttp
from aiohttp import web

from services.common.http_input import application
from services.fault_proxy.admin import IS_ADMIN_APP, add_admin_routes, admin_auth, not_found_admin
from services.fault_proxy.engine import FaultEngine
from services.fault_proxy.faults import (
    HEADER_PREFIX,
    Abort,
    Admit,
    CorruptBody,
    Delay,
    Hold,
    ReplaceBody,
    RequestInfo,
    Respond,
    Throttle,
    Truncate,
    header_faults,
)
from services.fault_proxy.metrics import FAULTS_INJECTED, INJECTED_DELAY, REQUESTS, UPSTREAM_DURATION
from services.fault_proxy.state import ADMIN_PREFIX, STATE, ProxyConfig, ProxyState, too_long

_HOP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "proxy-connection", "te",
        "trailer", "upgrade", "proxy-authorization", "proxy-authenticate"}


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
    app = application(too_long, middlewares=[admin_auth], client_max_size=64 * 1024 * 1024)
    app[STATE] = ProxyState(config, engine or FaultEngine())
    app[IS_ADMIN_APP] = False
    if config.admin_on_proxy_port:
        add_admin_routes(app)
    app.router.add_route("*", ADMIN_PREFIX + "/{tail:.*}", not_found_admin)
    app.router.add_route("*", "/{tail:.*}", proxy_handler)
    app.on_startup.append(_on_startup)
    app.on_cleanup.append(_on_cleanup)
    return app
