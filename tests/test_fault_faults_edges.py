"""Fault definitions and decisions at their boundaries (services/fault_proxy/faults.py), hand-computed:
validation limits on both sides (0 / 200 / 599 / 24 h / 128-character names / strict and non-strict lower
bounds), defaults, the serialised forms, Retry-After rounding, the toxicity and max_hits boundaries, the token
bucket with a clock that goes back and a zero rate, corrupt_body paths through nested lists, the bounded list
of timed-out patterns, and header faults' limits. Found by `make mutation` (test_fault_proxy.py pins the common
case of each type)."""

from __future__ import annotations

import json
import math
import random

import pytest

from services.fault_proxy import faults as F
from services.fault_proxy.faults import (
    MAX_MS,
    Abort,
    Admit,
    ConcurrencyState,
    CorruptBody,
    Delay,
    Drawn,
    FaultError,
    FaultSpec,
    HttpError,
    Latency,
    Match,
    RateLimitState,
    ReplaceBody,
    RequestInfo,
    Respond,
    decide,
    error_body,
    header_faults,
    parse_fault,
)

REQ = RequestInfo(seq=1, method="POST", path="/v1/retrieve", body=b"{}")


def _field(d) -> str:
    with pytest.raises(FaultError) as e:
        parse_fault(d)
    return e.value.field


def _act(d, now: float = 0.0, state=None, seq: int = 1):
    return decide(parse_fault(d), RequestInfo(seq, "GET", "/"), 1, now, state)[0].action


# -- limits on both sides ---------------------------------------------------------------------------------------
def test_constants():
    assert MAX_MS == 86_400_000.0 and F.MAX_S == 86_400.0
    assert F.REGEX_TIMEOUT_S == 0.05 and F.STAGES == ("request", "response") and F.RESERVED_NAMES == {"log"}


def test_millisecond_and_second_limits():
    ok = parse_fault({"type": "latency", "attributes": {"latency_ms": MAX_MS, "max_ms": MAX_MS}})
    assert ok.attributes == {"distribution": "fixed", "latency_ms": MAX_MS, "max_ms": MAX_MS}
    assert _field({"type": "latency", "attributes": {"latency_ms": MAX_MS + 1}}) == "attributes.latency_ms"
    assert _field({"type": "latency", "attributes": {"latency_ms": 1, "max_ms": MAX_MS + 1}}) == "attributes.max_ms"
    assert parse_fault({"type": "http_error", "attributes": {"retry_after_s": 86_400}}).attributes[
        "retry_after_s"] == 86_400.0
    assert _field({"type": "http_error", "attributes": {"retry_after_s": 86_401}}) == "attributes.retry_after_s"
    assert _field({"type": "outage", "attributes": {"duration_s": 86_401}}) == "attributes.duration_s"
    assert _field({"type": "timeout_after", "attributes": {"timeout_ms": MAX_MS + 1}}) == "attributes.timeout_ms"
    assert _field({"type": "rate_limit", "attributes": {"rate_per_s": 1, "retry_after_s": 86_401}}) == \
        "attributes.retry_after_s"
    assert _field({"type": "concurrency_limit", "attributes": {"max_in_flight": 1, "retry_after_s": 86_401}}) == \
        "attributes.retry_after_s"


@pytest.mark.parametrize("value", [True, False, "5", [5], float("nan"), float("inf"), -0.5])
def test_numbers_reject_bools_strings_non_finite_and_negatives(value):
    assert _field({"type": "latency", "attributes": {"latency_ms": value}}) == "attributes.latency_ms"


def test_zero_allowed_where_the_bound_is_not_strict():
    assert parse_fault({"type": "latency", "attributes": {"latency_ms": 0}}).attributes["latency_ms"] == 0.0
    assert parse_fault({"type": "reset", "attributes": {"after_bytes": 0}}).attributes == {"after_bytes": 0}
    assert parse_fault({"type": "latency", "attributes": {"latency_ms": 1, "distribution": "pareto",
                                                          "alpha": 0.001}}).attributes["alpha"] == 0.001
    assert _field({"type": "latency", "attributes": {"latency_ms": 1, "distribution": "pareto", "alpha": 0}}) == \
        "attributes.alpha"
    for dist, extra in (("lognormal", {"sigma": 0.5}), ("pareto", {"alpha": 1.5})):
        assert _field({"type": "latency", "attributes": {"latency_ms": 0, "distribution": dist, **extra}}) == \
            "attributes.latency_ms"
        assert parse_fault({"type": "latency", "attributes": {"latency_ms": 0.5, "distribution": dist, **extra}})


