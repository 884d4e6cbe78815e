"""Serve the OpenClaw native-memory backend: `python -m services.adapters.openclaw --port 0 [--config '{"preset": ...}']`."""
from services.adapters.openclaw.backend import OpenClawBackend
from services.adapters.server import adapter_main

if __name__ == "__main__":
    adapter_main(OpenClawBackend)
