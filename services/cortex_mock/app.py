"""The cortex-mock HTTP surface (aiohttp): routes, auth, validation errors, timing headers, /metrics.

`make_app(config)` builds a complete application for in-process tests (aiohttp test client) and for
`__main__`. Shapes follow the `@ubundi/openclaw-cortex` plugin's client (Ubundi/openclaw-cortex, src/cortex/client.ts).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import time
from typing import Any

import orjson
from aiohttp import web

from services.common.errors import InputError, http_status
from services.common.http_input import application
from services.common.metrics_http import metrics_handler
from services.cortex_mock.config import MockConfig
from services.cortex_mock.engine import CortexEngine, encode_payload
from services.cortex_mock.jobs import InProcessJobs, RedisJobs, SharedJobTable, public_view
from services.cortex_mock.metrics import MockMetrics
from services.cortex_mock.search import SearchParams
from services.cortex_mock.store import tenant_id_for_key
from services.cortex_mock.validation import (
    MAX_QUERY_CHARS,
    RequestInvalid,
    first_loc,
    lone_surrogate_path,
    nesting_invalid,
    nonfinite_invalid,
    oversize_invalid,
    parse_batch,
    parse_ingest_conversation,
    parse_ingest_text,
    parse_recall,
    parse_reflect,
    parse_remember,
    parse_retrieve,
    too_long_body,
)

log = logging.getLogger("cortex_mock")
PUBLIC_PATHS = ("/health", "/metrics")
CONFIG_KEY = web.AppKey("config", MockConfig)
ENGINE_KEY = web.AppKey("engine", CortexEngine)
JOBS_KEY = web.AppKey("jobs", object)
METRICS_KEY = web.AppKey("metrics", MockMetrics)
WORKERS_KEY = web.AppKey("workers", object)  # a WorkerSupervisor when Redis workers were spawned, else None
TENANT_KEY = web.RequestKey("tenant_id", str)


class AuthError(InputError):
    """A missing (401) or unknown (403) API key; the field is the x-api-key header."""

    def __init__(self, status: int, detail: str):
        super().__init__("header.x-api-key", detail, text=detail)
        self.status = status
        self.detail = detail

    def body(self) -> dict[str, Any]:
        return {"detail": self.detail}


def authenticate(api_key: str | None, allowed: list[str]) -> str:
    """Tenant id for the x-api-key value. 401: missing/empty; 403: not among the configured keys.
    With no keys configured (dev default) every non-empty key is its own tenant. Keys are compared in
    constant time (hmac.compare_digest) against every configured key, so timing tells nothing about a key."""
    if api_key is None or not api_key.strip():
        raise AuthError(401, "Missing x-api-key header")
    key = api_key.strip()
    if allowed:
        kb = key.encode("utf-8", "surrogateescape")
        match = False
        for k in allowed:
            match |= hmac.compare_digest(kb, k.encode("utf-8", "surrogateescape"))
        if not match:
            raise AuthError(403, "Invalid API key")
    return tenant_id_for_key(key)


def json_response(payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    """A JSON response encoded with orjson (several times faster than json.dumps on result lists)."""
    return web.Response(body=orjson.dumps(payload), status=status, headers=headers, content_type="application/json")


def _json_error(status: int, detail: Any) -> web.Response:
    return json_response({"detail": detail}, status=status)


def _too_long(status: int, field: str, msg: str) -> web.Response:
    """A request line or header past the parser's limits (no handler ran): 414 / 431 in the API's shape."""
    return json_response(too_long_body(field, msg), status=status)


class BodyInvalid(InputError):
    """A body that is not acceptable JSON: 400 (malformed) or 422 (valid JSON, invalid text). `detail` is the
    FastAPI-style detail (a string, or a list of errors with their loc); `field` the first loc dotted, or "body"."""

    def __init__(self, status: int, detail: Any):
        super().__init__(first_loc(detail), str(detail), text=str(detail))
        self.status, self.detail = status, detail

    def body(self) -> dict[str, Any]:
        return {"detail": self.detail}


def parse_json_body(raw: bytes) -> Any:
    """orjson first (fast; rejects NaN/Infinity, lone surrogates and nesting deeper than 1024). A lone
    surrogate is then located with the standard parser so the error names the field."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        msg = str(e)
        if "depth limit" in msg:
            raise nesting_invalid(raw) from e
        if "surrogate" not in msg:
            try:  # NaN / Infinity: the standard parser reads them, so the error can name their field
                bad = nonfinite_invalid(json.loads(raw))
            except (ValueError, RecursionError):
                bad = None
            if bad is not None:
                raise bad from e
            raise BodyInvalid(400, f"Malformed JSON body: {msg}") from e
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise BodyInvalid(400, f"Malformed JSON body: {type(e).__name__}: {str(e)[:200]}") from e
    path = lone_surrogate_path(value)
    if path is None:  # a surrogate in raw bytes (not an escape): not UTF-8 at all
        raise BodyInvalid(400, "Malformed JSON body: not valid UTF-8")
    raise BodyInvalid(422, [{"type": "string_unicode", "loc": ["body", *path],
                             "msg": "String contains a lone UTF-16 surrogate; text must be valid Unicode"}])


