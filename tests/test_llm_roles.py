"""Per-role LLM routing: which endpoint each role reads from the environment, the CLI choices, the backends'
flush and compaction clients, and the rig pointing roles at llm-mock (the local model's half is in
tests/test_local_llm_server.py, marked needs_llm)."""

from __future__ import annotations

import pytest

from services.adapters.base import BackendContext
from services.adapters.compacted.backend import CompactedBackend
from services.common import llm_roles as R
from services.common.llm_client import DEFAULT_MOCK_MODEL, LLMConfig
from services.common.types import IngestBatch, Message, Session, parse_iso
from services.launcher import Rig
from tests.inprocess_llm import InProcessMockLLM


def test_a_role_without_settings_is_played_by_the_answerer():
    env = {"MEMRIG_LLM_BASE_URL": "http://127.0.0.1:1/v1", "MEMRIG_LLM_MODEL": "big"}
    cfgs = R.role_configs(env)
    assert {r: (c.base_url, c.model) for r, c in cfgs.items()} == {r: ("http://127.0.0.1:1/v1", "big") for r in R.ROLES}


def test_a_role_with_a_model_but_no_url_reaches_it_at_the_answerers_url():
    env = {"MEMRIG_LLM_BASE_URL": "http://a:1/v1", "MEMRIG_JUDGE_MODEL": "judge-m",
           "MEMRIG_FLUSH_BASE_URL": "http://f:2/v1", "MEMRIG_FLUSH_MODEL": "flush-m", "MEMRIG_FLUSH_MODEL_DIGEST": "ff"}
    cfgs = R.role_configs(env)
    assert (cfgs["judge"].base_url, cfgs["judge"].model) == ("http://a:1/v1", "judge-m")
    assert (cfgs["flush"].base_url, cfgs["flush"].model, cfgs["flush"].model_digest) == ("http://f:2/v1", "flush-m", "ff")
    assert (cfgs["compaction"].base_url, cfgs["compaction"].model) == ("http://a:1/v1", DEFAULT_MOCK_MODEL)
    assert cfgs["answerer"].model == DEFAULT_MOCK_MODEL
    with pytest.raises(ValueError, match="role: 'writer' is not an LLM role"):
        R.role_config("writer", env)


def test_choices_default_from_llm_and_per_role_flags_win():
    assert R.resolve_choices("local", judge="mock") == {"answerer": "local", "judge": "mock", "flush": "local",
                                                         "compaction": "local"}
    assert R.resolve_choices(None, flush="local") == {"answerer": "env", "judge": "env", "flush": "local",
                                                       "compaction": "env"}
    with pytest.raises(ValueError, match="--llm: 'remote' is not one of mock, local, env"):
        R.resolve_choices("remote")
    with pytest.raises(ValueError, match="--judge: 'gpt' is not one of"):
        R.resolve_choices("mock", judge="gpt")
    with pytest.raises(ValueError, match="--writer: not an LLM role"):
        R.resolve_choices("mock", writer="local")


def test_set_role_replaces_every_field_of_the_prefix():
    env = {"MEMRIG_JUDGE_BASE_URL": "http://old/v1", "MEMRIG_JUDGE_API_KEY": "k", "MEMRIG_JUDGE_MODEL_DIGEST": "aa",
           "MEMRIG_LLM_MODEL": "keep"}
    R.set_mock(env, "judge", "http://mock:9/v1")
    assert env == {"MEMRIG_JUDGE_BASE_URL": "http://mock:9/v1", "MEMRIG_JUDGE_MODEL": DEFAULT_MOCK_MODEL,
                   "MEMRIG_LLM_MODEL": "keep"}
    with pytest.raises(ValueError, match="MEMRIG_JUDGE_TEMPERATURE: not a role setting"):
        R.set_role(env, "judge", "http://x/v1", "m", {"TEMPERATURE": "1"})


def test_short_name_names_quantisation_and_digest():
    ident = LLMConfig(model="qwen", model_digest="cc324af070c2ecbf" + "0" * 48, quantization="Q4_K_M").identity()
    assert R.short_name(ident) == "qwen (Q4_K_M, sha256 cc324af070c2)"
    assert R.short_name(LLMConfig().identity()) == "llm-mock (offline, not a model)"


