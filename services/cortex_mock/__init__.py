"""cortex-mock: a local stand-in for the Cortex memory API (Ubundi), with a real pipeline inside.

The HTTP surface follows ../shared/reference/peers.md §2.3 (the `@ubundi/openclaw-cortex` client's shapes); the
pipeline follows the Cortex architecture notes in seeds/000 (5-way hybrid retrieval, RRF, rerank, token
packing, reflection). Run it with `python -m services.cortex_mock --port 0`; see `__main__.py` for flags.
"""
