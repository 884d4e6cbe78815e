"""Control-condition backend: see backend.py."""
