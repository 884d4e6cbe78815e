"""Read-only numpy arrays shared by every cortex-mock process on one data dir, through file mappings.

With `--processes N` each server process builds its own snapshot of a tenant (snapshot.TenantIndex). The largest
part of a snapshot is the fact-embedding matrix (10k memories x 384 float32 = 15 MB), and a retrieve reads all
of it once (the semantic channel's matrix-vector product), so the product is bound by memory bandwidth. Private
copies, one a process, compete for the last-level cache, and each product then streams from DRAM; one mapped copy
is the same physical pages for every process.

`SharedArrays.share(kind, arr)` returns an array with the same bytes backed by a page-cache mapping of a file
named by the content's hash, so every process holding the same content maps the same physical pages. The file
is written to a temporary name and renamed into place, and an existing file is compared with the array before
it is used, so a torn or foreign file is never read as data; any OS error leaves the private array in use (the
answer is the same, only the sharing is lost). Files of superseded content are unlinked once they are older than
`stale_s`: a process still mapping one keeps its pages (POSIX unlink semantics), and a process that finds a file
gone writes it again.
"""

from __future__ import annotations

import hashlib
import logging
import mmap
import os
import threading
import time
from pathlib import Path

import numpy as np

log = logging.getLogger("cortex_mock")

STALE_S = 30.0  # superseded files older than this are unlinked when a newer one of the same kind is written


def content_name(kind: str, arr: np.ndarray) -> str:
    """`<kind>-<dtype>-<rows>x<cols>-<sha256 of the bytes>.bin`: the same content always gets the same name."""
    digest = hashlib.sha256(memoryview(arr).cast("B")).hexdigest()[:32]  # sha256: CPU-accelerated, ~10 ms / 15 MB
    shape = "x".join(str(d) for d in arr.shape)
    return f"{kind}-{arr.dtype.str.lstrip('<>|=')}-{shape}-{digest}.bin"


def map_array(path: Path, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """A read-only array over the file's pages (ValueError if its size does not fit the shape)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        want = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        if size != want:
            raise ValueError(f"{path.name}: {size} bytes, expected {want}")
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)  # the mapping outlives the closed descriptor
    return np.frombuffer(mm, dtype=dtype).reshape(shape)


class SharedArrays:
    """Content-addressed, file-backed copies of read-only arrays in `directory` (created on first use).
    Arrays smaller than `min_bytes` are returned as they are (sharing them saves nothing)."""

    def __init__(self, directory: str | Path, min_bytes: int = 1 << 20, stale_s: float = STALE_S):
        self.directory = Path(directory)
        self.min_bytes = min_bytes
        self.stale_s = stale_s
        self.written = 0  # files this object wrote (a test can tell "mapped an existing file" from "wrote it")
        self.mapped = 0  # arrays returned backed by a mapping
        self._lock = threading.Lock()

    def share(self, kind: str, arr: np.ndarray) -> np.ndarray:
        if arr.nbytes < self.min_bytes or arr.size == 0:  # (an empty file cannot be mapped)
            return arr
        arr = np.ascontiguousarray(arr)
        name = content_name(kind, arr)
        path = self.directory / name
        try:
            try:
                m = map_array(path, arr.dtype, arr.shape)
                if np.array_equal(m, arr):
                    self.mapped += 1
                    return m
                log.warning("shared array %s does not hold its content; rewriting it", name)
            except (FileNotFoundError, ValueError):
                pass
            self.directory.mkdir(parents=True, exist_ok=True)
            tmp = self.directory / f".{name}.{os.getpid()}.{threading.get_ident()}.tmp"
            with open(tmp, "wb") as f:
                f.write(memoryview(arr).cast("B"))
            os.replace(tmp, path)  # atomic: a reader sees the whole file or none
            self.written += 1
            self._unlink_stale(kind, keep=name)
            m = map_array(path, arr.dtype, arr.shape)
            self.mapped += 1
            return m
        except OSError as e:  # full disk, read-only dir, a file unlinked under us: keep the private copy
            log.warning("could not share %s (%s); keeping a private copy", name, e)
            return arr

    def _unlink_stale(self, kind: str, keep: str) -> None:
        now = time.time()
        with self._lock:
            for p in [*self.directory.glob(f"{kind}-*.bin"), *self.directory.glob(".*.tmp")]:
                if p.name == keep:  # (a .tmp is left only by a process killed while writing)
                    continue
                try:
                    if now - p.stat().st_mtime > self.stale_s:
                        p.unlink()
                except FileNotFoundError:  # another process got there first
                    pass
