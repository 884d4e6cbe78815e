"""One OpenAI-compatible chat client (aiohttp) for answers, judging, compaction, extraction and HyDE.

Configuration comes from the environment so a real model needs no code change:
`MEMRIG_LLM_BASE_URL` (default: the local llm-mock), `MEMRIG_LLM_MODEL`, `MEMRIG_LLM_API_KEY`, and optionally
`MEMRIG_LLM_MODEL_DIGEST` / `MEMRIG_LLM_MODEL_QUANT` (what the endpoint serves: the rig's local-llm sets them),
`MEMRIG_LLM_MAX_TOKENS` (a cap for calls that set none) and `MEMRIG_LLM_TIMEOUT_S`. Other roles read the same
names under their own prefix (services/common/llm_roles.py).
Retries with exponential backoff on 429 and 5xx (honouring Retry-After); every other error is raised.
Deterministic calls (temperature 0) go through the on-disk response cache (services/common/llm_cache.py) unless
`MEMRIG_LLM_CACHE` is `off` (`refresh` calls the model and overwrites the entry).
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from services.common import llm_cache
from services.common.errors import DependencyError

DEFAULT_MOCK_URL = "http://127.0.0.1:8790/v1"
DEFAULT_MOCK_MODEL = "memrig-llm-mock"


class LLMError(DependencyError):
    """A failed LLM call: `status` is the HTTP status (None when the endpoint was not reached), `url` the
    endpoint called, so a server can say which dependency is missing (services/common/grpc_status.py)."""

    dependency = "the LLM endpoint"

    def __init__(self, message: str, status: int | None = None, url: str | None = None):
        super().__init__(message, status)
        self.url = url


@dataclass
class LLMConfig:
    base_url: str = DEFAULT_MOCK_URL
    model: str = DEFAULT_MOCK_MODEL
    api_key: str = ""
    timeout_s: float = 120.0
    max_retries: int = 4
    backoff_base_s: float = 0.5
    backoff_max_s: float = 20.0
    max_concurrency: int = 8
    model_digest: str = ""  # SHA-256 of the model file the endpoint serves, when known
    quantization: str = ""
    max_tokens: int | None = None  # used when a call sets none
    cache: str = "on"  # llm_cache.MODES
    cache_path: str = ""  # "" = llm_cache.default_path()
    details: dict[str, Any] = field(default_factory=dict)  # more identity (runtime, context size), for reports

    @classmethod
    def from_env(cls, prefix: str = "MEMRIG_LLM", env: Mapping[str, str] | None = None, **overrides: Any) -> LLMConfig:
        env = os.environ if env is None else env
        max_tokens = env.get(f"{prefix}_MAX_TOKENS")
        timeout = env.get(f"{prefix}_TIMEOUT_S")
        cfg = cls(
            base_url=env.get(f"{prefix}_BASE_URL", DEFAULT_MOCK_URL).rstrip("/"),
            model=env.get(f"{prefix}_MODEL", DEFAULT_MOCK_MODEL),
            api_key=env.get(f"{prefix}_API_KEY", ""),
            model_digest=env.get(f"{prefix}_MODEL_DIGEST", ""),
            quantization=env.get(f"{prefix}_MODEL_QUANT", ""),
            max_tokens=_positive_int(max_tokens, f"{prefix}_MAX_TOKENS") if max_tokens else None,
            cache=llm_cache.parse_mode(env.get("MEMRIG_LLM_CACHE")),
            cache_path=env.get("MEMRIG_LLM_CACHE_PATH", ""),
        )
        if timeout:
            cfg.timeout_s = float(_positive_int(timeout, f"{prefix}_TIMEOUT_S"))
        for k, v in overrides.items():
            if v is not None:
                setattr(cfg, k, v)
        return cfg

    @property
    def is_mock(self) -> bool:
        return self.model == DEFAULT_MOCK_MODEL

    @property
    def caches(self) -> bool:
        """Whether this endpoint's deterministic calls go through the response cache (never the offline mock)."""
        return self.cache != "off" and not self.is_mock

    def identity(self) -> dict[str, Any]:
        """What a report prints about the model behind a number (never the key)."""
        ident: dict[str, Any] = {
            "model": self.model,
            "base_url": self.base_url,
            "offline_mock": self.is_mock,
        }
        if self.model_digest:
            ident["sha256"] = self.model_digest
        if self.quantization:
            ident["quantization"] = self.quantization
        if self.max_tokens:
            ident["max_tokens"] = self.max_tokens
        if not self.is_mock:
            ident["response_cache"] = self.cache
        ident.update(self.details)
        return ident