def test_integers():
    assert parse_fault({"type": "truncate", "attributes": {"after_bytes": 3.0}}).attributes == {"after_bytes": 3}
    assert _field({"type": "truncate", "attributes": {"after_bytes": 3.5}}) == "attributes.after_bytes"
    assert _field({"type": "truncate"}) == "attributes.after_bytes"
    assert _field({"type": "truncate", "attributes": {"after_bytes": -1}}) == "attributes.after_bytes"
    assert parse_fault({"type": "reset"}).attributes == {"after_bytes": 0}
    assert parse_fault({"type": "concurrency_limit", "attributes": {"max_in_flight": 0}}).attributes == {
        "max_in_flight": 0, "status": 503}


@pytest.mark.parametrize("status,ok", [(199, False), (200, True), (599, True), (600, False)])
def test_status_range(status, ok):
    for ftype, extra in (("http_error", {}), ("timeout_after", {"timeout_ms": 1}), ("outage", {"duration_s": 1}),
                         ("rate_limit", {"rate_per_s": 1}), ("concurrency_limit", {"max_in_flight": 1})):
        d = {"type": ftype, "attributes": {"status": status, **extra}}
        if ok:
            assert parse_fault(d).attributes["status"] == status
        else:
            assert _field(d) == "attributes.status"


def test_weighted_statuses_validation():
    assert parse_fault({"type": "http_error", "attributes": {"statuses": {"200": 1, "599": 0}}}).attributes == {
        "statuses": {"200": 1.0, "599": 0.0}}
    for bad in ({}, [503], {"199": 1}, {"600": 1}, {"503": -1}, {"503": True}, {"503": float("nan")},
                {"503": "1"}, {"503": 0, "500": 0}):
        assert _field({"type": "http_error", "attributes": {"statuses": bad}}) == "attributes.statuses"
    # statuses null falls back to the single status
    assert parse_fault({"type": "http_error", "attributes": {"statuses": None}}).attributes == {"status": 503}


def test_pick_status_edges():
    w = {"503": 3.0, "500": 1.0}
    assert HttpError.pick_status(w, 1.0) == 503  # past the last cumulative weight: the last status
    assert HttpError.pick_status({"502": 1.0, "501": 1.0, "500": 2.0}, 0.5) == 501  # 500 [0,.5), 501 [.5,.75)
    assert HttpError.pick_status({"502": 1.0, "501": 1.0, "500": 2.0}, 0.75) == 502
    assert HttpError.pick_status({"500": 0.0, "503": 2.0}, 0.0) == 503  # a zero weight is never drawn


def test_http_error_bodies_and_error_body():
    assert _act({"type": "http_error", "name": "e", "attributes": {"status": 500, "body": "plain"}}) == Respond(
        500, b"plain")
    assert _act({"type": "http_error", "name": "e", "attributes": {"status": 500, "body": [1, None]}}).body == \
        b"[1, null]"
    assert json.loads(error_body("f", 502)) == {"detail": "injected fault 'f' (HTTP 502)", "fault": "f"}
    assert json.loads(error_body("f", 502, "why")) == {"detail": "why", "fault": "f"}
    d = decide(parse_fault({"type": "http_error", "name": "e"}), REQ, 1, 0, None)[0]
    assert d.drawn == {"status": 503} and d.action.headers == ()


@pytest.mark.parametrize("seconds,header", [(0.0, "0"), (-3.0, "0"), (2.0, "2"), (2.000000001, "2"),
                                            (2.01, "3"), (0.4, "1")])
def test_retry_after_rounds_up_to_whole_seconds(seconds, header):
    assert F._fmt_retry_after(seconds) == header


def test_names_and_stages():
    assert parse_fault({"type": "reset", "name": "a" * 128}).name == "a" * 128
    assert _field({"type": "reset", "name": "a" * 129}) == "name"
    assert _field({"type": "reset", "name": 5}) == "name"
    assert parse_fault({"type": "reset"}, name_default="dflt").name == "dflt"
    assert parse_fault({"type": "reset", "name": "x"}, name_default="dflt").name == "x"
    assert parse_fault({"type": "reset", "stage": "response"}).name == "reset_response"
    assert parse_fault({"type": "slow_body", "attributes": {"bytes_per_s": 10}}).name == "slow_body_response"
    assert _field([1]) == "body" and _field({"type": ""}) == "type" and _field({"type": 3}) == "type"
    assert _field({"type": "slow_body", "stage": "request", "attributes": {"bytes_per_s": 10}}) == "stage"
    assert _field({"type": "corrupt_body", "stage": "request"}) == "stage"


