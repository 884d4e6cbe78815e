"""The cost scenarios: turn latency per plugin state, tokens injected, resources, the continuity arc and the failure
drills, measured by driving the turn simulator (services/turn_sim) and the drills (services/drills) over the
services a Rig starts. Above all three: neither the simulator nor the drills import this package.

`scenarios.run_costs(out_dir, rig)` is the one entry point `make bench-all` calls, with its own Rig;
`python -m services.cost_scenarios` runs it standalone with a Rig of its own.
"""
