"""The gRPC servers as generic clients see them: a reflection-only client over grpc.reflection.v1 (and
v1alpha), Health List, dependency failures mapped to UNAVAILABLE naming what is missing, Ingest limits,
RunSuite options checked before streaming, and GetRun confined to the results root."""

from __future__ import annotations

import socket
from datetime import UTC, datetime

import grpc
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, struct_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2

from memrig.v1 import coordinator_pb2 as cpb
from memrig.v1 import coordinator_pb2_grpc as cpb_grpc
from memrig.v1 import memory_backend_pb2 as pb
from memrig.v1 import memory_backend_pb2_grpc as pb_grpc
from services.adapters.base import BackendContext
from services.adapters.host import BackendHost
from services.adapters.none.backend import NoMemoryBackend
from services.adapters.openclaw.backend import OpenClawBackend
from services.adapters.server import SERVICE_NAME, MemoryBackendServicer
from services.common.grpc_util import REFLECTION_V1, aio_channel, graceful_stop, start_server
from services.common.llm_client import LLMClient, LLMConfig
from services.common.types import MAX_CONTENT_CHARS, dt_to_ts
from services.coordinator.server import SERVICE_NAME as COORD_SERVICE
from services.coordinator.server import CoordinatorServicer
from services.coordinator.suites.base import OptionError, coerce_option
from services.launcher import Rig

T0 = dt_to_ts(datetime(2026, 1, 5, tzinfo=UTC))


async def _serve_backend(backend):
    host = BackendHost(backend)
    await host.start()
    server, health, port = await start_server(
        lambda s: pb_grpc.add_MemoryBackendServiceServicer_to_server(MemoryBackendServicer(host), s), [SERVICE_NAME])
    return server, health, port, host


@pytest.fixture
async def none_backend():
    server, health, port, host = await _serve_backend(NoMemoryBackend({}, BackendContext(embedder_name="hash")))
    async with aio_channel(f"127.0.0.1:{port}") as ch:
        yield ch
    await graceful_stop(server, health, 0.5)
    await host.close()


def _reflect(ch: grpc.aio.Channel, service: str):
    return ch.stream_stream(f"/{service}/ServerReflectionInfo",
                            request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
                            response_deserializer=reflection_pb2.ServerReflectionResponse.FromString)


async def _ask(ch, service: str, **req) -> reflection_pb2.ServerReflectionResponse:
    call = _reflect(ch, service)(iter([reflection_pb2.ServerReflectionRequest(**req)]), timeout=10)
    return [r async for r in call][0]


async def test_reflection_v1_only_client_lists_describes_and_calls(none_backend):
    ch = none_backend
    listed = await _ask(ch, REFLECTION_V1, list_services="")
    names = {s.name for s in listed.list_services_response.service}
    assert names == {SERVICE_NAME, "grpc.health.v1.Health", REFLECTION_V1, "grpc.reflection.v1alpha.ServerReflection"}

    # Build the service's messages from reflection alone (a fresh pool, no generated stubs), then call Describe.
    # the answer holds the file and its transitive dependencies (struct.proto, timestamp.proto)
    r = await _ask(ch, REFLECTION_V1, file_containing_symbol=SERVICE_NAME)
    files = {}
    for raw in r.file_descriptor_response.file_descriptor_proto:
        fdp = descriptor_pb2.FileDescriptorProto.FromString(raw)
        files[fdp.name] = fdp
    assert "memrig/v1/memory_backend.proto" in files
    pool, added = descriptor_pool.DescriptorPool(), set()

    def add(name):
        if name not in added:
            for dep in files[name].dependency:
                add(dep)
            pool.Add(files[name])
            added.add(name)

    for name in files:
        add(name)
    svc = pool.FindServiceByName("memrig.v1.MemoryBackendService")
    method = svc.methods_by_name["Describe"]
    req_cls = message_factory.GetMessageClass(method.input_type)
    resp_cls = message_factory.GetMessageClass(method.output_type)
    call = ch.unary_unary("/memrig.v1.MemoryBackendService/Describe",
                          request_serializer=req_cls.SerializeToString, response_deserializer=resp_cls.FromString)
    resp = await call(req_cls(), timeout=10)
    assert resp.name == "none"

    # v1 describes itself; v1alpha still answers for older clients
    own = await _ask(ch, REFLECTION_V1, file_containing_symbol=REFLECTION_V1)
    fdp = descriptor_pb2.FileDescriptorProto.FromString(own.file_descriptor_response.file_descriptor_proto[0])
    assert fdp.package == "grpc.reflection.v1" and fdp.service[0].method[0].input_type == \
        ".grpc.reflection.v1.ServerReflectionRequest"
    old = await _ask(ch, "grpc.reflection.v1alpha.ServerReflection", list_services="")
    assert {s.name for s in old.list_services_response.service} == names