def test_toxicity_match_attributes_and_max_hits_validation():
    assert parse_fault({"type": "reset", "toxicity": 0}).toxicity == 0.0
    assert parse_fault({"type": "reset", "toxicity": 1}).toxicity == 1.0
    assert _field({"type": "reset", "toxicity": True}) == "toxicity"
    assert _field({"type": "reset", "toxicity": -0.01}) == "toxicity"
    assert _field({"type": "reset", "match": "GET"}) == "match"
    assert _field({"type": "reset", "match": {"method": 1}}) == "match.method"
    assert _field({"type": "reset", "match": {"body_regex": "[a"}}) == "match.body_regex"
    m = parse_fault({"type": "reset", "match": {"method": "", "path_regex": "", "body_regex": None}}).match
    assert m == Match(None, None, None)
    assert _field({"type": "reset", "attributes": [1]}) == "attributes"
    assert _field({"type": "blackhole", "attributes": {"x": 1}}) == "attributes.x"
    assert _field({"type": "rate_limit", "attributes": {"rate_per_s": 1, "staus": 1}}) == "attributes.staus"
    assert _field({"type": "reset", "max_hits": True}) == "max_hits"
    assert _field({"type": "reset", "max_hits": 1.0}) == "max_hits"
    assert _field({"type": "reset", "max_hits": -1}) == "max_hits"
    assert parse_fault({"type": "reset", "max_hits": 1}).max_hits == 1
    assert parse_fault({"type": "reset", "created_at": 5, "generation": 2, "order": 3}).max_hits is None


def test_serialised_forms_round_trip():
    d = {"name": "lat", "type": "latency", "stage": "response", "toxicity": 0.25,
         "match": {"method": "GET", "path_regex": "^/v1", "body_regex": None},
         "attributes": {"latency_ms": 5}, "max_hits": 3}
    s = parse_fault(d)
    stored = {**s.to_json(), "created_at": 12.5, "generation": 4, "order": 2}
    back = FaultSpec.from_json(stored)
    assert (back.created_at, back.generation, back.order) == (12.5, 4, 2)
    assert back.to_json() == stored
    assert back.definition() == {"name": "lat", "type": "latency", "stage": "response", "toxicity": 0.25,
                                 "match": {"method": "GET", "path_regex": "^/v1", "body_regex": None},
                                 "attributes": {"distribution": "fixed", "latency_ms": 5.0}, "max_hits": 3}
    plain = FaultSpec.from_json(s.definition())  # no bookkeeping fields: the defaults
    assert (plain.created_at, plain.generation, plain.order) == (0.0, 0, 0)
    assert FaultSpec.from_json({"type": "reset", "generation": "7"}).generation == 7
    assert s.kind is Latency


def test_match_methods_and_body_decoding():
    info = RequestInfo(1, "post", "/v1/x", b"\xff\xfeneedle")
    assert Match("*").matches(info) and Match(None).matches(info)
    assert Match("GET | POST").matches(info) and not Match("GET|PUT").matches(info)
    assert Match(body_regex="needle").matches(info)  # invalid utf-8 is replaced, the rest still searched
    assert Match(path_regex="^/v1/").matches(info) and not Match(path_regex="^/v2").matches(info)
    assert Match("GET", "^/v1/", "needle").to_json() == {"method": "GET", "path_regex": "^/v1/",
                                                        "body_regex": "needle"}


def test_timed_out_patterns_kept_bounded(monkeypatch):
    def slow(*a, **kw):
        raise TimeoutError

    monkeypatch.setattr(F.regex, "search", slow)
    monkeypatch.setattr(F, "REGEX_TIMEOUTS", F.REGEX_TIMEOUTS)
    F.REGEX_TIMEOUTS.clear()
    for i in range(105):
        assert F.regex_search(f"p{i}", "text") is False
    assert F.REGEX_TIMEOUTS == [f"p{i}" for i in range(5, 105)]
    F.REGEX_TIMEOUTS.clear()


def test_regex_search_passes_the_timeout(monkeypatch):
    seen = {}

    def spy(pattern, text, timeout=None):
        seen["timeout"] = timeout
        return None

    monkeypatch.setattr(F.regex, "search", spy)
    assert F.regex_search("a", "b") is False and seen == {"timeout": 0.05}


