"""Serve the memory-hook backend: `python -m services.adapters.memory_hook --port 0 [--config '{"rerank": false}']`."""
from services.adapters.memory_hook.backend import MemoryHookBackend
from services.adapters.server import adapter_main

if __name__ == "__main__":
    adapter_main(MemoryHookBackend)
