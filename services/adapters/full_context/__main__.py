from services.adapters.full_context.backend import FullContextBackend
from services.adapters.server import adapter_main

if __name__ == "__main__":
    adapter_main(FullContextBackend)
