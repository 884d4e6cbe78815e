"""The blind pairwise judge (prompts.PAIRWISE_JUDGE_SYSTEM): which of two responses answers better.

Input: "Question: ...\nGround truth: ...\nResponse X: ...\nResponse Y: ...". Each response is graded alone
with the 0-3 rubric (judge.grade); the higher score wins, equal scores are a TIE. Order and length play
no part, as the prompt asks, because each grade looks only at one response. Output: `{"winner": "X"|"Y"|"TIE"}`.
"""

from __future__ import annotations

import json

from services.llm_mock.judge import grade
from services.llm_mock.text import parse_fields

PAIRWISE_LABELS = {
    "question": ("Question",),
    "truth": ("Ground truth", "Gold answer"),
    "x": ("Response X",),
    "y": ("Response Y",),
}


def winner(question: str, truth: str, x: str, y: str) -> str:
    sx = grade(question, truth, x)[0]
    sy = grade(question, truth, y)[0]
    return "X" if sx > sy else "Y" if sy > sx else "TIE"


def respond(user_text: str) -> str:
    f = parse_fields(user_text, PAIRWISE_LABELS)
    return json.dumps({"winner": winner(f["question"], f["truth"], f["x"], f["y"])})
