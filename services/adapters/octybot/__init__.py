"""`octybot`: an Octybot-like graph memory reference backend (see backend.py)."""
