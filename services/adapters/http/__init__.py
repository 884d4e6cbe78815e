"""`http`: a generic adapter for HTTP memory services, driven by mapping files (see backend.py, mapping.py)."""
