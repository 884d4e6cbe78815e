"""One OpenAI-compatible chat client (aiohttp) for answers, judging, compaction, extraction and HyDE.

Configuration comes from the environment so a real model needs no code change:
`MEMRIG_LLM_BASE_URL` (default: the local llm-mock), `MEMRIG_LLM_MODEL`, `MEMRIG_LLM_API_KEY`.
Retries with exponential backoff on 429 and 5xx (honouring Retry-After); every other error is raised.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp

DEFAULT_MOCK_URL = "http://127.0.0.1:8790/v1"
DEFAULT_MOCK_MODEL = "memrig-llm-mock"


class LLMError(RuntimeError):
    """A failed LLM call: `status` is the HTTP status (None when the endpoint was not reached), `url` the
    endpoint called, so a server can say which dependency is missing (services/common/grpc_status.py)."""

    def __init__(self, message: str, status: int | None = None, url: str | None = None):
        super().__init__(message)
        self.status = status
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

    @classmethod
    def from_env(cls, prefix: str = "MEMRIG_LLM", **overrides: Any) -> LLMConfig:
        cfg = cls(
            base_url=os.environ.get(f"{prefix}_BASE_URL", DEFAULT_MOCK_URL).rstrip("/"),
            model=os.environ.get(f"{prefix}_MODEL", DEFAULT_MOCK_MODEL),
            api_key=os.environ.get(f"{prefix}_API_KEY", ""),
        )
        for k, v in overrides.items():
            if v is not None:
                setattr(cfg, k, v)
        return cfg

    @property
    def is_mock(self) -> bool:
        return self.model == DEFAULT_MOCK_MODEL

    def identity(self) -> dict[str, Any]:
        """What a report prints about the model behind a number (never the key)."""
        return {
            "model": self.model,
            "base_url": self.base_url,
            "offline_mock": self.is_mock,
        }


@dataclass
class ChatResult:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    attempts: int = 1
    raw: dict[str, Any] = field(default_factory=dict)


class LLMClient:
    def __init__(self, config: LLMConfig | None = None, session: aiohttp.ClientSession | None = None):
        self.config = config or LLMConfig.from_env()
        self._session = session
        self._own_session = session is None
        self._sem = asyncio.Semaphore(self.config.max_concurrency)
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0

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
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        if seed is not None:
            body["seed"] = seed
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
        try:
            text = data["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError) as e:
            raise LLMError(f"LLM response has no choices[0].message.content: {str(data)[:200]}") from e
        usage = data.get("usage") or {}
        res = ChatResult(
            text=text,
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            latency_s=time.perf_counter() - t0,
            attempts=attempt,
            raw=data,
        )
        self.calls += 1
        self.prompt_tokens += res.prompt_tokens
        self.completion_tokens += res.completion_tokens
        return res
