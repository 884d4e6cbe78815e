"""The fault types of the fault proxy, one small class each, registered by name in `FAULT_TYPES`: how each
validates its attributes and what it decides for one request (a pure function of fault, request, rng, clock
value and the fault's state). services/fault_proxy/faults.py parses definitions into them and re-exports them.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from services.fault_proxy.actions import (
    MAX_MS,
    MAX_S,
    STAGES,
    Abort,
    Admit,
    ConcurrencyState,
    Decision,
    Delay,
    FaultError,
    Hold,
    ReplaceBody,
    RequestInfo,
    Respond,
    Throttle,
    Truncate,
)


class FaultView(Protocol):
    """What a fault type reads of its stored fault (faults.FaultSpec is one): its name, its validated attributes
    and when it was added. A protocol, so this module does not import faults.py, which imports it."""

    @property
    def name(self) -> str: ...

    @property
    def attributes(self) -> dict[str, Any]: ...

    @property
    def created_at(self) -> float: ...


# ---------------------------------------------------------------------------------------------------
# Attribute helpers (each raises FaultError naming attributes.<key>)


def _num(attrs: dict[str, Any], key: str, default: float | None = None, *, lo: float | None = 0.0,
         hi: float | None = None, required: bool = False, strict_lo: bool = False) -> float | None:
    if key not in attrs or attrs[key] is None:
        if required:
            raise FaultError(f"attributes.{key}", "is required")
        return default
    v = attrs[key]
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise FaultError(f"attributes.{key}", f"must be a number (got {v!r})")
    if lo is not None and (v < lo or (strict_lo and v == lo)):
        raise FaultError(f"attributes.{key}", f"must be {'>' if strict_lo else '>='} {lo} (got {v})")
    if hi is not None and v > hi:
        raise FaultError(f"attributes.{key}", f"must be <= {hi} (got {v})")
    return float(v)


def _int(attrs: dict[str, Any], key: str, default: int | None = None, *, lo: int = 0, required: bool = False,
         ) -> int | None:
    v = _num(attrs, key, None if default is None else float(default), lo=lo, required=required)
    if v is None:
        return None
    if v != int(v):
        raise FaultError(f"attributes.{key}", f"must be an integer (got {attrs[key]!r})")
    return int(v)


def _choice(attrs: dict[str, Any], key: str, options: tuple[str, ...], default: str) -> str:
    v = attrs.get(key, default)
    if v not in options:
        raise FaultError(f"attributes.{key}", f"must be one of {'|'.join(options)} (got {v!r})")
    return v


def _status(attrs: dict[str, Any], key: str, default: int) -> int:
    # 1xx are interim answers, not a final status a fault can give (101 would switch protocols)
    v = _int(attrs, key, default, lo=200)
    if v > 599:
        raise FaultError(f"attributes.{key}", f"must be an HTTP status 200..599 (got {v})")
    return v


def _retry_after(attrs: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    ra = _num(attrs, "retry_after_s", hi=MAX_S)
    return (("Retry-After", _fmt_retry_after(ra)),) if ra is not None else ()


def _fmt_retry_after(seconds: float) -> str:
    # Retry-After takes whole seconds; round up so a client never retries before the bucket refills.
    return str(max(0, math.ceil(seconds - 1e-9)))


def error_body(fault: str, status: int, detail: str = "") -> bytes:
    # FastAPI-shaped error body (the Cortex server is FastAPI), so clients parse it like a real error.
    return json.dumps({"detail": detail or f"injected fault {fault!r} (HTTP {status})", "fault": fault}).encode()


def _r(x: float) -> float:
    return round(x, 6)


# ---------------------------------------------------------------------------------------------------
# Fault types


class FaultType:
    """Base: subclasses set TYPE, STAGES, DEFAULT_STAGE and implement `validate` and `decide`."""

    TYPE: ClassVar[str] = ""
    STAGES: ClassVar[tuple[str, ...]] = STAGES
    DEFAULT_STAGE: ClassVar[str] = "request"
    STATEFUL: ClassVar[bool] = False

    @classmethod
    def validate(cls, attrs: dict[str, Any]) -> dict[str, Any]:
        """Return the normalised attributes or raise FaultError."""
        return dict(attrs)

    @classmethod
    def new_state(cls, spec: FaultView, now: float) -> Any:
        return None

    @classmethod
    def decide(cls, spec: FaultView, info: RequestInfo, rng: random.Random, now: float, state: Any) -> Decision:
        raise NotImplementedError


FAULT_TYPES: dict[str, type[FaultType]] = {}


def register(cls: type[FaultType]) -> type[FaultType]:
    FAULT_TYPES[cls.TYPE] = cls
    return cls


@register
class Latency(FaultType):
    """Delay before forwarding (request stage) or before answering (response stage).

    Distributions (all in ms, clamped at 0 and at `max_ms` when given): fixed `latency_ms`; uniform
    `latency_ms ± jitter_ms` (toxiproxy's latency toxic); normal(mean latency_ms, `stddev_ms`);
    lognormal with median `latency_ms` and shape `sigma`; pareto with scale `latency_ms` and shape `alpha`
    (heavy tail: P(X > x) = (latency_ms / x)^alpha).
    """

    TYPE = "latency"
    DISTRIBUTIONS = ("fixed", "uniform", "normal", "lognormal", "pareto")

    @classmethod
    def validate(cls, attrs):
        default = "uniform" if attrs.get("jitter_ms") else "fixed"
        dist = _choice(attrs, "distribution", cls.DISTRIBUTIONS, default)
        out: dict[str, Any] = {"distribution": dist,
                               "latency_ms": _num(attrs, "latency_ms", required=True, hi=MAX_MS)}
        if dist == "uniform":
            out["jitter_ms"] = _num(attrs, "jitter_ms", 0.0, hi=MAX_MS)
        elif dist == "normal":
            out["stddev_ms"] = _num(attrs, "stddev_ms", required=True, hi=MAX_MS)
        elif dist == "lognormal":
            out["sigma"] = _num(attrs, "sigma", required=True)
            if out["latency_ms"] <= 0:
                raise FaultError("attributes.latency_ms", "must be > 0 for a lognormal (it is the median)")
        elif dist == "pareto":
            out["alpha"] = _num(attrs, "alpha", required=True, strict_lo=True)
            if out["latency_ms"] <= 0:
                raise FaultError("attributes.latency_ms", "must be > 0 for a pareto (it is the scale)")
        max_ms = _num(attrs, "max_ms", hi=MAX_MS)
        if max_ms is not None:
            out["max_ms"] = max_ms
        return out

    @staticmethod
    def draw_ms(attrs: dict[str, Any], rng: random.Random) -> float:
        dist, lat = attrs["distribution"], attrs["latency_ms"]
        if dist == "fixed":
            ms = lat
        elif dist == "uniform":
            j = attrs.get("jitter_ms", 0.0)
            ms = lat + (rng.random() * 2 - 1) * j
        elif dist == "normal":
            ms = rng.gauss(lat, attrs["stddev_ms"])
        elif dist == "lognormal":
            ms = rng.lognormvariate(math.log(lat), attrs["sigma"])
        else:  # pareto
            ms = lat * rng.paretovariate(attrs["alpha"])
        ms = max(0.0, ms)
        if "max_ms" in attrs:
            ms = min(ms, attrs["max_ms"])
        return ms

    @classmethod
    def decide(cls, spec, info, rng, now, state):
        ms = cls.draw_ms(spec.attributes, rng)
        return Decision(Delay(ms / 1000.0), {"delay_ms": _r(ms)})


@register
class HttpError(FaultType):
    """Answer with an error status: `status` or weighted `statuses` ({"503": 3, "500": 1}), optional
    `retry_after_s` and `body` (a string, or any JSON value)."""

    TYPE = "http_error"

    @classmethod
    def validate(cls, attrs):
        out: dict[str, Any] = {}
        if "statuses" in attrs and attrs["statuses"] is not None:
            raw = attrs["statuses"]
            if not isinstance(raw, dict) or not raw:
                raise FaultError("attributes.statuses", 'must be a non-empty object {"503": weight, ...}')
            weights: dict[str, float] = {}
            for code, w in raw.items():
                try:
                    c = int(code)
                except (TypeError, ValueError):
                    raise FaultError("attributes.statuses", f"key {code!r} is not an HTTP status") from None
                if not 200 <= c <= 599:
                    raise FaultError("attributes.statuses", f"status {c} is not in 200..599")
                if isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(w) or w < 0:
                    raise FaultError("attributes.statuses", f"weight for {code} must be a number >= 0")
                weights[str(c)] = float(w)
            if sum(weights.values()) <= 0:
                raise FaultError("attributes.statuses", "weights must not all be 0")
            out["statuses"] = weights
        else:
            out["status"] = _status(attrs, "status", 503)
        if attrs.get("retry_after_s") is not None:
            out["retry_after_s"] = _num(attrs, "retry_after_s", hi=MAX_S)
        if "body" in attrs:
            out["body"] = attrs["body"]
        return out

    @staticmethod
    def pick_status(weights: dict[str, float], u: float) -> int:
        """Weighted choice by cumulative weight, keys in ascending status order (so the order of the JSON
        object does not change the outcome)."""
        total = sum(weights.values())
        acc = 0.0
        items = sorted(weights.items(), key=lambda kv: int(kv[0]))
        for code, w in items:
            acc += w / total
            if u < acc:
                return int(code)
        return int(items[-1][0])

    @classmethod
    def decide(cls, spec, info, rng, now, state):
        a = spec.attributes
        drawn: dict[str, Any] = {}
        if "statuses" in a:
            u = rng.random()
            status = cls.pick_status(a["statuses"], u)
            drawn["status_draw"] = _r(u)
        else:
            status = a["status"]
        drawn["status"] = status
        body = a.get("body")
        if body is None:
            raw = error_body(spec.name, status)
        elif isinstance(body, str):
            raw = body.encode()
        else:
            raw = json.dumps(body).encode()
        return Decision(Respond(status, raw, _retry_after(a)), drawn)


@register
class Reset(FaultType):
    """Abort the transport: before forwarding (request stage) or after `after_bytes` of the response."""

    TYPE = "reset"

    @classmethod
    def validate(cls, attrs):
        return {"after_bytes": _int(attrs, "after_bytes", 0)}

    @classmethod
    def decide(cls, spec, info, rng, now, state):
        return Decision(Abort(spec.attributes.get("after_bytes", 0)), {})


@register
class Blackhole(FaultType):
    """Accept and never answer, so the client's deadline fires; removing the fault releases and forwards."""

    TYPE = "blackhole"

    @classmethod
    def validate(cls, attrs):
        return {}

    @classmethod
    def decide(cls, spec, info, rng, now, state):
        return Decision(Hold(), {})


@register
class TimeoutAfter(FaultType):
    """Answer 504 (or `status`) after `timeout_ms`, as a gateway whose upstream never answered."""

    TYPE = "timeout_after"

    @classmethod
    def validate(cls, attrs):
        return {"timeout_ms": _num(attrs, "timeout_ms", required=True, hi=MAX_MS),
                "status": _status(attrs, "status", 504)}

    @classmethod
    def decide(cls, spec, info, rng, now, state):
        a = spec.attributes
        return Decision(Respond(a["status"], error_body(spec.name, a["status"], "gateway timeout (injected)"),
                                after_s=a["timeout_ms"] / 1000.0), {})


@register
class SlowBody(FaultType):
    """Stream the response body at `bytes_per_s`, in `chunk_bytes` slices (default: 100 ms worth)."""

    TYPE = "slow_body"
    STAGES = ("response",)
    DEFAULT_STAGE = "response"

    @classmethod
    def validate(cls, attrs):
        bps = _num(attrs, "bytes_per_s", required=True, lo=1.0)  # below 1 byte/s a body never ends
        chunk = _int(attrs, "chunk_bytes", max(1, int(bps / 10)), lo=1)
        return {"bytes_per_s": bps, "chunk_bytes": chunk}

    @classmethod
    def decide(cls, spec, info, rng, now, state):
        a = spec.attributes
        return Decision(Throttle(a["bytes_per_s"], a["chunk_bytes"]), {})


@register
class TruncateBody(FaultType):
    """Cut the response body after `after_bytes` while the headers keep the full Content-Length."""

    TYPE = "truncate"
    STAGES = ("response",)
    DEFAULT_STAGE = "response"

    @classmethod
    def validate(cls, attrs):
        return {"after_bytes": _int(attrs, "after_bytes", required=True)}

    @classmethod
    def decide(cls, spec, info, rng, now, state):
        return Decision(Truncate(spec.attributes["after_bytes"]), {})


@register
class CorruptBody(FaultType):
    """Corrupt a JSON response body.

    `mode`: `invalid_json` (the first half of the body followed by a stray token, so a parser fails),
    `drop_items` / `null_items` (each item of the list fields named in `fields`, found at any depth, is
    dropped / replaced by null with probability `probability`). The new body gets a correct
    Content-Length: this is a content fault, `truncate` is the framing fault. A body that is not JSON is
    left alone for the item modes (logged as such).
    """

    TYPE = "corrupt_body"
    STAGES = ("response",)
    DEFAULT_STAGE = "response"
    MODES = ("invalid_json", "drop_items", "null_items")

    @classmethod
    def validate(cls, attrs):
        mode = _choice(attrs, "mode", cls.MODES, "invalid_json")
        fields_ = attrs.get("fields", ["results", "memories"])
        if not isinstance(fields_, list) or not all(isinstance(f, str) and f for f in fields_):
            raise FaultError("attributes.fields", "must be a list of field names")
        return {"mode": mode, "fields": list(fields_), "probability": _num(attrs, "probability", 0.5, hi=1.0)}

    @classmethod
    def decide(cls, spec, info, rng, now, state):
        # The body is only known at the response stage; the proxy calls `corrupt` with the same rng.
        return Decision(ReplaceBody(b""), {"mode": spec.attributes["mode"]})

    @staticmethod
    def corrupt(attrs: dict[str, Any], body: bytes, rng: random.Random) -> tuple[bytes, dict[str, Any]]:
        mode = attrs["mode"]
        if mode == "invalid_json":
            return body[: len(body) // 2] + b"\x00<corrupt>", {"kept_bytes": len(body) // 2}
        try:
            doc = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            return body, {"skipped": "not_json"}
        touched: dict[str, list[int]] = {}
        p = attrs["probability"]

        def walk(node: Any, path: str) -> Any:
            if isinstance(node, dict):
                out = {}
                for k, v in node.items():
                    here = f"{path}.{k}" if path else k
                    if k in attrs["fields"] and isinstance(v, list):
                        hit = [i for i in range(len(v)) if rng.random() < p]
                        touched[here] = hit
                        hs = set(hit)
                        if mode == "drop_items":
                            out[k] = [x for i, x in enumerate(v) if i not in hs]
                        else:
                            out[k] = [None if i in hs else x for i, x in enumerate(v)]
                    else:
                        out[k] = walk(v, here)
                return out
            if isinstance(node, list):
                return [walk(x, f"{path}[{i}]") for i, x in enumerate(node)]
            return node

        new = walk(doc, "")
        return json.dumps(new).encode(), {"items": touched}


@dataclass
class RateLimitState:
    tokens: float
    last: float

    def take(self, rate: float, burst: float, now: float) -> tuple[bool, float]:
        """Refill by elapsed time, then take one token. Returns (allowed, seconds until one is available)."""
        self.tokens = min(burst, self.tokens + max(0.0, now - self.last) * rate)
        self.last = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True, 0.0
        return False, (1.0 - self.tokens) / rate if rate > 0 else math.inf


@register
class RateLimit(FaultType):
    """A token bucket (`rate_per_s`, capacity `burst`, full when added): past it, 429 with Retry-After
    (`retry_after_s`, or the time until the next token, rounded up)."""

    TYPE = "rate_limit"
    STATEFUL = True

    @classmethod
    def validate(cls, attrs):
        rate = _num(attrs, "rate_per_s", required=True, strict_lo=True)  # 0: a bucket that never refills
        out = {"rate_per_s": rate, "burst": _num(attrs, "burst", max(1.0, rate), lo=1.0),
               "status": _status(attrs, "status", 429)}
        if attrs.get("retry_after_s") is not None:
            out["retry_after_s"] = _num(attrs, "retry_after_s", hi=MAX_S)
        return out

    @classmethod
    def new_state(cls, spec, now):
        return RateLimitState(tokens=spec.attributes["burst"], last=now)

    @classmethod
    def decide(cls, spec, info, rng, now, state):
        a = spec.attributes
        ok, wait = state.take(a["rate_per_s"], a["burst"], now)
        drawn = {"tokens_left": _r(state.tokens)}
        if ok:
            return Decision(None, drawn)
        ra = a.get("retry_after_s", wait if math.isfinite(wait) else 60.0)
        drawn["retry_after_s"] = _r(ra)
        return Decision(Respond(a["status"], error_body(spec.name, a["status"], "rate limited (injected)"),
                                (("Retry-After", _fmt_retry_after(ra)),)), drawn)


@register
class ConcurrencyLimit(FaultType):
    """Admit at most `max_in_flight` matching requests at once; the rest get 503 (Envoy max_active_faults)."""

    TYPE = "concurrency_limit"
    STATEFUL = True

    @classmethod
    def validate(cls, attrs):
        out = {"max_in_flight": _int(attrs, "max_in_flight", required=True), "status": _status(attrs, "status", 503)}
        if attrs.get("retry_after_s") is not None:
            out["retry_after_s"] = _num(attrs, "retry_after_s", hi=MAX_S)
        return out

    @classmethod
    def new_state(cls, spec, now):
        return ConcurrencyState()

    @classmethod
    def decide(cls, spec, info, rng, now, state):
        a = spec.attributes
        drawn = {"in_flight": state.in_flight}
        if state.in_flight >= a["max_in_flight"]:
            return Decision(Respond(a["status"], error_body(spec.name, a["status"], "too many requests in flight"),
                                    _retry_after(a)), drawn)
        state.in_flight += 1
        return Decision(Admit(state), drawn)


@register
class Outage(FaultType):
    """Down for `duration_s` from when the fault was added, then up (the fault stays listed, inert).
    While down: `mode` error (HTTP `status`, default 503) or reset (abort the transport)."""

    TYPE = "outage"

    @classmethod
    def validate(cls, attrs):
        return {"duration_s": _num(attrs, "duration_s", required=True, hi=MAX_S),
                "mode": _choice(attrs, "mode", ("error", "reset"), "error"),
                "status": _status(attrs, "status", 503)}

    @classmethod
    def decide(cls, spec, info, rng, now, state):
        a = spec.attributes
        left = spec.created_at + a["duration_s"] - now
        if left <= 0:
            return Decision(None, {"down": False})
        drawn = {"down": True, "seconds_left": _r(left)}
        if a["mode"] == "reset":
            return Decision(Abort(0), drawn)
        return Decision(Respond(a["status"], error_body(spec.name, a["status"], "service unavailable (outage)"),
                                (("Retry-After", _fmt_retry_after(left)),)), drawn)


# Every attribute each type reads (validation drops what a distribution or mode does not use, so the output
# keys alone are not the list).
KNOWN_ATTRIBUTES: dict[str, frozenset[str]] = {
    "latency": frozenset({"distribution", "latency_ms", "jitter_ms", "stddev_ms", "sigma", "alpha", "max_ms"}),
    "http_error": frozenset({"status", "statuses", "retry_after_s", "body"}),
    "reset": frozenset({"after_bytes"}),
    "blackhole": frozenset(),
    "timeout_after": frozenset({"timeout_ms", "status"}),
    "slow_body": frozenset({"bytes_per_s", "chunk_bytes"}),
    "truncate": frozenset({"after_bytes"}),
    "corrupt_body": frozenset({"mode", "fields", "probability"}),
    "rate_limit": frozenset({"rate_per_s", "burst", "status", "retry_after_s"}),
    "concurrency_limit": frozenset({"max_in_flight", "status", "retry_after_s"}),
    "outage": frozenset({"duration_s", "mode", "status"}),
}
