"""Registers the `http` adapter once per shipped mapping (imported by registry.all_specs()). `http:cortex-mock`
starts the cortex-mock itself; the others expect their service at the mapping's base_url (or a `base_url`
option). None is in bench-all by default."""
from services.adapters.registry import BackendSpec, register

_MOD = "services.adapters.http"
_CLS = "services.adapters.http.backend:HttpBackend"

register(BackendSpec(
    "http:cortex-mock", _MOD, _CLS, config={"mapping": "cortex-mock"},
    description="cortex-mock through the generic HTTP adapter and its mapping file (no plugin client behaviour).",
    requires=("cortex-mock",), config_from_services=lambda urls: {"base_url": urls["cortex-mock"]}, default=False,
))
register(BackendSpec(
    "http:engram", _MOD, _CLS, config={"mapping": "engram"},
    description="An Engram-style agent server (/seed, /probe) you run yourself; base_url option.", default=False,
))
register(BackendSpec(
    "http:openclaw-cortex", _MOD, _CLS, config={"mapping": "openclaw-cortex"},
    description="ajitpratap0/openclaw-cortex REST API (Go, Memgraph) you run yourself; base_url option.",
    default=False,
))