# -- decisions -------------------------------------------------------------------------------------------------
def test_toxicity_boundary_and_max_hits_boundary():
    u = random.Random("1:1:t").random()  # 0.134... for this seed/seq/name
    s_at = parse_fault({"type": "reset", "name": "t", "toxicity": u})
    dec, log, _ = decide(s_at, REQ, 1, 0, None)
    assert dec.action is None and log.applied is False and log.u == round(u, 6)  # u == toxicity: not applied
    s_above = parse_fault({"type": "reset", "name": "t", "toxicity": min(1.0, u + 1e-9)})
    assert decide(s_above, REQ, 1, 0, None)[0].action == Abort(0)
    twice = parse_fault({"type": "reset", "name": "t", "max_hits": 2})
    assert decide(twice, REQ, 1, 0, None, hits=1)[0].action == Abort(0)
    dec, log, _ = decide(twice, REQ, 1, 0, None, hits=2)
    assert dec.action is None and log.note == "exhausted" and log.applied is False
    assert decide(parse_fault({"type": "reset"}), REQ, 1, 0, None, hits=10 ** 6)[0].action == Abort(0)


def test_drawn_log_entries():
    dec, log, rng = decide(parse_fault({"type": "latency", "name": "lat", "attributes": {"latency_ms": 7}}),
                           REQ, 1, 0, None)
    r = random.Random("1:1:lat")
    assert log.to_json() == {"fault": "lat", "type": "latency", "stage": "request", "u": round(r.random(), 6),
                             "applied": True, "drawn": {"delay_ms": 7.0}}
    assert rng.random() == r.random()  # the returned stream continues after the toxicity draw
    log.drawn["delay_ms"] = 0
    assert dec.drawn == {"delay_ms": 7.0}  # the log holds a copy
    assert Drawn("f", "reset", "request", 0.5, False, note="exhausted").to_json() == {
        "fault": "f", "type": "reset", "stage": "request", "u": 0.5, "applied": False, "note": "exhausted"}
    # an admitted request is not an applied fault
    d, log, _ = decide(parse_fault({"type": "concurrency_limit", "attributes": {"max_in_flight": 1}}), REQ, 1, 0,
                       ConcurrencyState())
    assert isinstance(d.action, Admit) and log.applied is False and log.drawn == {"in_flight": 0}


def test_latency_clamped_at_zero_exactly_and_uniform_default():
    # seq 1, seed 3, name lat: the toxicity draw, then gauss(0, 1000) = -1770.92... -> clamped to 0
    s = parse_fault({"type": "latency", "name": "lat", "attributes": {"latency_ms": 0, "distribution": "normal",
                                                                      "stddev_ms": 1000}})
    assert decide(s, RequestInfo(1, "GET", "/"), 3, 0, None)[0].action == Delay(0.0)
    assert parse_fault({"type": "latency", "attributes": {"latency_ms": 5, "jitter_ms": 0}}).attributes == {
        "distribution": "fixed", "latency_ms": 5.0}
    assert parse_fault({"type": "latency", "attributes": {"latency_ms": 5, "distribution": "uniform"}}).attributes \
        == {"distribution": "uniform", "latency_ms": 5.0, "jitter_ms": 0.0}
    assert Latency.draw_ms({"distribution": "uniform", "latency_ms": 5.0}, random.Random(0)) == 5.0
    assert Latency.draw_ms({"distribution": "fixed", "latency_ms": 500.0, "max_ms": 20.0}, random.Random(0)) == 20.0
    assert _act({"type": "latency", "attributes": {"latency_ms": 250}}) == Delay(0.25)


def test_slow_body_defaults_and_limits():
    assert parse_fault({"type": "slow_body", "attributes": {"bytes_per_s": 5}}).attributes == {
        "bytes_per_s": 5.0, "chunk_bytes": 1}
    assert parse_fault({"type": "slow_body", "attributes": {"bytes_per_s": 1}}).attributes["chunk_bytes"] == 1
    assert parse_fault({"type": "slow_body", "attributes": {"bytes_per_s": 25}}).attributes["chunk_bytes"] == 2
    assert _field({"type": "slow_body", "attributes": {"bytes_per_s": 0.99}}) == "attributes.bytes_per_s"
    assert _field({"type": "slow_body", "attributes": {"bytes_per_s": 10, "chunk_bytes": 0}}) == \
        "attributes.chunk_bytes"


def test_timeout_after_default_status_and_body():
    act = _act({"type": "timeout_after", "name": "to", "attributes": {"timeout_ms": 250}})
    assert act == Respond(504, error_body("to", 504, "gateway timeout (injected)"), after_s=0.25)


