"""Every "X vs native" comparison is against the strongest OpenClaw native profile of the suite, named."""

from __future__ import annotations

from services.coordinator.suites.common import baseline_note
from services.coordinator.suites.cortex_v1 import strongest_native
from services.coordinator.suites.locomo import _baseline, baseline_rule, strongest

PER = {
    "bm25": {"turn_recall@5": {"q1": 0.9, "q2": 0.9}},
    "openclaw": {"turn_recall@5": {"q1": 0.8, "q2": 0.8}},
    "openclaw-real": {"turn_recall@5": {"q1": 0.1, "q2": 0.3}},  # mean 0.2
    "openclaw-real[profile=sessions]": {"turn_recall@5": {"q1": 0.5, "q2": None, "q3": 0.3}},  # mean 0.4
    "openclaw-real[profile=flush-every-session]": {"turn_recall@5": {"q1": 0.2, "q2": 0.2}},  # mean 0.2
}


def test_strongest_real_profile_wins_and_the_port_only_without_it():
    assert _baseline(list(PER), PER, "turn_recall@5") == "openclaw-real[profile=sessions]"
    # The port scores higher (0.8) but OpenClaw itself ran: the baseline is OpenClaw's strongest profile.
    no_real = {k: v for k, v in PER.items() if not k.startswith("openclaw-real")}
    assert _baseline(list(no_real), no_real, "turn_recall@5") == "openclaw"
    assert _baseline(["bm25", "compacted", "full-context"]) == "full-context"
    assert _baseline(["bm25", "dense"]) == "bm25"
    assert _baseline([]) is None
    # Without metric values: the plain backend of the family.
    assert _baseline(list(PER)) == "openclaw-real"
    assert _baseline(["openclaw-real[profile=sessions]", "bm25"]) == "openclaw-real[profile=sessions]"


def test_strongest_ties_go_to_the_plain_name_then_name_order():
    tie = {"openclaw-real": {"m": {"a": 0.2}}, "openclaw-real[profile=flush-every-session]": {"m": {"a": 0.2}},
           "openclaw-real[profile=sessions]": {"m": {}}}
    assert strongest(list(tie), tie, "m") == "openclaw-real"
    tie.pop("openclaw-real")
    assert strongest(list(tie), tie, "m") == "openclaw-real[profile=flush-every-session]"


def test_cortex_v1_strongest_native_label():
    conds = {"compacted": {"mean": 2.9}, "OpenClaw native": {"mean": 2.1},
             "OpenClaw native [profile=sessions]": {"mean": 2.5}, "OpenClaw native (port)": {"mean": 2.8},
             "compacted + bm25": {"mean": 2.6}}
    assert strongest_native(conds) == "OpenClaw native [profile=sessions]"
    assert strongest_native({"OpenClaw native (port)": {"mean": 1.0}, "bare": {"mean": 0.5}}) == "OpenClaw native (port)"
    assert strongest_native({"OpenClaw native": {"mean": None}}) is None
    assert strongest_native({"OpenClaw native": {"mean": 2.0}, "OpenClaw native [profile=x]": {"mean": 2.0}}) == \
        "OpenClaw native"


def test_baseline_note_names_it():
    assert baseline_note({"baseline": "openclaw-real[profile=sessions]", "baseline_rule": "the strongest"}) == \
        ["", "Every scorecard below is against **openclaw-real[profile=sessions]**: the strongest."]
    assert baseline_note({}) == []


def test_the_baseline_rule_says_when_no_native_profile_ran():
    native = baseline_rule("recall@5", "openclaw-real[profile=sessions]")
    assert native.startswith("the strongest OpenClaw native profile on recall@5")
    assert baseline_rule("recall@5", "openclaw") == native == baseline_rule("recall@5")
    conds = ["octybot", "octybot-real"]
    assert _baseline(conds) == "octybot"
    assert baseline_rule("recall@5", _baseline(conds)).startswith("no OpenClaw native profile ran")