async def read_json(request: web.Request, optional: bool = False) -> Any:
    raw = await request.read()
    if not raw.strip():
        if optional:
            return {}
        raise BodyInvalid(400, "Request body is empty; expected a JSON object")
    return parse_json_body(raw)


def _path_param(request: web.Request, name: str) -> str:
    """A path parameter, refused (422 naming it) when it holds a lone surrogate (percent-decoded bytes that
    are not UTF-8)."""
    v = request.match_info[name]
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        raise BodyInvalid(422, [{"type": "string_unicode", "loc": ["path", name],
                                 "msg": "Path parameter is not valid UTF-8"}]) from None
    return v


@web.middleware
async def metrics_mw(request: web.Request, handler):
    m = request.app[METRICS_KEY]
    route = request.match_info.route.resource
    endpoint = route.canonical if route is not None else "unmatched"
    status = 500
    try:
        resp = await handler(request)
        status = resp.status
        return resp
    except web.HTTPException as e:
        status = e.status
        raise
    finally:
        m.requests.labels(endpoint, request.method, str(status)).inc()


@web.middleware
async def errors_mw(request: web.Request, handler):
    too_long = oversize_invalid(request)
    if too_long is not None:
        return json_response(too_long[1], status=too_long[0])
    routing_error = request.match_info.http_exception
    if routing_error is not None:  # unknown route or method: the API's JSON shape, not aiohttp's text
        detail = "Not Found" if routing_error.status == 404 else "Method Not Allowed"
        return _json_error(routing_error.status, detail)
    try:
        if request.path not in PUBLIC_PATHS:
            request[TENANT_KEY] = authenticate(request.headers.get("x-api-key"), request.app[CONFIG_KEY].api_keys)
        return await handler(request)
    except (AuthError, RequestInvalid, BodyInvalid) as e:  # the API's bad-request shapes, status by family
        return json_response(e.body(), status=http_status(e))
    except web.HTTPException:
        raise
    except Exception as e:
        from services.common.llm_client import LLMError

        if isinstance(e, LLMError):
            return _json_error(http_status(e), f"extraction LLM failed: {e}")
        log.exception("unhandled error on %s %s", request.method, request.path)
        return _json_error(500, f"Internal Server Error: {type(e).__name__}")


# -- handlers -------------------------------------------------------------------------------------------------
async def health(request: web.Request) -> web.Response:
    app = request.app
    workers = app[WORKERS_KEY]
    body: dict[str, Any] = {"status": "ok", "service": "cortex-mock", "pid": os.getpid(),
                            "jobs_backend": app[JOBS_KEY].backend,
                            "worker_pids": workers.pids() if workers is not None else []}
    if workers is not None:  # real worker health: alive processes, respawns, the last exit
        body["workers"] = workers.health()
        if not workers.healthy():
            body["status"] = "degraded"
            return json_response(body, status=503)
    return json_response(body)


async def warmup(request: web.Request) -> web.Response:
    await read_json(request, optional=True)
    return json_response(await request.app[ENGINE_KEY].warmup(request[TENANT_KEY]))


async def _sleep_added(engine: CortexEngine, mode: str) -> float:
    ms = engine.added_latency_ms(mode)
    if ms > 0:
        await asyncio.sleep(ms / 1000.0)
    return ms


