"""One replay for two backends: a backend whose stored state another backend of the run already holds, searched
another way, is answered from that backend's state (RetrieveQuery.view) instead of ingesting the same conversation
again.

The case it exists for: OpenClaw's `default` and `sessions` profiles write the same files and transcripts from a
conversation (services/adapters/openclaw/lifecycle.same_writes) and differ only in what memory_search searches, so
`make bench-all` replayed every conversation through OpenClaw twice for identical state (a quarter of its time,
issue 46). A backend says what it can serve in Describe: `replay` (a key: equal keys, equal state), `profile` (the
view it is) and `views` (the views its state answers). tests/test_openclaw_real_views.py holds each view's lists
equal to a backend of that profile's own, to the last bit.

The rule (`plan`): backend B rides on backend A when both were started for this run and are measured (neither
failed nor reused), they give the same replay key, A lists B's profile among its views, and A ingests every
namespace B has probes in (a resumed run where A finished a namespace B did not: B replays its own). B's process
still runs (its Describe is B's), but it ingests nothing; its probes go to A's state, right after A's own probes of
the same namespace and before A releases it. Its cost records are A's replay (what an install of B pays is the same
replay), marked `replay_of`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from services.common.types import RetrieveQuery


def _caps(describe: dict[str, Any] | None) -> dict[str, str]:
    return {c["name"]: c["detail"] for c in (describe or {}).get("capabilities") or []}


def plan(backends: list[str], describes: dict[str, dict[str, Any]], started: set[str], measured: set[str],
         namespaces: dict[str, set[str]]) -> dict[str, tuple[str, str]]:
    """{B: (A, view)}: the backends answered from another's replay (see the module docstring). `backends` in the
    run's order (the first of equals is the one that replays), `started` those with a client, `measured` those
    neither failed nor reused, `namespaces` per backend the namespaces it has probes in."""
    out: dict[str, tuple[str, str]] = {}
    hosts: list[str] = []
    for b in backends:
        if b not in started or b not in measured:
            continue
        caps = _caps(describes.get(b))
        key, view = caps.get("replay"), caps.get("profile")
        host = next((a for a in hosts if key and view and _caps(describes.get(a)).get("replay") == key
                     and view in _caps(describes.get(a)).get("views", "").split(",")
                     and namespaces.get(b, set()) <= namespaces.get(a, set())), None)
        if host is None:
            hosts.append(b)
        else:
            out[b] = (host, view)
    return out


class ViewClient:
    """B's client for the probes: A's, with B's view on every Retrieve. B's ingest is A's, so nothing else is
    forwarded (an ingest or reset through it is a bug in the caller, refused)."""

    def __init__(self, host: Any, host_name: str, view: str):
        self.host, self.host_name, self.view = host, host_name, view

    async def retrieve(self, namespace: str, query: RetrieveQuery):
        return await self.host.retrieve(namespace, replace(query, view=self.view))

    async def prepare(self, namespace: str):
        return await self.host.prepare(namespace)

    def __getattr__(self, name: str):
        raise AttributeError(f"a view of {self.host_name} ({self.view!r}) only retrieves; {name} is {self.host_name}'s")


def shared_record(host_rec: dict[str, Any], host: str) -> dict[str, Any]:
    """A cost record of B's namespace from A's: the replay's counts and times, marked as A's."""
    keep = {k: v for k, v in host_rec.items() if k not in ("retrieve_ms", "release_s", "release_error")}
    return {**keep, "replay_of": host}
