"""Quality suites by name. A suite module registers its class here on import."""

from __future__ import annotations

import importlib

from services.coordinator.suites.base import Suite

_SUITES: dict[str, type[Suite]] = {}

# Modules that define suites; a missing optional module (partial checkout) is skipped.
SUITE_MODULES = (
    "services.coordinator.suites.cortex_v1",
    "services.coordinator.suites.arclight",
    "services.coordinator.suites.quaid_weeks",
    "services.coordinator.suites.octybot",
    "services.coordinator.suites.locomo",
    "services.coordinator.suites.longmemeval",
    "services.coordinator.suites.madial",
    "services.coordinator.suites.poisoned_memory",
    "services.coordinator.suites.nextjs_docs",
    "services.coordinator.suites.beam",
)


def register(cls: type[Suite]) -> type[Suite]:
    _SUITES[cls.name] = cls
    return cls


def all_suites() -> dict[str, type[Suite]]:
    for mod in SUITE_MODULES:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name != mod:
                raise
    return dict(_SUITES)


def get_suite(name: str) -> type[Suite]:
    suites = all_suites()
    if name not in suites:
        raise KeyError(f"unknown suite {name!r}; known: {', '.join(sorted(suites))}")
    return suites[name]
