"""One replay for two backends (services/coordinator/views.py): which backend rides on which, what its client
forwards, and (slow, real OpenClaw) that a run where `openclaw-real[profile=sessions]` rides on `openclaw-real`
records the same retrievals for it as a run where it replays on its own."""

from __future__ import annotations

import asyncio
import json

import pytest

from services.common.types import RetrieveQuery
from services.coordinator import views as V


def _d(key: str | None, profile: str | None, views: str | None = None) -> dict:
    caps = [{"name": "sessions", "detail": ""}]
    for name, val in (("replay", key), ("profile", profile), ("views", views)):
        if val is not None:
            caps.append({"name": name, "detail": val})
    return {"capabilities": caps}


NS = {"a": {"n1", "n2"}, "b": {"n1", "n2"}, "c": {"n1"}, "x": {"n1", "n2"}}


def test_the_first_of_equal_replays_replays_and_the_others_ride_on_it():
    d = {"a": _d("k", "default", "sessions"), "b": _d("k", "sessions", "default"), "x": _d(None, None)}
    assert V.plan(["a", "b", "x"], d, {"a", "b", "x"}, {"a", "b", "x"}, NS) == {"b": ("a", "sessions")}
    # the order of the run decides which one replays
    assert V.plan(["b", "a"], d, {"a", "b"}, {"a", "b"}, NS) == {"a": ("b", "default")}


def test_no_ride_without_every_condition():
    d = {"a": _d("k", "default", "sessions"), "b": _d("k", "sessions", "default")}
    assert V.plan(["a", "b"], d, {"b"}, {"a", "b"}, NS) == {}  # a not started
    assert V.plan(["a", "b"], d, {"a", "b"}, {"b"}, NS) == {}  # a failed or reused: b replays itself
    assert V.plan(["a", "b"], d, {"a", "b"}, {"a"}, NS) == {}  # b reused: nothing to answer
    other = {"a": _d("k", "default", "sessions"), "b": _d("k2", "sessions", "default")}
    assert V.plan(["a", "b"], other, {"a", "b"}, {"a", "b"}, NS) == {}  # different state
    unlisted = {"a": _d("k", "default", "flush"), "b": _d("k", "sessions", "default")}
    assert V.plan(["a", "b"], unlisted, {"a", "b"}, {"a", "b"}, NS) == {}  # a does not serve that view
    # a resumed run where the host has finished a namespace the rider has not: the rider replays on its own
    assert V.plan(["c", "b"], {"c": _d("k", "default", "sessions"), "b": _d("k", "sessions", "default")},
                  {"b", "c"}, {"b", "c"}, NS) == {}
    # a rider never hosts: a third equal one rides on the first
    three = {"a": _d("k", "default", "sessions"), "b": _d("k", "sessions", "default"),
             "x": _d("k", "sessions", "default")}
    assert V.plan(["a", "b", "x"], three, {"a", "b", "x"}, {"a", "b", "x"}, NS) == {
        "b": ("a", "sessions"), "x": ("a", "sessions")}


def test_a_view_client_puts_the_view_on_retrieve_and_forwards_nothing_that_writes():
    seen = []

    class Host:
        async def retrieve(self, ns, q):
            seen.append((ns, q))
            return "res", 7

        async def prepare(self, ns):
            return f"prepared {ns}"

    c = V.ViewClient(Host(), "openclaw-real", "sessions")
    q = RetrieveQuery("which port?", 6)
    assert asyncio.run(c.retrieve("n1", q)) == ("res", 7)
    assert seen == [("n1", RetrieveQuery("which port?", 6, view="sessions"))] and q.view == ""
    assert asyncio.run(c.prepare("n1")) == "prepared n1"
    for name in ("ingest", "reset", "settle"):
        with pytest.raises(AttributeError, match=f"only retrieves; {name} is openclaw-real's"):
            getattr(c, name)


def test_a_riders_record_is_the_replays_with_its_own_retrieve_times():
    host = {"messages": 10, "pass": 0, "ingest_s": 2.5, "settle_s": 0.5, "retrieve_ms": [3.0], "release_s": 0.1,
            "rss_bytes": 5}
    assert V.shared_record(host, "openclaw-real") == {"messages": 10, "pass": 0, "ingest_s": 2.5, "settle_s": 0.5,
                                                      "rss_bytes": 5, "replay_of": "openclaw-real"}


