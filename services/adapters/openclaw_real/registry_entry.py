"""Registers `openclaw-real` (OpenClaw 2026.9.6 itself) with the backend registry."""
from services.adapters.registry import BackendSpec, register


def _available() -> tuple[bool, str]:
    from services.adapters.openclaw_real.node import availability

    a = availability()
    return a.ok, a.reason


_MOD, _CLS = "services.adapters.openclaw_real", "services.adapters.openclaw_real.backend:OpenClawRealBackend"

register(BackendSpec(
    "openclaw-real", _MOD, _CLS, config={"preset": "openclaw", "profile": "default"},
    description="OpenClaw 2026.9.6 itself (its memory manager in a Node sidecar) over the memory a real install "
                "holds (profile default: threshold flush, session-memory hook files, transcripts indexed).",
    available=_available, role="native",
))
# The other profiles of a real install run in bench-all beside it, so every verdict can name the strongest native.
for _profile, _what in (("sessions", "default + memory_search over the session transcripts"),
                        ("flush-every-session", "the idealisation: a flush after every session, MEMORY.md by rule")):
    register(BackendSpec(
        f"openclaw-real[profile={_profile}]", _MOD, _CLS, config={"preset": "openclaw", "profile": _profile},
        description=f"OpenClaw 2026.9.6 itself, profile {_profile}: {_what}.", available=_available, role="native",
    ))