async def test_health_list(none_backend):
    stub = health_pb2_grpc.HealthStub(none_backend)
    r = await stub.List(health_pb2.HealthListRequest(), timeout=10)
    assert dict((k, v.status) for k, v in r.statuses.items()) == {
        "": health_pb2.HealthCheckResponse.SERVING, SERVICE_NAME: health_pb2.HealthCheckResponse.SERVING}


def _session(role="user", content="We use port 3001.", ts=True) -> pb.Session:
    return pb.Session(session_id="s1", started_at=T0 if ts else None,
                      messages=[pb.Message(id="m1", role=role, content=content)])


@pytest.mark.parametrize("session, field", [
    (_session(role="wizard"), "sessions[0].messages[0].role"),
    (_session(content="x" * (MAX_CONTENT_CHARS + 1)), "sessions[0].messages[0].content"),
    (_session(ts=False), "sessions[0].started_at"),
    (pb.Session(session_id="s" * 513, started_at=T0, messages=[pb.Message(id="m", role="user", content="x")]),
     "sessions[0].session_id"),
])
async def test_ingest_limits_name_the_field(none_backend, session, field):
    stub = pb_grpc.MemoryBackendServiceStub(none_backend)
    with pytest.raises(grpc.aio.AioRpcError) as ei:
        await stub.Ingest(pb.IngestRequest(namespace="ns", sessions=[session]), timeout=10)
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert ei.value.details().startswith(field + ":")
    # nothing was stored
    stats = await stub.Stats(pb.StatsRequest(namespace="ns"), timeout=10)
    assert stats.namespaces[0].messages == 0


async def test_ingest_at_the_limit_is_accepted(none_backend):
    stub = pb_grpc.MemoryBackendServiceStub(none_backend)
    r = await stub.Ingest(pb.IngestRequest(namespace="ns", sessions=[_session(content="y" * MAX_CONTENT_CHARS)]),
                          timeout=30)
    assert r.messages_accepted == 1


async def test_missing_llm_is_unavailable_naming_the_endpoint():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = s.getsockname()[1]
    s.close()  # nothing listens there now
    url = f"http://127.0.0.1:{dead}/v1"
    ctx = BackendContext(embedder_name="hash", llm_base_url=url)
    ctx._llm = LLMClient(LLMConfig(base_url=url, max_retries=0))
    server, health, port, host = await _serve_backend(OpenClawBackend({}, ctx))
    try:
        async with aio_channel(f"127.0.0.1:{port}") as ch:
            stub = pb_grpc.MemoryBackendServiceStub(ch)
            with pytest.raises(grpc.aio.AioRpcError) as ei:
                await stub.Ingest(pb.IngestRequest(namespace="ns", sessions=[_session()]), timeout=30)
    finally:
        await graceful_stop(server, health, 0.5)
        await host.close()
    assert ei.value.code() == grpc.StatusCode.UNAVAILABLE
    d = ei.value.details()
    assert d.startswith("openclaw needs the LLM endpoint at " + url) and "MEMRIG_LLM_BASE_URL" in d