def test_backend_context_flush_and_compaction_clients(monkeypatch):
    monkeypatch.setenv("MEMRIG_LLM_BASE_URL", "http://a:1/v1")
    ctx = BackendContext()
    assert ctx.compaction_llm is ctx.llm and ctx.llm.config.base_url == "http://a:1/v1"
    monkeypatch.setenv("MEMRIG_FLUSH_BASE_URL", "http://f:2/v1")
    monkeypatch.setenv("MEMRIG_FLUSH_MODEL", "flush-m")
    ctx = BackendContext(llm_base_url="http://rig:3/v1")
    assert (ctx.llm.config.base_url, ctx.llm.config.model) == ("http://f:2/v1", "flush-m")
    assert ctx.compaction_llm is not ctx.llm
    assert (ctx.compaction_llm.config.base_url, ctx.compaction_llm.config.model) == ("http://rig:3/v1", DEFAULT_MOCK_MODEL)
    explicit = LLMConfig(base_url="http://e:4/v1", model="e")
    ctx = BackendContext(llm_config=explicit, compaction_llm_config=explicit)
    assert ctx.llm.config is explicit and ctx.compaction_llm is ctx.llm


async def test_the_compacted_backend_summarises_with_the_compaction_role():
    flush, comp = InProcessMockLLM(), InProcessMockLLM()
    ctx = BackendContext()
    ctx._llm, ctx._compaction_llm = flush, comp
    b = CompactedBackend(context=ctx)
    s = Session("s1", parse_iso("2026-03-01T09:00:00Z", "t"), (Message("m1", "user", "The dev server runs on port 3001."),))
    await b.ingest("ns", IngestBatch(sessions=(s,)))
    await b.settle("ns", 5)
    assert comp.tasks() == ["compaction"] and flush.tasks() == []


@pytest.mark.slow  # starts a server process
async def test_rig_points_roles_at_llm_mock(tmp_path, monkeypatch):
    monkeypatch.delenv("MEMRIG_LLM_BASE_URL", raising=False)
    async with Rig(tmp_path / "procs") as rig:
        roles = await rig.ensure_llm_roles({"answerer": "env", "judge": "mock", "flush": "mock", "compaction": "env"})
        mock = rig.procs["llm-mock"].url
        assert {r: c.base_url for r, c in roles.items()} == {r: mock for r in R.ROLES}
        assert rig.env["MEMRIG_JUDGE_BASE_URL"] == mock and rig.env["MEMRIG_FLUSH_MODEL"] == DEFAULT_MOCK_MODEL
        assert "MEMRIG_COMPACTION_BASE_URL" not in rig.env  # env: played by the answerer
        assert list(rig.procs) == ["llm-mock"]


async def test_the_coordinators_compaction_uses_the_compaction_role(tmp_path):
    from services.coordinator.context import ProbeContext

    class Recorder(InProcessMockLLM):
        def __init__(self, model):
            super().__init__()
            self.config = LLMConfig(model=model)

    answer, comp = Recorder("a"), Recorder("c")
    s = Session("s1", parse_iso("2026-03-01T09:00:00Z", "t"), (Message("m1", "user", "The dev server runs on port 3001."),))
    ctx = ProbeContext({}, {"ns": IngestBatch(sessions=(s,))}, answer, answer, tmp_path, "suite", compaction_llm=comp)
    summary = await ctx.compaction("ns")
    assert comp.tasks() == ["compaction"] and answer.tasks() == [] and summary
    assert ProbeContext({}, {}, answer, answer, tmp_path, "suite").compaction_llm is answer


def _memrig(*args, env):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "services.cli", *args], capture_output=True, text=True, timeout=300,
                          env=env)


def test_bench_without_the_local_model_says_what_to_run(tmp_path):
    import os

    env = {**os.environ, "MEMRIG_CACHE_DIR": str(tmp_path / "no-model")}
    r = _memrig("bench", "--suite", "cortex-v1", "--backends", "none", "--llm", "local", "--out", str(tmp_path / "o"),
                env=env)
    assert r.returncode == 2, r.stderr
    assert "error: local-llm cannot start:" in r.stderr and "make setup-local-llm" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.slow
def test_up_with_roles_points_the_backends_flush_at_the_chosen_model(tmp_path):
    import json
    import os

    env = {**os.environ, "MEMRIG_STATE_DIR": str(tmp_path / "state")}
    env.pop("MEMRIG_LLM_BASE_URL", None)
    r = _memrig("up", "--backends", "full-context", "--llm", "mock", env=env)
    try:
        assert r.returncode == 0, r.stderr
        assert "flush       llm-mock (offline, not a model) at http://127.0.0.1:" in r.stdout
        state = json.loads((tmp_path / "state" / "run" / "state.json").read_text())
        assert set(state) == {"llm-mock", "backend/full-context"}
        with open(f"/proc/{state['backend/full-context']['pid']}/environ", "rb") as f:
            child = dict(kv.split("=", 1) for kv in f.read().decode().split("\0") if "=" in kv)
        assert child["MEMRIG_FLUSH_BASE_URL"] == state["llm-mock"]["url"]
        assert child["MEMRIG_FLUSH_MODEL"] == DEFAULT_MOCK_MODEL
    finally:
        assert _memrig("down", env=env).returncode == 0
