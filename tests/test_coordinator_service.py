"""CoordinatorService over gRPC: list, a streamed RunSuite with progress to completion, GetRun, bad input."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from google.protobuf import struct_pb2

from memrig.v1 import coordinator_pb2 as cpb
from memrig.v1 import coordinator_pb2_grpc as cpb_grpc
from services.common.grpc_util import aio_channel, graceful_stop, start_server
from services.coordinator.server import SERVICE_NAME, CoordinatorServicer
from services.launcher import Rig

pytestmark = pytest.mark.slow


@pytest.fixture
async def coordinator(tmp_path):
    rig = Rig(tmp_path / "procs")
    servicer = CoordinatorServicer(rig, tmp_path / "results")
    server, health, port = await start_server(
        lambda s: cpb_grpc.add_CoordinatorServiceServicer_to_server(servicer, s), [SERVICE_NAME])
    async with aio_channel(f"127.0.0.1:{port}") as ch:
        yield cpb_grpc.CoordinatorServiceStub(ch), tmp_path
    await graceful_stop(server, health, 1.0)
    rig.stop_all()


async def test_list_run_get(coordinator):
    stub, tmp = coordinator
    suites = await stub.ListSuites(cpb.ListSuitesRequest(), timeout=30)
    assert "cortex-v1" in [s.name for s in suites.suites]
    backends = await stub.ListBackends(cpb.ListBackendsRequest(), timeout=30)
    assert {"none", "full-context", "openclaw"} <= {b.name for b in backends.backends}

    opts = struct_pb2.Struct()
    opts.update({"limit": 4})
    out = tmp / "results" / "run1"  # RunSuite and GetRun stay inside the results root
    events = [ev async for ev in stub.RunSuite(cpb.RunSuiteRequest(
        suite="cortex-v1", backends=["none", "full-context"], out_dir=str(out), options=opts), timeout=300)]
    phases = [e.phase for e in events]
    assert "probes" in phases and phases[-1] == "done"
    assert events[-1].state == cpb.RUN_STATE_SUCCEEDED
    probes = [e for e in events if e.phase == "probes"]
    assert probes[-1].done == probes[-1].total == 4 * 3

    run = await stub.GetRun(cpb.GetRunRequest(run=str(out)), timeout=30)
    assert run.state == cpb.RUN_STATE_SUCCEEDED
    assert "Cortex V1: condition × category" in run.report_markdown
    assert Path(out, "samples.jsonl").exists()


async def test_bad_requests_name_the_field(coordinator):
    stub, _ = coordinator
    with pytest.raises(grpc.aio.AioRpcError) as e:
        async for _ in stub.RunSuite(cpb.RunSuiteRequest(suite="nope", backends=["none"]), timeout=30):
            pass
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "suite" in e.value.details()
    with pytest.raises(grpc.aio.AioRpcError) as e:
        async for _ in stub.RunSuite(cpb.RunSuiteRequest(suite="cortex-v1", backends=["nope"]), timeout=30):
            pass
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "backends" in e.value.details()
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await stub.GetRun(cpb.GetRunRequest(run="does-not-exist"), timeout=30)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