def test_status_mapping():
    from services.adapters.cortex.client import CortexConnectionError, CortexHTTPError
    from services.common.grpc_status import status_for
    from services.common.llm_client import LLMError
    from services.common.types import ValidationError

    assert status_for(ValidationError("query", "bad"), "b") == (grpc.StatusCode.INVALID_ARGUMENT, "query: bad")
    assert status_for(LLMError("x", 503, "http://h/v1"), "b")[0] == grpc.StatusCode.UNAVAILABLE
    assert status_for(LLMError("x", 429), "b")[0] == grpc.StatusCode.UNAVAILABLE
    assert status_for(LLMError("x", 404, "http://h/v1"), "b")[0] == grpc.StatusCode.FAILED_PRECONDITION
    assert status_for(CortexConnectionError("refused"), "cortex")[0] == grpc.StatusCode.UNAVAILABLE
    assert status_for(CortexHTTPError("search", 401, "no key"), "cortex")[0] == grpc.StatusCode.FAILED_PRECONDITION
    assert status_for(ConnectionRefusedError("x"), "b")[0] == grpc.StatusCode.UNAVAILABLE
    from services.adapters.openclaw_real.backend import SidecarError

    code, msg = status_for(SidecarError("openclaw-real: OpenClaw unavailable: not installed"), "openclaw-real")
    assert code == grpc.StatusCode.UNAVAILABLE and "not installed" in msg
    code, msg = status_for(KeyError("k"), "b")
    assert code == grpc.StatusCode.INTERNAL and msg == "b: internal error: KeyError: 'k'"
    from services.adapters.http.client import ServiceError

    code, msg = status_for(ServiceError("connection_error", "POST http://h/x: refused"), "http")
    assert code == grpc.StatusCode.UNAVAILABLE and msg.startswith("http needs the memory service behind the http adapter")
    assert status_for(ServiceError("http_403", "forbidden", 403), "http")[0] == grpc.StatusCode.FAILED_PRECONDITION
    assert status_for(ServiceError("http_429", "slow down", 429), "http")[0] == grpc.StatusCode.UNAVAILABLE
    try:  # the http adapter wraps a failed ingest in its own message: the cause still decides
        try:
            raise ServiceError("timeout", "timed out")
        except ServiceError as inner:
            raise RuntimeError("svc: ingest failed (timeout)") from inner
    except RuntimeError as wrapped:
        assert status_for(wrapped, "http")[0] == grpc.StatusCode.UNAVAILABLE
    code, msg = status_for(CortexHTTPError("search", 401, "no key"), "cortex")
    assert msg == "cortex needs the Cortex API, which refused the request: Cortex search failed: 401 — no key"


def test_status_mapping_imports_no_adapter():
    import subprocess
    import sys

    code = ("import sys, services.common.grpc_status as g, grpc; g.status_for(ValueError('x'), 'b'); "
            "print(sorted(m for m in sys.modules if m.startswith('services.adapters')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr


@pytest.fixture
async def coordinator(tmp_path):
    rig = Rig(tmp_path / "procs")
    (tmp_path / "results" / "r1").mkdir(parents=True)
    (tmp_path / "results" / "r1" / "run.json").write_text('{"run_id": "r1"}')
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "run.json").write_text('{"run_id": "outside"}')
    servicer = CoordinatorServicer(rig, tmp_path / "results")
    server, health, port = await start_server(
        lambda s: cpb_grpc.add_CoordinatorServiceServicer_to_server(servicer, s), [COORD_SERVICE])
    async with aio_channel(f"127.0.0.1:{port}") as ch:
        yield cpb_grpc.CoordinatorServiceStub(ch), tmp_path
    await graceful_stop(server, health, 0.5)
    rig.stop_all()


@pytest.mark.parametrize("opts, needle", [
    ({"limit": "abc"}, "options.limit: expected an integer, got 'abc'"),
    ({"limit": 2.5}, "options.limit: expected an integer"),
    ({"nope": 1}, "options.nope: suite cortex-v1: unknown option"),
])
async def test_runsuite_bad_option_is_invalid_argument_before_streaming(coordinator, opts, needle):
    stub, _ = coordinator
    s = struct_pb2.Struct()
    s.update(opts)
    events = []
    with pytest.raises(grpc.aio.AioRpcError) as ei:
        async for ev in stub.RunSuite(cpb.RunSuiteRequest(suite="cortex-v1", backends=["none"], options=s),
                                      timeout=30):
            events.append(ev)
    assert events == []
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT and ei.value.details().startswith(needle)


