"""A two-session fixture for the OpenClaw lifecycle tests (the port's and openclaw-real's profiles)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from services.common.types import Message, Session

T0 = datetime(2026, 3, 1, 11, 0, tzinfo=UTC)
S1 = Session("s1", T0, (
    Message("s1-m0", "user", "The dev server runs on port 3001.", T0),
    Message("s1-m1", "assistant", "Noted: port 3001.", T0 + timedelta(minutes=1)),
    Message("s1-m2", "user", "We chose pnpm because it is faster.", T0 + timedelta(minutes=2)),
))
S2 = Session("s2", T0 + timedelta(days=2), (
    Message("s2-m0", "user", "/status", T0 + timedelta(days=2)),
    Message("s2-m1", "assistant", 'Deploys go out on "Thursdays".', T0 + timedelta(days=2, minutes=3)),
))


def ms(dt: datetime) -> int:
    """Epoch milliseconds, as OpenClaw stamps its files."""
    return int(dt.timestamp() * 1000)
