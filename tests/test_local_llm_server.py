"""local-llm: argument checks, the admission bound, the role settings it hands out, a clear refusal when the model
is not set up, and (marked needs_llm) the real server: start through the rig, identity, an answer, a cached
rerun, stop by PID."""

from __future__ import annotations

import asyncio
import os
from argparse import Namespace
from pathlib import Path

import pytest

from services.launcher import LaunchError, Rig
from services.local_llm import client as LC
from services.local_llm import model as M
from services.local_llm import server as S
from services.local_llm.setup import local_llm_status

# Read before the autouse fixture points MEMRIG_CACHE_DIR at a temporary directory.
REAL_CACHE_DIR = os.environ.get("MEMRIG_CACHE_DIR")
READY, WHY = local_llm_status()


def _args(**kw) -> Namespace:
    base = {"host": "127.0.0.1", "port": 0, "n_ctx": 8192, "threads": 2, "max_inflight": 16}
    return Namespace(**{**base, **kw})


def test_bad_arguments_name_the_flag():
    S.check_args(_args())
    with pytest.raises(ValueError, match="--n-ctx: 256 is too small"):
        S.check_args(_args(n_ctx=256))
    with pytest.raises(ValueError, match="--max-inflight: must be at least 1, got 0"):
        S.check_args(_args(max_inflight=0))
    with pytest.raises(ValueError, match="--threads: must be at least 1, got -1"):
        S.check_args(_args(threads=-1))
    with pytest.raises(ValueError, match="--port: 70000 is not a TCP port"):
        S.check_args(_args(port=70000))


def test_main_refuses_a_missing_model_with_the_setup_command(tmp_path, capsys):
    code = S.main(["--model-path", str(tmp_path / "absent.gguf")])
    err = capsys.readouterr().err
    assert code == 2 and "absent.gguf is not in" in err and "make setup-local-llm" in err


async def test_the_admission_bound_answers_503_beyond_the_limit():
    release = asyncio.Event()
    entered = []

    async def app(scope, receive, send):
        entered.append(scope["path"])
        await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    rejected = []
    limited = S.InflightLimit(app, 2, on_reject=lambda: rejected.append(1))
    sent: list[list[dict]] = [[], [], [], []]

    def sender(i):
        async def send(msg):
            sent[i].append(msg)
        return send

    post = {"type": "http", "path": "/v1/chat/completions", "method": "POST"}
    running = [asyncio.ensure_future(limited(post, None, sender(i))) for i in range(2)]
    await asyncio.sleep(0)
    await limited(post, None, sender(2))  # a third: refused at once
    assert sent[2][0]["status"] == 503 and (b"retry-after", b"2") in sent[2][0]["headers"]
    assert b"--max-inflight" in sent[2][1]["body"] and rejected == [1]
    release.set()
    await asyncio.gather(*running)
    assert [m[0]["status"] for m in sent[:2]] == [200, 200] and limited.inflight == 0
    await limited(post, None, sender(3))  # room again
    assert sent[3][0]["status"] == 200


def test_role_settings_and_identity_details():
    ident = {"model": "q", "sha256": "ab" * 32, "quantization": "Q4_K_M", "name": "Qwen", "runtime": "llama-cpp-python 0.3.36",
             "n_ctx": 8192, "threads": 2, "max_inflight": 16, "bytes": 5}
    assert LC.local_role_settings("judge", ident) == {"MODEL_DIGEST": "ab" * 32, "MODEL_QUANT": "Q4_K_M",
                                                      "MAX_TOKENS": "96", "TIMEOUT_S": "1800"}
    assert LC.identity_details(ident) == {"name": "Qwen", "runtime": "llama-cpp-python 0.3.36", "n_ctx": 8192,
                                          "threads": 2}
    assert LC.root_of("http://127.0.0.1:5/v1/") == "http://127.0.0.1:5"


