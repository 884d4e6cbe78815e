"""Every "X vs native" comparison is against the strongest OpenClaw native profile of the suite, named, chosen by
one rule (services/coordinator/baseline.py) from the backends' registry roles and the metric registry's direction."""

from __future__ import annotations

import pytest

from services.adapters.registry import BackendSpec, role_of
from services.coordinator.baseline import choose, direction, means_of
from services.coordinator.suites.common import baseline_note
from services.coordinator.suites.cortex_v1 import strongest_native

PER = {
    "bm25": {"budget_recall@1000": {"q1": 0.9, "q2": 0.9}},
    "openclaw": {"budget_recall@1000": {"q1": 0.8, "q2": 0.8}},
    "openclaw-real": {"budget_recall@1000": {"q1": 0.1, "q2": 0.3}},  # mean 0.2
    "openclaw-real[profile=sessions]": {"budget_recall@1000": {"q1": 0.5, "q2": None, "q3": 0.3}},  # mean 0.4
    "openclaw-real[profile=flush-every-session]": {"budget_recall@1000": {"q1": 0.2, "q2": 0.2}},  # mean 0.2
}
M = "budget_recall@1000"


def test_roles_come_from_the_registry():
    assert [role_of(b) for b in ("openclaw-real", "openclaw-real[profile=sessions]", "openclaw",
                                 "openclaw[embedder=wordllama]", "openclaw-2026-02", "bm25", "hybrid", "none",
                                 "full-context", "cortex", "my-own-system")] == [
        "native", "native", "native-port", "native-port", "native-release", "ir-baseline", "ir-baseline",
        "control", "control", "memory", "memory"]
    with pytest.raises(ValueError, match="role 'judge' is not one of"):
        BackendSpec("x", "m", "m:C", role="judge")


def test_strongest_real_profile_wins_and_the_port_only_without_it():
    assert means_of(PER, M)["openclaw-real[profile=sessions]"] == pytest.approx(0.4)
    cond, rule = choose(PER, None, means_of(PER, M), M)
    assert cond == "openclaw-real[profile=sessions]" and rule.startswith("the strongest OpenClaw native condition on "
                                                                          "budget_recall@1000")
    # The port scores higher (0.8) but OpenClaw itself ran: the baseline is OpenClaw's strongest profile.
    no_real = {k: v for k, v in PER.items() if not k.startswith("openclaw-real")}
    assert choose(no_real, None, means_of(no_real, M), M)[0] == "openclaw"
    assert choose(["bm25", "compacted", "full-context"])[0] == "full-context"
    assert choose(["bm25", "dense"]) == ("bm25", "no OpenClaw native profile or control ran: the first condition by "
                                                 "name")
    assert choose([]) == (None, "no condition ran")
    assert choose(["bm25", "openclaw"], fallback_to_control=False)[0] == "openclaw"
    assert choose(["bm25", "full-context"], fallback_to_control=False) == (None, "no OpenClaw native backend ran")
    # Without metric values: the plain backend of the family.
    assert choose(list(PER))[0] == "openclaw-real"
    assert choose(["openclaw-real[profile=sessions]", "bm25"])[0] == "openclaw-real[profile=sessions]"


def test_the_direction_is_the_registrys():
    lat = {"openclaw-real": {"uncontained": {"a": 0.5}}, "openclaw-real[profile=sessions]": {"uncontained": {"a": 0.1}}}
    assert direction("uncontained") is False
    assert choose(lat, None, means_of(lat, "uncontained"), "uncontained")[0] == "openclaw-real[profile=sessions]"
    with pytest.raises(KeyError, match="'made_up' is not in the metric registry"):
        choose(lat, None, {}, "made_up")


def test_strongest_ties_go_to_the_plain_name_then_name_order():
    tie = {"openclaw-real": {M: {"a": 0.2}}, "openclaw-real[profile=flush-every-session]": {M: {"a": 0.2}},
           "openclaw-real[profile=sessions]": {M: {}}}
    assert choose(tie, None, means_of(tie, M), M)[0] == "openclaw-real"
    tie.pop("openclaw-real")
    assert choose(tie, None, means_of(tie, M), M)[0] == "openclaw-real[profile=flush-every-session]"


def test_cortex_v1_strongest_native_label():
    backend_of = {"OpenClaw native": "openclaw-real", "OpenClaw native [profile=sessions]":
                  "openclaw-real[profile=sessions]", "OpenClaw native (port)": "openclaw", "compacted + bm25": "bm25"}
    conds = {"compacted": {"mean": 2.9}, "OpenClaw native": {"mean": 2.1},
             "OpenClaw native [profile=sessions]": {"mean": 2.5}, "OpenClaw native (port)": {"mean": 2.8},
             "compacted + bm25": {"mean": 2.6}}
    assert strongest_native(conds, backend_of) == "OpenClaw native [profile=sessions]"
    assert strongest_native({"OpenClaw native (port)": {"mean": 1.0}, "bare": {"mean": 0.5}}, backend_of) == \
        "OpenClaw native (port)"
    assert strongest_native({"compacted": {"mean": 2.0}}, backend_of) is None  # a control is never "native"
    assert strongest_native({"OpenClaw native": {"mean": 2.0}, "OpenClaw native [profile=x]": {"mean": 2.0}},
                            {**backend_of, "OpenClaw native [profile=x]": "openclaw-real[profile=x]"}) == \
        "OpenClaw native"


def test_baseline_note_names_it():
    assert baseline_note({"baseline": "openclaw-real[profile=sessions]", "baseline_rule": "the strongest"}) == \
        ["", "Every scorecard below is against **openclaw-real[profile=sessions]**: the strongest."]
    assert baseline_note({}) == []


def test_the_rule_says_when_no_native_profile_ran():
    cond, rule = choose(["octybot", "octybot-real"])
    assert cond == "octybot" and rule.startswith("no OpenClaw native profile or control ran")