# -- corrupt_body ----------------------------------------------------------------------------------------------
def test_corrupt_body_validation():
    assert parse_fault({"type": "corrupt_body"}).attributes == {"mode": "invalid_json",
                                                               "fields": ["results", "memories"], "probability": 0.5}
    assert parse_fault({"type": "corrupt_body", "attributes": {"probability": 1}}).attributes["probability"] == 1.0
    assert _field({"type": "corrupt_body", "attributes": {"probability": 1.01}}) == "attributes.probability"
    for bad in ("results", [""], [1], ["ok", None]):
        assert _field({"type": "corrupt_body", "attributes": {"fields": bad}}) == "attributes.fields"
    d = decide(parse_fault({"type": "corrupt_body", "attributes": {"mode": "null_items"}}), REQ, 1, 0, None)[0]
    assert d.action == ReplaceBody(b"") and d.drawn == {"mode": "null_items"}


def test_corrupt_paths_through_nested_lists_and_probability_boundary():
    body = json.dumps({"a": [{"results": [1, 2]}, {"x": {"results": [3]}}], "results": "not a list"}).encode()
    out, drawn = CorruptBody.corrupt({"mode": "null_items", "fields": ["results"], "probability": 1.0}, body,
                                     random.Random(0))
    assert json.loads(out) == {"a": [{"results": [None, None]}, {"x": {"results": [None]}}], "results": "not a list"}
    assert drawn == {"items": {"a[0].results": [0, 1], "a[1].x.results": [0]}}
    # an item is hit when its draw is below p: with p equal to the first draw, that item is kept
    first = random.Random(5).random()
    out, drawn = CorruptBody.corrupt({"mode": "drop_items", "fields": ["results"], "probability": first},
                                     json.dumps({"results": [1]}).encode(), random.Random(5))
    assert json.loads(out) == {"results": [1]} and drawn == {"items": {"results": []}}
    out, drawn = CorruptBody.corrupt({"mode": "invalid_json"}, b"abcde", random.Random(0))
    assert out == b"ab\x00<corrupt>" and drawn == {"kept_bytes": 2}
    assert CorruptBody.corrupt({"mode": "null_items", "fields": ["r"], "probability": 1}, b"\xff",
                               random.Random(0)) == (b"\xff", {"skipped": "not_json"})


# -- stateful types ---------------------------------------------------------------------------------------------
def test_token_bucket_clock_back_cap_and_zero_rate():
    st = RateLimitState(tokens=0.5, last=10.0)
    ok, wait = st.take(1.0, 2.0, 5.0)  # the clock went back: no refill, and no negative refill
    assert not ok and st.tokens == 0.5 and st.last == 5.0 and wait == pytest.approx(0.5)
    st = RateLimitState(tokens=1.5, last=0.0)
    assert st.take(1.0, 2.0, 100.0) == (True, 0.0) and st.tokens == pytest.approx(1.0)  # capped at burst 2, minus 1
    st = RateLimitState(tokens=1.0, last=0.0)
    assert st.take(0.0, 1.0, 5.0) == (True, 0.0)
    ok, wait = st.take(0.0, 1.0, 6.0)
    assert not ok and wait == math.inf


def test_rate_limit_validation_and_decisions():
    assert parse_fault({"type": "rate_limit", "attributes": {"rate_per_s": 0.5}}).attributes == {
        "rate_per_s": 0.5, "burst": 1.0, "status": 429}
    assert parse_fault({"type": "rate_limit", "attributes": {"rate_per_s": 5}}).attributes["burst"] == 5.0
    assert _field({"type": "rate_limit", "attributes": {"rate_per_s": 5, "burst": 0.5}}) == "attributes.burst"
    # issue 37: a zero rate (a bucket that never refills: every request past the burst refused for good) is
    # refused by name; a slow one refills: 1 s at 0.01/s leaves 0.01 tokens, the next in (1 - 0.01) / 0.01 = 99 s
    assert _field({"type": "rate_limit", "attributes": {"rate_per_s": 0, "burst": 1}}) == "attributes.rate_per_s"
    s = parse_fault({"type": "rate_limit", "name": "rl", "attributes": {"rate_per_s": 0.01, "burst": 1}})
    st = s.kind.new_state(s, 50.0)
    assert (st.tokens, st.last) == (1.0, 50.0)
    d = decide(s, REQ, 1, 50.0, st)[0]
    assert d.action is None and d.drawn == {"tokens_left": 0.0}
    d = decide(s, REQ, 1, 51.0, st)[0]
    assert d.drawn == {"tokens_left": 0.01, "retry_after_s": 99.0}
    assert d.action == Respond(429, error_body("rl", 429, "rate limited (injected)"), (("Retry-After", "99"),))
    s = parse_fault({"type": "rate_limit", "name": "rl", "attributes": {"rate_per_s": 4, "burst": 1,
                                                                         "retry_after_s": 7.5, "status": 503}})
    st = s.kind.new_state(s, 0.0)
    decide(s, REQ, 1, 0.0, st)
    d = decide(s, REQ, 1, 0.0, st)[0]
    assert d.action.status == 503 and d.action.headers == (("Retry-After", "8"),) and d.drawn["retry_after_s"] == 7.5


