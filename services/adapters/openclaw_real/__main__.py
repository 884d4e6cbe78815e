from services.adapters.openclaw_real.backend import OpenClawRealBackend
from services.adapters.server import adapter_main

if __name__ == "__main__":
    adapter_main(OpenClawRealBackend)