async def retrieve(request: web.Request) -> web.Response:
    """`query_type`, `session_id`, `force_tier` and `session_goal` are validated and otherwise ignored (the
    mock has one pipeline per mode; README "cortex-mock: request fields")."""
    t0 = time.perf_counter()
    body = parse_retrieve(await read_json(request))
    engine = request.app[ENGINE_KEY]
    p = SearchParams(query=body["query"], top_k=body["top_k"], mode=body["mode"], reference=body["reference_date"],
                     debug=body["debug"], token_budget=body["token_budget"] or engine.config.token_budget,
                     user_id=body["user_id"])
    out = await engine.retrieve(request[TENANT_KEY], p)
    added = await _sleep_added(engine, p.mode)
    elapsed = time.perf_counter() - t0
    request.app[METRICS_KEY].retrieve_seconds.labels(p.mode).observe(elapsed)
    payload: dict[str, Any] = {"results": out.results, "coverage": out.coverage}
    if p.debug and out.debug is not None:
        out.debug["timings_ms"]["added_latency"] = round(added, 3)
        out.debug["timings_ms"]["total"] = round(elapsed * 1000.0, 3)
        payload["_debug"] = out.debug
    headers = {"X-Cortex-Processing-Ms": str(int(round(elapsed * 1000.0))), "X-Cortex-Pipeline-Mode": p.mode,
               "X-Cortex-Channels-Used": ",".join(out.channels_used),
               "X-Cortex-Added-Latency-Ms": str(int(round(added)))}
    return json_response(payload, headers=headers)


def recall_memory(r: dict[str, Any]) -> dict[str, Any]:
    """One retrieve result as the plugin's RecallMemory (client.ts 2.22.1). `source` is "retrieve" (the
    plugin's union is "retrieve" | "fallback"; the mock has no fallback path); every mock memory was
    extracted from ingested text, so `grounded` is true."""
    md = r["metadata"]
    out = {"node_id": r["node_id"], "content": r["content"], "confidence": r["confidence"],
           "relevance": r["score"], "when": md["occurred_at"], "session_id": md["session_id"],
           "entities": md["entity_refs"], "type": r["type"], "memory_type": md["fact_type"], "grounded": True,
           "query_alignment": r["query_alignment"], "source": "retrieve", "message_ids": md["message_ids"],
           "superseded": md["superseded"]}
    out.update({k: md[k] for k in ("source_origin", "derivation_mode", "source_app") if k in md})
    return out


async def recall(request: web.Request) -> web.Response:
    """`query_type` and `include_ungrounded` are validated and ignored (one pipeline; every mock memory is
    grounded); `derivation_mode` filters on the memory's provenance."""
    t0 = time.perf_counter()
    body = parse_recall(await read_json(request))
    engine = request.app[ENGINE_KEY]
    query = body["query"]
    if body["context"]:
        query = (query + "\n" + body["context"])[:MAX_QUERY_CHARS]
    p = SearchParams(query=query, top_k=body["limit"], mode="fast", reference=body["reference_date"],
                     token_budget=10 * engine.config.token_budget, session_filter=body["session_filter"],
                     min_confidence=body["min_confidence"], fact_type=body["memory_type"],
                     include_origins=body["include_origins"], exclude_origins=body["exclude_origins"],
                     user_id=body["user_id"], derivation_mode=body["derivation_mode"])
    out = await engine.retrieve(request[TENANT_KEY], p)
    added = await _sleep_added(engine, "fast")
    memories = [recall_memory(r) for r in out.results]
    headers = {"X-Cortex-Processing-Ms": str(int(round((time.perf_counter() - t0) * 1000.0))),
               "X-Cortex-Pipeline-Mode": "fast", "X-Cortex-Channels-Used": ",".join(out.channels_used),
               "X-Cortex-Added-Latency-Ms": str(int(round(added)))}
    return json_response({"coverage": out.coverage, "memories": memories}, headers=headers)


async def ingest_text(request: web.Request) -> web.Response:
    body = parse_ingest_text(await read_json(request))
    return json_response(await request.app[ENGINE_KEY].ingest_text(request[TENANT_KEY], body))


async def ingest_conversation(request: web.Request) -> web.Response:
    body = parse_ingest_conversation(await read_json(request))
    return json_response(await request.app[ENGINE_KEY].ingest_conversation(request[TENANT_KEY], body))


async def ingest_batch(request: web.Request) -> web.Response:
    items = parse_batch(await read_json(request))
    return json_response(await request.app[ENGINE_KEY].ingest_batch(request[TENANT_KEY], items))


async def _submit(request: web.Request, kind: str, body: dict) -> dict[str, Any]:
    return await request.app[JOBS_KEY].submit(request[TENANT_KEY], kind, encode_payload(body))


