"""Turn simulator: the agent host that plays turns (recall hook → prependContext → LLM → auto-capture) over any
memrig backend, for turn latency per plugin state, tokens injected, resources and the continuity arc. The cost
scenarios that drive it (and the drills) are services/cost_scenarios, above both: nothing here imports them.
"""
