"""services/studies/openclaw_profile.py: reading Node's CPU profiles, on hand-made profile files."""

from __future__ import annotations

import json

from services.studies.openclaw_profile import read_cpu_profiles


def _profile(path, frames, start=0, end=3_000_000):
    """One thread's profile: each (function, url, microseconds) one node sampled once for that long."""
    nodes = [{"id": i + 1, "callFrame": {"functionName": fn, "url": url}} for i, (fn, url, _) in enumerate(frames)]
    path.write_text(json.dumps({"nodes": nodes, "samples": [i + 1 for i in range(len(frames))],
                                "timeDeltas": [us for _, _, us in frames], "startTime": start, "endTime": end}))


def test_main_thread_and_workers_by_entry_script(tmp_path):
    dist = "file:///x/node_modules/openclaw/dist/"
    _profile(tmp_path / "CPU.20261129.1.42.0.001.cpuprofile",
             [("(idle)", "", 2_000_000), ("search", dist + "manager.js", 500_000), ("(program)", "", 100_000)])
    _profile(tmp_path / "CPU.20261129.1.42.1.002.cpuprofile",
             [("run", dist + "infra/sqlite-store.worker.js", 1_500_000), ("(idle)", "", 700_000)])
    _profile(tmp_path / "CPU.20261129.1.42.2.003.cpuprofile",
             [("run", dist + "infra/sqlite-store.worker.js", 250_000), ("(garbage collector)", "", 250_000)])
    _profile(tmp_path / "CPU.20261129.1.42.10.004.cpuprofile", [("x", "node:internal/main", 100_000)])
    got = read_cpu_profiles(tmp_path)
    assert got["threads"] == 4
    assert got["main"] == {"wall_s": 3.0, "busy_s": 0.5, "idle_s": 2.0}
    # thread 10 sorts after thread 2 (by number, not name); GC time is CPU the worker used
    assert got["workers"] == {"openclaw/dist/infra/sqlite-store.worker.js": {"count": 2, "busy_s": 2.0},
                              "(other)": {"count": 1, "busy_s": 0.1}}
