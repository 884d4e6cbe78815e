"""Tokens injected into the prompt per turn (the recall hook's prependContext), counted with cl100k.

`context_budget_pct` = tokens_injected_p50 / context_window × 100, with the window configurable (default 200 000
tokens, the context window of the Claude models OpenClaw defaults to).
"""

from __future__ import annotations

from collections import defaultdict

from prometheus_client import CollectorRegistry, Histogram

from collectors.prom import get_metric
from collectors.samples import SampleSink
from services.common.percentiles import summary
from services.common.tokens import count_tokens, tokenizer_name

DEFAULT_CONTEXT_WINDOW = 200_000
TOKEN_BUCKETS = (0, 10, 25, 50, 100, 250, 500, 1000, 2000, 4000, 8000, 16000, 32000, 64000)


def token_summary(counts: list[int], context_window: int = DEFAULT_CONTEXT_WINDOW) -> dict:
    if not counts:
        return {"n": 0, "tokens_injected_p50": None, "tokens_injected_p95": None, "tokens_injected_mean": None,
                "tokens_injected_max": None, "context_budget_pct": None, "context_window": context_window}
    s = summary(counts, (50, 95), suffix="", stats=("mean",))
    return {"n": s["n"], "tokens_injected_p50": s["p50"], "tokens_injected_p95": s["p95"],
            "tokens_injected_mean": s["mean"], "tokens_injected_max": max(counts),
            "context_budget_pct": s["p50"] / context_window * 100.0, "context_window": context_window}


class TokenOverheadCollector:
    def __init__(self, context_window: int = DEFAULT_CONTEXT_WINDOW, sink: SampleSink | None = None,
                 registry: CollectorRegistry | None = None, component: str = "turn_sim"):
        if context_window <= 0:
            raise ValueError("context_window must be > 0")
        self.context_window = context_window
        self.sink = sink
        self.component = component
        self.hist = get_metric(Histogram, "memrig_turn_injected_tokens",
                               "cl100k tokens the recall hook prepended to the prompt in one turn",
                               ("backend", "top_k"), registry, buckets=TOKEN_BUCKETS)
        self._counts: dict[tuple[str, int], list[int]] = defaultdict(list)

    def observe(self, backend: str, top_k: int, text: str, **extra) -> int:
        n = count_tokens(text)
        self.hist.labels(backend, str(top_k)).observe(n)
        self._counts[(backend, top_k)].append(n)
        if self.sink is not None:
            self.sink.write("tokens", component=self.component, backend=backend, top_k=top_k, tokens=n,
                            chars=len(text), **extra)
        return n

    def summary(self, backend: str, top_k: int) -> dict:
        return {"backend": backend, "top_k": top_k, "tokenizer": tokenizer_name(),
                **token_summary(self._counts.get((backend, top_k), []), self.context_window)}

    def keys(self) -> list[tuple[str, int]]:
        return list(self._counts)
