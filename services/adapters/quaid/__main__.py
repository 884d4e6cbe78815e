"""Serve the Quaid-style backend: `python -m services.adapters.quaid --port 0 [--embedder minilm|wordllama|hash]`."""
from services.adapters.quaid.backend import QuaidBackend
from services.adapters.server import adapter_main

if __name__ == "__main__":
    adapter_main(QuaidBackend)