def test_concurrency_limit_zero_release_floor_and_retry_after():
    s = parse_fault({"type": "concurrency_limit", "name": "cl", "attributes": {"max_in_flight": 0,
                                                                               "retry_after_s": 2.5}})
    st = ConcurrencyState()
    d = decide(s, REQ, 1, 0, st)[0]
    assert d.action == Respond(503, error_body("cl", 503, "too many requests in flight"), (("Retry-After", "3"),))
    assert d.drawn == {"in_flight": 0} and st.in_flight == 0
    st.release()
    assert st.in_flight == 0  # never below zero
    st = ConcurrencyState(in_flight=2)
    st.release()
    assert st.in_flight == 1
    assert s.kind.new_state(s, 0.0) == ConcurrencyState(0)


def test_outage_boundary_and_drawn():
    s = FaultSpec(**{**parse_fault({"type": "outage", "name": "o", "attributes": {"duration_s": 10,
                                                                                   "status": 502}}).__dict__,
                     "created_at": 100.0})
    d = decide(s, REQ, 1, 109.75, None)[0]
    assert d.drawn == {"down": True, "seconds_left": 0.25}
    assert d.action == Respond(502, error_body("o", 502, "service unavailable (outage)"), (("Retry-After", "1"),))
    d = decide(s, REQ, 1, 110.0, None)[0]
    assert d.action is None and d.drawn == {"down": False}
    assert parse_fault({"type": "outage", "attributes": {"duration_s": 1}}).attributes == {
        "duration_s": 1.0, "mode": "error", "status": 503}


# -- header faults ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value,ok", [("0", True), (str(MAX_MS), True), (str(MAX_MS + 1), False), ("-1", False),
                                      ("nan", False), ("inf", False), ("x", False)])
def test_header_milliseconds_limits(value, ok):
    acts, seen = header_faults({"x-fault-delay-ms": value})
    if ok:
        assert acts == [Delay(float(value) / 1000.0)] and seen == {"delay_ms": float(value)}
    else:
        assert acts == [] and seen == {"bad": "x-fault-delay-ms"}
    acts, seen = header_faults({"X-Fault-Timeout-After-Ms": value})
    if ok:
        assert acts == [Respond(504, error_body("header", 504), after_s=float(value) / 1000.0)]
        assert seen == {"timeout_after_ms": float(value)}
    else:
        assert acts == [] and seen == {"bad": "x-fault-timeout-after-ms"}


@pytest.mark.parametrize("value,ok", [("199", False), ("200", True), ("599", True), ("600", False)])
def test_header_abort_status_range(value, ok):
    acts, seen = header_faults({"x-fault-abort": value})
    if ok:
        assert acts == [Respond(int(value), error_body("header", int(value)))] and seen == {"abort": int(value)}
    else:
        assert acts == [] and seen == {"bad": "x-fault-abort"}


def test_header_faults_all_at_once_in_order():
    acts, seen = header_faults({"x-fault-timeout-after-ms": "5", "x-fault-reset": "yes", "x-fault-abort": "500",
                                "x-fault-delay-ms": "1", "x-other": "1", "fault-delay-ms": "9"})
    assert acts == [Delay(0.001), Respond(500, error_body("header", 500)), Abort(0),
                    Respond(504, error_body("header", 504), after_s=0.005)]
    assert seen == {"delay_ms": 1.0, "abort": 500, "reset": True, "timeout_after_ms": 5.0}
    assert header_faults({}) == ([], {})


def test_base_type_defaults_and_which_types_keep_state():
    assert F.FaultType.validate({"a": 1}) == {"a": 1}
    assert F.FaultType.new_state(parse_fault({"type": "reset"}), 0.0) is None
    with pytest.raises(NotImplementedError):
        F.FaultType.decide(parse_fault({"type": "reset"}), REQ, random.Random(0), 0.0, None)
    assert (F.FaultType.STAGES, F.FaultType.DEFAULT_STAGE, F.FaultType.STATEFUL) == (F.STAGES, "request", False)
    assert {t for t, k in F.FAULT_TYPES.items() if k.STATEFUL} == {"rate_limit", "concurrency_limit"}
    assert {t for t, k in F.FAULT_TYPES.items() if k.STAGES == ("response",)} == {"slow_body", "truncate",
                                                                                  "corrupt_body"}


