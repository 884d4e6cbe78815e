"""Registers `cortex` (full-mode recall) and `cortex-fast` with the backend registry. Both talk to the
cortex-mock through the fault proxy when the rig starts them (imported by registry.all_specs())."""
from services.adapters.registry import BackendSpec, register

_MOD = "services.adapters.cortex"
_CLS = "services.adapters.cortex.backend:CortexBackend"


def _through_proxy(urls: dict[str, str]) -> dict[str, str]:
    return {"base_url": urls["fault-proxy"]}


register(BackendSpec(
    "cortex", _MOD, _CLS, config={"mode": "full"},
    description="Cortex API (mock, via the fault proxy) with the plugin's client: full-mode recall, "
                "2 s budget, cold-start gate, RetryQueue capture, <cortex_memories> envelope.",
    requires=("cortex-mock", "fault-proxy"), config_from_services=_through_proxy,
))
register(BackendSpec(
    "cortex-fast", _MOD, _CLS, config={"mode": "fast"},
    description="As `cortex`, with fast-mode recall (BM25 + semantic + RRF, no graph/rerank).",
    requires=("cortex-mock", "fault-proxy"), config_from_services=_through_proxy,
))
