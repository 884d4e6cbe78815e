"""cortex-mock, issue 14: limits and roles as the API enforces them, bad bodies answered 4xx naming the field
with nothing stored, reads that never create a tenant, the open-tenant cap and idle eviction (injectable
clock), the settle delay on the same clock, supervised worker processes, constant-time key checks, keys from
a file, the 0.0.0.0 warning, and rankings that do not depend on the order concurrent ingests committed in."""

from __future__ import annotations

import asyncio
import sys

import pytest
from aiohttp.test_utils import TestClient, TestServer

from services.cortex_mock.__main__ import build_parser, config_from_args, exposure_warning
from services.cortex_mock.app import ENGINE_KEY, authenticate, make_app
from services.cortex_mock.config import MockConfig
from services.cortex_mock.jobs import public_view
from services.cortex_mock.supervisor import WorkerSupervisor
from services.cortex_mock.validation import RequestInvalid, parse_recall

A = {"x-api-key": "key-a"}


class Clock:
    def __init__(self, t: float = 1_800_000_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
async def make_client(tmp_path):
    made: list[TestClient] = []

    async def _make(clock=None, **kw) -> TestClient:
        kw.setdefault("data_dir", str(tmp_path / "data"))
        kw.setdefault("embedder", "hash")
        c = TestClient(TestServer(make_app(MockConfig(**kw), clock=clock)))
        await c.start_server()
        made.append(c)
        return c

    yield _make
    for c in made:
        await c.close()


async def post(c, path, body, headers=A):
    r = await c.post(path, json=body, headers=headers)
    return r.status, await r.json()


def tenant_files(c) -> list[str]:
    return sorted(p.name for p in c.server.app[ENGINE_KEY].data_dir.glob("cortex_*.sqlite"))


# -- limits and roles ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("path,body,loc", [
    ("/v1/ingest", {"text": "x" * 50_001}, ["body", "text"]),
    ("/v1/jobs/ingest", {"text": "x" * 50_001}, ["body", "text"]),
    ("/v1/ingest/conversation", {"messages": [{"role": "user", "content": "x" * 10_001}]},
     ["body", "messages", 0, "content"]),
    ("/v1/ingest/conversation", {"messages": [{"role": "user", "content": "x" * 10_000}] * 5},
     ["body", "messages"]),  # 5 x (4 + 10000 + 4) = 50040 > 50000 as the plugin counts a transcript
    ("/v1/ingest/conversation", {"messages": [{"role": "User", "content": "Hello there, the TTL is 5s."}]},
     ["body", "messages", 0, "role"]),
    ("/v1/jobs/ingest/conversation", {"messages": [{"role": "human", "content": "The TTL is 5s."}]},
     ["body", "messages", 0, "role"]),
    ("/v1/remember", {"messages": [{"role": "system", "content": "The TTL is 5s."}]},
     ["body", "messages", 0, "role"]),
])
async def test_limits_and_roles_422_and_nothing_stored(make_client, path, body, loc):
    c = await make_client()
    status, out = await post(c, path, body)
    assert status == 422 and loc in [e["loc"] for e in out["detail"]]
    r = await c.get("/v1/knowledge", headers=A)
    assert (await r.json())["total_memories"] == 0


async def test_limits_at_the_boundary_are_accepted(make_client):
    c = await make_client()
    assert (await post(c, "/v1/ingest", {"text": "The TTL is 300s. " + "y" * (50_000 - 17)}))[0] == 200
    msgs = [{"role": "assistant", "content": "z" * 10_000}] * 4 + [{"role": "user", "content": "w" * 9_940}]
    assert sum(len(m["role"]) + len(m["content"]) + 4 for m in msgs) == 50_000
    assert (await post(c, "/v1/ingest/conversation", {"messages": msgs}))[0] == 200