def test_dataclass_defaults():
    s = parse_fault({"type": "reset"})
    assert (s.max_hits, s.created_at, s.generation, s.order) == (None, 0.0, 0, 0)
    assert Abort().after_bytes == 0 and ConcurrencyState().in_flight == 0
    assert Respond(500).body == b"" and Respond(500).headers == () and Respond(500).after_s == 0.0
    assert RequestInfo(1, "GET", "/").body == b"" and F.Decision(None).drawn == {}
    assert _act({"type": "http_error", "attributes": {"status": 500}}).after_s == 0.0
    # decide's default hit count is 0: a one-shot fault fires on its first request
    assert decide(parse_fault({"type": "reset", "max_hits": 1}), REQ, 1, 0, None)[0].action == Abort(0)


@pytest.mark.parametrize("body,field", [
    ({"type": "slow_body"}, "attributes.bytes_per_s"),
    ({"type": "latency", "attributes": {"latency_ms": 5, "distribution": "normal"}}, "attributes.stddev_ms"),
    ({"type": "latency", "attributes": {"latency_ms": 5, "distribution": "lognormal"}}, "attributes.sigma"),
    ({"type": "timeout_after"}, "attributes.timeout_ms"),
    ({"type": "concurrency_limit"}, "attributes.max_in_flight"),
    ({"type": "truncate", "attributes": {"after_bytes": None}}, "attributes.after_bytes"),
])
def test_required_attributes_are_named_when_missing(body, field):
    assert _field(body) == field


def test_several_unknown_fields_name_the_first_in_sorted_order():
    assert _field({"type": "reset", "match": {"zeta": 1, "alpha": 2}}) == "match.alpha"
    assert _field({"type": "reset", "attributes": {"zz": 1, "after_bytes": 1, "aa": 2}}) == "attributes.aa"
    assert _field({"type": "reset", "zz": 1, "aa": 2}) == "aa"


def test_explicit_chunk_of_one_byte_and_parsed_distribution_names():
    assert parse_fault({"type": "slow_body", "attributes": {"bytes_per_s": 1000, "chunk_bytes": 1}}).attributes == {
        "bytes_per_s": 1000.0, "chunk_bytes": 1}
    normal = "".join(["nor", "mal"])  # parsed from JSON: equal, not the interned literal
    assert parse_fault({"type": "latency", "attributes": {"latency_ms": 5, "distribution": normal,
                                                          "stddev_ms": 2}}).attributes == {
        "distribution": "normal", "latency_ms": 5.0, "stddev_ms": 2.0}