# ---------------------------------------------------------------------------------------------- through the runner
def _openclaw_ok():
    from services.adapters.openclaw_real.node import availability

    return availability()


SESSIONS = 5  # several /new boundaries, so several hook files and a transcript with resets


def _first_sessions(conv: dict, n: int) -> dict:
    c = conv["conversation"]
    keep = {k: v for k, v in c.items() if not k.startswith("session_") or int(k.split("_")[1]) <= n}
    ids = {t["dia_id"] for k, v in keep.items() if k.startswith("session_") and isinstance(v, list) for t in v}
    qa = [q for q in conv["qa"] if q.get("evidence") and set(q["evidence"]) <= ids]
    return {**conv, "conversation": keep, "qa": qa}


@pytest.mark.slow
@pytest.mark.skipif(not _openclaw_ok().ok, reason="[requires:openclaw] openclaw-real unavailable")
async def test_a_riding_backend_records_what_it_records_on_its_own_replay(tmp_path):
    from services.coordinator.runner import RunConfig, run_suite
    from services.coordinator.suites.common import default_data_dir
    from tests.test_streamed_run import MOCK_ROLES

    data = default_data_dir()
    if not (data / "locomo" / "locomo10_dev.json").exists():
        pytest.skip(f"[requires:data] LoCoMo not found under {data}")
    sess = "openclaw-real[profile=sessions]"
    # A real conversation cut to its first SESSIONS sessions (92 messages, not the 689 of the one seed 0 samples from
    # the whole file) and the questions whose evidence lies in them: the comparison is the same, each replay ~7x
    # shorter. Written under tmp_path, read through the suite's data_dir option.
    conv = _first_sessions(json.loads((data / "locomo" / "locomo10_dev.json").read_text())[0], SESSIONS)
    (tmp_path / "data" / "locomo").mkdir(parents=True)
    (tmp_path / "data" / "locomo" / "locomo10_dev.json").write_text(json.dumps([conv]))
    opts = {"conversations": 1, "questions": 8, "answer": False, "data_dir": str(tmp_path / "data")}

    def cfg(out, backends):
        return RunConfig(suite="locomo", backends=backends, out_dir=str(tmp_path / out), embedder="hash",
                         options=opts, llm_roles=MOCK_ROLES, in_process=True)

    # the two runs are independent (own out_dir, own sidecars, the benchmark's frozen clock): side by side they keep
    # both cores busy
    alone, shared = await asyncio.gather(run_suite(cfg("alone", [sess])), run_suite(cfg("shared", ["openclaw-real", sess])))
    assert alone.state == shared.state == "succeeded", (alone.failures, shared.failures)
    run = json.loads((shared.run_dir / "run.json").read_text())
    assert run["replay_views"] == {sess: {"replay_of": "openclaw-real", "view": "sessions"}}
    recs = run["ingest"][sess]["namespaces"]
    assert recs and all(r["replay_of"] == "openclaw-real" for r in recs.values())
    host = run["ingest"]["openclaw-real"]["namespaces"]
    assert {ns: r["ingest_s"] for ns, r in recs.items()} == {ns: host[ns]["ingest_s"] for ns in recs}
    assert "replay_views" not in json.loads((alone.run_dir / "run.json").read_text())

    def retrievals(run_dir):
        out = {}
        for line in (run_dir / "samples.jsonl").read_text().splitlines():
            s = json.loads(line)
            if s["condition"] == sess:
                r = dict(s["retrievals"][sess])
                for k in ("latency_ms", "server_ms", "client_ms", "server_duration_ns"):
                    r.pop(k, None)
                out[s["probe_id"]] = r
        return out

    a, b = retrievals(alone.run_dir), retrievals(shared.run_dir)
    assert len(a) == 8 and a.keys() == b.keys()
    for pid in a:
        assert a[pid] == b[pid], pid


def test_the_report_says_which_backend_searched_whose_replay():
    from services.coordinator.report import render_replay_views

    assert render_replay_views({}) == ""
    text = render_replay_views({"replay_views": {"openclaw-real[profile=sessions]": {
        "replay_of": "openclaw-real", "view": "sessions"}}})
    assert text.startswith("> **One replay, two backends:** **openclaw-real[profile=sessions]** searched "
                           "**openclaw-real**'s replay as its `sessions` view.")
