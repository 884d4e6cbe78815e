"""services/datasets.py: the bench Job's data by SHA-256 (deploy/k8s/components/data/data/SHA256SUMS), checked and
fetched from a .tar.gz (file:// here), a bad archive never replacing good files."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import pytest

from services import datasets

REPO = Path(__file__).resolve().parents[1]
SUMS = REPO / "deploy" / "k8s" / "components" / "data" / "data" / "SHA256SUMS"


def _tree(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)


def _targz(path: Path, files: dict[str, bytes]) -> str:
    with tarfile.open(path, "w:gz") as t:
        for rel, data in files.items():
            info = tarfile.TarInfo(rel)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return path.as_uri()


FILES = {"a/x.json": b"[1, 2]", "b.txt": b"hello"}
# sha256 of b"[1, 2]" and b"hello", by hand with hashlib
EXPECTED = {"a/x.json": hashlib.sha256(b"[1, 2]").hexdigest(),
            "b.txt": "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"}


def test_the_committed_sums_are_the_shared_data(data_dir):
    assert datasets.format_sums(datasets.sums_of(data_dir)) == SUMS.read_text()
    assert datasets.check(data_dir, datasets.parse_sums(SUMS.read_text())) == []


def test_the_sums_name_every_default_suite_file():
    listed = set(datasets.parse_sums(SUMS.read_text()))
    assert {"locomo/locomo10_dev.json", "longmemeval/longmemeval_oracle_dev.json",
            "madial-bench/MADial-Bench-en-dialogue.json", "madial-bench/MADial-Bench-en-memory.json"} <= listed
    assert {f"locomo/audit/errors_conv_{i}.json" for i in range(7)} <= listed


def test_sums_and_check(tmp_path):
    _tree(tmp_path / "d", {**FILES, "README.md": b"skipped"})
    assert datasets.sums_of(tmp_path / "d") == EXPECTED
    (tmp_path / "d" / "b.txt").write_bytes(b"hellO")
    assert datasets.check(tmp_path / "d", {**EXPECTED, "c.json": "0" * 64}) == [
        f"b.txt: sha256 {hashlib.sha256(b'hellO').hexdigest()}, expected {EXPECTED['b.txt']}", "c.json: missing"]


def test_parse_sums_refuses_bad_lines():
    for text, said in (("abc  x", "line 1"), (f"{'a' * 64}  ../x", "'../x'"), (f"{'a' * 64}  /etc/x", "'/etc/x'"),
                       ("", "no file")):
        with pytest.raises(ValueError, match=said.replace(".", r"\.")):
            datasets.parse_sums(text)


def test_fetch_unpacks_checks_and_keeps_good_files_on_a_bad_archive(tmp_path):
    dest = tmp_path / "data"
    good = _targz(tmp_path / "good.tar.gz", FILES)
    assert datasets.fetch(dest, EXPECTED, "") == ["a/x.json: missing", "b.txt: missing",
                                                  "no MEMRIG_DATA_URL / --url to fetch the data from"]
    assert datasets.fetch(dest, EXPECTED, good) == []
    assert (dest / "a" / "x.json").read_bytes() == b"[1, 2]"
    assert sorted(p.name for p in dest.iterdir()) == ["a", "b.txt"]  # the temporary directory is gone
    assert datasets.fetch(dest, EXPECTED, "file:///nonexistent.tar.gz") == []  # already whole: nothing fetched
    (dest / "b.txt").write_bytes(b"changed")
    bad = _targz(tmp_path / "bad.tar.gz", {"a/x.json": b"[1, 2]", "b.txt": b"wrong"})
    assert datasets.fetch(dest, EXPECTED, bad) == [
        f"{bad}: b.txt: sha256 {hashlib.sha256(b'wrong').hexdigest()}, expected {EXPECTED['b.txt']}"]
    assert (dest / "b.txt").read_bytes() == b"changed"  # untouched by the bad archive


def test_fetch_refuses_an_archive_that_leaves_the_directory(tmp_path):
    evil = _targz(tmp_path / "evil.tar.gz", {"../escape.txt": b"x"})
    with pytest.raises(ValueError, match="leaves the data directory"):
        datasets.fetch(tmp_path / "data", EXPECTED, evil)
    assert not (tmp_path / "escape.txt").exists()


def test_cli_exit_codes(tmp_path, capsys):
    _tree(tmp_path / "d", FILES)
    (tmp_path / "SUMS").write_text(datasets.format_sums(EXPECTED))
    assert datasets.main(["check", str(tmp_path / "d"), "--sums", str(tmp_path / "SUMS")]) == 0
    (tmp_path / "d" / "b.txt").unlink()
    assert datasets.main(["check", str(tmp_path / "d"), "--sums", str(tmp_path / "SUMS")]) == 1
    assert "datasets: b.txt: missing" in capsys.readouterr().err
    assert datasets.main(["fetch", str(tmp_path / "d"), "--sums", str(tmp_path / "SUMS"),
                          "--url", "file:///nonexistent.tar.gz"]) == 2
