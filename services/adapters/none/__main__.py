from services.adapters.none.backend import NoMemoryBackend
from services.adapters.server import adapter_main

if __name__ == "__main__":
    adapter_main(NoMemoryBackend)
