"""Quaid-style reference backend: see backend.py and README.md."""
