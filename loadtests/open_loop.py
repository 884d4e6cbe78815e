"""Open-loop load driver (asyncio): a seeded arrival schedule, latency from the intended send time.

Locust users form a closed loop: when the target stalls they stop sending, so one slow sample stands in for
the many requests that would have queued behind it (coordinated omission). This driver works like wrk2 instead:

* The schedule is fixed before the run (`build_schedule`): constant or Poisson arrivals, seeded, with step and
  spike phases. Request i is *intended* at `t0 + schedule[i]` whatever happened to earlier requests.
* At most `concurrency` requests are on the wire (wrk2's connections); later arrivals wait for a slot in FIFO
  order. At most `max_pending` may be waiting or on the wire; an arrival beyond that is *dropped* (counted,
  never silently skipped) and makes the run invalid.
* Per request we keep four perf_counter_ns stamps: intended, dispatched (the scheduler reached it), sent (a slot
  was free and the call started) and done. Corrected latency = done - intended; service time = done - sent (what
  a closed-loop tool reports); schedule lag = dispatched - intended (the generator's own lateness); queue wait =
  sent - intended.
* Both latencies go into HdrHistograms (package `hdrhistogram`, microsecond values, 3 significant digits) and
  are persisted as histoblobs. Successful requests only; failures are counted by error type.
* The run is invalid when the generator could not keep its schedule: schedule-lag p99 above a threshold, or any
  dropped arrival.

This module must not import locust (gevent monkey-patching breaks asyncio/grpc.aio).

    python -m loadtests.open_loop --target http --url http://127.0.0.1:8792 --rate 100 --duration 10
    python -m loadtests.open_loop --target grpc --address 127.0.0.1:50051 --shape step --rate 50 --step 50 --steps 4
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

import numpy as np
from hdrh.histogram import HdrHistogram

from loadtests.workload import queries
from services.common import event_loop
from services.common.errors import DependencyError
from services.common.percentiles import pname, summary

# HdrHistogram range: 1 us .. 1 h, 3 significant digits (0.1 % value precision).
_HDR_LOW_US = 1
_HDR_HIGH_US = 3_600_000_000
_HDR_DIGITS = 3

REPORT_PERCENTILES = (50.0, 90.0, 99.0, 99.9)


# ------------------------------------------------------------------------------------------------- schedule
@dataclass(frozen=True)
class Phase:
    """`duration_s` seconds of arrivals at `rate` per second; `arrival` is "constant" or "poisson"."""

    rate: float
    duration_s: float
    arrival: str = "constant"
    name: str = ""

    def __post_init__(self) -> None:
        if self.rate < 0 or not math.isfinite(self.rate):
            raise ValueError(f"phase.rate must be a finite number >= 0, got {self.rate!r}")
        if self.duration_s <= 0:
            raise ValueError(f"phase.duration_s must be > 0, got {self.duration_s!r}")
        if self.arrival not in ("constant", "poisson"):
            raise ValueError(f"phase.arrival must be 'constant' or 'poisson', got {self.arrival!r}")


def build_schedule(phases: Sequence[Phase], seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Intended send offsets in seconds from the run start (sorted), and the phase index of each.

    Constant phases place arrival k at `start + k / rate` (so `rate * duration` arrivals, the first one at the
    phase start). Poisson phases draw exponential gaps with mean `1 / rate` from one seeded generator, so the
    same seed and phases always give the same schedule.
    """
    rng = np.random.default_rng(seed)
    offsets: list[np.ndarray] = []
    idx: list[np.ndarray] = []
    start = 0.0
    for p_i, ph in enumerate(phases):
        if ph.rate > 0:
            if ph.arrival == "constant":
                n = int(math.floor(ph.rate * ph.duration_s + 1e-9))
                t = start + np.arange(n, dtype=np.float64) / ph.rate
            else:
                # Draw a few more gaps than expected, then cut at the phase end.
                n_draw = int(ph.rate * ph.duration_s + 10 * math.sqrt(ph.rate * ph.duration_s) + 10)
                t = start + np.cumsum(rng.exponential(1.0 / ph.rate, size=n_draw))
                while t.size and t[-1] < start + ph.duration_s:  # pragma: no cover - vanishingly rare
                    more = t[-1] + np.cumsum(rng.exponential(1.0 / ph.rate, size=n_draw))
                    t = np.concatenate([t, more])
                t = t[t < start + ph.duration_s]
            offsets.append(t)
            idx.append(np.full(t.size, p_i, dtype=np.int32))
        start += ph.duration_s
    if not offsets:
        return np.zeros(0), np.zeros(0, dtype=np.int32)
    return np.concatenate(offsets), np.concatenate(idx)


