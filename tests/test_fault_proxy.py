"""Pure decision logic of the fault proxy (services/fault_proxy/faults.py): no sockets, no clocks."""

from __future__ import annotations

import json
import math
import random

import pytest

from services.fault_proxy.faults import (
    FAULT_TYPES,
    Abort,
    Admit,
    ConcurrencyState,
    CorruptBody,
    Delay,
    FaultError,
    FaultSpec,
    Hold,
    HttpError,
    Latency,
    RateLimitState,
    RequestInfo,
    Respond,
    Throttle,
    Truncate,
    decide,
    header_faults,
    parse_fault,
    request_rng,
)

REQ = RequestInfo(seq=1, method="POST", path="/v1/retrieve", body=b'{"mode": "full"}')


def spec(**d) -> FaultSpec:
    return parse_fault(d)


def test_registry_has_every_type():
    assert sorted(FAULT_TYPES) == sorted([
        "latency", "http_error", "reset", "blackhole", "timeout_after", "slow_body", "truncate",
        "corrupt_body", "rate_limit", "concurrency_limit", "outage"])


@pytest.mark.parametrize("body,field", [
    ({}, "type"),
    ({"type": "nope"}, "type"),
    ({"type": "latency"}, "attributes.latency_ms"),
    ({"type": "latency", "attributes": {"latency_ms": -1}}, "attributes.latency_ms"),
    ({"type": "latency", "attributes": {"latency_ms": 5, "distribution": "zipf"}}, "attributes.distribution"),
    ({"type": "latency", "attributes": {"latency_ms": 5, "distribution": "pareto"}}, "attributes.alpha"),
    ({"type": "http_error", "toxicity": 1.5}, "toxicity"),
    ({"type": "http_error", "toxicity": "x"}, "toxicity"),
    ({"type": "http_error", "stage": "middle"}, "stage"),
    ({"type": "truncate", "stage": "request", "attributes": {"after_bytes": 1}}, "stage"),
    ({"type": "http_error", "match": {"path_regex": "("}}, "match.path_regex"),
    ({"type": "http_error", "match": {"verb": "GET"}}, "match.verb"),
    ({"type": "http_error", "name": "log"}, "name"),
    ({"type": "http_error", "name": "a b"}, "name"),
    ({"type": "http_error", "attributes": {"status": 700}}, "attributes.status"),
    ({"type": "http_error", "attributes": {"statuses": {"abc": 1}}}, "attributes.statuses"),
    ({"type": "http_error", "max_hits": 0}, "max_hits"),
    ({"type": "http_error", "colour": "red"}, "colour"),
    ({"type": "rate_limit"}, "attributes.rate_per_s"),
    ({"type": "concurrency_limit", "attributes": {"max_in_flight": 1.5}}, "attributes.max_in_flight"),
    ({"type": "outage"}, "attributes.duration_s"),
    ({"type": "corrupt_body", "attributes": {"mode": "flip"}}, "attributes.mode"),
    ({"type": "slow_body", "attributes": {"bytes_per_s": 0}}, "attributes.bytes_per_s"),
])
def test_parse_errors_name_the_field(body, field):
    with pytest.raises(FaultError) as e:
        parse_fault(body)
    assert e.value.field == field


def test_parse_defaults():
    s = spec(type="http_error")
    assert (s.name, s.stage, s.toxicity, s.attributes) == ("http_error_request", "request", 1.0, {"status": 503})
    assert spec(type="truncate", attributes={"after_bytes": 3}).stage == "response"
    assert spec(type="latency", attributes={"latency_ms": 10, "jitter_ms": 2}).attributes["distribution"] == "uniform"
    assert spec(type="slow_body", attributes={"bytes_per_s": 1000}).attributes["chunk_bytes"] == 100


def test_match_method_path_body():
    s = spec(type="http_error", match={"method": "post|put", "path_regex": "^/v1/retrieve$", "body_regex": '"full"'})
    assert s.match.matches(REQ)
    assert not s.match.matches(RequestInfo(1, "GET", "/v1/retrieve", REQ.body))
    assert not s.match.matches(RequestInfo(1, "POST", "/v1/retrieve", b'{"mode": "fast"}'))
    assert not s.match.matches(RequestInfo(1, "POST", "/v1/retrieve/x", REQ.body))


def test_request_rng_is_stable_and_distinct():
    a = request_rng(7, 3, "f").random()
    assert a == request_rng(7, 3, "f").random()
    assert a != request_rng(7, 4, "f").random()
    assert a != request_rng(8, 3, "f").random()
    assert a != request_rng(7, 3, "g").random()


def test_toxicity_draw_is_the_first_value_of_the_request_stream():
    s = spec(type="http_error", name="e", toxicity=0.5)
    for seq in range(1, 50):
        u = random.Random(f"11:{seq}:e").random()
        dec, log, _ = decide(s, RequestInfo(seq, "GET", "/"), 11, 0.0, None)
        assert log.u == round(u, 6)
        assert (dec.action is not None) == (u < 0.5) == log.applied


