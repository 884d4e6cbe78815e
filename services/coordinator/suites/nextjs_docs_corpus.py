"""The Next.js documentation the `nextjs-docs` suite ingests, and its static AGENTS.md index.

Since Next.js 16.2 the `next` npm package ships version-matched docs at `dist/docs/` (stated in those docs,
`01-app/02-guides/ai-agents.md`, next@16.4.6), so the corpus comes from the package registry with the ordinary
client: `npm pack next@<version>` into memrig's cache dir, then the `dist/docs/**.md` members are unpacked
(tarfile's "data" filter). Nothing is copied into the repo. A local directory of .md files works too
(option `docs_dir`).

`agents_md_index` builds the static alternative the seed compares against: an AGENTS.md holding a compressed
index of the docs (one line per directory: `|dir:{file1,file2,...}`), the form of Vercel's `agents-md` codemod
(`npx @next/codemod agents-md`, described in the same guide), which tells the agent to read the files it needs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from collections import defaultdict
from pathlib import Path

from services.coordinator.suites.base import SuiteUnavailable

DOCS_PREFIX = "package/dist/docs/"
AGENTS_MD_HEADER = ("# AGENTS.md\n\nThis version of Next.js has breaking changes. Before writing code, read the "
                    "relevant file in node_modules/next/dist/docs/. Docs index (dir:{files}):\n")


def cache_root() -> Path:
    return Path(os.environ.get("MEMRIG_CACHE_DIR") or Path.home() / ".cache" / "memrig") / "nextjs-docs"


def fetch_docs(version: str, root: Path | None = None) -> Path:
    """The docs directory of next@version, fetched once with `npm pack` and cached."""
    dest = (root or cache_root()) / version
    docs = dest / "docs"
    if (docs / ".complete").exists():
        return docs
    npm = shutil.which("npm")
    if npm is None:
        raise SuiteUnavailable("nextjs-docs: npm not found; install Node.js/npm or pass docs_dir=<dir of .md files>")
    dest.mkdir(parents=True, exist_ok=True)
    try:
        out = subprocess.run([npm, "pack", f"next@{version}", "--pack-destination", str(dest), "--silent"],
                             capture_output=True, text=True, timeout=600, check=True)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        raise SuiteUnavailable(f"nextjs-docs: `npm pack next@{version}` failed: {getattr(e, 'stderr', '') or e}") \
            from None
    tgz = dest / out.stdout.strip().splitlines()[-1]
    tmp = dest / "docs.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    with tarfile.open(tgz) as tf:
        members = [m for m in tf.getmembers() if m.name.startswith(DOCS_PREFIX) and m.name.endswith((".md", ".mdx"))]
        if not members:
            raise SuiteUnavailable(f"nextjs-docs: next@{version} ships no dist/docs (bundled docs start at 16.2)")
        for m in members:
            m.name = m.name[len(DOCS_PREFIX):]
        tf.extractall(tmp, members=members, filter="data")
    shutil.rmtree(docs, ignore_errors=True)
    tmp.rename(docs)
    tgz.unlink()
    (docs / ".complete").write_text(version)
    return docs


def load_docs(docs_dir: Path, sections: list[str]) -> dict[str, str]:
    """Relative path → text for every .md/.mdx under the given top-level sections (all when empty)."""
    if not docs_dir.is_dir():
        raise SuiteUnavailable(f"nextjs-docs: {docs_dir} is not a directory")
    out = {}
    for p in sorted(docs_dir.rglob("*")):
        if p.suffix not in (".md", ".mdx") or not p.is_file():
            continue
        rel = p.relative_to(docs_dir).as_posix()
        if sections and not any(rel == s or rel.startswith(s.rstrip("/") + "/") for s in sections):
            continue
        out[rel] = p.read_text(encoding="utf-8", errors="replace")
    if not out:
        raise SuiteUnavailable(f"nextjs-docs: no .md files under {docs_dir} for sections {sections}")
    return out


def agents_md_index(paths: list[str]) -> str:
    by_dir: dict[str, list[str]] = defaultdict(list)
    for p in sorted(paths):
        d, _, f = p.rpartition("/")
        by_dir[d].append(f)
    return AGENTS_MD_HEADER + "\n".join(f"|{d}:{{{','.join(fs)}}}" for d, fs in sorted(by_dir.items())) + "\n"
