"""cortex-mock: a local stand-in for the Cortex memory API (Ubundi), with a real pipeline inside.

The HTTP surface follows the `@ubundi/openclaw-cortex` plugin's client (Ubundi/openclaw-cortex, src/cortex/client.ts:
the paths, request bodies and response shapes it sends and reads); the pipeline follows the Cortex architecture as
that repo documents it (docs/CORTEX_API.md, and benchmark/BENCHMARK_PLAN.md at commit 0855305: 5-way hybrid
retrieval fused by RRF, a cross-encoder rerank in full mode, token-budget packing, reflection). Run it with
`python -m services.cortex_mock --port 0`; see `__main__.py` for flags.
"""
