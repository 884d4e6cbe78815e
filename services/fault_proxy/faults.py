"""Faults of the fault proxy: their JSON shape, validation and the pure decision logic.

A fault is `{name, type, stage, toxicity, match, attributes, max_hits}` (toxiproxy's Toxic with an HTTP
`match` and a per-request toxicity draw; Envoy's HTTP fault filter for the status/delay semantics). Each type
is a small class registered by name in `FAULT_TYPES` (fault_types.py); `decide` is a pure function of (fault,
request info, rng, now, state) that returns an `Action` (actions.py) for the proxy to carry out, plus the values
it drew so the proxy can log them. Nothing here does I/O or reads a clock, so every decision is unit-testable
and a seeded run replays exactly. This module holds the stored fault (`FaultSpec`, `Match`), parsing, the
per-request decision and the header-forced faults, and is the one import surface of all three.

Determinism: the proxy gives every (request sequence number, fault name) pair its own `random.Random`
seeded from the run seed (`request_rng`), so the draws for request n do not depend on how concurrent
requests interleave, only on the order in which requests arrived.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field
from typing import Any

import regex  # the `regex` package: matching with a timeout, so a catastrophic pattern cannot stall the proxy

from services.common.http_input import deepest_field
from services.fault_proxy.actions import (
    MAX_MS,
    MAX_S,
    STAGES,
    Abort,
    Action,
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
from services.fault_proxy.fault_types import (
    FAULT_TYPES,
    KNOWN_ATTRIBUTES,
    Blackhole,
    ConcurrencyLimit,
    CorruptBody,
    FaultType,
    HttpError,
    Latency,
    Outage,
    RateLimit,
    RateLimitState,
    Reset,
    SlowBody,
    TimeoutAfter,
    TruncateBody,
    _fmt_retry_after,
    _r,
    error_body,
    register,
)

# The fault proxy's one import surface: the actions and fault types are defined in actions.py and fault_types.py.
__all__ = [
    "FAULT_TYPES", "HEADER_PREFIX", "KNOWN_ATTRIBUTES", "MAX_MS", "MAX_S", "REGEX_TIMEOUTS", "REGEX_TIMEOUT_S",
    "RESERVED_NAMES", "STAGES", "Abort", "Action", "Admit", "Blackhole", "ConcurrencyLimit", "ConcurrencyState",
    "CorruptBody", "Decision", "Delay", "Drawn", "FaultError", "FaultSpec", "FaultType", "Hold", "HttpError",
    "Latency", "Match", "Outage", "RateLimit", "RateLimitState", "ReplaceBody", "RequestInfo", "Reset", "Respond",
    "SlowBody", "Throttle", "TimeoutAfter", "Truncate", "TruncateBody", "_fmt_retry_after", "decide",
    "error_body", "header_faults", "parse_fault", "regex_search", "register", "request_rng",
]

REGEX_TIMEOUT_S = 0.05  # per match; a pattern that needs longer is treated as not matching (and logged)
# A fault may not be called "log": GET /faults/log is the decision log.
RESERVED_NAMES = frozenset({"log"})
_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")


# ---------------------------------------------------------------------------------------------------
# The stored fault


def regex_search(pattern: str, text: str) -> bool:
    """`regex.search` bounded by REGEX_TIMEOUT_S: a catastrophic pattern (`(a+)+$` on a long body) gives up
    instead of blocking the proxy's event loop; a timeout counts as no match."""
    try:
        return regex.search(pattern, text, timeout=REGEX_TIMEOUT_S) is not None
    except TimeoutError:
        REGEX_TIMEOUTS.append(pattern)
        del REGEX_TIMEOUTS[:-100]
        return False


REGEX_TIMEOUTS: list[str] = []  # the last patterns that timed out (for tests and the status endpoint)


@dataclass(frozen=True)
class Match:
    method: str | None = None  # None or "*" = any; "GET|POST" = either
    path_regex: str | None = None  # search on the path (no query string)
    body_regex: str | None = None  # search on the request body (utf-8, errors replaced)

    def matches(self, info: RequestInfo) -> bool:
        if self.method and self.method != "*":
            if info.method.upper() not in {m.strip().upper() for m in self.method.split("|")}:
                return False
        if self.path_regex and not regex_search(self.path_regex, info.path):
            return False
        if self.body_regex and not regex_search(self.body_regex, info.body.decode("utf-8", "replace")):
            return False
        return True

    def to_json(self) -> dict[str, Any]:
        return {"method": self.method, "path_regex": self.path_regex, "body_regex": self.body_regex}


