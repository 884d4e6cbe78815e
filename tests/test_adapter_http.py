"""The generic `http` adapter: against a tiny aiohttp service written here (hand-checked requests and
responses, 4xx/5xx/timeouts), bad mapping files, and cortex-mock (same results as the `cortex` adapter;
`memrig conformance` passes)."""

from __future__ import annotations

import asyncio
import copy
from datetime import UTC, datetime, timedelta

import pytest
import yaml
from aiohttp import web

from services.adapters.http.backend import HttpBackend
from services.adapters.http.client import ServiceError
from services.adapters.http.mapping import MAPPINGS_DIR, MappingError, load_mapping, parse_mapping
from services.common.types import Document, IngestBatch, Message, RetrieveQuery, Session, ValidationError
from tests.fixtures_proxy import serve_app

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


def two_sessions() -> IngestBatch:
    return IngestBatch((
        Session("s1", T0, (Message("m1", "user", "the billing service deploys to kubernetes", T0),
                           Message("m2", "assistant", "noted billing uses kubernetes", T0))),
        Session("s2", T0 + timedelta(days=1), (Message("m3", "user", "lunch is at noon"),)),
    ))


class TinyCortexGo:
    """Speaks the openclaw-cortex REST shapes (remember/search/delete). Search score = the number of distinct
    query words found in the memory's content (hand-checkable), ties in insertion order. `fail` queues
    statuses to answer instead of the real response, per path; `delay_s` slows search down."""

    def __init__(self) -> None:
        self.memories: dict[str, dict] = {}
        self.requests: list[tuple[str, str, dict | None]] = []
        self.fail: dict[str, list[int]] = {}
        self.delay_s = 0.0
        self.n = 0

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/remember", self.remember)
        app.router.add_post("/v1/search", self.search)
        app.router.add_delete("/v1/memories/{id}", self.delete)
        return app

    async def _pre(self, request: web.Request) -> web.Response | None:
        body = await request.json() if request.can_read_body else None
        self.requests.append((request.method, request.path, body))
        q = self.fail.get(request.path)
        if q:
            return web.json_response({"error": "injected"}, status=q.pop(0))
        return None

    async def remember(self, request: web.Request) -> web.Response:
        if (r := await self._pre(request)) is not None:
            return r
        body = self.requests[-1][2]
        self.n += 1
        mid = f"mem-{self.n}"
        self.memories[mid] = {"id": mid, **body, "created_at": "2024-03-01T09:00:00Z"}
        return web.json_response({"id": mid, "stored": True})

    async def search(self, request: web.Request) -> web.Response:
        if (r := await self._pre(request)) is not None:
            return r
        await asyncio.sleep(self.delay_s)
        body = self.requests[-1][2]
        words = set(body["message"].lower().split())
        rows = []
        for m in self.memories.values():
            if m["project"] != body["project"]:
                continue
            s = len(words & set(m["content"].lower().replace(":", " ").split()))
            if s:
                rows.append({"memory": m, "score": float(s)})
        rows.sort(key=lambda r: -r["score"])
        return web.json_response({"results": rows[: body["limit"]]})

    async def delete(self, request: web.Request) -> web.Response:
        if (r := await self._pre(request)) is not None:
            return r
        if self.memories.pop(request.match_info["id"], None) is None:
            return web.json_response({"error": "memory not found"}, status=404)
        return web.json_response({"deleted": True})


def fast_mapping(tmp_path, name: str = "openclaw-cortex", **patch) -> str:
    """A shipped mapping with short backoff (and any patch), written to tmp_path."""
    raw = yaml.safe_load((MAPPINGS_DIR / f"{name}.yaml").read_text())
    raw["retries"]["backoff_ms"] = 1
    raw.setdefault("settle", {})["wait_s"] = 0
    for k, v in patch.items():
        raw[k] = v
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(raw))
    return str(p)


@pytest.fixture
async def go_service():
    svc = TinyCortexGo()
    runner, port = await serve_app(svc.app())
    made: list[HttpBackend] = []

    def make(mapping: str, **cfg) -> HttpBackend:
        b = HttpBackend({"mapping": mapping, "base_url": f"http://127.0.0.1:{port}", **cfg})
        made.append(b)
        return b

    yield svc, make
    for b in made:
        await b.close()
    await runner.cleanup()


