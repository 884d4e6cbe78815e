"""The benchmark data for a machine without ../shared/data (a cluster's bench Job): listed by SHA-256, fetched once,
checked before use; and the official files a user fetches (LongMemEval S), checked by a content digest.

    python -m services.datasets sums DIR                      the SHA256SUMS of DIR (every file but README.md)
    python -m services.datasets check DIR --sums FILE         every listed file present with its digest
    python -m services.datasets fetch DIR --sums FILE [--url URL]
        check; if anything is missing or differs, download URL (a .tar.gz of a data directory, http(s) or
        file://), unpack it into a hidden directory inside DIR, check that, then move its files into place
    python -m services.datasets digest FILE                   the canonical content digest of a JSON (.gz) file
    python -m services.datasets verify FILE --as NAME         FILE against the content digest recorded for NAME
    python -m services.datasets get NAME DIR [--src PATH] [--url URL]
        put the official file NAME (OFFICIAL) at DIR/<its path>: copied from PATH, else downloaded from URL
        (default: its official address), written beside its place under a temporary name, checked, then moved in

The content digest: parse the JSON, serialise it with sorted keys, no whitespace (separators "," and ":"),
ensure_ascii=False, encode UTF-8, sha256. Key order, indentation and gzip do not change it; any value does. The
repository records one only for a file whose digest it computed itself (CONTENT_DIGESTS); a file without one is
put in place but never said to check (exit 3).

SHA256SUMS is sha256sum's format: `<64 hex>  <relative path>` a line. deploy/k8s/components/data/data/SHA256SUMS
lists every file of the workplace's ../shared/data but its READMEs, as it is there: the files the default suites read
(LoCoMo, its audit, LongMemEval, MADial-Bench, with their licences) and BEAM's dev split; the bench Job's init
container runs `fetch` into its data volume.
Exit 0 = every file checks; 1 = a file is missing or differs (each named); 2 = bad arguments or a failed download;
3 = in place, but no digest is recorded for it, so it is not checked.
The data is public but not ours: it is never in this repository or the image, only on the volume.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import shutil
import sys
import tarfile
import tempfile
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from services.common.errors import InputError

SKIP = {"README.md"}


@dataclass(frozen=True)
class OfficialFile:
    """A public file a user fetches: where it goes under the data directory, its official address, and its content
    digest when this repository computed one (None: not recorded, so never claimed to check)."""

    path: str
    url: str
    content_sha256: str | None
    source: str


# Content digests this repository computed itself, by the data directory's relative path.
CONTENT_DIGESTS: dict[str, str] = {
    # the 24-question S sample of ../shared/data (4 per question type), computed from that file
    "longmemeval/longmemeval_s_sample24.json.gz": "575c5038f5d13ab7de55eed0cb034250bdddd6aa35df81191bad47eefa61654c",
    # BEAM's dev split of ../shared/data (mohammadtavakoli78/BEAM @ b2a3ee8: 51 conversations, 1,020 questions),
    # computed from that file
    "beam/beam_dev.json.gz": "4350c9fa71098b5d28bd982e54579f1187cd994861631f3580ae4917828cfced",
}

OFFICIAL: dict[str, OfficialFile] = {
    # The official LongMemEval S (500 questions, ~264 MB). Its digest is not recorded: nobody here has had the file
    # (no download from this workplace), and the 498-question copy in hussainzs/Memoria is not the official file.
    "longmemeval-s": OfficialFile(
        "longmemeval/longmemeval_s_cleaned.json",
        "https://huggingface.co/datasets/xiaowu0162/longmemeval-cleaned/resolve/main/longmemeval_s_cleaned.json",
        CONTENT_DIGESTS.get("longmemeval/longmemeval_s_cleaned.json"),
        "Hugging Face dataset xiaowu0162/longmemeval-cleaned (MIT, Wu et al., ICLR 2025)"),
}


class DigestMismatch(InputError):
    """A file whose content digest is not the recorded one; `field` is the file, the message names both digests."""

    def __init__(self, what: str, got: str, expected: str, note: str = ""):
        super().__init__(what, f"content sha256 {got}, expected {expected} (canonical JSON: sorted keys, no "
                         f"whitespace, UTF-8){note}")
        self.got, self.expected = got, expected


def load_json(path: Path) -> Any:
    """A JSON file, gzip-compressed when its name ends in .gz."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def canonical_json(value: Any) -> bytes:
    """The canonical form the content digest hashes: sorted keys, no whitespace, non-ASCII kept, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def content_digest(path: Path) -> str:
    """sha256 of canonical_json(the file's JSON)."""
    return hashlib.sha256(canonical_json(load_json(path))).hexdigest()


def verify_content(path: Path, expected: str, name: str | None = None) -> str:
    """The file's content digest when it is `expected`; DigestMismatch naming the file and both digests otherwise."""
    got = content_digest(path)
    if got != expected:
        raise DigestMismatch(f"{path}{f' ({name})' if name else ''}", got, expected)
    return got


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def sums_of(root: Path) -> dict[str, str]:
    """{relative posix path: sha256} of every file under root except README.md, sorted by path."""
    out = {}
    for p in sorted(x for x in root.rglob("*") if x.is_file() and x.name not in SKIP):
        out[p.relative_to(root).as_posix()] = sha256_file(p)
    return out


def format_sums(sums: dict[str, str]) -> str:
    return "".join(f"{d}  {p}\n" for p, d in sums.items())


def parse_sums(text: str) -> dict[str, str]:
    """SHA256SUMS text into {path: digest}; a malformed line or an unsafe path is a ValueError naming the line."""
    out: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        digest, sep, path = line.partition("  ")
        pp = PurePosixPath(path)
        if not sep or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise ValueError(f"SHA256SUMS line {n}: expected '<64 lowercase hex>  <path>', got {line!r}")
        if not path or pp.is_absolute() or ".." in pp.parts:
            raise ValueError(f"SHA256SUMS line {n}: path {path!r} must be relative, without '..'")
        out[path] = digest
    if not out:
        raise ValueError("SHA256SUMS: no file listed")
    return out


def check(root: Path, expected: dict[str, str]) -> list[str]:
    """One problem a line (missing, or which digest it has instead); empty = every file checks."""
    bad = []
    for rel, digest in expected.items():
        p = root / rel
        if not p.is_file():
            bad.append(f"{rel}: missing")
            continue
        got = sha256_file(p)
        if got != digest:
            bad.append(f"{rel}: sha256 {got}, expected {digest}")
    return bad


def _safe_extract(tar: tarfile.TarFile, dest: Path) -> None:
    """Regular files and directories only, every path inside dest (no links, devices or '..')."""
    for m in tar.getmembers():
        pp = PurePosixPath(m.name)
        if pp.is_absolute() or ".." in pp.parts:
            raise ValueError(f"archive member {m.name!r} leaves the data directory")
        if not (m.isfile() or m.isdir()):
            raise ValueError(f"archive member {m.name!r} is neither a file nor a directory")
    tar.extractall(dest, filter="data")


def fetch(root: Path, expected: dict[str, str], url: str, timeout_s: float = 600.0) -> list[str]:
    """Make root hold every expected file: nothing to do when it already checks; else download `url`, unpack
    into a hidden directory inside root (the same volume; removed at the end), check the unpacked copy (a bad
    archive leaves root's files as they were), then move each listed file into place."""
    if not check(root, expected):
        return []
    if not url:
        return check(root, expected) + ["no MEMRIG_DATA_URL / --url to fetch the data from"]
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root, prefix=".fetch-") as tmp:
        archive = Path(tmp) / "data.tar.gz"
        with urllib.request.urlopen(url, timeout=timeout_s) as r, open(archive, "wb") as f:
            shutil.copyfileobj(r, f)
        unpacked = Path(tmp) / "data"
        unpacked.mkdir()
        with tarfile.open(archive, "r:gz") as t:
            _safe_extract(t, unpacked)
        bad = check(unpacked, expected)
        if bad:
            return [f"{url}: {b}" for b in bad]
        for rel in expected:
            dst = root / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            (unpacked / rel).replace(dst)
    return check(root, expected)


