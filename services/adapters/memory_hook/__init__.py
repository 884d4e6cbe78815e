"""memory-hook reference backend: see backend.py and README.md."""
