"""Serve the `http` adapter: `python -m services.adapters.http --config '{"mapping": "cortex-mock"}'`."""
from services.adapters.http.backend import HttpBackend
from services.adapters.server import adapter_main

if __name__ == "__main__":
    adapter_main(HttpBackend)
