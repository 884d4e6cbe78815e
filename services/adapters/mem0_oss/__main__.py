"""Serve `mem0-oss`: `python -m services.adapters.mem0_oss`."""
from services.adapters.mem0_oss.backend import Mem0OssBackend
from services.adapters.server import adapter_main

if __name__ == "__main__":
    adapter_main(Mem0OssBackend)
