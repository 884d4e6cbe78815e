"""A seeded fault timeline: fault-proxy faults switched on and off at set times while the users keep running.

A timeline is a list of `FaultWindow(at_s, duration_s, fault)`: at `at_s` seconds after the test starts the
fault definition is POSTed to the fault proxy's admin API, and `duration_s` later it is DELETEd. Windows can
come from a seed (`seeded:SEED[:DURATION_S[:N]]`), a JSON file or inline JSON.

`run_timeline` is written against injectable `sleep` and `clock` functions and a *synchronous* admin client
(urllib), so inside a locust process it runs in a greenlet with `gevent.sleep` and gevent-patched sockets:
never asyncio inside locust. Each switch is logged with the wall-clock time before and after the admin call,
so tests and reports can match request timestamps against the exact window the fault was live.
"""

from __future__ import annotations

import json
import random
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from services.common.errors import DependencyError

# Fault definitions in the fault proxy's JSON shape (services/fault_proxy/faults.py), by short preset name.
PRESETS: dict[str, dict[str, Any]] = {
    "error_503": {"type": "http_error", "attributes": {"status": 503}},
    "error_500": {"type": "http_error", "attributes": {"status": 500}},
    "latency_300ms": {"type": "latency", "attributes": {"latency_ms": 300}},
    "latency_jitter": {"type": "latency", "attributes": {"latency_ms": 200, "jitter_ms": 150}},
    "reset": {"type": "reset"},
    "timeout_1s": {"type": "timeout_after", "attributes": {"timeout_ms": 1000}},
    "rate_limit_20": {"type": "rate_limit", "attributes": {"rate_per_s": 20, "burst": 20}},
}
DEFAULT_KINDS = ("error_503", "latency_300ms", "reset")


@dataclass(frozen=True)
class FaultWindow:
    at_s: float
    duration_s: float
    fault: dict[str, Any] = field(hash=False)

    @property
    def name(self) -> str:
        return self.fault["name"]

    @property
    def end_s(self) -> float:
        return self.at_s + self.duration_s


def make_fault(kind_or_fault: str | dict[str, Any], name: str, toxicity: float = 1.0,
               path_regex: str | None = None) -> dict[str, Any]:
    base = dict(PRESETS[kind_or_fault]) if isinstance(kind_or_fault, str) else dict(kind_or_fault)
    f = {"name": name, "toxicity": toxicity, **base}
    f["name"] = name
    if path_regex:
        f["match"] = {"path_regex": path_regex}
    return f


def seeded_timeline(seed: int, duration_s: float, windows: int = 3, min_len_s: float = 3.0,
                    max_len_s: float = 8.0, kinds: tuple[str, ...] = DEFAULT_KINDS,
                    toxicity: float = 1.0, path_regex: str | None = None) -> list[FaultWindow]:
    """`windows` non-overlapping windows in the middle 80 % of the run, one per equal slot, kinds drawn."""
    if windows <= 0:
        return []
    rng = random.Random(seed)
    lo, hi = 0.1 * duration_s, 0.9 * duration_s
    slot = (hi - lo) / windows
    out = []
    for k in range(windows):
        length = min(rng.uniform(min_len_s, max_len_s), 0.6 * slot)
        start = lo + k * slot + rng.uniform(0.0, slot - length)
        kind = rng.choice(kinds)
        out.append(FaultWindow(round(start, 3), round(length, 3),
                               make_fault(kind, f"tl{k}_{kind}", toxicity, path_regex)))
    return out


def parse_timeline(obj: Any) -> list[FaultWindow]:
    """[{at_s, duration_s, fault: {...} | preset: "error_503", name?, toxicity?, path_regex?}, ...]"""
    if not isinstance(obj, list):
        raise ValueError("timeline: must be a JSON list of windows")
    out = []
    for i, w in enumerate(obj):
        if not isinstance(w, dict):
            raise ValueError(f"timeline[{i}]: must be an object")
        for k in ("at_s", "duration_s"):
            if not isinstance(w.get(k), int | float) or w[k] < 0 or (k == "duration_s" and w[k] <= 0):
                raise ValueError(f"timeline[{i}].{k}: must be a number >= 0 (duration > 0)")
        if "fault" in w:
            fault = make_fault(w["fault"], w["fault"].get("name") or w.get("name") or f"tl{i}",
                               w["fault"].get("toxicity", 1.0))
        elif w.get("preset") in PRESETS:
            fault = make_fault(w["preset"], w.get("name") or f"tl{i}_{w['preset']}", w.get("toxicity", 1.0),
                               w.get("path_regex"))
        else:
            raise ValueError(f"timeline[{i}]: needs 'fault' or 'preset' (one of {', '.join(PRESETS)})")
        out.append(FaultWindow(float(w["at_s"]), float(w["duration_s"]), fault))
    names = [w.name for w in out]
    if len(set(names)) != len(names):
        raise ValueError("timeline: window fault names must be unique")
    return sorted(out, key=lambda w: w.at_s)