# -- bad bodies ----------------------------------------------------------------------------------------------
async def test_lone_surrogate_is_422_naming_the_field(make_client):
    c = await make_client()
    raw = b'{"messages": [{"role": "user", "content": "ok"}, {"role": "user", "content": "bad \\ud800 x"}]}'
    r = await c.post("/v1/ingest/conversation", data=raw, headers={**A, "Content-Type": "application/json"})
    body = await r.json()
    assert r.status == 422 and body["detail"][0]["loc"] == ["body", "messages", 1, "content"]
    assert body["detail"][0]["type"] == "string_unicode"
    # a valid pair is fine
    raw = b'{"text": "The mascot is \\ud83d\\ude00 the grinning face."}'
    r = await c.post("/v1/ingest", data=raw, headers={**A, "Content-Type": "application/json"})
    assert r.status == 200
    r = await c.post("/v1/retrieve", data=b'{"query": "\\udfff"}', headers={**A, "Content-Type": "application/json"})
    assert r.status == 422 and (await r.json())["detail"][0]["loc"] == ["body", "query"]


async def test_deep_json_nan_and_non_object_bodies(make_client):
    c = await make_client()
    h = {**A, "Content-Type": "application/json"}
    r = await c.post("/v1/retrieve", data=b"[" * 100_000 + b"]" * 100_000, headers=h)
    d = (await r.json())["detail"][0]  # issue 37: named (the body itself here), with the depth
    assert r.status == 422 and d["loc"] == ["body"] and d["msg"].startswith("Nested 100000 levels")
    r = await c.post("/v1/recall", data=b'{"query": "q", "min_confidence": NaN}', headers=h)
    d = (await r.json())["detail"][0]  # not JSON (RFC 8259 has no NaN), and the error names where it is
    assert r.status == 422 and d["loc"] == ["body", "min_confidence"] and d["type"] == "finite_number"
    with pytest.raises(RequestInvalid) as e:  # and a NaN that got in another way is refused by name
        parse_recall({"query": "q", "min_confidence": float("nan")})
    assert e.value.errors[0]["loc"] == ["body", "min_confidence"]
    r = await c.post("/v1/retrieve", data=b'"just a string"', headers=h)
    assert r.status == 422


# -- tenants -------------------------------------------------------------------------------------------------
async def test_reads_with_a_new_key_create_no_tenant(make_client):
    c = await make_client()
    new = {"x-api-key": "never-seen-before"}
    for method, path, body in (("GET", "/v1/stats", None), ("GET", "/v1/knowledge?user_id=u", None),
                               ("POST", "/v1/retrieve", {"query": "anything"}),
                               ("POST", "/v1/recall", {"query": "anything"}), ("GET", "/v1/jobs/nope", None),
                               ("GET", "/v1/nodes/nope", None), ("DELETE", "/v1/forget/session/s", None),
                               ("DELETE", "/v1/forget/entity/Redis", None),
                               ("DELETE", "/v1/forget/user/u?confirm=true", None)):
        r = await c.request(method, path, json=body, headers=new)
        assert r.status in (200, 404), (path, r.status)
    assert tenant_files(c) == [] and c.server.app[ENGINE_KEY].open_tenants() == {}
    _, st = await post(c, "/v1/ingest", {"text": "The TTL is 300s."}, headers=new)
    assert len(tenant_files(c)) == 1  # a write does create it


async def test_open_tenant_cap_and_idle_eviction(make_client):
    clock = Clock()
    c = await make_client(clock=clock, max_open_tenants=2, tenant_idle_s=100.0)
    engine = c.server.app[ENGINE_KEY]
    for k in ("k1", "k2", "k3"):
        assert (await post(c, "/v1/ingest", {"text": f"The {k} cache TTL is 300s."}, headers={"x-api-key": k}))[0] == 200
    assert len(engine.open_tenants()) == 2 and engine.tenants_evicted == 1  # k1, least recently used, closed
    _, r = await post(c, "/v1/retrieve", {"query": "cache TTL"}, headers={"x-api-key": "k1"})
    assert "k1 cache" in r["results"][0]["content"]  # reopened on demand, nothing lost
    clock.t += 101  # everyone idle: the next request closes all but its own tenant
    await post(c, "/v1/retrieve", {"query": "cache TTL"}, headers={"x-api-key": "k2"})
    # k1's reopening closed k2 (2 evictions); now k2 reopens and the idle k3 and k1 close (4)
    assert len(engine.open_tenants()) == 1 and engine.tenants_evicted == 4
    text = await (await c.get("/metrics")).text()
    assert "memrig_cortex_mock_open_tenants 1.0" in text and "memrig_cortex_mock_evicted_tenants 4.0" in text


