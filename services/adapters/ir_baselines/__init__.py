"""Standard information-retrieval baselines (BM25, dense, hybrid RRF) as control backends: see backend.py."""