def test_toxicity_zero_and_one():
    never = spec(type="http_error", toxicity=0.0)
    always = spec(type="http_error", toxicity=1.0)
    for seq in range(1, 200):
        info = RequestInfo(seq, "GET", "/")
        assert decide(never, info, 1, 0, None)[0].action is None
        assert isinstance(decide(always, info, 1, 0, None)[0].action, Respond)


def test_max_hits_exhausted():
    s = spec(type="http_error", max_hits=1)
    dec, log, _ = decide(s, REQ, 1, 0, None, hits=1)
    assert dec.action is None and log.note == "exhausted"


# -- latency ------------------------------------------------------------------------------------------


def _latency(attrs, seq=5, seed=3, name="lat"):
    s = spec(type="latency", name=name, attributes=attrs)
    dec, log, _ = decide(s, RequestInfo(seq, "GET", "/"), seed, 0, None)
    assert isinstance(dec.action, Delay)
    return dec.action.seconds * 1000, log


def test_latency_fixed():
    ms, log = _latency({"latency_ms": 250})
    assert ms == 250 and log.drawn == {"delay_ms": 250.0}


def test_latency_uniform_golden():
    r = random.Random("3:5:lat")
    r.random()  # toxicity draw
    expect = 100 + (r.random() * 2 - 1) * 40
    ms, _ = _latency({"latency_ms": 100, "jitter_ms": 40})
    assert ms == pytest.approx(expect)
    assert 60 <= ms <= 140


def test_latency_normal_lognormal_pareto_golden():
    r = random.Random("3:5:lat")
    r.random()
    assert _latency({"latency_ms": 100, "distribution": "normal", "stddev_ms": 10})[0] == pytest.approx(
        max(0.0, r.gauss(100, 10)))
    r = random.Random("3:5:lat")
    r.random()
    assert _latency({"latency_ms": 100, "distribution": "lognormal", "sigma": 0.5})[0] == pytest.approx(
        r.lognormvariate(math.log(100), 0.5))
    r = random.Random("3:5:lat")
    r.random()
    p = _latency({"latency_ms": 100, "distribution": "pareto", "alpha": 1.5})[0]
    assert p == pytest.approx(100 * r.paretovariate(1.5)) and p >= 100


def test_latency_clamps():
    assert _latency({"latency_ms": 0, "distribution": "normal", "stddev_ms": 1000}, seq=1)[0] >= 0
    for seq in range(1, 30):
        assert _latency({"latency_ms": 100, "distribution": "pareto", "alpha": 0.5, "max_ms": 150}, seq=seq)[0] <= 150


# -- http_error, timeout_after, reset, blackhole ---------------------------------------------------------


def test_pick_status_by_cumulative_weight():
    w = {"503": 3.0, "500": 1.0}  # ascending order: 500 covers [0, .25), 503 covers [.25, 1)
    assert HttpError.pick_status(w, 0.0) == 500
    assert HttpError.pick_status(w, 0.2499) == 500
    assert HttpError.pick_status(w, 0.25) == 503
    assert HttpError.pick_status(w, 0.9999) == 503


def test_http_error_retry_after_and_body():
    s = spec(type="http_error", name="e", attributes={"status": 429, "retry_after_s": 1.2, "body": {"x": 1}})
    act = decide(s, REQ, 1, 0, None)[0].action
    assert act == Respond(429, b'{"x": 1}', (("Retry-After", "2"),))
    default = decide(spec(type="http_error", name="e"), REQ, 1, 0, None)[0].action
    assert json.loads(default.body)["fault"] == "e" and default.status == 503


def test_http_error_weighted_draw_golden():
    s = spec(type="http_error", name="w", attributes={"statuses": {"500": 1, "503": 1}})
    r = random.Random("9:4:w")
    r.random()
    u = r.random()
    dec = decide(s, RequestInfo(4, "GET", "/"), 9, 0, None)[0]
    assert dec.action.status == (500 if u < 0.5 else 503)
    assert dec.drawn["status_draw"] == round(u, 6)


def test_timeout_reset_blackhole_actions():
    assert decide(spec(type="timeout_after", attributes={"timeout_ms": 1500}), REQ, 1, 0, None)[0].action.after_s == 1.5
    assert decide(spec(type="timeout_after", attributes={"timeout_ms": 1}), REQ, 1, 0, None)[0].action.status == 504
    assert decide(spec(type="reset"), REQ, 1, 0, None)[0].action == Abort(0)
    assert decide(spec(type="reset", stage="response", attributes={"after_bytes": 7}), REQ, 1, 0,
                  None)[0].action == Abort(7)
    assert decide(spec(type="blackhole"), REQ, 1, 0, None)[0].action == Hold()


def test_body_actions():
    assert decide(spec(type="slow_body", attributes={"bytes_per_s": 50, "chunk_bytes": 5}), REQ, 1, 0,
                  None)[0].action == Throttle(50.0, 5)
    assert decide(spec(type="truncate", attributes={"after_bytes": 9}), REQ, 1, 0, None)[0].action == Truncate(9)


# -- corrupt_body -------------------------------------------------------------------------------------------

BODY = json.dumps({"results": [{"id": 1}, {"id": 2}, {"id": 3}], "coverage": "high",
                   "nested": {"memories": [1, 2]}}).encode()