@dataclass(frozen=True)
class FaultSpec:
    name: str
    type: str
    stage: str
    toxicity: float
    match: Match
    attributes: dict[str, Any]
    max_hits: int | None = None  # None = unlimited; 1 = a one-shot fault
    created_at: float = 0.0  # epoch seconds when added (outage counts from here)
    generation: int = 0  # bumped on every change: waits on an older generation are released
    order: int = 0  # application order (creation order)

    @property
    def kind(self) -> FaultType:
        return FAULT_TYPES[self.type]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "stage": self.stage,
            "toxicity": self.toxicity,
            "match": self.match.to_json(),
            "attributes": dict(self.attributes),
            "max_hits": self.max_hits,
            "created_at": self.created_at,
            "generation": self.generation,
            "order": self.order,
        }

    def definition(self) -> dict[str, Any]:
        """The user-given part (what populate compares to decide whether anything changed)."""
        d = self.to_json()
        for k in ("created_at", "generation", "order"):
            d.pop(k)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> FaultSpec:
        """Load a stored fault (already validated once)."""
        spec = parse_fault(d)
        return cls(**{**spec.__dict__, "created_at": float(d.get("created_at", 0.0)),
                      "generation": int(d.get("generation", 0)), "order": int(d.get("order", 0))})


# ---------------------------------------------------------------------------------------------------
# Parsing, RNG and the per-request decision


def parse_fault(d: Any, *, name_default: str | None = None) -> FaultSpec:
    """Validate a fault definition (the POST body) into a FaultSpec. Raises FaultError naming the field."""
    if not isinstance(d, dict):
        raise FaultError("body", "must be a JSON object")
    ftype = d.get("type")
    if not isinstance(ftype, str) or not ftype:
        raise FaultError("type", "is required")
    if ftype not in FAULT_TYPES:
        raise FaultError("type", f"unknown fault type {ftype!r}; known: {', '.join(sorted(FAULT_TYPES))}")
    kind = FAULT_TYPES[ftype]
    stage = d.get("stage") or kind.DEFAULT_STAGE
    if stage not in STAGES:
        raise FaultError("stage", f"must be request|response (got {stage!r})")
    if stage not in kind.STAGES:
        raise FaultError("stage", f"a {ftype} fault applies at the {'|'.join(kind.STAGES)} stage only")
    name = d.get("name") or name_default or f"{ftype}_{stage}"
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise FaultError("name", "must be 1-128 characters of letters, digits, '_', '.', '-'")
    if name in RESERVED_NAMES:
        raise FaultError("name", f"{name!r} is reserved")
    tox = d.get("toxicity", 1.0)
    if isinstance(tox, bool) or not isinstance(tox, int | float) or not 0.0 <= tox <= 1.0:
        raise FaultError("toxicity", f"must be a probability in [0, 1] (got {tox!r})")
    m = d.get("match") or {}
    if not isinstance(m, dict):
        raise FaultError("match", "must be an object {method, path_regex, body_regex}")
    unknown = sorted(set(m) - {"method", "path_regex", "body_regex"})
    if unknown:
        raise FaultError(f"match.{unknown[0]}", "unknown match field")
    for k in ("method", "path_regex", "body_regex"):
        if m.get(k) is not None and not isinstance(m[k], str):
            raise FaultError(f"match.{k}", "must be a string")
    for k in ("path_regex", "body_regex"):
        if m.get(k):
            try:
                regex.compile(m[k])
            except (regex.error, re.error) as e:
                raise FaultError(f"match.{k}", f"invalid regex: {e}") from None
    attrs = d.get("attributes") or {}
    if not isinstance(attrs, dict):
        raise FaultError("attributes", "must be an object")
    known = KNOWN_ATTRIBUTES.get(ftype)
    if known is not None:
        unknown = sorted(k for k in attrs if k not in known)
        if unknown:  # a typo (`staus`) must not be dropped silently: the fault would run with the default
            raise FaultError(f"attributes.{unknown[0]}", f"unknown attribute for a {ftype} fault; known: "
                             f"{', '.join(sorted(known)) or 'none'}")
    max_hits = d.get("max_hits")
    if max_hits is not None and (isinstance(max_hits, bool) or not isinstance(max_hits, int) or max_hits < 1):
        raise FaultError("max_hits", f"must be a positive integer or null (got {max_hits!r})")
    unknown = sorted(set(d) - {"name", "type", "stage", "toxicity", "match", "attributes", "max_hits",
                              "created_at", "generation", "order"})
    if unknown:
        raise FaultError(unknown[0], "unknown field")
    return FaultSpec(
        name=name, type=ftype, stage=stage, toxicity=float(tox),
        match=Match(m.get("method") or None, m.get("path_regex") or None, m.get("body_regex") or None),
        attributes=kind.validate(attrs), max_hits=max_hits,
    )


