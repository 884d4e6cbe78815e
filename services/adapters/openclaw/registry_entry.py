"""Registers the OpenClaw baseline presets with the backend registry (imported by registry.all_specs())."""
from services.adapters.registry import BackendSpec, register

_MOD = "services.adapters.openclaw"
_CLS = "services.adapters.openclaw.backend:OpenClawBackend"

register(BackendSpec(
    "openclaw", _MOD, _CLS, config={"preset": "openclaw", "profile": "default"},
    description="OpenClaw native memory as released in openclaw 2026.9.6 (per-bullet MEMORY.md, boosted keyword "
                "legs with fallback terms, filename search, 200 candidates, keyword preservation), over the memory "
                "files a real install holds (profile default).",
    role="native-port",
))
register(BackendSpec(
    "openclaw-2026-02", _MOD, _CLS, config={"preset": "openclaw-2026-02"},
    description="OpenClaw native memory as of Feb 2026 (every FTS hit scores 1.0; MMR and decay off).",
    role="native-release",
))
register(BackendSpec(
    "openclaw-2026-09", _MOD, _CLS, config={"preset": "openclaw-2026-09"},
    description="OpenClaw native memory of openclaw 2026.9.6 (the same as `openclaw`, by its release name).",
    default=False,
    role="native-release",
))
register(BackendSpec(
    "openclaw-late", _MOD, _CLS, config={"preset": "openclaw-late"},
    description="OpenClaw native memory, mid-2026 main (fixed BM25 mapping, MMR + decay, spare slots; before 2026.9).",
    default=False,
    role="native-release",
))
register(BackendSpec(
    "openclaw-flush-skip", _MOD, _CLS, config={"preset": "openclaw", "profile": "flush-every-session",
                                               "flush_skip_rate": 0.5},
    description="OpenClaw native memory with the every-other-cycle flush bug (50% of flushes skipped).",
    default=False,
    role="native-release",
))
