"""Serve quaid-real: `python -m services.adapters.quaid_real --port 0 [--embedder minilm|wordllama|hash]`."""
from services.adapters.quaid_real.backend import QuaidRealBackend
from services.adapters.server import adapter_main

if __name__ == "__main__":
    adapter_main(QuaidRealBackend)
