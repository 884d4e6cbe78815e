"""Serve `octybot-real`: `python -m services.adapters.octybot_real`."""
from services.adapters.octybot_real.backend import OctybotRealBackend
from services.adapters.server import adapter_main

if __name__ == "__main__":
    adapter_main(OctybotRealBackend)
