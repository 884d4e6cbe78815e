"""OpenClaw native memory baseline (Markdown workspace + FTS5/BM25 + vector hybrid search): see backend.py."""
