"""Registers `openclaw-real` (OpenClaw 2026.9.6 itself) with the backend registry."""
from services.adapters.registry import BackendSpec, register


def _available() -> tuple[bool, str]:
    from services.adapters.openclaw_real.node import availability

    a = availability()
    return a.ok, a.reason


register(BackendSpec(
    "openclaw-real", "services.adapters.openclaw_real", "services.adapters.openclaw_real.backend:OpenClawRealBackend",
    config={"preset": "openclaw"},
    description="OpenClaw 2026.9.6 itself (its memory manager in a Node sidecar) over the port's workspace files.",
    available=_available,
))
