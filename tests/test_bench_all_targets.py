"""`memrig bench-all --target backend=HOST:PORT` runs the suites against running backends (the deploy/k8s bench Job):
the targets reach every suite's RunConfig, name the backends when --backends is empty, and are waited for."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import pytest

from services.cli import build_parser
from services.commands.bench import bench_all_plan
from services.common.types import ValidationError
from services.coordinator import bench_all
from services.coordinator.plan import parse_targets


def test_parse_targets():
    assert parse_targets(["cortex=adapter-cortex:8850", "bm25=10.0.0.2:1"]) == {
        "cortex": "adapter-cortex:8850", "bm25": "10.0.0.2:1"}
    assert parse_targets(None) == {}
    for bad in ("cortex", "=host:1", "cortex="):
        with pytest.raises(ValidationError):
            parse_targets([bad])


def _run(tmp_path, monkeypatch, argv):
    seen = []

    async def fake_run_suite(cfg, progress, rig=None):
        seen.append(cfg)
        return SimpleNamespace(state="succeeded", failures={})

    monkeypatch.setattr(bench_all, "run_suite", fake_run_suite)
    monkeypatch.setattr(bench_all, "write_reports", lambda out, index: None)
    args = build_parser().parse_args(["bench-all", "--out", str(tmp_path / "run"), "--no-costs", *argv])
    assert asyncio.run(bench_all.run_bench_all(bench_all_plan(args))) == 0
    return seen


def test_targets_reach_every_suite_and_name_the_backends(tmp_path, monkeypatch):
    seen = _run(tmp_path, monkeypatch, ["--suites", "cortex-v1,arclight", "--target=cortex=adapter-cortex:8850",
                                        "--target", "bm25=adapter-bm25:8850"])
    assert [c.suite for c in seen] == ["cortex-v1", "arclight"]
    for c in seen:
        assert c.backends == ["cortex", "bm25"]
        assert c.targets == {"cortex": "adapter-cortex:8850", "bm25": "adapter-bm25:8850"}


def test_backends_still_win_over_targets(tmp_path, monkeypatch):
    seen = _run(tmp_path, monkeypatch, ["--suites", "cortex-v1", "--backends", "none,bm25",
                                        "--target=bm25=adapter-bm25:8850"])
    assert seen[0].backends == ["none", "bm25"] and seen[0].targets == {"bm25": "adapter-bm25:8850"}


def test_waiting_for_a_target_that_never_serves_gives_up_after_the_timeout(capsys):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    asyncio.run(bench_all._wait_for_targets({"bm25": f"127.0.0.1:{port}"}, 0.5))
    took = time.monotonic() - t0
    assert 0.5 <= took < 5
    assert f"[bench-all] target bm25: 127.0.0.1:{port} not healthy after 0.5s" in capsys.readouterr().out
    t0 = time.monotonic()
    asyncio.run(bench_all._wait_for_targets({"bm25": f"127.0.0.1:{port}"}, 0))  # 0 = do not wait
    assert time.monotonic() - t0 < 0.2


def test_waiting_returns_once_the_target_serves():
    from services.common.grpc_util import start_server

    async def go():
        server, _health, port = await start_server(lambda s: None, [], "127.0.0.1", 0)
        try:
            t0 = time.monotonic()
            await bench_all._wait_for_targets({"x": f"127.0.0.1:{port}"}, 10)
            return time.monotonic() - t0
        finally:
            await server.stop(0)

    assert asyncio.run(go()) < 2


def test_locomo_runs_every_conversation_unless_told_otherwise(tmp_path, monkeypatch):
    seen = _run(tmp_path / "a", monkeypatch, ["--suites", "cortex-v1,locomo", "--backends", "bm25"])
    assert [(c.suite, c.options) for c in seen] == [("cortex-v1", {}), ("locomo", {"conversations": 0})]
    seen = _run(tmp_path / "b", monkeypatch, ["--suites", "locomo", "--backends", "bm25", "--option",
                                              "locomo.conversations=4", "--option", "locomo.questions=6"])
    assert seen[0].options == {"conversations": 4, "questions": 6}
