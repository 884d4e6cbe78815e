"""What a drill is given (DrillContext), what it returns (DrillResult) and the knobs it sets on the adapter.

The memory plugin's failure policy (recall timeout budget, cold-start gate, RetryQueue cap) lives in the backend
adapter under test; a drill configures it through `AdapterKnobs` (config key names) and reads the retry-queue
depth through the backend's counters. `overrides` lets a test mis-configure the adapter on purpose (gate off,
huge timeout budget, no queue cap) to show that each drill's pass condition can fail.

Time, sleeping, RSS and the plugin are injectable (`clock`, `sleep`, `rss_reader`, `plugin_factory`): a real run
uses the wall clock, asyncio.sleep, psutil and the host's MemoryPlugin; a test drives every criterion of every
drill to failure on a simulated clock in milliseconds, so no test asserts anything about wall-clock speed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class DrillConfig:
    recall_timeout_ms: int = 500  # the adapter's recall budget (recallTimeoutMs)
    gate_failures: int = 3  # COLD_START_WINDOW
    cooldown_s: float = 1.5  # COLD_START_COOLDOWN_MS, shortened from 30 s so the drill runs in seconds
    outage_s: float = 2.5  # recovery drill's outage (seed: 30 s)
    queue_cap: int = 100  # RetryQueue MAX_CAPACITY
    slow_api_ms: int = 3000  # slow-API drill's injected delay (seed: 3 s)
    failed_captures: int = 120  # sustained-failures drill (seed: 100+)
    slack_ms: float = 150.0  # scheduling slack allowed over a budget on a shared 2-core machine
    near_zero_ms: float = 2.0  # "≈ 0 ms overhead"
    rss_growth_limit_mb: float = 25.0  # "memory stable" during sustained failures

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class AdapterKnobs:
    """Config key names of the adapter under test, and how a value is expressed."""

    recall_timeout_ms: str = "recall_timeout_ms"
    gate_failures: str = "cold_start_failures"
    cooldown_ms: str = "cold_start_cooldown_ms"
    queue_cap: str = "retry_queue_capacity"
    queue_depth_counter: str = "retry_queue_depth"

    def config(self, c: DrillConfig) -> dict[str, Any]:
        return {self.recall_timeout_ms: int(c.recall_timeout_ms), self.gate_failures: int(c.gate_failures),
                self.cooldown_ms: int(c.cooldown_s * 1000), self.queue_cap: int(c.queue_cap)}


@dataclass
class DrillResult:
    name: str
    expectation: str
    measured: str
    value: float | None
    passed: bool  # every criterion held
    details: dict[str, Any] = field(default_factory=dict)  # details["criteria"]: criterion -> held
    wall_s: float = 0.0
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


ClientFactory = Callable[[dict[str, Any]], Any]  # config overrides -> a fresh backend client through the proxy


@dataclass
class DrillContext:
    admin: Any  # services.fault_proxy.admin_client.FaultProxyAdmin
    make_client: ClientFactory
    namespace: str
    config: DrillConfig = field(default_factory=DrillConfig)
    knobs: AdapterKnobs = field(default_factory=AdapterKnobs)
    overrides: dict[str, Any] = field(default_factory=dict)  # applied last: deliberate mis-configuration
    seed: int = 0
    sink: Any = None  # collectors.samples.SampleSink
    clock: Callable[[], float] = time.perf_counter  # seconds; turn overhead and outage timing
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep
    rss_reader: Callable[[], int] | None = None  # None: this process's RSS (psutil)
    # (client, namespace, services.turn_sim.plugin.PluginConfig) -> the plugin under test; None: MemoryPlugin
    plugin_factory: Callable[..., Any] | None = None

    def client(self, **extra: Any) -> Any:
        cfg = {**self.knobs.config(self.config), **extra, **self.overrides}
        return self.make_client(cfg)

    async def queue_depth(self, client: Any) -> int | None:
        try:
            counters = (await client.stats(self.namespace)).get("counters", {})
        except Exception:
            return None
        v = counters.get(self.knobs.queue_depth_counter)
        return int(v) if v is not None else None


def verdict(criteria: dict[str, bool]) -> tuple[bool, dict[str, bool]]:
    """A drill passes when every criterion it claims held; the criteria go into the result's details."""
    return all(criteria.values()), dict(criteria)


def failed_criteria(result: DrillResult) -> set[str]:
    return {k for k, ok in (result.details.get("criteria") or {}).items() if not ok}


DrillFn = Callable[[DrillContext], Awaitable[DrillResult]]
