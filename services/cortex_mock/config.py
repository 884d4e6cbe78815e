"""cortex-mock configuration: one dataclass shared by the server, in-process tests and worker processes."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any


def _keys_from(value: str | None) -> list[str]:
    return [k.strip() for k in (value or "").replace("\n", ",").split(",") if k.strip()]


def read_keys_file(path: str) -> list[str]:
    """Allowed keys from a file (one per line or comma-separated; `#` starts a comment line), so keys need
    not appear in argv where `ps` shows them."""
    with open(path, encoding="utf-8") as f:
        return _keys_from("\n".join(line for line in f.read().splitlines() if not line.lstrip().startswith("#")))


@dataclass
class MockConfig:
    host: str = "127.0.0.1"
    port: int = 0
    data_dir: str | None = None  # None -> a fresh temp dir (logged at startup)
    api_keys: list[str] = field(default_factory=list)  # empty -> dev mode: any non-empty key is its own tenant
    settle_delay_ms: float = 0.0  # MENTIONS edges become visible this long after an ingest commits
    workers: int = 2  # in-process: asyncio job workers; with Redis: worker processes to spawn
    embedder: str | None = None  # minilm | wordllama | hash (None -> MEMRIG_EMBEDDER or minilm)
    # the shared SQLite embedding cache (services/common/embeddings.py). None: only for embedders slower than
    # its lookup and commit (minilm, remote); wordllama and hash embed a fact faster than the cache stores it
    embed_cache: bool | None = None
    extractor: str = "deterministic"  # deterministic | llm
    latency_fast_ms: float = 0.0  # added server-side delay on fast retrieves (and recall)
    latency_full_ms: float = 0.0
    latency_sigma: float = 0.0  # lognormal jitter (median = the base delay)
    seed: int = 0
    job_delay_ms: float = 0.0  # slow every job down (tests of worker death use it)
    redis_url: str | None = None  # set -> Redis job queue served by worker processes
    redis_prefix: str = "cortexmock"
    lease_ms: float = 10_000.0  # worker heartbeat lease; a worker silent this long is presumed dead
    max_attempts: int = 3
    token_budget: int = 2000  # retrieve packing budget (cl100k tokens)
    max_open_tenants: int = 64  # least recently used tenants beyond this are closed (reopened on demand)
    tenant_idle_s: float = 600.0  # a tenant unused this long is closed at the next request
    reuse_port: bool = False  # SO_REUSEPORT, so `--processes N` servers share one port
    search_threads: int = 1  # threads running retrieves in each process (numpy releases the GIL in the matmuls)
    processes: int = 1  # server processes on the port (the first starts and supervises the others)
    shared_jobs: bool = False  # in-process job records mirrored to <data_dir>/jobs.sqlite (any process answers)
    # Snapshot embedding matrices as file mappings every process on the data dir shares (shared_arrays.py):
    # arrays of at least `shared_arrays_min_bytes`, once a snapshot is `share_after_s` old. None = when several
    # server processes serve the data dir (`processes` > 1, or a sibling: `shared_jobs`); a lone process
    # keeps private copies (nobody to share with, and no derived files beside the tenant databases).
    shared_arrays: bool | None = None
    shared_arrays_min_bytes: int = 1 << 20
    share_after_s: float = 1.0

    @classmethod
    def from_env(cls, **overrides: Any) -> MockConfig:
        keys_file = os.environ.get("MEMRIG_CORTEX_API_KEYS_FILE")
        keys = read_keys_file(keys_file) if keys_file else _keys_from(os.environ.get("MEMRIG_CORTEX_API_KEYS"))
        cfg = cls(api_keys=keys, redis_url=os.environ.get("REDIS_URL") or None)
        for k, v in overrides.items():
            if v is not None:
                setattr(cfg, k, v)
        return cfg

    def shares_arrays(self) -> bool:
        if self.shared_arrays is not None:
            return self.shared_arrays
        return self.processes > 1 or self.shared_jobs

    def describe(self) -> dict[str, Any]:
        d = asdict(self)
        d["api_keys"] = f"{len(self.api_keys)} configured" if self.api_keys else "dev mode (any non-empty key)"
        return d
