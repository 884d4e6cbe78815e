"""The floor and the ANN option, over the same vectors the backends index.

Floor: numpy brute-force top-k — one matrix-vector product and an argpartition + sort of the k best, nothing
else (the floor of services/studies/openclaw_port_speed.py, k = OpenClaw's candidate count 24 at maxResults 6).
ANN: a usearch HNSW index (inner product on unit rows = cosine) built over the same matrix, searched with
several `expansion_search` values; each reported with its recall@10 against the exact top-10.
"""

from __future__ import annotations

import time

import numpy as np

from services.perf.stats import percentiles_ms, recall_at_k

FLOOR_K = 24


def floor_topk(matrix: np.ndarray, q: np.ndarray, k: int = FLOOR_K) -> np.ndarray:
    scores = matrix @ q
    k = min(k, len(scores))
    top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
    return top[np.argsort(-scores[top], kind="stable")]


def time_floor(matrix: np.ndarray, qvecs: np.ndarray, k: int = FLOOR_K, warmup: int = 3) -> list[int]:
    for q in qvecs[:warmup]:
        floor_topk(matrix, q, k)
    out = []
    for q in qvecs:
        t0 = time.perf_counter_ns()
        floor_topk(matrix, q, k)
        out.append(time.perf_counter_ns() - t0)
    return out


def exact_topk(matrix: np.ndarray, qvecs: np.ndarray, k: int = 10) -> list[list[int]]:
    return [floor_topk(matrix, q, k).tolist() for q in qvecs]


def ann_available() -> bool:
    try:
        import usearch.index  # noqa: F401
    except ImportError:
        return False
    return True


def ann_measure(matrix: np.ndarray, qvecs: np.ndarray, efs: tuple[int, ...] = (16, 64, 256),
                connectivity: int = 16, expansion_add: int = 64, threads: int = 2) -> dict:
    """Build an HNSW index over `matrix`, then per expansion_search: single-query latency and recall@10."""
    from usearch.index import Index

    n, dim = matrix.shape
    idx = Index(ndim=dim, metric="ip", dtype="f32", connectivity=connectivity, expansion_add=expansion_add)
    t0 = time.perf_counter()
    idx.add(np.arange(n, dtype=np.uint64), matrix, threads=threads)
    build_s = time.perf_counter() - t0
    exact = exact_topk(matrix, qvecs, 10)
    points = []
    for ef in efs:
        idx.expansion_search = ef
        for q in qvecs[:3]:
            idx.search(q, 10)
        lat, found = [], []
        for q in qvecs:
            t = time.perf_counter_ns()
            m = idx.search(q, 10)
            lat.append(time.perf_counter_ns() - t)
            found.append([int(x) for x in m.keys])
        points.append({"expansion_search": ef, "latency": percentiles_ms(lat),
                       "recall_at_10": recall_at_k(found, exact, 10)})
    return {"n": n, "build_s": build_s, "build_per_s": n / build_s if build_s > 0 else None,
            "connectivity": connectivity, "expansion_add": expansion_add, "points": points,
            "memory_bytes": int(idx.memory_usage)}


def best_ann_point(points: list[dict], min_recall: float = 0.95) -> dict | None:
    """The fastest point (by p50) reaching min_recall; else the point with the highest recall."""
    ok = [p for p in points if p["recall_at_10"] >= min_recall and p["latency"]]
    if ok:
        return min(ok, key=lambda p: p["latency"]["p50"])
    return max(points, key=lambda p: p["recall_at_10"]) if points else None
