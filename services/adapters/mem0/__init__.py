"""Mem0 OSS v3 reference backend: see backend.py and README.md."""