def _positive_int(value: str, field_name: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise ValueError(f"{field_name}: {value!r} is not an integer") from None
    if n <= 0:
        raise ValueError(f"{field_name}: must be positive, got {n}")
    return n


@dataclass
class ChatResult:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    attempts: int = 1
    raw: dict[str, Any] = field(default_factory=dict)
    cached: bool = False  # answered from the response cache; latency_s is then the original call's


class LLMClient:
    def __init__(self, config: LLMConfig | None = None, session: aiohttp.ClientSession | None = None):
        self.config = config or LLMConfig.from_env()
        self._session = session
        self._own_session = session is None
        self._sem = asyncio.Semaphore(self.config.max_concurrency)
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cache_hits = 0
        self.cache_misses = 0  # cacheable calls the model answered (and that were then stored)

    async def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.config.timeout_s))
            self._own_session = True
        return self._session

    async def close(self) -> None:
        if self._own_session and self._session is not None and not self._session.closed:
            await self._session.close()

    async def __aenter__(self) -> LLMClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def chat(
        self,
        messages: list[dict[str, str]],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        model: str | None = None,
        seed: int | None = None,
    ) -> ChatResult:
        body: dict[str, Any] = {"model": model or self.config.model, "messages": messages, "temperature": temperature}
        if max_tokens is None:
            max_tokens = self.config.max_tokens
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        if seed is not None:
            body["seed"] = seed
        key = None
        cache = self._response_cache()
        if cache is not None and llm_cache.cacheable(body):
            key = llm_cache.cache_key(body["model"], self.config.model_digest, self.config.base_url, body)
            hit = cache.get(key) if self.config.cache == "on" else None
            if hit is not None:
                self.cache_hits += 1
                return self._result(hit[0], hit[1], 0, cached=True)
        headers = {"Content-Type": "application/json"}
        if self.config.api_key:
            headers["Authorization"] = f"Bearer {self.config.api_key}"
        url = f"{self.config.base_url}/chat/completions"
        session = await self._get_session()
        attempt = 0
        async with self._sem:
            t0 = time.perf_counter()  # after the client's own concurrency wait: latency is the call's, not the queue's
            while True:
                attempt += 1
                retry_after: float | None = None
                try:
                    async with session.post(url, json=body, headers=headers) as resp:
                        if resp.status == 200:
                            data = await resp.json()
                            break
                        text = (await resp.text())[:300]
                        if resp.status == 429 or resp.status >= 500:
                            ra = resp.headers.get("Retry-After")
                            retry_after = float(ra) if ra and ra.replace(".", "", 1).isdigit() else None
                            err = LLMError(f"LLM call failed: {resp.status} — {text}", resp.status, url)
                        else:
                            raise LLMError(f"LLM call failed: {resp.status} — {text}", resp.status, url)
                except (TimeoutError, aiohttp.ClientConnectionError) as e:
                    err = LLMError(f"LLM call to {url} failed: {type(e).__name__}: {e}", url=url)
                if attempt > self.config.max_retries:
                    raise err
                delay = retry_after if retry_after is not None else min(
                    self.config.backoff_max_s, self.config.backoff_base_s * (2 ** (attempt - 1))
                )
                await asyncio.sleep(delay * (1.0 if retry_after is not None else random.uniform(0.8, 1.2)))
        res = self._result(data, time.perf_counter() - t0, attempt)
        if key is not None and cache is not None:
            cache.put(key, body["model"], self.config.model_digest, body, data, res.latency_s)
            self.cache_misses += 1
        return res

    def _result(self, data: dict[str, Any], latency_s: float, attempts: int, cached: bool = False) -> ChatResult:
        try:
            text = data["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError) as e:
            raise LLMError(f"LLM response has no choices[0].message.content: {str(data)[:200]}") from e
        usage = data.get("usage") or {}
        res = ChatResult(
            text=text,
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            latency_s=latency_s,
            attempts=attempts,
            raw=data,
            cached=cached,
        )
        self.calls += 1
        self.prompt_tokens += res.prompt_tokens
        self.completion_tokens += res.completion_tokens
        return res

    def _response_cache(self) -> llm_cache.ResponseCache | None:
        """Decided per call: the runner may point a client at another endpoint after building it."""
        return llm_cache.shared(self.config.cache_path or None) if self.config.caches else None

    def cache_stats(self) -> dict[str, Any]:
        return {"mode": self.config.cache if self.config.caches else "off", "hits": self.cache_hits,
                "misses": self.cache_misses}
