"""Snapshot embeddings shared between cortex-mock processes through file mappings (shared_arrays.py): the same
bytes as the private copy, the same answers, a file per content, torn or foreign files never read as data."""

from __future__ import annotations

import mmap
import os
import time
from datetime import UTC, datetime

import numpy as np

from services.cortex_mock.config import MockConfig
from services.cortex_mock.engine import CortexEngine
from services.cortex_mock.search import SearchParams
from services.cortex_mock.shared_arrays import SharedArrays, content_name


def _arr(seed: int, rows: int = 50, cols: int = 8) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, cols)).astype(np.float32)


def _is_mapped(a: np.ndarray) -> bool:
    base = a
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    if isinstance(base, memoryview):  # np.frombuffer keeps the exporter behind a memoryview
        base = base.obj
    return isinstance(base, mmap.mmap)


def test_small_arrays_stay_private(tmp_path):
    a = _arr(0)
    sa = SharedArrays(tmp_path / "arr", min_bytes=a.nbytes + 1)
    assert sa.share("emb", a) is a
    assert not (tmp_path / "arr").exists()


def test_share_writes_one_file_per_content_and_a_second_process_maps_it(tmp_path):
    a = _arr(1)
    first, second = SharedArrays(tmp_path, min_bytes=0), SharedArrays(tmp_path, min_bytes=0)
    m1 = first.share("emb", a)
    m2 = second.share("emb", a.copy())  # another process holding the same content
    assert (first.written, second.written, second.mapped) == (1, 0, 1)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == [content_name("emb", a)]
    assert files[0].startswith("emb-f4-50x8-")
    assert (tmp_path / files[0]).stat().st_size == a.nbytes == 50 * 8 * 4
    for m in (m1, m2):
        assert m.dtype == np.float32 and m.shape == (50, 8)
        assert np.array_equal(m, a) and _is_mapped(m)
        assert not m.flags.writeable  # a snapshot's arrays are read-only
    # different content -> a different name
    assert content_name("emb", _arr(2)) != files[0]
    assert content_name("qemb", a) != files[0]


def test_a_torn_or_foreign_file_is_rewritten_not_used(tmp_path):
    a = _arr(3)
    path = tmp_path / content_name("emb", a)
    path.write_bytes(b"\0" * a.nbytes)  # right name and size, wrong bytes
    sa = SharedArrays(tmp_path, min_bytes=0)
    assert np.array_equal(sa.share("emb", a), a) and sa.written == 1
    path.write_bytes(b"\0" * 10)  # truncated
    sa2 = SharedArrays(tmp_path, min_bytes=0)
    assert np.array_equal(sa2.share("emb", a), a) and sa2.written == 1
    assert path.stat().st_size == a.nbytes


