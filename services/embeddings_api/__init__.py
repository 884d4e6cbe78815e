"""OpenAI-compatible `/v1/embeddings` served from the rig's embedders and the shared content-hash cache."""
