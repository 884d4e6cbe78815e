"""openclaw-real and the OpenClaw port side by side on the same workspaces (`memrig fidelity` and `memrig sensitivity`).

Each suite's corpora go through openclaw-real once (the flush notes come from the rig's LLM client, the hook files and
transcripts from OpenClaw's own code); the port adopts the workspace that produced (`adopt_workspace`: it indexes
exactly those files with the same embedder and cache), so any difference between them is search logic.
"""

from __future__ import annotations

import json
import time
from collections.abc import Hashable, Iterable
from pathlib import Path
from typing import Any


def overlap(port: Iterable[Hashable], real: Iterable[Hashable]) -> float:
    """|P ∩ R| / max(|P|, |R|) over result identities, 1 when both are empty: every `memrig fidelity` study's
    agreement between a re-implementation's results and the real system's."""
    p, r = set(port), set(real)
    if not p and not r:
        return 1.0
    return len(p & r) / max(len(p), len(r))


class PairedOpenClaw:
    """openclaw-real and the port, started together on one embedder, fed the same workspaces: `ingest` sends a
    corpus through openclaw-real (flush notes from the rig's LLM) and has the port index that very `Workspace`."""

    def __init__(self, out: Path, embedder: str, preset: str, with_real: bool = True, profile: str = "default"):
        self.out, self.embedder, self.preset, self.with_real = out, embedder, preset, with_real
        self.profile = profile
        self.real = self.port = None
        self.rig = None

    async def __aenter__(self) -> PairedOpenClaw:
        from services.adapters.base import BackendContext
        from services.adapters.openclaw.backend import OpenClawBackend
        from services.adapters.openclaw_real.backend import OpenClawRealBackend
        from services.launcher import Rig

        self.out.mkdir(parents=True, exist_ok=True)
        self.rig = Rig(self.out / "procs")
        try:
            llm_url = await self.rig.ensure_llm()
            ctx = dict(embedder_name=None if self.embedder == "none" else self.embedder, data_dir=self.out / "data",
                       llm_base_url=llm_url)
            self.port = OpenClawBackend({"embedder": self.embedder, "preset": self.preset, "profile": self.profile},
                                        BackendContext(**ctx))
            await self.port.start()
            if self.with_real:
                self.real = OpenClawRealBackend({"embedder": self.embedder, "profile": self.profile},
                                                BackendContext(**ctx))
                await self.real.start()
        except BaseException:
            await self.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(self, *exc) -> None:
        for b in (self.port, self.real):
            if b is not None:
                await b.close()
                await b.context.close()
        if self.rig is not None:
            self.rig.stop_all()

    async def ingest(self, key: str, batch) -> None:
        if self.real is None:
            await self.port.ingest(key, batch)
            return
        await self.real.ingest(key, batch)
        await self.port.adopt_workspace(key, self.real.workspace_state(key), batch)


def load_suite(name: str, options: dict[str, Any], seed: int):
    """(suite, data) or (None, reason) when the suite cannot run here (e.g. its real data is absent)."""
    from services.coordinator.suites.base import SuiteUnavailable
    from services.coordinator.suites.registry import get_suite

    suite = get_suite(name)(options, seed=seed)
    try:
        return suite, suite.load()
    except SuiteUnavailable as e:
        return None, str(e)


async def ingested_suites(pair: PairedOpenClaw, suites: list[str], options: dict[str, dict[str, Any]], seed: int,
                          skipped: dict[str, str]):
    """Yields (name, suite, data, t0) once each suite's corpora are in both backends; unavailable suites go to
    `skipped` with the reason."""
    for name in suites:
        suite, data = load_suite(name, options.get(name, {}), seed)
        if suite is None:
            skipped[name] = data
            continue
        t0 = time.perf_counter()
        for ns, batch in data.corpora.items():
            await pair.ingest(f"{name}/{ns}", batch)
        yield name, suite, data, t0


def parse_options(pairs: list[str]) -> dict[str, dict[str, Any]]:
    """`suite.key=value` → {suite: {key: value}} (values parsed as JSON when they parse, else strings)."""
    out: dict[str, dict[str, Any]] = {}
    for pair in pairs:
        k, sep, v = pair.partition("=")
        suite, dot, key = k.partition(".")
        if not sep or not dot or not suite or not key:
            raise ValueError(f"--option {pair!r}: expected suite.key=value, e.g. locomo.conversations=1")
        try:
            val: Any = json.loads(v)
        except ValueError:
            val = v
        out.setdefault(suite, {})[key] = val
    return out
