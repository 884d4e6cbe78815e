"""The LLM response cache: its key (hand-computed), what is cached and what is not, the modes, and that a second
client (a rerun) reads what the first stored, against a scripted OpenAI-compatible server that counts calls."""

from __future__ import annotations

import hashlib
import json

import pytest
from aiohttp import web

from services.common import llm_cache
from services.common.llm_client import DEFAULT_MOCK_MODEL, LLMClient, LLMConfig

MSGS = [{"role": "system", "content": "S"}, {"role": "user", "content": "Which port?"}]


def test_key_is_sha256_of_the_canonical_document():
    body = {"model": "qwen", "messages": MSGS, "temperature": 0.0, "max_tokens": 64}
    # Written out by hand: sorted keys, no spaces, the endpoint left out because the digest is known.
    doc = ('{"digest":"abc","endpoint":"","messages":[{"content":"S","role":"system"},{"content":"Which port?",'
           '"role":"user"}],"model":"qwen","params":{"max_tokens":64,"temperature":0.0},"v":1}')
    assert llm_cache.cache_key("qwen", "abc", "http://127.0.0.1:9/v1", body) == hashlib.sha256(doc.encode()).hexdigest()


def test_key_changes_with_each_part_and_the_endpoint_only_without_a_digest():
    body = {"model": "m", "messages": MSGS, "temperature": 0.0}
    k = llm_cache.cache_key("m", "d1", "http://a/v1", body)
    assert llm_cache.cache_key("m2", "d1", "http://a/v1", body) != k
    assert llm_cache.cache_key("m", "d2", "http://a/v1", body) != k
    assert llm_cache.cache_key("m", "d1", "http://a/v1", {**body, "max_tokens": 5}) != k
    assert llm_cache.cache_key("m", "d1", "http://a/v1", {**body, "seed": 1}) != k
    other = [MSGS[0], {"role": "user", "content": "Which port? "}]
    assert llm_cache.cache_key("m", "d1", "http://a/v1", {**body, "messages": other}) != k
    # A local server on another port serving the same file: same entry.
    assert llm_cache.cache_key("m", "d1", "http://b:1/v1", body) == k
    # No digest: the endpoint is part of the key (a trailing slash is not).
    assert llm_cache.cache_key("m", "", "http://a/v1", body) != llm_cache.cache_key("m", "", "http://b/v1", body)
    assert llm_cache.cache_key("m", "", "http://a/v1/", body) == llm_cache.cache_key("m", "", "http://a/v1", body)


def test_only_temperature_zero_or_seeded_without_streaming_is_cacheable():
    assert llm_cache.cacheable({"temperature": 0.0})
    assert llm_cache.cacheable({"temperature": 0.7, "seed": 0}) and llm_cache.cacheable({"temperature": 0.7, "seed": 2})
    assert not llm_cache.cacheable({"temperature": 0.7, "seed": None})
    assert not llm_cache.cacheable({"temperature": 0.7, "seed": 1, "stream": True})
    assert llm_cache.cacheable({"temperature": 0})
    assert not llm_cache.cacheable({"temperature": 0.2})
    assert not llm_cache.cacheable({"temperature": 0.0, "stream": True})


def test_bad_mode_names_the_variable():
    with pytest.raises(ValueError, match="MEMRIG_LLM_CACHE: 'sometimes' is not a cache mode"):
        llm_cache.parse_mode("sometimes")
    assert llm_cache.parse_mode(None) == "on"
    assert llm_cache.parse_mode(" Refresh ") == "refresh"


def test_from_env_reads_identity_cache_and_limits():
    env = {"MEMRIG_JUDGE_BASE_URL": "http://127.0.0.1:5/v1/", "MEMRIG_JUDGE_MODEL": "qwen",
           "MEMRIG_JUDGE_MODEL_DIGEST": "ab" * 32, "MEMRIG_JUDGE_MODEL_QUANT": "Q4_K_M",
           "MEMRIG_JUDGE_MAX_TOKENS": "96", "MEMRIG_JUDGE_TIMEOUT_S": "900", "MEMRIG_LLM_CACHE": "refresh"}
    cfg = LLMConfig.from_env("MEMRIG_JUDGE", env=env)
    assert (cfg.base_url, cfg.model, cfg.model_digest, cfg.quantization) == (
        "http://127.0.0.1:5/v1", "qwen", "ab" * 32, "Q4_K_M")
    assert (cfg.max_tokens, cfg.timeout_s, cfg.cache) == (96, 900.0, "refresh")
    ident = cfg.identity()
    assert ident["sha256"] == "ab" * 32 and ident["quantization"] == "Q4_K_M" and ident["response_cache"] == "refresh"
    with pytest.raises(ValueError, match="MEMRIG_JUDGE_MAX_TOKENS: 'lots' is not an integer"):
        LLMConfig.from_env("MEMRIG_JUDGE", env={**env, "MEMRIG_JUDGE_MAX_TOKENS": "lots"})
    with pytest.raises(ValueError, match="MEMRIG_JUDGE_TIMEOUT_S: must be positive, got 0"):
        LLMConfig.from_env("MEMRIG_JUDGE", env={**env, "MEMRIG_JUDGE_TIMEOUT_S": "0"})