async def test_settle_delay_follows_the_injected_clock(make_client):
    clock = Clock()
    c = await make_client(clock=clock, settle_delay_ms=5_000)
    await post(c, "/v1/ingest", {"text": "We use Redis for the session cache."})
    st = await (await c.get("/v1/stats", headers=A)).json()
    assert st["pending_edges"] >= 1 and "MENTIONS" not in st["edges"]
    clock.t += 5.0
    st = await (await c.get("/v1/stats", headers=A)).json()
    assert st["pending_edges"] == 0 and st["edges"]["MENTIONS"] >= 1


# -- auth, keys, exposure ------------------------------------------------------------------------------------
def test_authenticate_compares_every_key():
    assert authenticate("b", ["a", "b"]).startswith("t")
    with pytest.raises(Exception) as e:
        authenticate("c", ["a", "b"])
    assert e.value.status == 403
    with pytest.raises(Exception) as e:
        authenticate("é\udc80", ["a"])  # undecodable header bytes: still a plain 403, not a crash
    assert e.value.status == 403
    assert authenticate("é\udc80", []) == authenticate("é\udc80", [])  # dev mode: a stable tenant


def test_keys_from_file_and_env(tmp_path, monkeypatch):
    f = tmp_path / "keys"
    f.write_text("# the rig's keys\nk1\nk2, k3\n")
    a = build_parser().parse_args(["--api-keys-file", str(f)])
    assert config_from_args(a).api_keys == ["k1", "k2", "k3"]
    monkeypatch.setenv("MEMRIG_CORTEX_API_KEYS_FILE", str(f))
    assert MockConfig.from_env().api_keys == ["k1", "k2", "k3"]


def test_exposure_warning():
    assert exposure_warning("127.0.0.1", []) is None
    assert exposure_warning("0.0.0.0", ["k"]) is None
    w = exposure_warning("0.0.0.0", [])
    assert w.startswith("WARNING") and "ANY" in w


# -- supervised workers --------------------------------------------------------------------------------------
DUMMY_WORKER = [sys.executable, "-c", "import time; print('READY', flush=True); time.sleep(120)"]


async def test_supervisor_respawns_with_backoff_and_reports_health():
    clock = Clock(0.0)
    sup = WorkerSupervisor(DUMMY_WORKER, 2, backoff_base_s=1.0, backoff_max_s=8.0, stable_s=60.0, clock=clock)
    await asyncio.to_thread(sup.start)
    try:
        assert sup.healthy() and len(sup.pids()) == 2
        victim = sup.slots[0].proc
        victim.kill()
        victim.wait()
        clock.t = 10.0
        assert await asyncio.to_thread(sup.check) == []  # death noted, respawn scheduled in 1 s
        h = sup.health()[0]
        assert not sup.healthy() and h["alive"] is False and h["last_exit"] == -9 and h["respawn_in_s"] == 1.0
        clock.t = 11.0
        assert await asyncio.to_thread(sup.check) == [0]
        assert sup.healthy() and sup.slots[0].restarts == 1 and sup.slots[0].proc.pid != victim.pid
        # an early second death doubles the backoff
        sup.slots[0].proc.kill()
        sup.slots[0].proc.wait()
        clock.t = 12.0
        await asyncio.to_thread(sup.check)
        assert sup.health()[0]["respawn_in_s"] == 2.0
        assert sup.backoff_s(10) == 8.0  # capped
    finally:
        await asyncio.to_thread(sup.stop, 5.0)
    assert all(s.proc.poll() is not None for s in sup.slots)


