"""Memory backends under test. Each is a Python class served as a `MemoryBackendService` process.

`python -m services.adapters.<name> --port P` starts one; `registry.py` lists them by name.
"""
