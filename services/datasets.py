"""The benchmark data for a machine without ../shared/data (a cluster's bench Job): listed by SHA-256, fetched once,
checked before use.

    python -m services.datasets sums DIR                      the SHA256SUMS of DIR (every file but README.md)
    python -m services.datasets check DIR --sums FILE         every listed file present with its digest
    python -m services.datasets fetch DIR --sums FILE [--url URL]
        check; if anything is missing or differs, download URL (a .tar.gz of a data directory, http(s) or
        file://), unpack it into a hidden directory inside DIR, check that, then move its files into place

SHA256SUMS is sha256sum's format: `<64 hex>  <relative path>` a line. deploy/k8s/components/bench/data/SHA256SUMS
lists the files the default suites read (LoCoMo, its audit, LongMemEval, MADial-Bench, with their licences), as
they are in the workplace's ../shared/data; the bench Job's init container runs `fetch` into its data volume.
Exit 0 = every file checks; 1 = a file is missing or differs (each named); 2 = bad arguments or a failed download.
The data is public but not ours: it is never in this repository or the image, only on the volume.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
import tarfile
import tempfile
import urllib.request
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

SKIP = {"README.md"}


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
    a = ap.parse_args(argv)
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