def test_corrupt_invalid_json():
    out, drawn = CorruptBody.corrupt({"mode": "invalid_json"}, BODY, random.Random(0))
    with pytest.raises(ValueError):
        json.loads(out)
    assert out.startswith(BODY[: len(BODY) // 2]) and drawn == {"kept_bytes": len(BODY) // 2}


def test_corrupt_drop_and_null_items_all_or_none():
    attrs = {"mode": "drop_items", "fields": ["results", "memories"], "probability": 1.0}
    out, drawn = CorruptBody.corrupt(attrs, BODY, random.Random(0))
    assert json.loads(out) == {"results": [], "coverage": "high", "nested": {"memories": []}}
    assert drawn == {"items": {"results": [0, 1, 2], "nested.memories": [0, 1]}}
    out, _ = CorruptBody.corrupt({**attrs, "mode": "null_items"}, BODY, random.Random(0))
    assert json.loads(out)["results"] == [None, None, None]
    out, drawn = CorruptBody.corrupt({**attrs, "probability": 0.0}, BODY, random.Random(0))
    assert json.loads(out) == json.loads(BODY)


def test_corrupt_drop_items_golden_with_rng():
    attrs = {"mode": "drop_items", "fields": ["results"], "probability": 0.5}
    r = random.Random(42)
    expect = [i for i in range(3) if r.random() < 0.5]
    out, drawn = CorruptBody.corrupt(attrs, BODY, random.Random(42))
    assert drawn["items"]["results"] == expect
    assert [x["id"] for x in json.loads(out)["results"]] == [i + 1 for i in range(3) if i not in expect]


def test_corrupt_non_json_left_alone():
    out, drawn = CorruptBody.corrupt({"mode": "drop_items", "fields": ["results"], "probability": 1}, b"<html>",
                                     random.Random(0))
    assert out == b"<html>" and drawn == {"skipped": "not_json"}


# -- stateful: rate limit, concurrency, outage -----------------------------------------------------------------


def test_token_bucket_golden():
    st = RateLimitState(tokens=2.0, last=0.0)
    assert st.take(2.0, 2.0, 0.0) == (True, 0.0)
    assert st.take(2.0, 2.0, 0.0) == (True, 0.0)
    ok, wait = st.take(2.0, 2.0, 0.0)
    assert not ok and wait == pytest.approx(0.5)
    ok, wait = st.take(2.0, 2.0, 0.25)  # half a token refilled
    assert not ok and wait == pytest.approx(0.25)
    assert st.take(2.0, 2.0, 0.5)[0]  # 0.5 tokens + 0.25 s × 2/s = 1.0


def test_rate_limit_decision_429_retry_after():
    s = spec(type="rate_limit", attributes={"rate_per_s": 0.5, "burst": 1})
    st = FAULT_TYPES["rate_limit"].new_state(s, 100.0)
    assert decide(s, REQ, 1, 100.0, st)[0].action is None
    act = decide(s, REQ, 1, 100.0, st)[0].action
    assert act.status == 429 and dict(act.headers) == {"Retry-After": "2"}  # 1 token at 0.5/s


def test_concurrency_limit_admit_and_release():
    s = spec(type="concurrency_limit", attributes={"max_in_flight": 1})
    st = ConcurrencyState()
    a1 = decide(s, REQ, 1, 0, st)[0].action
    assert isinstance(a1, Admit) and st.in_flight == 1
    assert decide(s, REQ, 1, 0, st)[0].action.status == 503
    a1.state.release()
    assert isinstance(decide(s, REQ, 1, 0, st)[0].action, Admit)


def test_outage_window():
    s = FaultSpec(**{**spec(type="outage", attributes={"duration_s": 10}).__dict__, "created_at": 100.0})
    act = decide(s, REQ, 1, 104.5, None)[0].action
    assert act.status == 503 and dict(act.headers)["Retry-After"] == "6"
    assert decide(s, REQ, 1, 110.0, None)[0].action is None
    r = FaultSpec(**{**spec(type="outage", attributes={"duration_s": 10, "mode": "reset"}).__dict__, "created_at": 100})
    assert decide(r, REQ, 1, 101, None)[0].action == Abort(0)


# -- header faults ----------------------------------------------------------------------------------------------


def test_header_faults():
    acts, seen = header_faults({"X-Fault-Delay-Ms": "200", "x-fault-abort": "503", "Other": "1"})
    assert acts[0] == Delay(0.2) and acts[1].status == 503
    assert seen == {"delay_ms": 200.0, "abort": 503}
    acts, seen = header_faults({"x-fault-abort": "abc"})
    assert acts == [] and seen == {"bad": "x-fault-abort"}
    acts, _ = header_faults({"x-fault-reset": "1", "x-fault-timeout-after-ms": "50"})
    assert acts[0] == Abort(0) and acts[1].after_s == 0.05 and acts[1].status == 504


def test_latency_draw_ms_static():
    assert Latency.draw_ms({"distribution": "fixed", "latency_ms": 7.0}, random.Random(0)) == 7.0