def constant_phases(rate: float, duration_s: float, arrival: str = "constant") -> list[Phase]:
    return [Phase(rate, duration_s, arrival, f"constant {rate:g}/s")]


def step_phases(start_rate: float, step: float, steps: int, step_duration_s: float,
                arrival: str = "constant") -> list[Phase]:
    """`steps` phases at start_rate, start_rate+step, ...; each `step_duration_s` long."""
    return [Phase(start_rate + k * step, step_duration_s, arrival, f"step {k + 1}: {start_rate + k * step:g}/s")
            for k in range(steps)]


def spike_phases(base_rate: float, spike_rate: float, before_s: float, spike_s: float, after_s: float,
                 arrival: str = "constant") -> list[Phase]:
    """Base load, a short spike, then base load again (recovery)."""
    return [Phase(base_rate, before_s, arrival, f"base {base_rate:g}/s"),
            Phase(spike_rate, spike_s, arrival, f"spike {spike_rate:g}/s"),
            Phase(base_rate, after_s, arrival, f"recovery {base_rate:g}/s")]


# ------------------------------------------------------------------------------------------------- records
@dataclass
class Records:
    """Per-arrival stamps (perf_counter_ns; 0 = never happened) and outcome."""

    intended: np.ndarray
    dispatched: np.ndarray
    sent: np.ndarray
    done: np.ndarray
    ok: np.ndarray  # bool
    dropped: np.ndarray  # bool
    phase: np.ndarray
    errors: list[str | None]

    @classmethod
    def empty(cls, n: int, phase: np.ndarray | None = None) -> Records:
        z = lambda: np.zeros(n, dtype=np.int64)  # noqa: E731
        return cls(z(), z(), z(), z(), np.zeros(n, dtype=bool), np.zeros(n, dtype=bool),
                   phase if phase is not None else np.zeros(n, dtype=np.int32), [None] * n)


def _new_hdr() -> HdrHistogram:
    return HdrHistogram(_HDR_LOW_US, _HDR_HIGH_US, _HDR_DIGITS)


