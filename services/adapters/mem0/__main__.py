"""Serve the Mem0 backend: `python -m services.adapters.mem0 --port 0 [--config '{"infer": false}']`."""
from services.adapters.mem0.backend import Mem0Backend
from services.adapters.server import adapter_main

if __name__ == "__main__":
    adapter_main(Mem0Backend)