async def test_ingest_sends_one_memory_per_message_and_search_maps_evidence_back(go_service, tmp_path):
    svc, make = go_service
    b = make(fast_mapping(tmp_path))
    await b.ingest("ns", two_sessions())
    assert [r[2] for r in svc.requests] == [
        {"content": "user: the billing service deploys to kubernetes", "type": "episode", "scope": "project",
         "tags": ["memrig-evidence:m1", "memrig-session:s1"], "project": "ns", "confidence": 0.9},
        {"content": "assistant: noted billing uses kubernetes", "type": "episode", "scope": "project",
         "tags": ["memrig-evidence:m2", "memrig-session:s1"], "project": "ns", "confidence": 0.9},
        {"content": "user: lunch is at noon", "type": "episode", "scope": "project",
         "tags": ["memrig-evidence:m3", "memrig-session:s2"], "project": "ns", "confidence": 0.9},
    ]
    st = await b.settle("ns", 5)
    assert st.settled and st.items_indexed == 3 and st.items_pending == 0
    r = await b.retrieve("ns", RetrieveQuery("where does billing deploy kubernetes", 2))
    # query words in m1 {billing, kubernetes} -> 2 ("deploys" is not "deploy"); m2 {billing, kubernetes} -> 2
    assert [(m.id, m.score, m.evidence_ids) for m in r.memories] == [("mem-1", 2.0, ["m1"]), ("mem-2", 2.0, ["m2"])]
    assert r.memories[0].text == "user: the billing service deploys to kubernetes"
    assert r.memories[0].created_at == T0 and r.memories[0].kind == "episode"
    assert svc.requests[-1][2] == {"message": "where does billing deploy kubernetes", "limit": 2, "project": "ns"}
    assert (await b.retrieve("other", RetrieveQuery("billing kubernetes", 5))).memories == []
    assert (await b.namespace_stats("ns")).items == 3


async def test_reset_per_item_deletes_what_was_stored(go_service, tmp_path):
    svc, make = go_service
    b = make(fast_mapping(tmp_path))
    await b.ingest("ns", two_sessions())
    await b.ingest("keep", IngestBatch((Session("k", T0, (Message("k1", "user", "billing keeps"),)),)))
    assert await b.reset("ns") == 3
    deletes = [p for m, p, _ in svc.requests if m == "DELETE"]
    assert deletes == ["/v1/memories/mem-1", "/v1/memories/mem-2", "/v1/memories/mem-3"]
    assert list(svc.memories) == ["mem-4"]
    assert (await b.retrieve("ns", RetrieveQuery("billing kubernetes", 5))).memories == []
    assert [m.evidence_ids for m in (await b.retrieve("keep", RetrieveQuery("billing", 5))).memories] == [["k1"]]


async def test_5xx_is_retried_then_degrades_4xx_is_not_retried(go_service, tmp_path):
    svc, make = go_service
    b = make(fast_mapping(tmp_path))
    await b.ingest("ns", two_sessions())
    n0 = len(svc.requests)
    svc.fail["/v1/search"] = [503, 503]  # two failures, the third try succeeds (attempts: 3)
    r = await b.retrieve("ns", RetrieveQuery("billing", 5))
    assert not r.degraded and len(r.memories) == 2 and len(svc.requests) == n0 + 3
    svc.fail["/v1/search"] = [503, 503, 503]
    r = await b.retrieve("ns", RetrieveQuery("billing", 5))
    assert r.degraded and r.memories == [] and r.degraded_reason.startswith("http_503:")
    assert "after 3 tries" in r.degraded_reason
    n1 = len(svc.requests)
    svc.fail["/v1/search"] = [400]
    r = await b.retrieve("ns", RetrieveQuery("billing", 5))
    assert r.degraded and r.degraded_reason.startswith("http_400:") and len(svc.requests) == n1 + 1
    assert b.counters()["retrieve_degraded"] == 2


async def test_timeout_degrades(go_service, tmp_path):
    svc, make = go_service
    raw = yaml.safe_load((MAPPINGS_DIR / "openclaw-cortex.yaml").read_text())
    raw["timeouts_ms"]["retrieve"] = 50
    raw["retries"] = {"attempts": 2, "backoff_ms": 1, "on_timeout": True}
    p = tmp_path / "m.yaml"
    p.write_text(yaml.safe_dump(raw))
    b = make(str(p))
    await b.ingest("ns", two_sessions())
    svc.delay_s = 1.0
    n0 = len(svc.requests)
    r = await b.retrieve("ns", RetrieveQuery("billing", 5))
    assert r.degraded and r.degraded_reason.startswith("timeout:") and len(svc.requests) == n0 + 2


async def test_failed_ingest_is_rolled_back(tmp_path):
    svc = TinyCortexGo()
    # the 2nd remember fails 3 times (every try): the 1st message's memory must be deleted again
    orig = svc.remember
    calls = {"n": 0}

    async def flaky(request):
        calls["n"] += 1
        if calls["n"] >= 2:
            svc.fail["/v1/remember"] = [500]
        return await orig(request)

    svc.remember = flaky
    app = svc.app()
    runner, port = await serve_app(app)
    b = HttpBackend({"mapping": fast_mapping(tmp_path), "base_url": f"http://127.0.0.1:{port}"})
    try:
        with pytest.raises(ServiceError, match=r"ingest failed \(http_500\).*1/1 units already sent were forgotten") as e:
            await b.ingest("ns", two_sessions())
        assert e.value.kind == "http_500" and e.value.status == 500  # the service's error, not a bare RuntimeError
        assert svc.memories == {}
        assert (await b.namespace_stats("ns")).items == 0
        assert [p for m, p, _ in svc.requests if m == "DELETE"] == ["/v1/memories/mem-1"]
    finally:
        await b.close()
        await runner.cleanup()


