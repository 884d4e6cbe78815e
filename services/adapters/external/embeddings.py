"""The rig's embedder served to a real system that calls an embeddings API itself.

The bridge runs the rig's embeddings service (services/embeddings_api: OpenAI's `/v1/embeddings`, Ollama's
`/api/embed`, Voyage's `/voyage/v1/embeddings`) in this process, on 127.0.0.1 and a free port, over the very
embedder object the rig's re-implementation uses (with the shared cache), so the real system and the port embed with
identical vectors. A search query is embedded anew each time, never through the cache (EmbeddingsService.encode).
"""

from __future__ import annotations

from typing import Any


class EmbeddingsBridge:
    def __init__(self) -> None:
        self._runner: Any = None
        self.url = ""  # http://127.0.0.1:<port> while running, "" otherwise

    @property
    def running(self) -> bool:
        return self._runner is not None

    async def start(self, embedder: Any, single_text_is_query: bool = False) -> str:
        """Serve `embedder` (under its own name); returns the base URL, `http://127.0.0.1:<port>`.
        `single_text_is_query`: see EmbeddingsConfig."""
        from services.embeddings_api.app import EmbeddingsConfig, start_server

        self._runner, port = await start_server(EmbeddingsConfig(models=(), preloaded={embedder.name: embedder},
                                                                 single_text_is_query=single_text_is_query),
                                                "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def close(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()
        self.url = ""
