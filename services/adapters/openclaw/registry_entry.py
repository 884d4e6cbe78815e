"""Registers the OpenClaw baseline presets with the backend registry (imported by registry.all_specs())."""
from services.adapters.registry import BackendSpec, register

_MOD = "services.adapters.openclaw"
_CLS = "services.adapters.openclaw.backend:OpenClawBackend"

register(BackendSpec(
    "openclaw", _MOD, _CLS, config={"preset": "openclaw"},
    description="OpenClaw native memory, late-2026 search (fixed BM25 mapping, MMR + decay on, spare slots).",
))
register(BackendSpec(
    "openclaw-2026-02", _MOD, _CLS, config={"preset": "openclaw-2026-02"},
    description="OpenClaw native memory as of Feb 2026 (every FTS hit scores 1.0; MMR and decay off).",
))
register(BackendSpec(
    "openclaw-flush-skip", _MOD, _CLS, config={"preset": "openclaw", "flush_skip_rate": 0.5},
    description="OpenClaw native memory with the every-other-cycle flush bug (50% of flushes skipped).",
    default=False,
))