async def job_ingest(request: web.Request) -> web.Response:
    rec = await _submit(request, "ingest", parse_ingest_text(await read_json(request)))
    return json_response({"job_id": rec["job_id"], "status": rec["status"]})


async def job_ingest_conversation(request: web.Request) -> web.Response:
    rec = await _submit(request, "ingest_conversation", parse_ingest_conversation(await read_json(request)))
    return json_response({"job_id": rec["job_id"], "status": rec["status"]})


async def job_reflect(request: web.Request) -> web.Response:
    rec = await _submit(request, "reflect", parse_reflect(await read_json(request, optional=True)))
    return json_response({"job_id": rec["job_id"], "status": rec["status"]})


async def remember(request: web.Request) -> web.Response:
    """`POST /v1/remember` (text or messages): accepted for background processing, as the API answers the
    plugin (RememberAcceptedResponse: session_id, status, job_id); poll `GET /v1/jobs/{job_id}`."""
    kind, body = parse_remember(await read_json(request))
    rec = await _submit(request, kind, body)
    return json_response({"session_id": body.get("session_id"), "status": rec["status"], "job_id": rec["job_id"]})


async def job_status(request: web.Request) -> web.Response:
    rec = await request.app[JOBS_KEY].get(_path_param(request, "job_id"))
    if rec is None or rec.get("tenant_id") != request[TENANT_KEY]:
        return _json_error(404, "Job not found")
    view = public_view(rec)
    if view["status"] == "failed" and rec.get("kind") in ("ingest", "ingest_conversation"):
        # A worker that died after its ingest committed but before it recorded completion (with no attempts
        # left the reaper marks the job failed): the tenant's applied_jobs table is the truth.
        applied = await request.app[ENGINE_KEY].applied_job(request[TENANT_KEY], view["job_id"])
        if applied is not None:
            view = public_view({**rec, "status": "completed", "result": applied, "error": ""})
            view["recovered"] = "the ingest committed before its worker was lost; status from the tenant store"
    return json_response(view)


async def reflect_sync(request: web.Request) -> web.Response:
    parse_reflect(await read_json(request, optional=True))
    return json_response(await request.app[ENGINE_KEY].reflect(request[TENANT_KEY]))


async def knowledge(request: web.Request) -> web.Response:
    return json_response(await request.app[ENGINE_KEY].knowledge(request[TENANT_KEY], _query_str(request, "user_id")))


async def stats(request: web.Request) -> web.Response:
    return json_response(await request.app[ENGINE_KEY].stats(request[TENANT_KEY], _query_str(request, "user_id")))


def _query_str(request: web.Request, name: str) -> str | None:
    v = request.query.get(name) or None
    if v is not None:
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            raise BodyInvalid(422, [{"type": "string_unicode", "loc": ["query", name],
                                     "msg": "Query parameter is not valid UTF-8"}]) from None
        if len(v) > 1000:
            raise BodyInvalid(422, [{"type": "string_too_long", "loc": ["query", name],
                                     "msg": "String should have at most 1000 characters"}])
    return v


async def forget_session(request: web.Request) -> web.Response:
    sid = _path_param(request, "session_id")
    return json_response(await request.app[ENGINE_KEY].forget_session(request[TENANT_KEY], sid))


async def forget_entity(request: web.Request) -> web.Response:
    name = _path_param(request, "name")
    return json_response(await request.app[ENGINE_KEY].forget_entity(request[TENANT_KEY], name))


async def forget_user(request: web.Request) -> web.Response:
    if request.query.get("confirm", "").lower() != "true":
        return json_response({"detail": [{"type": "missing", "loc": ["query", "confirm"],
                                          "msg": "confirm=true is required to delete a user's memories"}]},
                             status=422)
    uid = _path_param(request, "user_id")
    return json_response(await request.app[ENGINE_KEY].forget_user(request[TENANT_KEY], uid))


async def get_node(request: web.Request) -> web.Response:
    node = await request.app[ENGINE_KEY].node(request[TENANT_KEY], _path_param(request, "node_id"))
    if node is None:
        return _json_error(404, "Node not found")
    return json_response(node)


def _not_modelled(what: str):
    async def handler(request: web.Request) -> web.Response:
        return _json_error(501, f"cortex-mock does not model {what}; the real Cortex API serves it")

    return handler


