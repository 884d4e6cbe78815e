"""Serve `octybot`: `python -m services.adapters.octybot`."""
from services.adapters.octybot.backend import OctybotBackend
from services.adapters.server import adapter_main

if __name__ == "__main__":
    adapter_main(OctybotBackend)