async def test_runsuite_out_dir_outside_root_is_rejected(coordinator):
    stub, tmp = coordinator
    with pytest.raises(grpc.aio.AioRpcError) as ei:
        async for _ in stub.RunSuite(cpb.RunSuiteRequest(suite="cortex-v1", backends=["none"],
                                                         out_dir=str(tmp / "elsewhere")), timeout=30):
            pass
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT and ei.value.details().startswith("out_dir:")


async def test_getrun_confined_to_results_root(coordinator):
    stub, tmp = coordinator
    assert (await stub.GetRun(cpb.GetRunRequest(run="r1"), timeout=10)).run_id == "r1"
    assert (await stub.GetRun(cpb.GetRunRequest(run=str(tmp / "results" / "r1")), timeout=10)).run_id == "r1"
    for bad in (str(tmp / "outside"), "../outside", "/etc", ""):
        with pytest.raises(grpc.aio.AioRpcError) as ei:
            await stub.GetRun(cpb.GetRunRequest(run=bad), timeout=10)
        assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT, bad
        assert ei.value.details().startswith("run:")


def test_coerce_option():
    assert coerce_option("limit", 0, "5") == 5 and coerce_option("limit", 0, 5.0) == 5
    assert coerce_option("full", False, "true") is True and coerce_option("full", False, 0) is False
    assert coerce_option("categories", "12345", 12) == "12"
    assert coerce_option("ratio", 0.5, "0.25") == 0.25
    assert coerce_option("data_dir", None, "/x") == "/x"
    for name, default, value in (("limit", 0, "abc"), ("limit", 0, True), ("full", False, "maybe"),
                                 ("categories", "A", [1]), ("ratio", 0.5, "x")):
        with pytest.raises(OptionError) as ei:
            coerce_option(name, default, value)
        assert ei.value.option == name and str(ei.value).startswith(f"options.{name}:")


async def test_runner_marks_a_backend_dead_on_failed_precondition():
    from services.adapters.client import backend_error
    from services.coordinator.runner import run_one
    from services.coordinator.suites.base import Condition, Probe

    class Refusing:
        name = "t"

        async def run_probe(self, ctx, probe, cond):  # what GrpcBackendClient raises for FAILED_PRECONDITION
            raise backend_error("openclaw", "FAILED_PRECONDITION", "openclaw needs the LLM endpoint ...")

    failures: dict[str, str] = {}
    cond = Condition("openclaw", ("backend:openclaw",))
    first = await run_one(Refusing(), None, Probe(id="p1", question="q"), cond, failures)
    assert first["status"] == "error" and failures["openclaw"].startswith("failed mid-run: FAILED_PRECONDITION")
    second = await run_one(Refusing(), None, Probe(id="p2", question="q"), cond, failures)
    assert second["error"].startswith("backend openclaw unavailable")  # not retried probe after probe


async def test_an_ingests_deadline_grows_with_its_messages_past_the_floor(monkeypatch):
    from services.adapters.client import GrpcBackendClient
    from services.common.types import IngestBatch, Message, Session

    c = GrpcBackendClient("127.0.0.1:9", name="slow", ingest_deadline_s=600.0)  # nothing listens: _call is faked
    try:
        assert c.ingest_deadline(0) == 600.0 and c.ingest_deadline(200) == 600.0  # the floor
        assert c.ingest_deadline(2_088) == 6_264.0  # a BEAM 1M conversation: 3 s a message
        seen = []

        async def fake_call(method, request, deadline=None):
            seen.append((method, deadline))
            return type("R", (), {"sessions_accepted": 1, "messages_accepted": 250, "documents_accepted": 0})()

        monkeypatch.setattr(c, "_call", fake_call)
        msgs = tuple(Message(f"m{i}", "user", "x") for i in range(250))
        await c.ingest("ns", IngestBatch(sessions=(Session("s", datetime(2024, 1, 1, tzinfo=UTC), msgs),)))
        assert seen == [("Ingest", 750.0)]
    finally:
        await c.close()
