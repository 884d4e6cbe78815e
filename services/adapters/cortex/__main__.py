"""`python -m services.adapters.cortex --port P --config '{"base_url": "http://127.0.0.1:8792"}'`."""
from services.adapters.cortex.backend import CortexBackend
from services.adapters.server import adapter_main

if __name__ == "__main__":
    adapter_main(CortexBackend)