# ---------------------------------------------------------------------------------------------------------
# Against a scripted server


@pytest.fixture
async def counting_server():
    """Replies "reply <n>" where n counts the calls it served; records each request body."""
    state = {"n": 0, "bodies": []}

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        state["n"] += 1
        state["bodies"].append(body)
        return web.json_response({"choices": [{"message": {"role": "assistant", "content": f"reply {state['n']}"}}],
                                  "usage": {"prompt_tokens": 10, "completion_tokens": 2}})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    state["url"] = f"http://127.0.0.1:{port}/v1"
    yield state
    await runner.cleanup()


def _cfg(state, tmp_path, **kw) -> LLMConfig:
    return LLMConfig(base_url=state["url"], model="qwen-test", model_digest="d" * 64, max_retries=0,
                     cache_path=str(tmp_path / "cache.sqlite"), **kw)


async def test_second_identical_call_is_served_from_disk(counting_server, tmp_path):
    async with LLMClient(_cfg(counting_server, tmp_path)) as llm:
        a = await llm.chat(MSGS)
        b = await llm.chat(MSGS)
        c = await llm.chat(MSGS + [{"role": "user", "content": "and the TTL?"}])
    assert (a.text, a.cached) == ("reply 1", False)
    assert (b.text, b.cached, b.prompt_tokens, b.completion_tokens) == ("reply 1", True, 10, 2)
    assert b.latency_s == pytest.approx(a.latency_s)  # the original call's latency, kept with the entry
    assert (c.text, counting_server["n"]) == ("reply 2", 2)
    assert (llm.cache_hits, llm.cache_misses, llm.calls) == (1, 2, 3)
    # A rerun: a new client (new process in practice) on the same file calls nothing.
    async with LLMClient(_cfg(counting_server, tmp_path)) as again:
        assert (await again.chat(MSGS)).text == "reply 1"
        assert (await again.chat(MSGS + [{"role": "user", "content": "and the TTL?"}])).text == "reply 2"
    assert counting_server["n"] == 2
    st = llm_cache.ResponseCache(tmp_path / "cache.sqlite").stats()
    assert (st["entries"], st["hits"]) == (2, 3)


async def test_the_max_tokens_default_is_sent_and_keyed(counting_server, tmp_path):
    async with LLMClient(_cfg(counting_server, tmp_path, max_tokens=32)) as llm:
        await llm.chat(MSGS)
        await llm.chat(MSGS, max_tokens=8)
    assert [b.get("max_tokens") for b in counting_server["bodies"]] == [32, 8]


async def test_sampling_calls_and_the_offline_mock_are_never_cached(counting_server, tmp_path):
    async with LLMClient(_cfg(counting_server, tmp_path)) as llm:
        await llm.chat(MSGS, temperature=0.7)
        await llm.chat(MSGS, temperature=0.7)
    assert counting_server["n"] == 2 and llm.cache_hits == 0 and llm.cache_misses == 0
    mock = LLMConfig(base_url=counting_server["url"], model=DEFAULT_MOCK_MODEL, max_retries=0,
                     cache_path=str(tmp_path / "mock.sqlite"))
    async with LLMClient(mock) as llm:
        await llm.chat(MSGS)
        await llm.chat(MSGS)
    assert counting_server["n"] == 4
    assert not (tmp_path / "mock.sqlite").exists()


async def test_refresh_calls_the_model_and_overwrites_off_leaves_no_file(counting_server, tmp_path):
    async with LLMClient(_cfg(counting_server, tmp_path)) as llm:
        assert (await llm.chat(MSGS)).text == "reply 1"
    async with LLMClient(_cfg(counting_server, tmp_path, cache="refresh")) as llm:
        r = await llm.chat(MSGS)
        assert (r.text, r.cached) == ("reply 2", False)
    async with LLMClient(_cfg(counting_server, tmp_path)) as llm:
        assert (await llm.chat(MSGS)).text == "reply 2"  # the refreshed entry
    assert counting_server["n"] == 2
    off = LLMConfig(base_url=counting_server["url"], model="qwen-test", cache="off", max_retries=0,
                    cache_path=str(tmp_path / "off.sqlite"))
    async with LLMClient(off) as llm:
        await llm.chat(MSGS)
        await llm.chat(MSGS)
    assert counting_server["n"] == 4 and not (tmp_path / "off.sqlite").exists()


async def test_the_entry_keeps_request_and_response(counting_server, tmp_path):
    async with LLMClient(_cfg(counting_server, tmp_path)) as llm:
        await llm.chat(MSGS, seed=3)
    import sqlite3

    with sqlite3.connect(tmp_path / "cache.sqlite") as db:
        model, digest, req, resp = db.execute("SELECT model, digest, request, response FROM responses").fetchone()
    assert (model, digest) == ("qwen-test", "d" * 64)
    assert json.loads(req) == {"model": "qwen-test", "messages": MSGS, "temperature": 0.0, "seed": 3}
    assert json.loads(resp)["choices"][0]["message"]["content"] == "reply 1"


def test_stats_delta():
    assert llm_cache.stats_delta({"hits": 3, "entries": 10}, {"hits": 9, "entries": 10}) == {"hits": 6, "new_entries": 0}
