"""Every backend the rig ships, by name: where its class lives, its preset config, what it depends on.

Add your own Python backend here (or run any-language backends yourself and pass `--target HOST:PORT`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class BackendSpec:
    name: str
    module: str  # `python -m <module>` serves it
    cls: str  # "package.module:Class"
    config: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    # Other rig services it needs running first (names in services.launcher.SERVICES).
    requires: tuple[str, ...] = ()
    # Builds config entries from the addresses of the required services: {"service": "http://..."}.
    config_from_services: Callable[[dict[str, str]], dict[str, Any]] | None = None
    # Whether `make bench-all` includes it by default.
    default: bool = True

    def load_class(self):
        mod, _, name = self.cls.partition(":")
        return getattr(importlib.import_module(mod), name)


_SPECS: dict[str, BackendSpec] = {}


def register(spec: BackendSpec) -> BackendSpec:
    _SPECS[spec.name] = spec
    return spec


register(BackendSpec(
    "none", "services.adapters.none", "services.adapters.none.backend:NoMemoryBackend",
    description="Control: no memory at all (fresh session every time).",
))
register(BackendSpec(
    "full-context", "services.adapters.full_context", "services.adapters.full_context.backend:FullContextBackend",
    description="Control: everything ingested returned as static context (AGENTS.md-style), cut to a token budget.",
))
register(BackendSpec(
    "compacted", "services.adapters.compacted", "services.adapters.compacted.backend:CompactedBackend",
    description="Control: a one-shot compaction summary made through the LLM client (OpenClaw /compact).",
))


def _optional_specs() -> None:
    """Backends whose modules may not exist yet in a partial checkout register themselves on import."""
    for mod in ("services.adapters.openclaw.registry_entry", "services.adapters.cortex.registry_entry",
                "services.adapters.quaid.registry_entry", "services.adapters.mem0.registry_entry",
                "services.adapters.memory_hook.registry_entry",
                "services.adapters.http.registry_entry", "services.adapters.mem0_oss.registry_entry",
                "services.adapters.octybot.registry_entry"):
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name is None or not mod.startswith(e.name):
                raise


def all_specs() -> dict[str, BackendSpec]:
    _optional_specs()
    return dict(_SPECS)


def get_spec(name: str) -> BackendSpec:
    specs = all_specs()
    if name not in specs:
        raise KeyError(f"unknown backend {name!r}; known: {', '.join(sorted(specs))}")
    return specs[name]


def default_backends() -> list[str]:
    return [n for n, s in all_specs().items() if s.default]