def get_official(spec: OfficialFile, root: Path, src: Path | None = None, url: str | None = None,
                 timeout_s: float = 600.0) -> tuple[Path, str | None]:
    """Put `spec`'s file at root/spec.path: copied from `src` (a .gz is decompressed) or downloaded from `url`
    (default spec.url), written beside its place under a temporary name and checked before it is moved in, so a
    bad copy never replaces anything. A file already there is checked, not replaced. Returns (path, its content
    digest when checked; None when the repository records no digest). DigestMismatch when it differs."""
    dest = root / spec.path
    if dest.exists() and src is None and url is None:
        return dest, (verify_content(dest, spec.content_sha256, spec.path) if spec.content_sha256 else None)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            if src is not None:
                with (gzip.open(src, "rb") if src.suffix == ".gz" else open(src, "rb")) as f:
                    shutil.copyfileobj(f, out, 1 << 20)
            else:
                with urllib.request.urlopen(url or spec.url, timeout=timeout_s) as r:
                    shutil.copyfileobj(r, out, 1 << 20)
        digest = None
        if spec.content_sha256:
            try:
                digest = verify_content(tmp, spec.content_sha256)
            except DigestMismatch as e:
                raise DigestMismatch(f"{src or url or spec.url} (for {spec.path})", e.got, e.expected,
                                     f"; nothing was written to {dest}") from None
        else:
            load_json(tmp)  # at least whole JSON
        umask = os.umask(0)
        os.umask(umask)
        tmp.chmod(0o666 & ~umask)  # mkstemp's 0600 would make the data readable by its writer alone
        tmp.replace(dest)
        return dest, digest
    finally:
        tmp.unlink(missing_ok=True)