def load_timeline(spec: str, duration_s: float = 60.0) -> list[FaultWindow]:
    """`seeded:SEED[:DURATION_S[:N]]`, a path to a JSON file, or inline JSON; "" or "none" = no faults."""
    spec = (spec or "").strip()
    if not spec or spec == "none":
        return []
    if spec.startswith("seeded"):
        parts = spec.split(":")
        seed = int(parts[1]) if len(parts) > 1 and parts[1] else 0
        dur = float(parts[2]) if len(parts) > 2 and parts[2] else duration_s
        n = int(parts[3]) if len(parts) > 3 and parts[3] else 3
        return seeded_timeline(seed, dur, n)
    if spec.lstrip().startswith("["):
        return parse_timeline(json.loads(spec))
    return parse_timeline(json.loads(Path(spec).read_text()))


def timeline_to_json(windows: list[FaultWindow]) -> list[dict[str, Any]]:
    return [asdict(w) for w in windows]


# ---------------------------------------------------------------------------------------------------
class FaultAdminError(DependencyError):
    """A call of the fault proxy's admin API failed; `status` is its HTTP status when it answered one."""

    dependency = "the fault proxy's admin API"


class FaultAdmin:
    """Synchronous client of the fault proxy's admin API, plain urllib.

    `base_url` is the proxy URL, or its `--admin-port` listener's URL; the client adds `/__admin` (as
    services/fault_proxy/admin_client.py does). urllib is gevent-friendly once locust has monkey-patched
    sockets; outside locust it is just blocking.
    """

    ADMIN_PREFIX = "/__admin"

    def __init__(self, base_url: str, token: str = "", timeout_s: float = 5.0):
        self.base = base_url.rstrip("/") + self.ADMIN_PREFIX
        self.token = token
        self.timeout_s = timeout_s

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as r:
                raw = r.read()
        except urllib.error.HTTPError as e:
            raise FaultAdminError(f"{method} {path}: HTTP {e.code} {e.read()[:300]!r}", e.code) from None
        except OSError as e:
            raise FaultAdminError(f"{method} {path}: {e}") from None
        return json.loads(raw) if raw.strip() else None

    def add(self, fault: dict[str, Any]) -> Any:
        return self._call("POST", "/faults", fault)

    def remove(self, name: str) -> None:
        self._call("DELETE", f"/faults/{name}")

    def list(self) -> Any:
        return self._call("GET", "/faults")

    def reset(self) -> None:
        self._call("POST", "/reset", {})


def timeline_actions(windows: list[FaultWindow]) -> list[tuple[float, str, FaultWindow]]:
    """(time, "apply"|"remove", window) in time order; a removal sorts before an apply at the same time."""
    acts = [(w.at_s, "apply", w) for w in windows] + [(w.end_s, "remove", w) for w in windows]
    return sorted(acts, key=lambda a: (a[0], 0 if a[1] == "remove" else 1))


def run_timeline(windows: list[FaultWindow], admin: Any, *, sleep: Callable[[float], Any] = time.sleep,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 on_event: Callable[[dict[str, Any]], Any] | None = None,
                 should_stop: Callable[[], bool] = lambda: False, t0: float | None = None) -> list[dict[str, Any]]:
    """Apply and remove each window's fault at its time (relative to `t0`, default now); return the events.

    Every fault still applied when the run ends or is stopped is removed before returning.
    """
    t0 = clock() if t0 is None else t0
    events: list[dict[str, Any]] = []
    live: dict[str, FaultWindow] = {}

    def do(action: str, w: FaultWindow) -> None:
        ev = {"action": action, "name": w.name, "type": w.fault.get("type"), "at_s": w.at_s if action == "apply"
              else w.end_s, "wall_start": wall(), "rel_start_s": round(clock() - t0, 4), "ok": True}
        try:
            if action == "apply":
                admin.add(w.fault)
                live[w.name] = w
            else:
                admin.remove(w.name)
                live.pop(w.name, None)
        except Exception as e:  # a failed switch is logged, the timeline goes on
            ev["ok"], ev["error"] = False, str(e)
        ev["wall_end"] = wall()
        events.append(ev)
        if on_event:
            on_event(ev)

    try:
        for t, action, w in timeline_actions(windows):
            while not should_stop():
                left = t0 + t - clock()
                if left <= 0:
                    break
                sleep(min(left, 0.1))
            if should_stop():
                break
            do(action, w)
    finally:
        for w in list(live.values()):
            do("remove", w)
    return events