def _metrics_handler(app: web.Application):
    inner = metrics_handler(app[METRICS_KEY].registry)

    async def handler(request: web.Request) -> web.StreamResponse:
        m, jobs, engine = app[METRICS_KEY], app[JOBS_KEY], app[ENGINE_KEY]
        try:
            m.queue_depth.set(await jobs.depth())
            await jobs.refresh_counts()
        except Exception:  # Redis down: still serve the rest
            log.warning("metrics: job backend unavailable", exc_info=True)
        now = engine.clock()
        tenants = engine.open_tenants()

        def total() -> dict[str, int]:
            out: dict[str, int] = {}
            for st in tenants.values():
                for typ, n in st.counts(now)["nodes"].items():
                    out[typ] = out.get(typ, 0) + n
            return out

        # Totals over the open tenants, never per tenant: a tenant id is derived from an API key and one
        # label per key would list every client on a public endpoint (and grow without bound).
        m.nodes.clear()
        for typ, n in (await asyncio.to_thread(total)).items():
            m.nodes.labels(typ).set(n)
        m.open_tenants.set(len(tenants))
        m.evicted_tenants.set(engine.tenants_evicted)
        m.released_tenants.set(engine.tenants_released)
        return await inner(request)

    return handler


def make_app(config: MockConfig | None = None, clock=None) -> web.Application:
    """`clock` (wall-clock seconds) drives the settle delay, idle-tenant eviction, job timestamps and (Redis)
    lease expiry in the server's reaper."""
    config = config or MockConfig.from_env()
    engine = CortexEngine(config, clock=clock)
    app = application(_too_long, middlewares=[metrics_mw, errors_mw], client_max_size=32 * 1024 * 1024)
    app[CONFIG_KEY] = config
    app[ENGINE_KEY] = engine
    app[WORKERS_KEY] = None
    if config.redis_url:
        app[JOBS_KEY] = RedisJobs(config.redis_url, config.redis_prefix, config.lease_ms, config.max_attempts,
                                  clock=engine.clock)
    else:
        shared = SharedJobTable(str(engine.data_dir / "jobs.sqlite")) if config.shared_jobs else None
        app[JOBS_KEY] = InProcessJobs(engine, config.workers, shared, clock=engine.clock)
    app[METRICS_KEY] = MockMetrics(lambda: app[JOBS_KEY].counts.counts)

    async def on_startup(app: web.Application) -> None:
        await app[JOBS_KEY].start()
        await asyncio.to_thread(_warm, engine)

    async def on_cleanup(app: web.Application) -> None:
        await app[JOBS_KEY].stop()
        await engine.close()

    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
    r = app.router
    r.add_get("/health", health)
    r.add_get("/metrics", _metrics_handler(app))
    r.add_post("/v1/warmup", warmup)
    r.add_post("/v1/retrieve", retrieve)
    r.add_post("/v1/recall", recall)
    r.add_post("/v1/remember", remember)
    r.add_post("/v1/ingest", ingest_text)
    r.add_post("/v1/ingest/conversation", ingest_conversation)
    r.add_post("/v1/ingest/batch", ingest_batch)
    r.add_post("/v1/jobs/ingest", job_ingest)
    r.add_post("/v1/jobs/ingest/conversation", job_ingest_conversation)
    r.add_post("/v1/jobs/reflect", job_reflect)
    r.add_get("/v1/jobs/{job_id}", job_status)
    r.add_post("/v1/reflect", reflect_sync)
    r.add_get("/v1/knowledge", knowledge)
    r.add_get("/v1/stats", stats)
    r.add_get("/v1/nodes/{node_id}", get_node)
    r.add_delete("/v1/forget/session/{session_id}", forget_session)
    r.add_delete("/v1/forget/entity/{name}", forget_entity)
    r.add_delete("/v1/forget/user/{user_id}", forget_user)
    # Account linking and the TooToo bridge belong to the hosted product, not to memory: 501 with a detail.
    r.add_get("/v1/auth/link", _not_modelled("account linking (GET /v1/auth/link)"))
    r.add_post("/v1/auth/code", _not_modelled("pairing codes (POST /v1/auth/code)"))
    r.add_post("/v1/bridge/passive", _not_modelled("the TooToo passive bridge (POST /v1/bridge/passive)"))
    return app


def _warm(engine: CortexEngine) -> None:
    """Load the embedder and tokenizer before the first request, so the first retrieve isn't a cold start."""
    from services.common.tokens import count_tokens

    engine.embedder.encode(["warm up"])
    count_tokens("warm up")
