from services.adapters.compacted.backend import CompactedBackend
from services.adapters.server import adapter_main

if __name__ == "__main__":
    adapter_main(CompactedBackend)
