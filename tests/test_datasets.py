"""services/datasets.py: the bench Job's data by SHA-256 (deploy/k8s/components/data/data/SHA256SUMS), checked and
fetched from a .tar.gz (file:// here), a bad archive never replacing good files."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
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


BEAM = "beam/beam_dev.json.gz"


@pytest.mark.slow
def test_the_beam_dev_file_is_listed_and_recorded_as_its_readme_describes_it(data_dir, capsys):
    """BEAM's dev split (added to ../shared/data with its README): the one SHA256SUMS line beyond the default suites'
    files is its sha256, and its content digest is recorded (checked by `verify --as`), for the file the README
    describes: BEAM @ b2a3ee8, 51 conversations (16 of 100K tokens, 28 of 500K, 7 of 1M), 1,020 questions."""
    if not (data_dir / BEAM).exists():
        pytest.skip(f"[requires:data] {BEAM} not found under {data_dir}")
    listed = datasets.parse_sums(SUMS.read_text())
    assert {p for p in listed if p.startswith("beam/")} == {BEAM}
    assert listed[BEAM] == datasets.sha256_file(data_dir / BEAM)
    raw = datasets.load_json(data_dir / BEAM)
    assert (raw["commit"], raw["split"]) == ("b2a3ee8ba12d68f83143dda191097dc3e028ddd3", "dev")
    sizes = [c["size"] for c in raw["conversations"]]
    assert (sizes.count("100K"), sizes.count("500K"), sizes.count("1M"), len(sizes)) == (16, 28, 7, 51)
    assert sum(len(q) for c in raw["conversations"] for q in c["probing_questions"].values()) == 1020
    digest = datasets.CONTENT_DIGESTS[BEAM]
    assert hashlib.sha256(datasets.canonical_json(raw)).hexdigest() == digest
    assert datasets.main(["verify", str(data_dir / BEAM), "--as", BEAM]) == 0
    assert f"content sha256 {digest} as recorded for {BEAM}" in capsys.readouterr().out


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


# -- content digests (LongMemEval S): canonical JSON, key order and whitespace do not matter -----------------------
SAMPLE = "longmemeval/longmemeval_s_sample24.json.gz"


def _sample(data_dir: Path) -> Path:
    if not (data_dir / SAMPLE).exists():
        pytest.skip(f"[requires:data] {SAMPLE} not found under {data_dir}")
    return data_dir / SAMPLE


def test_the_content_digest_is_sha256_of_sorted_compact_utf8_json(tmp_path):
    (tmp_path / "a.json").write_text('{"b": [1, 2.5, "é"],\n  "a": {"z": null, "y": true}}', encoding="utf-8")
    canonical = '{"a":{"y":true,"z":null},"b":[1,2.5,"é"]}'.encode()  # by hand
    assert datasets.canonical_json(datasets.load_json(tmp_path / "a.json")) == canonical
    assert datasets.content_digest(tmp_path / "a.json") == hashlib.sha256(canonical).hexdigest()
    with gzip.open(tmp_path / "a.json.gz", "wt", encoding="utf-8") as f:
        f.write('{"a":{"z":null,"y":true},"b":[1,2.5,"\\u00e9"]}')  # another key order, an escaped é, gzip
    assert datasets.content_digest(tmp_path / "a.json.gz") == hashlib.sha256(canonical).hexdigest()


def _reordered(value):
    """The same JSON with every object's keys in reverse order."""
    if isinstance(value, dict):
        return {k: _reordered(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reordered(v) for v in value]
    return value


def test_the_recorded_sample_digest_checks_the_sample_a_reordered_copy_and_not_a_tampered_one(data_dir, tmp_path):
    sample = _sample(data_dir)
    expected = datasets.CONTENT_DIGESTS[SAMPLE]
    assert datasets.verify_content(sample, expected) == expected
    raw = datasets.load_json(sample)
    copy = tmp_path / "reordered.json"
    copy.write_text(json.dumps(_reordered(raw), indent=3, ensure_ascii=True), encoding="utf-8")
    assert copy.read_bytes() != datasets.canonical_json(raw)  # really another serialisation
    assert datasets.verify_content(copy, expected) == expected
    raw[5]["haystack_sessions"][3][0]["content"] += " "  # one character of one turn
    bad = tmp_path / "tampered.json"
    bad.write_text(json.dumps(raw), encoding="utf-8")
    got = datasets.content_digest(bad)
    assert got != expected
    with pytest.raises(datasets.DigestMismatch) as e:
        datasets.verify_content(bad, expected, SAMPLE)
    assert str(e.value).startswith(f"{bad} ({SAMPLE}): content sha256 {got}, expected {expected}")
    # the command line: exit 0 on the copy, 1 on the tampered file, naming it and both digests
    assert datasets.main(["verify", str(copy), "--as", SAMPLE]) == 0
    assert datasets.main(["verify", str(bad), "--as", SAMPLE]) == 1


def test_get_checks_before_it_moves_in_and_says_when_it_cannot_check(data_dir, tmp_path, capsys):
    sample = _sample(data_dir)
    spec = datasets.OfficialFile("longmemeval/s.json", "file:///nonexistent", datasets.CONTENT_DIGESTS[SAMPLE], "t")
    root = tmp_path / "data"
    path, digest = datasets.get_official(spec, root, src=sample)  # a .gz source is written decompressed
    assert path == root / "longmemeval" / "s.json" and digest == spec.content_sha256
    assert path.read_bytes()[:1] == b"[" and datasets.get_official(spec, root) == (path, digest)  # in place: checked
    bad = tmp_path / "bad.json"
    raw = datasets.load_json(sample)
    raw[0]["answer"] = "something else"
    bad.write_text(json.dumps(raw))
    before = path.read_bytes()
    with pytest.raises(datasets.DigestMismatch, match=rf"{bad} \(for longmemeval/s.json\): content sha256 "
                                                      rf"[0-9a-f]{{64}}, expected {spec.content_sha256}.*nothing "
                                                      "was written"):
        datasets.get_official(spec, root, src=bad)
    assert path.read_bytes() == before and [p.name for p in path.parent.iterdir()] == ["s.json"]  # no .part left
    # no recorded digest (the official S file today): put in place, never said to check; exit 3
    assert datasets.OFFICIAL["longmemeval-s"].content_sha256 is None
    assert datasets.OFFICIAL["longmemeval-s"].url.endswith(
        "/datasets/xiaowu0162/longmemeval-cleaned/resolve/main/longmemeval_s_cleaned.json")
    assert datasets.main(["get", "longmemeval-s", str(root), "--src", str(bad)]) == 3
    err = capsys.readouterr().err
    assert "longmemeval_s_cleaned.json is in place, NOT checked: the repository records no content digest" in err
    assert (root / "longmemeval" / "longmemeval_s_cleaned.json").exists()
    (tmp_path / "notjson.json").write_text("[1,")
    assert datasets.main(["get", "longmemeval-s", str(tmp_path / "d2"), "--src", str(tmp_path / "notjson.json")]) == 2
    assert not (tmp_path / "d2" / "longmemeval" / "longmemeval_s_cleaned.json").exists()
