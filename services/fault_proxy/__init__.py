"""fault-proxy: an aiohttp reverse proxy that injects HTTP faults in front of a service (the Cortex mock or a
real Cortex URL), with a toxiproxy-style admin API, a seeded per-request decision log and Prometheus metrics.

    python -m services.fault_proxy (--upstream URL | --shard-map NAME=URL,...) --port P [--host 127.0.0.1]
        [--seed N] [--allow-header-faults] [--admin-token T] [--admin-port P2] [--redis-url URL]

Files: faults.py (fault definitions, validation, pure decisions; with fault_types.py, one class per type, and
actions.py, what a decision returns), engine.py (numbering, state, waits, log),
store.py (local or Redis fault state; the password from REDIS_PASSWORD), shards.py (which upstream owns a
tenant), app.py (HTTP: the proxy path), admin.py (HTTP: the admin API), state.py (what the two share), metrics.py,
admin_client.py
(async client for drills and locust timelines), __main__.py (CLI).
"""