async def test_health_reports_dead_workers(tmp_path):
    from services.cortex_mock.app import WORKERS_KEY

    sup = WorkerSupervisor(DUMMY_WORKER, 1, clock=Clock(0.0))
    await asyncio.to_thread(sup.start)
    app = make_app(MockConfig(data_dir=str(tmp_path / "d"), embedder="hash"))
    app[WORKERS_KEY] = sup
    c = TestClient(TestServer(app))
    await c.start_server()
    try:
        r = await c.get("/health")
        assert r.status == 200 and (await r.json())["worker_pids"] == sup.pids()
        sup.slots[0].proc.kill()
        sup.slots[0].proc.wait()
        r = await c.get("/health")
        body = await r.json()
        assert r.status == 503 and body["status"] == "degraded" and body["workers"][0]["alive"] is False
    finally:
        await c.close()
        await asyncio.to_thread(sup.stop, 5.0)


# -- determinism ---------------------------------------------------------------------------------------------
FACTS = [f"The {svc} service is owned by team {team}." for svc, team in
         [("billing", "Atlas"), ("search", "Atlas"), ("payments", "Borealis"), ("auth", "Cirrus"),
          ("ledger", "Atlas"), ("notifications", "Dorado"), ("reports", "Borealis"), ("export", "Cirrus")]]


async def test_ranking_does_not_depend_on_ingest_order(make_client):
    c = await make_client()
    ka, kb = {"x-api-key": "order-a"}, {"x-api-key": "order-b"}
    same = "Deploys are frozen on Fridays."  # one text for two users: equal scores, a tie to break
    await asyncio.gather(*(post(c, "/v1/ingest", {"text": t, "session_id": f"s{i}"}, ka)
                           for i, t in enumerate(FACTS)))
    await asyncio.gather(*(post(c, "/v1/ingest", {"text": t, "session_id": f"s{i}"}, kb)
                           for i, t in reversed(list(enumerate(FACTS)))))
    for uid, sid in (("u1", "x1"), ("u2", "x2")):
        await post(c, "/v1/ingest", {"text": same, "user_id": uid, "session_id": sid}, ka)
    for uid, sid in (("u2", "x2"), ("u1", "x1")):
        await post(c, "/v1/ingest", {"text": same, "user_id": uid, "session_id": sid}, kb)
    for q, mode in (("Which team owns a service?", "full"), ("team Atlas", "fast"), ("deploys frozen", "fast"),
                    ("Who owns billing and payments?", "full")):
        _, ra = await post(c, "/v1/retrieve", {"query": q, "mode": mode, "top_k": 10}, ka)
        _, rb = await post(c, "/v1/retrieve", {"query": q, "mode": mode, "top_k": 10}, kb)
        key = [(r["content"], r["metadata"]["session_id"], r["score"]) for r in ra["results"]]
        assert key == [(r["content"], r["metadata"]["session_id"], r["score"]) for r in rb["results"]], q
    _, ra = await post(c, "/v1/retrieve", {"query": "deploys frozen", "mode": "fast", "top_k": 2}, ka)
    assert [r["metadata"]["session_id"] for r in ra["results"]] == ["x1", "x2"]  # tie: user u1 before u2


# -- commit + ack ------------------------------------------------------------------------------------------
async def test_job_marked_failed_after_its_commit_reports_completed(make_client):
    """The reaper marks a job failed when its worker died with no attempt left; if the ingest had committed
    (applied_jobs), the status must say completed, with the recorded result."""
    from services.cortex_mock.app import JOBS_KEY

    c = await make_client()
    _, j = await post(c, "/v1/jobs/ingest", {"text": "The staging cluster runs Kubernetes 1.30."})
    for _ in range(500):
        rec = await c.server.app[JOBS_KEY].get(j["job_id"])
        if rec["status"] == "completed":
            break
        await asyncio.sleep(0.01)
    committed = public_view(rec)["result"]["nodes_created"]
    rec.update(status="failed", error="worker w1 lost mid-job (lease expired) (attempt 1 of 1)", result=None)
    body = await (await c.get(f"/v1/jobs/{j['job_id']}", headers=A)).json()
    assert body["status"] == "completed" and body["nodes_created"] == committed >= 1 and "error" not in body
    assert "committed" in body["recovered"]
    # a job whose ingest never committed stays failed
    c.server.app[JOBS_KEY].jobs["never-ran"] = {**rec, "job_id": "never-ran", "status": "failed", "error": "lost"}
    body = await (await c.get("/v1/jobs/never-ran", headers=A)).json()
    assert body["status"] == "failed" and body["error"] == "lost"