def request_rng(seed: int, seq: int, fault_name: str) -> random.Random:
    """One generator per (run seed, request number, fault): string seeds hash with SHA-512, so this is
    stable across processes and Python runs (unlike hash())."""
    return random.Random(f"{seed}:{seq}:{fault_name}")


@dataclass
class Drawn:
    """One fault's entry in the decision log of one request."""

    fault: str
    type: str
    stage: str
    u: float
    applied: bool
    drawn: dict[str, Any] = field(default_factory=dict)
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        d = {"fault": self.fault, "type": self.type, "stage": self.stage, "u": self.u, "applied": self.applied}
        if self.drawn:
            d["drawn"] = self.drawn
        if self.note:
            d["note"] = self.note
        return d


def decide(spec: FaultSpec, info: RequestInfo, seed: int, now: float, state: Any,
           hits: int = 0) -> tuple[Decision, Drawn, random.Random]:
    """The toxicity draw then the type's own decision. Returns the rng so the response stage of a body
    fault can keep drawing from the same stream."""
    rng = request_rng(seed, info.seq, spec.name)
    u = rng.random()
    log = Drawn(spec.name, spec.type, spec.stage, _r(u), False)
    if spec.max_hits is not None and hits >= spec.max_hits:
        log.note = "exhausted"
        return Decision(None), log, rng
    if u >= spec.toxicity:
        return Decision(None), log, rng
    dec = spec.kind.decide(spec, info, rng, now, state)
    log.applied = dec.action is not None and not isinstance(dec.action, Admit)
    log.drawn = dict(dec.drawn)
    return dec, log, rng


# ---------------------------------------------------------------------------------------------------
# Header-forced faults (only with --allow-header-faults)

HEADER_PREFIX = "x-fault-"


def _header_ms(v: str) -> float:
    """A header's milliseconds: finite, 0..MAX_MS (NaN or inf would make a delay that never ends)."""
    ms = float(v)
    if not math.isfinite(ms) or ms < 0 or ms > MAX_MS:
        raise ValueError(v)
    return ms


def header_faults(headers: dict[str, str]) -> tuple[list[Action], dict[str, Any]]:
    """`x-fault-delay-ms: 200` delays; `x-fault-abort: 503` answers 503; `x-fault-reset: 1` aborts;
    `x-fault-timeout-after-ms: T` answers 504 after T. Returns the actions in that order and what was read.
    Malformed values are ignored (and reported) rather than failing the request."""
    h = {k.lower(): v for k, v in headers.items() if k.lower().startswith(HEADER_PREFIX)}
    actions: list[Action] = []
    seen: dict[str, Any] = {}
    if "x-fault-delay-ms" in h:
        try:
            ms = _header_ms(h["x-fault-delay-ms"])
            actions.append(Delay(ms / 1000.0))
            seen["delay_ms"] = ms
        except ValueError:
            seen["bad"] = "x-fault-delay-ms"
    if "x-fault-abort" in h:
        try:
            st = int(h["x-fault-abort"])
            if not 200 <= st <= 599:
                raise ValueError
            actions.append(Respond(st, error_body("header", st)))
            seen["abort"] = st
        except ValueError:
            seen["bad"] = "x-fault-abort"
    if "x-fault-reset" in h:
        actions.append(Abort(0))
        seen["reset"] = True
    if "x-fault-timeout-after-ms" in h:
        try:
            ms = _header_ms(h["x-fault-timeout-after-ms"])
            actions.append(Respond(504, error_body("header", 504), after_s=ms / 1000.0))
            seen["timeout_after_ms"] = ms
        except ValueError:
            seen["bad"] = "x-fault-timeout-after-ms"
    return actions, seen


def nesting_error(raw: bytes) -> FaultError:
    """An admin body nested too deep to parse: the error names the top-level field holding the deepest point
    (`body` when the body itself is the deep array)."""
    field, depth = deepest_field(raw)
    return FaultError(field or "body", f"nested {depth} levels of arrays/objects deep: too deep to parse; send a "
                      "flatter body")
