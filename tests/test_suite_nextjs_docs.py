"""`nextjs-docs` (seed 004): docs fetched from the npm package (a fake `npm` here), the AGENTS.md index, and a run
through the real runner over a tiny docs tree with hand-computed hit/MRR/coverage."""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from services.common.tokens import count_tokens
from services.coordinator.runner import RunConfig, run_suite
from services.coordinator.suites.base import SuiteUnavailable
from services.coordinator.suites.data.nextjs_docs_tasks import TASKS
from services.coordinator.suites.nextjs_docs import NextjsDocsSuite, api_coverage, doc_in_context, doc_rank
from services.coordinator.suites.nextjs_docs_corpus import agents_md_index, fetch_docs, load_docs

# Read before the autouse fixture points MEMRIG_CACHE_DIR at a temporary directory.
REAL_CACHE_DIR = os.environ.get("MEMRIG_CACHE_DIR")
FN = "01-app/03-api-reference/04-functions/"
TINY = {
    "01-app/01-getting-started/intro.md": "# Intro\nNext.js is a React framework.",
    FN + "cookies.md": "# cookies\n`cookies` is an async function that reads HTTP request cookies in Server Components.",
    FN + "revalidatePath.md": "# revalidatePath\n`revalidatePath` purges cached data for a path on demand.",
    FN + "updateTag.md": "# updateTag\n`updateTag` expires a cache tag from a Server Action (read-your-own-writes).",
    "02-pages/ignored.md": "pages router",
}


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def test_agents_md_index_and_section_filter(tmp_path):
    docs = load_docs(write_tree(tmp_path / "docs", TINY), ["01-app"])
    assert sorted(docs) == sorted(k for k in TINY if k.startswith("01-app/"))
    idx = agents_md_index(list(docs))
    assert idx.endswith("|01-app/01-getting-started:{intro.md}\n"
                        "|01-app/03-api-reference/04-functions:{cookies.md,revalidatePath.md,updateTag.md}\n")
    with pytest.raises(SuiteUnavailable, match="no .md files"):
        load_docs(tmp_path / "docs", ["03-architecture"])


def test_doc_rank_and_api_coverage():
    mems = [{"evidence_ids": ["x"], "source": ""}, {"evidence_ids": [], "source": FN + "cookies.md"},
            {"evidence_ids": [FN + "updateTag.md"]}]
    assert doc_rank(mems, [FN + "updateTag.md", FN + "cookies.md"]) == 2
    assert doc_rank(mems, ["nope.md"]) is None
    assert doc_in_context(None, "## 01-app/x.md\ntext", ["01-app/x.md"]) and doc_in_context(2, "", ["y.md"])
    assert not doc_in_context(None, "## 01-app/y.md", ["01-app/x.md"])
    assert api_coverage("import { updateTag } from 'next/cache'", ["updateTag", "next/cache"])
    assert not api_coverage("updatetag", ["updateTag"])  # API names are case-sensitive


def test_fetch_docs_with_npm_pack(tmp_path, monkeypatch):
    """A fake `npm` on PATH answers `npm pack next@X --pack-destination D` with a hand-made tarball."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, text in {"package/package.json": "{}", "package/dist/docs/01-app/a.md": "# A",
                           "package/dist/docs/index.md": "# Docs", "package/dist/server/x.js": "x"}.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    tgz = tmp_path / "next-9.9.9.tgz"
    tgz.write_bytes(buf.getvalue())
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    npm = bin_dir / "npm"
    npm.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/calls\ncp {tgz} "$4"/\necho next-9.9.9.tgz\n')
    npm.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    docs = fetch_docs("9.9.9", tmp_path / "cache")
    assert sorted(p.relative_to(docs).as_posix() for p in docs.rglob("*.md")) == ["01-app/a.md", "index.md"]
    assert fetch_docs("9.9.9", tmp_path / "cache") == docs  # cached: npm runs once
    assert (tmp_path / "calls").read_text().splitlines() == [
        f"pack next@9.9.9 --pack-destination {tmp_path / 'cache' / '9.9.9'} --silent"]
    assert not list((tmp_path / "cache" / "9.9.9").glob("*.tgz"))


@pytest.mark.slow
async def test_runner_over_a_tiny_docs_tree(tmp_path):
    docs = write_tree(tmp_path / "docs", TINY)
    out = await run_suite(RunConfig(suite="nextjs-docs", backends=["full-context"], out_dir=str(tmp_path / "run"),
                                    in_process=True, options={"docs_dir": str(docs)}))
    assert out.state == "succeeded", out.failures
    m = json.loads((out.run_dir / "metrics.json").read_text())
    fc = m["conditions"]["full-context"]
    # three tasks have their doc in the tree; full-context returns every doc, newest block first:
    # updateTag (rank 1), revalidatePath (2), cookies (3), intro (4)
    assert fc["n"] == 3 and fc["overall"]["doc_hit"]["mean"] == 1.0
    assert fc["overall"]["rr"]["mean"] == pytest.approx((1 + 1 / 2 + 1 / 3) / 3)
    assert fc["overall"]["api_coverage"]["mean"] == 1.0
    idx = agents_md_index([k for k in TINY if k.startswith("01-app/")])
    assert m["agents_md"]["overall"]["doc_hit"]["mean"] == 1.0
    assert m["agents_md"]["overall"]["token_spend"]["mean"] == count_tokens(idx)
    report = (out.run_dir / "report.md").read_text()
    assert "## Next.js docs as memories (seed 004)" in report and "needs a real coding agent" in report


def test_tasks_match_the_real_docs():
    """Every task's answering docs exist in the real bundled docs and carry the APIs it expects."""
    root = os.environ.get("MEMRIG_NEXTJS_DOCS_DIR")
    if not root or not Path(root).is_dir():
        # the suite's own fetch (`npm pack next@16.4.6`, cached under the real cache dir, not the test's tmp one)
        cache = Path(REAL_CACHE_DIR or Path.home() / ".cache" / "memrig") / "nextjs-docs"
        try:
            root = str(fetch_docs(NextjsDocsSuite.defaults["version"], root=cache))
        except SuiteUnavailable as e:
            pytest.skip(f"[requires:nextjs-docs] {e} (or set MEMRIG_NEXTJS_DOCS_DIR to an unpacked next/dist/docs)")
    for tid, _prompt, docs, apis in TASKS:
        text = "\n".join((Path(root) / d).read_text() for d in docs)
        assert all(a in text for a in apis), tid
