"""`mem0-oss`: Mem0 through its own library (see backend.py)."""