def _content_main(a: argparse.Namespace, ap: argparse.ArgumentParser) -> int:
    """digest / verify / get."""
    try:
        if a.cmd == "digest":
            print(f"{content_digest(Path(a.file))}  {a.file}")
            return 0
        if a.cmd == "verify":
            expected = CONTENT_DIGESTS.get(a.name) or (OFFICIAL[a.name].content_sha256 if a.name in OFFICIAL else None)
            if a.name not in CONTENT_DIGESTS and a.name not in OFFICIAL:
                ap.error(f"--as: {a.name!r} is not a known file; known: {', '.join(sorted({*CONTENT_DIGESTS, *OFFICIAL}))}")
            if not expected:
                print(f"datasets: {a.file}: no content digest is recorded for {a.name}; not checked", file=sys.stderr)
                return 3
            verify_content(Path(a.file), expected, a.name)
            print(f"datasets: {a.file}: content sha256 {expected} as recorded for {a.name}")
            return 0
        spec = OFFICIAL[a.name]
        path, digest = get_official(spec, Path(a.dir), Path(a.src) if a.src else None, a.url or None)
    except DigestMismatch as e:
        print(f"datasets: {e}", file=sys.stderr)
        return 1
    except (OSError, ValueError) as e:  # unreadable or not JSON, a failed download
        print(f"datasets: {a.cmd}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    if digest is None:
        print(f"datasets: {path} is in place, NOT checked: the repository records no content digest for {spec.path} "
              f"yet (services/datasets.py CONTENT_DIGESTS)", file=sys.stderr)
        return 3
    print(f"datasets: {path}: content sha256 {digest}, as recorded")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m services.datasets", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sums", help="print the SHA256SUMS of a data directory")
    s.add_argument("dir")
    for name in ("check", "fetch"):
        c = sub.add_parser(name)
        c.add_argument("dir")
        c.add_argument("--sums", required=True, help="SHA256SUMS file")
        if name == "fetch":
            c.add_argument("--url", default="", help="a .tar.gz of a data directory (http(s):// or file://)")
    d = sub.add_parser("digest", help="the canonical content digest of a JSON (or .json.gz) file")
    d.add_argument("file")
    v = sub.add_parser("verify", help="a file against the content digest recorded for a name")
    v.add_argument("file")
    v.add_argument("--as", dest="name", required=True, help="a recorded name (CONTENT_DIGESTS path or OFFICIAL name)")
    g = sub.add_parser("get", help="put an official file in a data directory, checked")
    g.add_argument("name", choices=sorted(OFFICIAL))
    g.add_argument("dir", help="the data directory (MEMRIG_DATA_DIR)")
    g.add_argument("--src", default="", help="a local copy to take instead of downloading")
    g.add_argument("--url", default="", help="download from here instead of the official address")
    a = ap.parse_args(argv)
    if a.cmd in ("digest", "verify", "get"):
        return _content_main(a, ap)
    root = Path(a.dir)
    if a.cmd == "sums":
        if not root.is_dir():
            ap.error(f"dir: {root} is not a directory")
        sys.stdout.write(format_sums(sums_of(root)))
        return 0
    try:
        expected = parse_sums(Path(a.sums).read_text())
    except (OSError, ValueError) as e:
        ap.error(f"--sums: {e}")
    try:
        bad = check(root, expected) if a.cmd == "check" else fetch(root, expected, a.url)
    except (OSError, ValueError, tarfile.TarError) as e:
        print(f"datasets: fetch {a.url}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    for b in bad:
        print(f"datasets: {b}", file=sys.stderr)
    if not bad:
        print(f"datasets: {len(expected)} files in {root} match {a.sums}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
