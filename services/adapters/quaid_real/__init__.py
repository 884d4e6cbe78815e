"""quaid-real: Quaid itself, driven through its own Python code (see backend.py)."""