async def test_the_rig_says_why_local_llm_cannot_start(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMRIG_CACHE_DIR", str(tmp_path / "empty-cache"))
    async with Rig(tmp_path / "procs") as rig:
        with pytest.raises(LaunchError, match="local-llm cannot start: .*make setup-local-llm"):
            await rig.ensure_llm_roles({"judge": "local"})
        assert "local-llm" not in rig.procs


async def chat_or_say_why(llm, proc, msgs, **kw):
    """llm.chat, and when the call fails, whether the server died and the end of its log (CI at 3d5bd7c showed only
    "Connect call failed": the server had died by SIGILL, a build for another CPU, see test_local_llm_setup.py)."""
    from services.common.llm_client import LLMError

    try:
        return await llm.chat(msgs, **kw)
    except LLMError as e:
        log = Path(proc.log).read_text(errors="replace")[-1500:] if Path(proc.log).exists() else "(no log)"
        pytest.fail(f"{e}\nlocal-llm pid {proc.pid} alive={proc.alive()}; its log ends:\n{log}")


@pytest.mark.needs_llm
@pytest.mark.slow
@pytest.mark.skipif(not READY, reason=f"[requires:local-llm] local model not set up: {WHY}")
async def test_real_server_starts_answers_caches_and_stops_by_pid(tmp_path, monkeypatch):
    from services.common.llm_client import LLMClient

    if REAL_CACHE_DIR:
        monkeypatch.setenv("MEMRIG_CACHE_DIR", REAL_CACHE_DIR)
    else:
        monkeypatch.delenv("MEMRIG_CACHE_DIR")
    async with Rig(tmp_path / "procs") as rig:
        roles = await rig.ensure_llm_roles({"answerer": "local", "judge": "local", "flush": "local",
                                            "compaction": "local"})
        proc = rig.procs["local-llm"]
        assert proc.url.startswith("http://127.0.0.1:") and proc.alive()
        cfg = roles["answerer"]
        assert (cfg.model, cfg.model_digest, cfg.quantization, cfg.max_tokens) == (
            M.DEFAULT_MODEL.alias, M.DEFAULT_MODEL.sha256, "Q4_K_M", 200)
        assert roles["judge"].max_tokens == 96 and cfg.identity()["runtime"] == "llama-cpp-python 0.3.36"
        msgs = [{"role": "system", "content": "Answer in a few words."},
                {"role": "user", "content": "Context: the dev server runs on port 3001.\nWhich port does the dev "
                                            "server use?"}]
        async with LLMClient(cfg) as llm:
            first = await chat_or_say_why(llm, proc, msgs)
            again = await chat_or_say_why(llm, proc, msgs)
        assert "3001" in first.text and not first.cached
        assert again.cached and again.text == first.text
        pid = proc.pid
    with pytest.raises(ProcessLookupError):  # stopped by PID when the rig closed
        os.kill(pid, 0)


def test_logits_only_where_sampled():
    # llama-cpp-python's server keeps a logits row per prompt position by default; the rig turns that off
    ms = S.model_settings(M.model_path(), M.DEFAULT_MODEL, _args(n_ctx=4096, threads=3))
    assert ms["logits_all"] is False
    assert (ms["n_ctx"], ms["n_threads"], ms["n_threads_batch"], ms["model_alias"]) == (
        4096, 3, 3, M.DEFAULT_MODEL.alias)


def _rss_bytes(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


# The resident size after a long prompt: the model (1.1 GB mapped), the KV cache and one logits row. With logits for
# every position (151,936 floats, 608 kB, a position) it was over 4 GB after 2.4k tokens: the 2.5k-token prompt here
# would hold 1.5 GB of them beside the model, past the bound (a 3.5k-token prompt took 85-118 s quiet, this one
# about two thirds of that). (The KV cache for all 8,192 positions is ~235 MB: 28
# layers x K and V x 256 values x 2 bytes, so a prompt filling the window would not move RSS near the bound; it took
# 4.5 minutes of prefill on the portable llama.cpp build, this one about a third of that.)
RSS_BOUND = 2_600_000_000


@pytest.mark.needs_llm
@pytest.mark.slow
@pytest.mark.timeout(1800)  # a 2.5k-token prompt on 2 shared cores takes minutes
@pytest.mark.skipif(not READY, reason=f"[requires:local-llm] local model not set up: {WHY}")
async def test_memory_stays_bounded_after_a_long_prompt(tmp_path, monkeypatch):
    from services.common.llm_client import LLMClient

    if REAL_CACHE_DIR:
        monkeypatch.setenv("MEMRIG_CACHE_DIR", REAL_CACHE_DIR)
    else:
        monkeypatch.delenv("MEMRIG_CACHE_DIR")
    monkeypatch.setenv("MEMRIG_LLM_CACHE", "off")
    async with Rig(tmp_path / "procs") as rig:
        roles = await rig.ensure_llm_roles({"answerer": "local"})
        pid = rig.procs["local-llm"].pid
        # about 2,500 tokens of numbered notes, then a question about one of them
        notes = "\n".join(f"Note {i}: the build server number {i} listens on port {3000 + i}." for i in range(115))
        async with LLMClient(roles["answerer"]) as llm:
            res = await chat_or_say_why(llm, rig.procs["local-llm"], [
                {"role": "user", "content": notes + "\nWhich port does server 7 use? Answer with the number only."}],
                max_tokens=8)
        assert res.prompt_tokens > 2400
        rss = _rss_bytes(pid)
        print(f"local-llm RSS after a {res.prompt_tokens}-token prompt: {rss / 1e9:.2f} GB")
        assert rss < RSS_BOUND
