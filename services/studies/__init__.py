"""Studies: commands that measure the rig's baselines and statistics rather than serve a backend.

- `fidelity` (`memrig fidelity openclaw`): the OpenClaw port against OpenClaw 2026.9.6 itself, query by query;
- `sensitivity` (`memrig sensitivity openclaw`): the native baseline by embedder × minScore;
- `openclaw_port_speed` (`make bench-openclaw`): the port's index build throughput and search latency beside a numpy
  brute-force floor;
- `bench_openclaw_real` (`make bench-openclaw-real`): openclaw-real's retrieve latency beside the port's;
- `interval_study`: do LoCoMo's reported intervals hold over a full run;
- `paired`: openclaw-real and the port fed the same workspaces (shared by fidelity and sensitivity).

They drive backends through their public methods only.
"""
