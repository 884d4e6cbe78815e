from services.adapters.ir_baselines.backend import IRBaselineBackend
from services.adapters.server import adapter_main

if __name__ == "__main__":
    adapter_main(IRBaselineBackend)
