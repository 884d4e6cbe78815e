"""The llm-mock's knobs (one dataclass, filled from the command line or by tests)."""

from __future__ import annotations

from dataclasses import dataclass

from services.common.llm_client import DEFAULT_MOCK_MODEL


@dataclass
class MockConfig:
    host: str = "127.0.0.1"
    port: int = 8790
    latency_ms: float = 0.0  # fixed delay added to every valid chat request
    latency_jitter_ms: float = 0.0  # plus a seeded uniform draw in [0, jitter]
    seed: int = 0  # seeds the jitter and the injected-error draws (one stream each, in request order)
    prompt_tokens_override: int | None = None  # report this in usage instead of the cl100k count
    completion_tokens_override: int | None = None
    error_rate: float = 0.0  # probability of an injected error per valid chat request
    error_status: int = 500  # status of injected errors (500, 502, 503 or 429)
    model: str = DEFAULT_MOCK_MODEL  # the id /v1/models lists
    # More model ids answered the same way (listed too); "*" accepts any id, for clients with a fixed model name.
    model_aliases: tuple[str, ...] = ()
    cache_size: int = 2048  # responses remembered by request content (they are deterministic anyway)
    max_body_bytes: int = 64 * 1024 * 1024

    def validate(self) -> MockConfig:
        if self.latency_ms < 0:
            raise ValueError("latency_ms must be >= 0")
        if self.latency_jitter_ms < 0:
            raise ValueError("latency_jitter_ms must be >= 0")
        if not 0.0 <= self.error_rate <= 1.0:
            raise ValueError("error_rate must be within [0, 1]")
        if self.error_status not in (429, 500, 502, 503, 504):
            raise ValueError("error_status must be one of 429, 500, 502, 503, 504")
        for name in ("prompt_tokens_override", "completion_tokens_override"):
            v = getattr(self, name)
            if v is not None and v < 0:
                raise ValueError(f"{name} must be >= 0")
        if self.cache_size < 0:
            raise ValueError("cache_size must be >= 0")
        if any(not a or not a.strip() for a in self.model_aliases):
            raise ValueError("model_aliases must be non-empty strings")
        return self

    def serves_model(self, model: str) -> bool:
        return model == self.model or model in self.model_aliases or "*" in self.model_aliases

    def listed_models(self) -> list[str]:
        return [self.model] + [a for a in dict.fromkeys(self.model_aliases) if a not in ("*", self.model)]
