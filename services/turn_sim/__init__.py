"""Turn simulator: the agent host that plays turns (recall hook → prependContext → LLM → auto-capture) over any
memrig backend, for turn latency per plugin state, tokens injected, resources and the continuity arc.
`bench.run_costs` is the one entry point `make bench-all` calls; `python -m services.turn_sim` runs it standalone.
"""
