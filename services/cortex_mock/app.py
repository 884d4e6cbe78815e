"""The cortex-mock HTTP surface (aiohttp): routes, auth, validation errors, timing headers, /metrics.

`make_app(config)` builds a complete application for in-process tests (aiohttp test client) and for
`__main__`. Shapes follow reference/peers.md §2.3.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

from aiohttp import web
from prometheus_client.aiohttp import make_aiohttp_handler

from services.cortex_mock.config import MockConfig
from services.cortex_mock.engine import CortexEngine, encode_payload
from services.cortex_mock.jobs import InProcessJobs, RedisJobs, public_view
from services.cortex_mock.metrics import MockMetrics
from services.cortex_mock.search import SearchParams
from services.cortex_mock.store import tenant_id_for_key
from services.cortex_mock.validation import (
    MAX_QUERY_CHARS,
    RequestInvalid,
    parse_ingest_conversation,
    parse_ingest_text,
    parse_recall,
    parse_reflect,
    parse_retrieve,
)

log = logging.getLogger("cortex_mock")
PUBLIC_PATHS = ("/health", "/metrics")
CONFIG_KEY = web.AppKey("config", MockConfig)
ENGINE_KEY = web.AppKey("engine", CortexEngine)
JOBS_KEY = web.AppKey("jobs", object)
METRICS_KEY = web.AppKey("metrics", MockMetrics)
WORKER_PIDS_KEY = web.AppKey("worker_pids", list)
TENANT_KEY = web.RequestKey("tenant_id", str)


class AuthError(Exception):
    def __init__(self, status: int, detail: str):
        super().__init__(detail)
        self.status = status
        self.detail = detail


def authenticate(api_key: str | None, allowed: list[str]) -> str:
    """Tenant id for the x-api-key value. 401: missing/empty; 403: not among the configured keys.
    With no keys configured (dev default) every non-empty key is its own tenant."""
    if api_key is None or not api_key.strip():
        raise AuthError(401, "Missing x-api-key header")
    key = api_key.strip()
    if allowed and key not in allowed:
        raise AuthError(403, "Invalid API key")
    return tenant_id_for_key(key)


def _json_error(status: int, detail: Any) -> web.Response:
    return web.json_response({"detail": detail}, status=status)


async def read_json(request: web.Request, optional: bool = False) -> Any:
    raw = await request.read()
    if not raw.strip():
        if optional:
            return {}
        raise web.HTTPBadRequest(text=json.dumps({"detail": "Request body is empty; expected a JSON object"}),
                                 content_type="application/json")
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise web.HTTPBadRequest(text=json.dumps({"detail": f"Malformed JSON body: {e}"}),
                                 content_type="application/json") from e


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
    try:
        if request.path not in PUBLIC_PATHS:
            request[TENANT_KEY] = authenticate(request.headers.get("x-api-key"), request.app[CONFIG_KEY].api_keys)
        return await handler(request)
    except AuthError as e:
        return _json_error(e.status, e.detail)
    except RequestInvalid as e:
        return web.json_response(e.body(), status=422)
    except web.HTTPException:
        raise
    except Exception as e:
        from services.common.llm_client import LLMError

        if isinstance(e, LLMError):
            return _json_error(502, f"extraction LLM failed: {e}")
        log.exception("unhandled error on %s %s", request.method, request.path)
        return _json_error(500, f"Internal Server Error: {type(e).__name__}")


# -- handlers -------------------------------------------------------------------------------------------------
async def health(request: web.Request) -> web.Response:
    app = request.app
    return web.json_response({"status": "ok", "service": "cortex-mock", "jobs_backend": app[JOBS_KEY].backend,
                              "worker_pids": app[WORKER_PIDS_KEY]})


async def warmup(request: web.Request) -> web.Response:
    await read_json(request, optional=True)
    return web.json_response(await request.app[ENGINE_KEY].warmup(request[TENANT_KEY]))


async def _sleep_added(engine: CortexEngine, mode: str) -> float:
    ms = engine.added_latency_ms(mode)
    if ms > 0:
        await asyncio.sleep(ms / 1000.0)
    return ms


async def retrieve(request: web.Request) -> web.Response:
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
    return web.json_response(payload, headers=headers)


async def recall(request: web.Request) -> web.Response:
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
                     user_id=body["user_id"])
    out = await engine.retrieve(request[TENANT_KEY], p)
    added = await _sleep_added(engine, "fast")
    memories = [{
        "node_id": r["node_id"], "content": r["content"], "confidence": r["confidence"], "relevance": r["score"],
        "when": r["metadata"]["occurred_at"], "session_id": r["metadata"]["session_id"],
        "entities": r["metadata"]["entity_refs"], "type": r["type"], "memory_type": r["metadata"]["fact_type"],
        "source": r["source"], "message_ids": r["metadata"]["message_ids"],
        "superseded": r["metadata"]["superseded"],
    } for r in out.results]
    headers = {"X-Cortex-Processing-Ms": str(int(round((time.perf_counter() - t0) * 1000.0))),
               "X-Cortex-Pipeline-Mode": "fast", "X-Cortex-Channels-Used": ",".join(out.channels_used),
               "X-Cortex-Added-Latency-Ms": str(int(round(added)))}
    return web.json_response({"coverage": out.coverage, "memories": memories}, headers=headers)


async def ingest_text(request: web.Request) -> web.Response:
    body = parse_ingest_text(await read_json(request))
    return web.json_response(await request.app[ENGINE_KEY].ingest_text(request[TENANT_KEY], body))


async def ingest_conversation(request: web.Request) -> web.Response:
    body = parse_ingest_conversation(await read_json(request))
    return web.json_response(await request.app[ENGINE_KEY].ingest_conversation(request[TENANT_KEY], body))


async def _submit(request: web.Request, kind: str, body: dict) -> web.Response:
    rec = await request.app[JOBS_KEY].submit(request[TENANT_KEY], kind, encode_payload(body))
    return web.json_response({"job_id": rec["job_id"], "status": rec["status"]})


async def job_ingest(request: web.Request) -> web.Response:
    return await _submit(request, "ingest", parse_ingest_text(await read_json(request)))


async def job_ingest_conversation(request: web.Request) -> web.Response:
    return await _submit(request, "ingest_conversation", parse_ingest_conversation(await read_json(request)))


async def job_reflect(request: web.Request) -> web.Response:
    return await _submit(request, "reflect", parse_reflect(await read_json(request, optional=True)))


async def job_status(request: web.Request) -> web.Response:
    rec = await request.app[JOBS_KEY].get(request.match_info["job_id"])
    if rec is None or rec.get("tenant_id") != request[TENANT_KEY]:
        return _json_error(404, "Job not found")
    return web.json_response(public_view(rec))


async def reflect_sync(request: web.Request) -> web.Response:
    parse_reflect(await read_json(request, optional=True))
    return web.json_response(await request.app[ENGINE_KEY].reflect(request[TENANT_KEY]))


async def knowledge(request: web.Request) -> web.Response:
    return web.json_response(await request.app[ENGINE_KEY].knowledge(request[TENANT_KEY],
                                                                    request.query.get("user_id") or None))


async def stats(request: web.Request) -> web.Response:
    return web.json_response(await request.app[ENGINE_KEY].stats(request[TENANT_KEY]))


async def forget_session(request: web.Request) -> web.Response:
    sid = request.match_info["session_id"]
    return web.json_response(await request.app[ENGINE_KEY].forget_session(request[TENANT_KEY], sid))


async def forget_user(request: web.Request) -> web.Response:
    if request.query.get("confirm", "").lower() != "true":
        return web.json_response({"detail": [{"type": "missing", "loc": ["query", "confirm"],
                                              "msg": "confirm=true is required to delete a user's memories"}]},
                                 status=422)
    uid = request.match_info["user_id"]
    return web.json_response(await request.app[ENGINE_KEY].forget_user(request[TENANT_KEY], uid))


def _metrics_handler(app: web.Application):
    inner = make_aiohttp_handler(app[METRICS_KEY].registry)

    async def handler(request: web.Request) -> web.StreamResponse:
        m, jobs, engine = app[METRICS_KEY], app[JOBS_KEY], app[ENGINE_KEY]
        try:
            m.queue_depth.set(await jobs.depth())
            await jobs.refresh_counts()
        except Exception:  # Redis down: still serve the rest
            log.warning("metrics: job backend unavailable", exc_info=True)
        now = time.time()
        for tid, st in engine.open_tenants().items():
            c = await asyncio.to_thread(st.counts, now)
            for typ, n in c["nodes"].items():
                m.nodes.labels(tid, typ).set(n)
        return await inner(request)

    return handler


def make_app(config: MockConfig | None = None) -> web.Application:
    config = config or MockConfig.from_env()
    engine = CortexEngine(config)
    app = web.Application(middlewares=[metrics_mw, errors_mw], client_max_size=32 * 1024 * 1024)
    app[CONFIG_KEY] = config
    app[ENGINE_KEY] = engine
    app[WORKER_PIDS_KEY] = []
    if config.redis_url:
        app[JOBS_KEY] = RedisJobs(config.redis_url, config.redis_prefix, config.lease_ms, config.max_attempts)
    else:
        app[JOBS_KEY] = InProcessJobs(engine, config.workers)
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
    r.add_post("/v1/ingest", ingest_text)
    r.add_post("/v1/ingest/conversation", ingest_conversation)
    r.add_post("/v1/jobs/ingest", job_ingest)
    r.add_post("/v1/jobs/ingest/conversation", job_ingest_conversation)
    r.add_post("/v1/jobs/reflect", job_reflect)
    r.add_get("/v1/jobs/{job_id}", job_status)
    r.add_post("/v1/reflect", reflect_sync)
    r.add_get("/v1/knowledge", knowledge)
    r.add_get("/v1/stats", stats)
    r.add_delete("/v1/forget/session/{session_id}", forget_session)
    r.add_delete("/v1/forget/user/{user_id}", forget_user)
    return app


def _warm(engine: CortexEngine) -> None:
    """Load the embedder and tokenizer before the first request, so the first retrieve isn't a cold start."""
    from services.common.tokens import count_tokens

    engine.embedder.encode(["warm up"])
    count_tokens("warm up")