def test_actions_are_immutable():
    import dataclasses

    for act in (Delay(1.0), Respond(500), Abort(), Admit(ConcurrencyState()), RequestInfo(1, "GET", "/"), Match("GET")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(act, dataclasses.fields(act)[0].name, None)


def test_every_action_decision_and_spec_is_immutable():
    import dataclasses

    spec = parse_fault({"type": "reset"})
    for obj, attr in ((F.Decision(Delay(1.0), {"delay_ms": 1000.0}), "action"), (F.Hold(), "anything"),
                      (F.Throttle(100.0, 10), "bytes_per_s"), (F.Truncate(5), "after_bytes"),
                      (ReplaceBody(b"x"), "body"), (spec, "name")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, attr, None)


def test_parse_fault_takes_the_definition_by_keyword_and_the_name_default_only_by_keyword():
    assert parse_fault(d={"type": "reset"}, name_default="r1").name == "r1"
    with pytest.raises(TypeError):
        parse_fault({"type": "reset"}, "r1")  # name_default is keyword-only


def _from_json(text: str, seq: int = 1, state=None):
    """Decide on a fault parsed from JSON text: its strings are fresh objects, never the module's literals."""
    spec = parse_fault(json.loads(text))
    return decide(spec, RequestInfo(seq, "GET", "/"), 7, 0.0, state)[0].action


def test_distributions_and_modes_parsed_from_json_text_decide_by_value():
    assert _from_json('{"type": "latency", "attributes": {"latency_ms": 40, "distribution": "fixed"}}') == Delay(0.04)
    d = _from_json('{"type": "latency", "attributes": {"latency_ms": 40, "distribution": "uniform", "jitter_ms": 10}}')
    assert 0.03 <= d.seconds <= 0.05 and d.seconds != 0.04
    d = _from_json('{"type": "latency", "attributes": {"latency_ms": 40, "distribution": "normal", "stddev_ms": 5}}')
    assert isinstance(d, Delay) and d.seconds != 0.04
    d = _from_json('{"type": "latency", "attributes": {"latency_ms": 40, "distribution": "lognormal", "sigma": 0.5}}')
    assert isinstance(d, Delay) and d.seconds != 0.04
    d = _from_json('{"type": "latency", "attributes": {"latency_ms": 40, "distribution": "pareto", "alpha": 2}}')
    assert isinstance(d, Delay) and d.seconds >= 0.04  # the scale is the minimum of a pareto
    assert _from_json('{"type": "outage", "attributes": {"duration_s": 60, "mode": "reset"}}') == Abort(0)
    assert isinstance(_from_json('{"type": "outage", "attributes": {"duration_s": 60, "mode": "error"}}'), Respond)


def test_limits_above_the_small_int_cache_are_compared_by_value():
    """300 is built at run time (not a shared constant), as counts and JSON numbers are."""
    three_hundred = int("300")
    spec = parse_fault({"type": "reset", "max_hits": int("300")})
    info = RequestInfo(1, "GET", "/")
    assert decide(spec, info, 1, 0.0, None, hits=299)[0].action == Abort(0)
    assert decide(spec, info, 1, 0.0, None, hits=three_hundred)[0].action is None  # exhausted
    assert decide(spec, info, 1, 0.0, None, hits=301)[0].action is None  # past the limit (it was lowered)
    full = ConcurrencyState(in_flight=three_hundred)
    assert isinstance(_from_json('{"type": "concurrency_limit", "attributes": {"max_in_flight": 300}}', state=full),
                      Respond)


def test_reset_without_stored_attributes_aborts_at_byte_zero():
    import dataclasses

    spec = dataclasses.replace(parse_fault({"type": "reset"}), attributes={})
    assert decide(spec, RequestInfo(1, "GET", "/"), 1, 0.0, None)[0].action == Abort(0)


def test_bound_messages_say_strict_or_not():
    with pytest.raises(FaultError) as e:
        parse_fault({"type": "latency", "attributes": {"latency_ms": 5, "distribution": "pareto", "alpha": 0}})
    assert e.value.message == "must be > 0.0 (got 0)"
    with pytest.raises(FaultError) as e:
        parse_fault({"type": "latency", "attributes": {"latency_ms": -1}})
    assert e.value.message == "must be >= 0.0 (got -1)"


def test_type_must_be_a_non_empty_string():
    for bad, message in (("", "is required"), (None, "is required"), (5, "is required")):
        with pytest.raises(FaultError) as e:
            parse_fault({"type": bad})
        assert (e.value.field, e.value.message) == ("type", message)


def test_a_negative_status_weight_below_one_is_refused():
    with pytest.raises(FaultError) as e:
        parse_fault({"type": "http_error", "attributes": {"statuses": {"500": 1, "503": -0.5}}})
    assert (e.value.field, e.value.message) == ("attributes.statuses", "weight for 503 must be a number >= 0")


def test_parsed_uniform_distribution_keeps_its_jitter():
    uniform = "".join(["uni", "form"])  # parsed from JSON: equal, not the interned literal
    assert parse_fault({"type": "latency", "attributes": {"latency_ms": 5, "distribution": uniform,
                                                          "jitter_ms": 2}}).attributes == {
        "distribution": "uniform", "latency_ms": 5.0, "jitter_ms": 2.0}


def test_pick_status_past_a_rounded_down_total_gives_the_last_status():
    # seven equal weights: the running sum of 1/7 ends at 0.9999999999999998, so the largest float below 1
    # falls past every bucket and the last (highest) status is the answer, not the second
    weights = {str(500 + i): 1.0 for i in range(7)}
    assert HttpError.pick_status(weights, 0.9999999999999999) == 506
    assert HttpError.pick_status(weights, 0.0) == 500


def test_unknown_attribute_of_a_fault_that_takes_none_says_none():
    with pytest.raises(FaultError) as e:
        parse_fault({"type": "blackhole", "attributes": {"status": 503}})
    assert e.value.field == "attributes.status"
    assert e.value.message == "unknown attribute for a blackhole fault; known: none"


def test_a_method_that_sorts_before_the_wildcard_is_still_a_method_list():
    """Only "*" (or nothing) means any method; "!" and "(GET)" are compared literally and match nothing."""
    get = RequestInfo(1, "GET", "/v1/retrieve")
    assert Match("*").matches(get) and Match(None).matches(get) and Match("get|post").matches(get)
    assert not Match("!").matches(get)
    assert not Match("(GET)").matches(get)
