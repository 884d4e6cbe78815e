"""prompts_hash (run.json's `prompts_hash`, llm-mock's health) covers every system prompt of services/common/prompts.py,
the ones added after it was written included (BEAM's nugget judge, the sufficiency judge)."""

from __future__ import annotations

import pytest

from services.common import prompts

NAMES = sorted(k for k, v in vars(prompts).items() if k.endswith("_SYSTEM") and isinstance(v, str))


def test_the_prompts_it_covers_include_the_late_ones():
    assert {"NUGGET_JUDGE_SYSTEM", "NUGGET_JUDGE_ONE_SYSTEM", "SUFFICIENCY_SYSTEM", "ANSWER_SYSTEM"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_a_change_to_any_system_prompt_changes_the_hash(monkeypatch, name):
    before = prompts.prompts_hash()
    monkeypatch.setattr(prompts, name, getattr(prompts, name) + " ")
    assert prompts.prompts_hash() != before
