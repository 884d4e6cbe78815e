"""Can a real system run here, where its source is, and the one shape of every adapter's install command.

`Availability` is what each real adapter's `availability()` and `install()` return (the registry skips an
unavailable backend and reports `reason`). A `PinnedSource` is a third-party project read, unmodified and never
copied, from `../shared/third_party/<dir>/` beside the project (or the directory an environment variable names); it
is usable when its required files exist and its code hashes to the digest of the pinned commit's files, so a changed
checkout is named rather than benchmarked under the pinned name.

The digest (`tree_digest`): sha256 over the lines `"<sha256 of the file>  <path>\\n"`, one per file matched by the
source's patterns (paths relative to the source directory, `/`-separated, sorted; `__pycache__` files excluded). A
symlink is hashed as git stores it, by its target path (the bytes `readlink` prints, no newline), never by the file it
points to: a clone with real symlinks and one where git wrote them as plain files holding that path
(`core.symlinks=false`, or a copy that materialised them so) give the same digest. On the latter it is the same figure
as `find <dirs> -type f ... | sort | xargs sha256sum | sha256sum` run in the source directory.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[3]
THIRD_PARTY = PROJECT_ROOT.parent / "shared" / "third_party"  # ../shared/third_party beside the project


@dataclass(frozen=True)
class Availability:
    """Whether a real system can run here. `reason` is "" when `ok`, else one sentence saying what is missing and
    how to fix it. The other fields say what was found (empty when not reached): the system's release, where its
    code is read from, and the runtime (binary path and version) that runs it."""

    ok: bool
    reason: str
    system: str = ""  # "OpenClaw", "Quaid", "Octybot"
    version: str = ""  # the system's release as found ("2026.9.6", "0.2.15-alpha @ 9262e69", "9d0d070")
    source: str = ""  # the directory its code is read from
    runtime: str = ""  # the binary that runs it (node, python, bun)
    runtime_version: str = ""
    notes: tuple[str, ...] = field(default=())  # further facts for the install command's line (pins, checks)

    def unavailable(self, reason: str) -> Availability:
        """The same findings, not ok, for `reason`."""
        return Availability(False, reason, self.system, self.version, self.source, self.runtime,
                            self.runtime_version, self.notes)

    def summary(self) -> str:
        """One line for a person: `<system> <version> from <source> on <runtime name> <version> (<runtime path>)`,
        then the notes."""
        parts = [f"{self.system} {self.version}".strip()]
        if self.source:
            parts.append(f"from {self.source}")
        if self.runtime:
            parts.append(f"on {Path(self.runtime).name} {self.runtime_version} ({self.runtime})".replace("  ", " "))
        return " ".join(parts) + "".join(f"; {n}" for n in self.notes)


def blob_bytes(path: Path) -> bytes:
    """A file's content as git stores it: a symlink's target path (not followed, whatever it points to, even
    nothing), else the file's bytes."""
    return os.fsencode(os.readlink(path)) if path.is_symlink() else path.read_bytes()


def tree_digest(root: Path, patterns: tuple[str, ...]) -> str:
    """sha256 of the `"<sha256>  <relative path>\\n"` lines of every file or symlink under `root` matched by a glob
    pattern (relative to `root`), sorted by path, each hashed by `blob_bytes` (a symlink by its target path); files
    under a `__pycache__` directory are left out (Python writes them beside imported code)."""
    rels = sorted({p.relative_to(root).as_posix() for pat in patterns for p in root.glob(pat)
                   if (p.is_symlink() or p.is_file()) and "__pycache__" not in p.relative_to(root).parts})
    lines = "".join(f"{hashlib.sha256(blob_bytes(root / r)).hexdigest()}  {r}\n" for r in rels)
    return hashlib.sha256(lines.encode()).hexdigest()


@dataclass(frozen=True)
class PinnedSource:
    """A third-party project's source at a pinned commit, read where it lies.

    `dir_name` under ../shared/third_party (or `$<env>`); `required`: files that must exist (the first missing one is
    named); `patterns`: the files whose `tree_digest` must equal `digest`, the pinned commit's; `what`: the name of
    that set of files in messages ("memory code", "modules")."""

    system: str  # "Quaid"
    repo: str  # "Quaid-Labs/quaid"
    commit: str  # 40 hex digits
    dir_name: str  # the directory under ../shared/third_party
    env: str  # the variable that overrides the directory
    required: tuple[str, ...]
    patterns: tuple[str, ...]
    digest: str
    what: str = "code"

    def path(self) -> Path:
        env = os.environ.get(self.env)
        return Path(env).expanduser() if env else THIRD_PARTY / self.dir_name

    def check(self) -> str:
        """"" when the source is present and is the pinned commit's; else why not, naming the directory."""
        src = self.path()
        missing = [f for f in self.required if not (src / f).is_file()]
        if missing:
            return (f"{self.system}'s source is not at {src} (missing {missing[0]}); put {self.repo} @ "
                    f"{self.commit[:7]} at ../shared/third_party/{self.dir_name} beside the project or set {self.env}")
        got = tree_digest(src, self.patterns)
        if got != self.digest:
            return (f"{self.system}'s {self.what} at {src} is not commit {self.commit[:7]} of {self.repo} "
                    f"(digest {got[:12]}, pinned {self.digest[:12]})")
        return ""


def install_main(name: str, install: Callable[[], Availability]) -> int:
    """The body of every `python -m services.adapters.<name>.install` (`make setup-<system>`): install what is
    missing, then print what runs and exit 0, or print why it cannot and exit 1 (bench-all then skips the backend
    and says why)."""
    a = install()
    if a.ok:
        print(f"{name}: {a.summary()}")
        return 0
    print(f"{name} unavailable: {a.reason}", file=sys.stderr)
    return 1
