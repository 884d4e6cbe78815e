"""Every backend the rig ships, by name: where its class lives, its preset config, what it depends on.

The controls and IR baselines are registered below; every other adapter is a folder of services/adapters with a
`registry_entry.py` that registers its backends, found by `discover` (a folder whose entry does not import is
reported with the reason by `load_errors`, `memrig list` and an unknown-backend error). Add your own Python
backend as such a folder (or run any-language backends yourself and pass `--target HOST:PORT`).
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
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
    # Whether it can run on this machine: () -> (ok, reason). bench-all skips an unavailable backend and says why.
    available: Callable[[], tuple[bool, str]] | None = None
    # What it is in a comparison (ROLES): the baseline every verdict compares with is chosen by role
    # (services/coordinator/baseline.py), never by name.
    role: str = "memory"

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"backend {self.name}: role {self.role!r} is not one of {sorted(ROLES)}")

    def load_class(self):
        mod, _, name = self.cls.partition(":")
        return getattr(importlib.import_module(mod), name)


_SPECS: dict[str, BackendSpec] = {}

# native: OpenClaw itself (any profile); native-port: the rig's re-implementation of the current release;
# native-release: the port at another release or with a known bug (shown beside native, never the baseline);
# ir-baseline: BM25 / dense / hybrid over one document per message; control: no memory, everything, a summary;
# memory: a memory system under test (yours, Cortex, Mem0, ...).
ROLES = {"native": "OpenClaw native", "native-port": "OpenClaw native (port)",
         "native-release": "OpenClaw native, another release", "ir-baseline": "IR baseline", "control": "control",
         "memory": "memory system"}


def register(spec: BackendSpec) -> BackendSpec:
    _SPECS[spec.name] = spec
    return spec


register(BackendSpec(
    "none", "services.adapters.none", "services.adapters.none.backend:NoMemoryBackend",
    description="Control: no memory at all (fresh session every time).", role="control",
))
register(BackendSpec(
    "full-context", "services.adapters.full_context", "services.adapters.full_context.backend:FullContextBackend",
    description="Control: everything ingested returned as static context (AGENTS.md-style), cut to a token budget.",
    role="control",
))
register(BackendSpec(
    "compacted", "services.adapters.compacted", "services.adapters.compacted.backend:CompactedBackend",
    description="Control: a one-shot compaction summary made through the LLM client (OpenClaw /compact).",
    role="control",
))

for _method, _what in (("bm25", "Okapi BM25 (k1 1.2, b 0.75)"), ("dense", "embedder cosine over \"[date] text\""),
                       ("hybrid", "RRF (k 60) of BM25 and dense")):
    register(BackendSpec(
        _method, "services.adapters.ir_baselines", "services.adapters.ir_baselines.backend:IRBaselineBackend",
        config={"method": _method},
        description=f"Control IR baseline: {_what} over one document per message.", role="ir-baseline",
    ))


# BM25 as LongMemEval's own retrieval code runs it (ir_baselines/ranking.py), so a LongMemEval figure can be set
# beside the official one; not in bench-all's default set.
register(BackendSpec(
    "bm25-official", "services.adapters.ir_baselines", "services.adapters.ir_baselines.backend:IRBaselineBackend",
    config={"method": "bm25", "bm25_tokens": "official", "bm25_scoring": "okapi", "k1": 1.5, "b": 0.75,
            "bm25_epsilon": 0.25,
            "stopwords": "none", "index_roles": "user", "rank_all": True},
    description="Control IR baseline: BM25 as LongMemEval's code runs it (split on spaces, case kept, rank_bm25 "
                "BM25Okapi k1 1.5 b 0.75) over the user turns.", role="ir-baseline", default=False,
))


ADAPTERS_DIR = Path(__file__).resolve().parent
# Listing order: the controls, the IR baselines, OpenClaw's port, its other releases, OpenClaw itself, then the
# memory systems; within a role, the order of registration (folders alphabetically).
_ROLE_ORDER = ("control", "ir-baseline", "native-port", "native-release", "native", "memory")
_DISCOVERED = False
_LOAD_ERRORS: dict[str, str] = {}  # adapter folder -> why its registry_entry.py did not import


def discover(root: Path = ADAPTERS_DIR, package: str = "services.adapters") -> dict[str, str]:
    """Import `<package>.<folder>.registry_entry` for every folder of `root` that has a registry_entry.py (each
    registers its backends on import); returns {folder: "Type: message"} for those whose import raised, so a broken
    adapter is named with its reason (`memrig list`, an unknown-backend error) instead of vanishing."""
    errors = {}
    for entry in sorted(root.glob("*/registry_entry.py")):
        folder = entry.parent.name
        try:
            importlib.import_module(f"{package}.{folder}.registry_entry")
        except Exception as e:  # reported by name; the other adapters still load
            errors[folder] = f"{type(e).__name__}: {e}"
    return errors


def load_errors() -> dict[str, str]:
    """{adapter folder: why it did not load} (empty when every adapter loaded)."""
    all_specs()
    return dict(_LOAD_ERRORS)


def all_specs() -> dict[str, BackendSpec]:
    global _DISCOVERED
    if not _DISCOVERED:
        _DISCOVERED = True
        _LOAD_ERRORS.update(discover())
    return dict(sorted(_SPECS.items(), key=lambda kv: _ROLE_ORDER.index(kv[1].role)))


def role_of(name: str | None) -> str:
    """The comparison role (ROLES) of a backend name or variant (`openclaw-real[profile=sessions]` is OpenClaw
    itself); a name the registry does not know (a `--target`, your own system) is a memory system."""
    if not name:
        return "memory"
    specs = all_specs()
    spec = specs.get(name) or specs.get(parse_variant(name)[0])
    return spec.role if spec is not None else "memory"


_VARIANT_RE = re.compile(r"^([A-Za-z0-9_.:-]+)\[(.*)\]$")


def parse_variant(name: str) -> tuple[str, dict[str, Any]]:
    """`openclaw[embedder=wordllama,min_score=0.25]` → ("openclaw", {"embedder": "wordllama", "min_score": 0.25}).
    A plain name has no overrides. Values parse as JSON when they can (numbers, true/false), else stay strings."""
    m = _VARIANT_RE.match(name)
    if not m:
        return name, {}
    overrides: dict[str, Any] = {}
    for part in (x.strip() for x in m.group(2).split(",")):
        k, sep, v = part.partition("=")
        if not sep or not k.strip():
            raise KeyError(f"backend {name!r}: expected name[key=value,...], got {part!r}")
        try:
            overrides[k.strip()] = json.loads(v)
        except ValueError:
            overrides[k.strip()] = v.strip()
    return m.group(1), overrides


def split_names(s: str | None) -> list[str]:
    """A comma-separated list of backend names, where a variant's own commas stay inside its brackets:
    `bm25,openclaw-real[profile=default,context_window=32768]` → two names."""
    out, cur, depth = [], [], 0
    for ch in s or "":
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return [x.strip() for x in out if x.strip()]


def get_spec(name: str) -> BackendSpec:
    """A registered backend, or a variant of one with config overrides: `openclaw[embedder=wordllama]` runs the
    `openclaw` backend with `embedder: "wordllama"` under its own name, beside the plain one in the same run."""
    specs = all_specs()
    if name in specs:  # a variant registered under its own name (e.g. a profile bench-all runs by default)
        return specs[name]
    base, overrides = parse_variant(name)
    if base not in specs:
        broken = "".join(f"; adapter folder {f} did not load ({why})" for f, why in sorted(_LOAD_ERRORS.items()))
        raise KeyError(f"unknown backend {base!r}; known: {', '.join(sorted(specs))}{broken}")
    if not overrides:
        return specs[base]
    spec = specs[base]
    return replace(spec, name=name, config={**spec.config, **overrides}, default=False)


def default_backends() -> list[str]:
    return [n for n, s in all_specs().items() if s.default]