def test_question_groups_give_the_best_question_per_fact():
    import numpy as np

    from services.cortex_mock.snapshot import TenantIndex

    idx = TenantIndex(rev=1, q_owner=np.array([2, 0, 2, 2, 5], dtype=np.int64))
    order, owners, starts = idx.question_groups()
    scores = np.array([0.1, 0.7, 0.9, 0.3, 0.2])  # per question
    best = np.full(6, -1.0)
    best[owners] = np.maximum.reduceat(scores[order], starts)
    assert best.tolist() == [0.7, -1.0, 0.9, -1.0, -1.0, 0.2]  # by hand: fact 2 has 0.1, 0.9, 0.3


async def test_extreme_numbers_and_dates_are_4xx_or_handled(make_client):
    c = await make_client()
    h = {**A, "Content-Type": "application/json"}
    r = await c.post("/v1/retrieve", data=b'{"query": "x", "top_k": 100000000000000000000000}', headers=h)
    body = await r.json()
    assert r.status == 422 and body["detail"][0]["loc"] == ["body", "top_k"]
    assert isinstance(body["detail"][0]["input"], str)  # beyond 64 bits: echoed as text, not a 500
    for ref in ("0001-01-01T00:00:00Z", "9999-12-31"):
        status, body = await post(c, "/v1/retrieve", {"query": "last week", "reference_date": ref})
        assert status == 422 and body["detail"][0]["loc"] == ["body", "reference_date"]
    status, _ = await post(c, "/v1/ingest", {"text": "On 9999-12-31 we ship. We started 100000 days ago."})
    assert status == 200
    status, body = await post(c, "/v1/retrieve", {"query": "what happened 100000 days ago and on 9999-12-31?",
                                                  "mode": "full", "debug": True})
    assert status == 200


async def test_token_counts_are_stored_at_ingest(make_client):
    from services.common.tokens import count_tokens
    from services.cortex_mock.store import tenant_id_for_key

    c = await make_client()
    await post(c, "/v1/ingest", {"text": "The cache TTL is 300s. Deploys happen on Fridays after lunch."})
    engine = c.server.app[ENGINE_KEY]
    st = engine.store(tenant_id_for_key("key-a"))
    rows = st.conn.execute("SELECT content, n_tokens FROM nodes WHERE type='FACT'").fetchall()
    assert len(rows) == 2 and all(n == count_tokens(content) > 0 for content, n in rows)
    idx = st.index(engine.embedder)
    assert idx.token_counts().tolist() == [count_tokens(f.content) for f in idx.facts]


def test_question_rows_group_distinct_questions_by_fact():
    """Facts 0, 2, 5 own questions; fact 2 has three, two of them the same text (vector). The layout has one
    column per owner and a row per question, padded with the slot past the distinct rows."""
    import numpy as np

    from services.cortex_mock.snapshot import TenantIndex

    a, b, c = [1.0, 0.0], [0.0, 1.0], [0.6, 0.8]
    idx = TenantIndex(rev=1, q_owner=np.array([2, 0, 2, 2, 5], dtype=np.int64),
                      q_emb=np.array([a, b, c, a, b], dtype=np.float32))
    g = idx.question_rows()
    assert g.distinct.tolist() == [b, pytest.approx(c), a]  # np.unique: rows in ascending order
    assert g.owners.tolist() == [0, 2, 5]
    assert g.layout.tolist() == [[0, 2, 0], [3, 1, 3], [3, 2, 3]]  # 3 = padding (scores -inf)
    assert idx.question_rows() is g  # once per snapshot
