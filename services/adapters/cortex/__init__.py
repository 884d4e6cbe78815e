"""`cortex` backend: the Cortex HTTP API through the `@ubundi/openclaw-cortex` plugin's client behaviour.

backend.py (the MemoryBackend), client.py (HTTP), gate.py (cold-start gate), retry_queue.py (capture
RetryQueue), envelope.py (`<cortex_memories>` block), registry_entry.py (`cortex`, `cortex-fast`).
"""