def test_os_errors_keep_the_private_copy(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    a = _arr(4)
    out = SharedArrays(blocker, min_bytes=0).share("emb", a)
    assert np.array_equal(out, a) and not _is_mapped(out)


def test_superseded_files_are_unlinked_once_stale(tmp_path):
    sa = SharedArrays(tmp_path, min_bytes=0, stale_s=30.0)
    old, fresh, newest, other_kind = _arr(5), _arr(6), _arr(7), _arr(8)
    sa.share("emb", old)
    sa.share("emb", fresh)
    sa.share("qemb", other_kind)
    (tmp_path / ".emb-x.123.456.tmp").write_bytes(b"partial")  # left by a process killed while writing
    past = time.time() - 60
    for name in (content_name("emb", old), content_name("qemb", other_kind), ".emb-x.123.456.tmp"):
        os.utime(tmp_path / name, (past, past))
    held = sa.share("emb", old.copy())  # a process mapping `old` (the existing file: nothing written)
    assert sa.written == 3
    sa.share("emb", newest)
    names = {p.name for p in tmp_path.iterdir()}
    # `old` is stale and superseded: unlinked, and so is the stale .tmp; `fresh` is young, qemb another kind
    assert names == {content_name("emb", x) for x in (fresh, newest)} | {content_name("qemb", other_kind)}
    assert np.array_equal(held, old)  # the mapping outlives the unlink
    again = sa.share("emb", old)  # a process that finds the file gone writes it again
    assert np.array_equal(again, old) and sa.written == 5 and content_name("emb", old) in os.listdir(tmp_path)


TEXTS = [
    ("The cache TTL is 300s. We use Redis for sessions on k8s. Priya owns the billing worker.", "2026-01-01"),
    ("We raised the cache TTL to 600s. We run Kubernetes in eu-west-1. Marco profiled the search index.",
     "2026-01-05"),
    ("We migrated from Redis to Valkey for sessions. The flaky test needs the redis fixture.", "2026-01-09"),
]


async def _ingest(e: CortexEngine, i: int) -> None:
    text, ref = TEXTS[i]
    await e.ingest_text("t", {"text": text, "session_id": f"s{i}",
                              "reference_date": datetime.fromisoformat(ref).replace(tzinfo=UTC)})


def _answers(e: CortexEngine, mode: str) -> list:
    out = []
    for q in ("What is the cache TTL?", "Who owns the billing worker?", "redis sessions", "What did Marco do?"):
        r = e.retrieve_sync("t", SearchParams(query=q, top_k=5, mode=mode, debug=True))
        out.append((r.results, r.coverage, r.channels_used, {k: v for k, v in r.debug.items() if k != "timings_ms"}))
    return out


async def test_processes_share_one_mapping_and_answer_exactly_as_private_copies(tmp_path):
    """Two engines on one data dir (two server processes) search file-mapped matrices; a third keeps private
    copies. Every answer is identical, before and after an ingest and a forget by the writer."""
    share = dict(embedder="hash", shared_arrays=True, shared_arrays_min_bytes=0, share_after_s=0.0)
    writer = CortexEngine(MockConfig(data_dir=str(tmp_path), **share))
    reader = CortexEngine(MockConfig(data_dir=str(tmp_path), **share))
    private = CortexEngine(MockConfig(data_dir=str(tmp_path), embedder="hash", shared_arrays=False))
    arrays = tmp_path / "cortex_t.arrays"
    try:
        for i in range(2):
            await _ingest(writer, i)
        for mode in ("fast", "full"):
            assert _answers(reader, mode) == _answers(private, mode) == _answers(writer, mode)
        ri, pi = reader.store("t").index(reader.embedder), private.store("t").index(private.embedder)
        assert _is_mapped(ri.emb) and _is_mapped(ri.q_emb) and not _is_mapped(pi.emb)
        assert np.array_equal(ri.emb, pi.emb) and np.array_equal(ri.q_emb, pi.q_emb)
        wi = writer.store("t").index(writer.embedder)
        assert _is_mapped(wi.emb)
        # both processes map the one file named by the current content
        assert content_name("emb", wi.emb) == content_name("emb", ri.emb) == content_name("emb", pi.emb)
        assert (arrays / content_name("emb", ri.emb)).is_file() and (arrays / content_name("qemb", ri.q_emb)).is_file()

        await _ingest(writer, 2)  # the writer's extended snapshot and the readers' rebuilds see the new facts
        for mode in ("fast", "full"):
            assert _answers(reader, mode) == _answers(private, mode) == _answers(writer, mode)
        ri2 = reader.store("t").index(reader.embedder)
        assert ri2.rev > ri.rev and _is_mapped(ri2.emb) and ri2.emb.shape[0] > ri.emb.shape[0]
        assert (arrays / content_name("emb", ri2.emb)).is_file()
        assert (arrays / content_name("emb", ri.emb)).is_file()  # superseded but young: kept for now

        await writer.forget_session("t", "s0")
        for mode in ("fast", "full"):
            assert _answers(reader, mode) == _answers(private, mode) == _answers(writer, mode)
        assert all("TTL is 300s" not in r["content"] for r in reader.retrieve_sync(
            "t", SearchParams(query="cache TTL", top_k=10, mode="fast")).results)
    finally:
        for e in (writer, reader, private):
            await e.close()


async def test_a_young_snapshot_is_searched_privately(tmp_path):
    """Below `share_after_s` a snapshot keeps its private copy (a write would soon replace it anyway)."""
    e = CortexEngine(MockConfig(data_dir=str(tmp_path), embedder="hash", shared_arrays=True,
                                shared_arrays_min_bytes=0, share_after_s=3600.0))
    try:
        await _ingest(e, 0)
        idx = e.store("t").index(e.embedder)
        assert not _is_mapped(idx.emb) and not (tmp_path / "cortex_t.arrays").exists()
        idx.built_at -= 7200  # an old snapshot now
        assert _is_mapped(e.store("t").index(e.embedder).emb)
    finally:
        await e.close()


def test_shared_by_default_only_when_several_processes_serve_the_data_dir():
    from services.cortex_mock.__main__ import build_parser, config_from_args, sibling_argv

    lone = config_from_args(build_parser().parse_args([]))
    several = config_from_args(build_parser().parse_args(["--processes", "2"]))
    off = config_from_args(build_parser().parse_args(["--processes", "2", "--no-shared-arrays"]))
    assert lone.shared_arrays is None and lone.shares_arrays() is False  # nobody to share with
    assert several.shares_arrays() is True and off.shares_arrays() is False
    sib = config_from_args(build_parser().parse_args(sibling_argv(several, "/d", 1234)[3:]))
    assert sib.processes == 1 and sib.shares_arrays() is True  # a sibling: --shared-jobs
    assert "--no-shared-arrays" not in sibling_argv(several, "/d", 1234)
    assert "--no-shared-arrays" in sibling_argv(off, "/d", 1234)
    assert config_from_args(build_parser().parse_args(sibling_argv(off, "/d", 1234)[3:])).shares_arrays() is False
    assert MockConfig(shared_arrays=True).shares_arrays() is True


async def test_a_lone_process_writes_no_array_files(tmp_path):
    e = CortexEngine(MockConfig(data_dir=str(tmp_path), embedder="hash", shared_arrays_min_bytes=0,
                                share_after_s=0.0))
    try:
        await _ingest(e, 0)
        e.retrieve_sync("t", SearchParams(query="cache TTL", top_k=3, mode="fast"))
        assert not _is_mapped(e.store("t").index(e.embedder).emb)
        names = sorted(p.name for p in tmp_path.iterdir())
        assert "cortex_t.sqlite" in names and all(n.startswith("cortex_t.sqlite") for n in names)  # no .arrays
    finally:
        await e.close()