async def test_documents_without_a_documents_request_are_rejected_before_sending(go_service, tmp_path):
    svc, make = go_service
    raw = yaml.safe_load((MAPPINGS_DIR / "openclaw-cortex.yaml").read_text())
    del raw["documents"]
    p = tmp_path / "m.yaml"
    p.write_text(yaml.safe_dump(raw))
    b = make(str(p))
    with pytest.raises(ValidationError) as e:
        await b.ingest("ns", IngestBatch(two_sessions().sessions, (Document("d1", "x"),)))
    assert e.value.field == "documents" and svc.requests == []


# -- Engram-style /seed /probe ---------------------------------------------------------------------------
async def test_engram_style_seed_and_probe(tmp_path):
    seen: list[tuple[str, dict]] = []

    async def seed(request):
        seen.append((request.path, await request.json()))
        return web.json_response({"seeded": True, "session_count": len(seen[-1][1]["sessions"])})

    async def probe(request):
        body = await request.json()
        seen.append((request.path, body))
        return web.json_response({"output": f"answer for {body['task_id']}", "metadata": {}})

    app = web.Application()
    app.router.add_post("/seed", seed)
    app.router.add_post("/probe", probe)
    runner, port = await serve_app(app)
    b = HttpBackend({"mapping": fast_mapping(tmp_path, "engram"), "base_url": f"http://127.0.0.1:{port}"})
    try:
        await b.ingest("t1", two_sessions())
        scope = b.scope("t1")
        assert scope.startswith("t1~") and scope.endswith(".0")
        assert seen[0] == ("/seed", {"task_id": scope, "sessions": [
            [{"role": "user", "content": "the billing service deploys to kubernetes"},
             {"role": "assistant", "content": "noted billing uses kubernetes"}],
            [{"role": "user", "content": "lunch is at noon"}]]})
        assert (await b.settle("t1", 5)).settled
        r = await b.retrieve("t1", RetrieveQuery("where does billing deploy?", 5))
        assert [(m.text, m.score) for m in r.memories] == [(f"answer for {scope}", 1.0)]
        assert seen[-1] == ("/probe", {"task_id": scope, "question": "where does billing deploy?"})
        assert dict(b.capabilities)["recall"] == "lossy"
        await b.reset("t1")  # no delete in the contract: the namespace moves to a fresh task id
        assert b.scope("t1") == scope[:-2] + ".1"
    finally:
        await b.close()
        await runner.cleanup()


# -- bad mappings ------------------------------------------------------------------------------------------
def _raw(name="cortex-mock"):
    return yaml.safe_load((MAPPINGS_DIR / f"{name}.yaml").read_text())


def test_shipped_mappings_load():
    for name in ("cortex-mock", "engram", "openclaw-cortex"):
        m, _ = load_mapping(name)
        assert m.service == name


@pytest.mark.parametrize("mutate, key", [
    (lambda r: r["retrieve"].pop("results"), "retrieve.results"),
    (lambda r: r.__setitem__("retreive", {}), "retreive"),
    (lambda r: r["ingest"].__setitem__("per", "conversation"), "ingest.per"),
    (lambda r: r["retrieve"]["fields"].pop("text"), "retrieve.fields.text"),
    (lambda r: r["ingest"]["request"]["body"].__setitem__("session_id", "{{sesion.id}}"), "ingest.request.body"),
    (lambda r: r["reset"].pop("request"), "reset"),
    (lambda r: r["settle"]["job"]["request"].__setitem__("path", "/v1/jobs/{{jobid}}"), "settle.job.request.path"),
    (lambda r: r["retries"].__setitem__("attempts", 0), "retries.attempts"),
])
def test_bad_mapping_names_the_key(mutate, key):
    raw = copy.deepcopy(_raw())
    mutate(raw)
    with pytest.raises(MappingError) as e:
        parse_mapping(raw, "m.yaml")
    assert f"{key}:" in str(e.value) and str(e.value).startswith("m.yaml: ")


def test_unknown_mapping_name_and_bad_yaml(tmp_path):
    with pytest.raises(MappingError, match="shipped: .*cortex-mock"):
        load_mapping("no-such-service")
    p = tmp_path / "bad.yaml"
    p.write_text("service: [unclosed")
    with pytest.raises(MappingError, match="not valid YAML"):
        load_mapping(str(p))
    with pytest.raises(ValueError, match="unknown config key"):
        HttpBackend({"mapping": "cortex-mock", "mappin": "x"})