def hdr_from_ns(values_ns: np.ndarray) -> HdrHistogram:
    h = _new_hdr()
    for v in np.maximum(np.asarray(values_ns, dtype=np.int64) // 1000, _HDR_LOW_US):
        h.record_value(min(int(v), _HDR_HIGH_US))
    return h


def hdr_summary_ms(h: HdrHistogram) -> dict[str, float | int | None]:
    n = h.get_total_count()
    if n == 0:
        return {"n": 0, **{f"p{pname(p)}_ms": None for p in REPORT_PERCENTILES}, "max_ms": None, "mean_ms": None}
    out: dict[str, float | int | None] = {"n": int(n)}
    for p in REPORT_PERCENTILES:
        out[f"p{pname(p)}_ms"] = h.get_value_at_percentile(p) / 1000.0
    out["max_ms"] = h.get_max_value() / 1000.0
    out["mean_ms"] = round(h.get_mean_value() / 1000.0, 3)
    return out


def _exact_ms(values_ns: np.ndarray, qs: Sequence[float] = (50, 99)) -> dict[str, float | None]:
    if values_ns.size == 0:
        return {**{f"p{pname(q)}_ms": None for q in qs}, "max_ms": None}
    s = summary(values_ns, qs, scale=1e-6, stats=("max",))
    return {k: round(v, 3) for k, v in s.items() if k != "n"}


@dataclass
class Validity:
    lag_p99_threshold_ms: float = 20.0
    max_dropped: int = 0


def summarise(rec: Records, phases: Sequence[Phase] = (), validity: Validity | None = None,
              meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything a report needs from one run's records (a pure function of the arrays)."""
    validity = validity or Validity()
    n = rec.intended.size
    dispatched = ~rec.dropped & (rec.dispatched > 0)
    finished = rec.done > 0
    ok = rec.ok & finished
    corrected = (rec.done - rec.intended)[ok]
    service = (rec.done - rec.sent)[ok]
    lag = (rec.dispatched - rec.intended)[rec.dispatched > 0]
    qwait = (rec.sent - rec.intended)[rec.sent > 0]
    h_corr, h_serv = hdr_from_ns(corrected), hdr_from_ns(service)
    errors = Counter(e for e, f, o in zip(rec.errors, finished, rec.ok, strict=True) if f and not o and e)
    n_drop = int(rec.dropped.sum())
    # Span over which the schedule was issued and answered, for achieved throughput.
    span_ns = (int(rec.done[finished].max()) - int(rec.intended.min())) if finished.any() else 0
    lag_ms = _exact_ms(lag, (50, 99))
    reasons = []
    if lag_ms["p99_ms"] is not None and lag_ms["p99_ms"] > validity.lag_p99_threshold_ms:
        reasons.append(f"schedule lag p99 {lag_ms['p99_ms']:.1f} ms > {validity.lag_p99_threshold_ms:g} ms")
    if n_drop > validity.max_dropped:
        reasons.append(f"{n_drop} arrivals dropped (in-flight bound hit)")
    unfinished = int((dispatched & ~finished).sum())
    if unfinished:
        reasons.append(f"{unfinished} requests never finished")
    per_phase = []
    for p_i, ph in enumerate(phases):
        m = rec.phase == p_i
        mo = m & ok
        per_phase.append({
            "phase": ph.name or f"phase {p_i}", "rate": ph.rate, "duration_s": ph.duration_s, "scheduled": int(m.sum()),
            "ok": int(mo.sum()), "failed": int((m & finished & ~rec.ok).sum()), "dropped": int((m & rec.dropped).sum()),
            "corrected": hdr_summary_ms(hdr_from_ns((rec.done - rec.intended)[mo])),
            "service": hdr_summary_ms(hdr_from_ns((rec.done - rec.sent)[mo])),
        })
    return {
        **(meta or {}),
        "model": "open loop (latency from the intended send time; corrected for coordinated omission)",
        "scheduled": n, "sent": int((rec.sent > 0).sum()), "completed": int(finished.sum()), "ok": int(ok.sum()),
        "failed": int((finished & ~rec.ok).sum()), "errors": dict(errors), "dropped": n_drop,
        "achieved_rps": round(int(ok.sum()) / (span_ns / 1e9), 2) if span_ns > 0 else 0.0,
        "corrected": hdr_summary_ms(h_corr),
        "service": hdr_summary_ms(h_serv),
        "schedule_lag": lag_ms,
        "queue_wait": _exact_ms(qwait, (50, 99)),
        "valid": not reasons,
        "invalid_reasons": reasons,
        "per_phase": per_phase,
        "histoblobs": {"corrected_us": h_corr.encode().decode("ascii") if h_corr.get_total_count() else "",
                       "service_us": h_serv.encode().decode("ascii") if h_serv.get_total_count() else ""},
    }


# ------------------------------------------------------------------------------------------------- targets
class Target(Protocol):
    name: str

    async def start(self) -> None: ...

    async def call(self, i: int) -> None:
        """Send request number i; raise on any failure."""

    async def close(self) -> None: ...


def default_queries(n: int = 64, seed: int = 7) -> list[str]:
    """A seeded set of short developer-memory questions (deterministic, no data files)."""
    return queries(n, seed)


class HttpRetrieveTarget:
    """POST /v1/retrieve on a Cortex API (the mock, through the fault proxy or direct)."""

    def __init__(self, base_url: str, api_key: str = "memrig-local", concurrency: int = 64,
                 queries: Sequence[str] | None = None, top_k: int = 10, mode: str = "fast", name: str = ""):
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.concurrency = concurrency
        self.queries = list(queries or default_queries())
        self.top_k = top_k
        self.mode = mode
        self.name = name or f"http {self.base_url}/v1/retrieve ({mode})"
        self._client = None
        self._requests: list[bytes] = []

    async def start(self) -> None:
        import orjson

        from loadtests.http_client import HttpClient, post_request

        self._client = HttpClient(self.base_url, self.concurrency)
        path = f"{urlsplit(self.base_url).path.rstrip('/')}/v1/retrieve"
        headers = {"x-api-key": self.api_key, "Content-Type": "application/json"}
        # Each query's request encoded once: the generator's CPU per request is part of what load-bench reports.
        # Request i carries {"query", "top_k", "mode"} with the queries taken in turn.
        self._requests = [post_request(self._client.host_header(), path,
                                       orjson.dumps({"query": q, "top_k": self.top_k, "mode": self.mode}), headers)
                          for q in self.queries]

    async def call(self, i: int) -> None:
        status, data = await self._client.request(self._requests[i % len(self._requests)])  # type: ignore[union-attr]
        if status >= 400:
            raise HttpStatusError(status, data)  # (its message keeps the first 200 bytes)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()


class HttpStatusError(DependencyError):
    """The target under load answered an HTTP error status (`status`; `kind` http_<status> is its error class in
    the driver's counts)."""

    dependency = "the target under load"

    def __init__(self, status: int, body: bytes = b""):
        super().__init__(f"HTTP {status}: {body[:200]!r}", status)

    @property
    def kind(self) -> str:
        return f"http_{self.status}"


class GrpcRetrieveTarget:
    """MemoryBackendService.Retrieve over grpc.aio (one HTTP/2 channel; concurrency bounded by the driver)."""

    def __init__(self, address: str, namespace: str = "load", queries: Sequence[str] | None = None,
                 top_k: int = 10, mode: str = "fast", name: str = ""):
        self.address = address
        self.namespace = namespace
        self.queries = list(queries or default_queries())
        self.top_k = top_k
        self.mode = mode
        self.name = name or f"grpc {address} Retrieve"
        self._channel = None
        self._stub = None

    async def start(self) -> None:
        import grpc

        from memrig.v1 import memory_backend_pb2_grpc as pb_grpc

        # No client retries: a rig must not hide faults.
        self._channel = grpc.aio.insecure_channel(self.address, options=[("grpc.enable_retries", 0)])
        self._stub = pb_grpc.MemoryBackendServiceStub(self._channel)

    async def call(self, i: int) -> None:
        from memrig.v1 import memory_backend_pb2 as pb

        mode = pb.RETRIEVE_MODE_FULL if self.mode == "full" else pb.RETRIEVE_MODE_FAST
        await self._stub.Retrieve(pb.RetrieveRequest(  # type: ignore[union-attr]
            namespace=self.namespace, query=self.queries[i % len(self.queries)], top_k=self.top_k, mode=mode))

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()


def error_kind(e: BaseException) -> str:
    if isinstance(e, HttpStatusError):
        return e.kind
    if isinstance(e, asyncio.TimeoutError | TimeoutError):
        return "timeout"
    code = getattr(e, "code", None)
    if callable(code):  # grpc.aio.AioRpcError
        try:
            return f"grpc_{code().name}"
        except Exception:  # pragma: no cover
            pass
    return type(e).__name__


# ------------------------------------------------------------------------------------------------- driver
@dataclass
class DriverConfig:
    concurrency: int = 64
    max_pending: int = 4096
    timeout_s: float = 10.0
    start_delay_s: float = 0.05
    validity: Validity = field(default_factory=Validity)


async def drive(target: Target, offsets_s: np.ndarray, phase_idx: np.ndarray | None = None,
                config: DriverConfig | None = None) -> Records:
    """Issue request i at t0 + offsets_s[i] regardless of earlier responses; return the stamps."""
    cfg = config or DriverConfig()
    n = int(offsets_s.size)
    rec = Records.empty(n, phase_idx)
    offs_ns = np.round(np.asarray(offsets_s, dtype=np.float64) * 1e9).astype(np.int64)
    sem = asyncio.Semaphore(cfg.concurrency)
    pending = 0
    tasks: set[asyncio.Task] = set()
    clock = time.perf_counter_ns

    async def one(i: int) -> None:
        nonlocal pending
        try:
            async with sem:
                rec.sent[i] = clock()
                try:
                    async with asyncio.timeout(cfg.timeout_s):  # no extra task per request, unlike wait_for
                        await target.call(i)
                    rec.ok[i] = True
                except asyncio.CancelledError:
                    raise
                except BaseException as e:  # every failure is an outcome to count
                    rec.errors[i] = error_kind(e)
                rec.done[i] = clock()
        finally:
            pending -= 1

    t0 = clock() + int(cfg.start_delay_s * 1e9)
    rec.intended[:] = t0 + offs_ns
    behind = 0
    for i in range(n):
        intended = int(rec.intended[i])
        now = clock()
        if intended > now:
            behind = 0
            await asyncio.sleep((intended - now) / 1e9)
        else:
            # Already late: dispatch without sleeping, but let the loop breathe now and then.
            behind += 1
            if behind % 32 == 0:
                await asyncio.sleep(0)
        rec.dispatched[i] = clock()
        if pending >= cfg.max_pending:
            rec.dropped[i] = True
            continue
        pending += 1
        t = asyncio.create_task(one(i))
        tasks.add(t)
        t.add_done_callback(tasks.discard)
    if tasks:
        await asyncio.wait(set(tasks))
    return rec


async def run_open_loop(target: Target, phases: Sequence[Phase], seed: int = 0,
                        config: DriverConfig | None = None) -> dict[str, Any]:
    """Build the schedule, drive the target, summarise. The target is started and closed here."""
    cfg = config or DriverConfig()
    offsets, idx = build_schedule(phases, seed)
    await target.start()
    try:
        rec = await drive(target, offsets, idx, cfg)
    finally:
        await target.close()
    meta = {"target": target.name, "seed": seed, "phases": [asdict(p) for p in phases],
            "concurrency": cfg.concurrency, "max_pending": cfg.max_pending, "timeout_s": cfg.timeout_s,
            "lag_p99_threshold_ms": cfg.validity.lag_p99_threshold_ms}
    return summarise(rec, phases, cfg.validity, meta)


def format_markdown(res: dict[str, Any], title: str = "Open-loop run") -> str:
    c, s = res["corrected"], res["service"]
    lines = [f"### {title}", "",
             f"Target `{res.get('target', '?')}`, seed {res.get('seed')}, concurrency {res.get('concurrency')}. "
             f"Open loop: latency measured from the intended send time (corrected), service time beside it.", "",
             f"Valid: **{'yes' if res['valid'] else 'NO — ' + '; '.join(res['invalid_reasons'])}**; "
             f"scheduled {res['scheduled']}, ok {res['ok']}, failed {res['failed']}, dropped {res['dropped']}, "
             f"achieved {res['achieved_rps']} ok/s; schedule lag p99 {res['schedule_lag']['p99_ms']} ms.", "",
             "| latency (ms) | p50 | p90 | p99 | p99.9 | max |", "|---|---|---|---|---|---|",
             f"| corrected (from intended) | {c['p50_ms']} | {c['p90_ms']} | {c['p99_ms']} | {c['p999_ms']} | {c['max_ms']} |",
             f"| service (from send, uncorrected) | {s['p50_ms']} | {s['p90_ms']} | {s['p99_ms']} | {s['p999_ms']} | {s['max_ms']} |"]
    if res["errors"]:
        lines += ["", "Errors: " + ", ".join(f"{k} x{v}" for k, v in sorted(res["errors"].items()))]
    if len(res.get("per_phase", [])) > 1:
        lines += ["", "| phase | scheduled | ok | failed | dropped | corrected p99 | service p99 |",
                  "|---|---|---|---|---|---|---|"]
        for p in res["per_phase"]:
            lines.append(f"| {p['phase']} | {p['scheduled']} | {p['ok']} | {p['failed']} | {p['dropped']} | "
                         f"{p['corrected']['p99_ms']} | {p['service']['p99_ms']} |")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------- CLI
def phases_from_args(a: argparse.Namespace) -> list[Phase]:
    if a.shape == "constant":
        return constant_phases(a.rate, a.duration, a.arrival)
    if a.shape == "step":
        return step_phases(a.rate, a.step, a.steps, a.duration, a.arrival)
    return spike_phases(a.rate, a.spike_rate, a.duration, a.spike_duration, a.duration, a.arrival)


def build_parser() -> argparse.ArgumentParser:
    """The CLI (its defaults are the documented ones: loadtests/README.md)."""
    ap = argparse.ArgumentParser(prog="python -m loadtests.open_loop", description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", choices=["http", "grpc"], default="http")
    ap.add_argument("--url", default="http://127.0.0.1:8792", help="Cortex API base URL (http target)")
    ap.add_argument("--api-key", default="memrig-local", help="x-api-key header (http target)")
    ap.add_argument("--address", default="127.0.0.1:50051", help="MemoryBackendService host:port (grpc target)")
    ap.add_argument("--namespace", default="load", help="namespace (grpc target)")
    ap.add_argument("--mode", choices=["fast", "full"], default="fast")
    ap.add_argument("--top-k", type=int, default=10)
    ap.add_argument("--shape", choices=["constant", "step", "spike"], default="constant")
    ap.add_argument("--arrival", choices=["constant", "poisson"], default="constant")
    ap.add_argument("--rate", type=float, default=50.0, help="rate per second (start rate for step, base for spike)")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds per phase (step) / base phases (spike)")
    ap.add_argument("--step", type=float, default=50.0, help="rate increment per step")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--spike-rate", type=float, default=200.0)
    ap.add_argument("--spike-duration", type=float, default=3.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--concurrency", type=int, default=64, help="requests on the wire at most (like wrk2 -c)")
    ap.add_argument("--max-pending", type=int, default=4096, help="queued+in-flight bound; beyond it arrivals drop")
    ap.add_argument("--timeout", type=float, default=10.0, help="per-request timeout, seconds")
    ap.add_argument("--lag-threshold-ms", type=float, default=20.0, help="schedule-lag p99 above this = invalid")
    ap.add_argument("--out", default="", help="directory for open_loop.json and open_loop.md")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    phases = phases_from_args(a)
    if a.target == "http":
        target: Target = HttpRetrieveTarget(a.url, a.api_key, a.concurrency, top_k=a.top_k, mode=a.mode)
    else:
        target = GrpcRetrieveTarget(a.address, a.namespace, top_k=a.top_k, mode=a.mode)
    cfg = DriverConfig(a.concurrency, a.max_pending, a.timeout, validity=Validity(a.lag_threshold_ms))
    res = event_loop.run(run_open_loop(target, phases, a.seed, cfg))
    md = format_markdown(res)
    if a.out:
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "open_loop.json").write_text(json.dumps(res, indent=2))
        (out / "open_loop.md").write_text(md)
    print(md)
    return 0 if res["valid"] else 3


if __name__ == "__main__":
    sys.exit(main())
