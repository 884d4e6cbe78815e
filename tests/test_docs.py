"""The README and docs/ hold to what they name (issue 48), checked in `make test` (quick tier, well under a second
but for `--help` of the lazily loaded commands):

- every relative link in README.md and docs/**/*.md resolves: the file (or directory) exists, and a `#anchor` into a
  Markdown file names one of its headings (GitHub's anchors);
- every `make` target a doc names, in a code span or block, is a rule in the Makefile;
- every `memrig` subcommand a doc names parses (`memrig CMD --help`, in-process through services.cli's parser), and
  every `memrig serve NAME` names a service or backend the CLI knows;
- every section of docs/results/ is a dated measurement that opens with its Command, Commit (a commit of this
  repository), Host and Load, and the text before a file's first section holds no figure (docs/results/README.md);
- the README stays a front door: at most 250 lines, linking every doc.
"""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
RESULTS = DOCS / "results"
README_MAX_LINES = 250


def doc_files() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def rel(p: Path, root: Path = REPO) -> str:
    return str(p.relative_to(root))


# ------------------------------------------------------------------------------------------------------
# Reading Markdown

FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"`([^`]+)`")
LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(([^()\s]+)\)")


def split_fences(text: str) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(prose lines, code-block lines), each as (line number, text)."""
    prose, code, inside = [], [], False
    for n, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            inside = not inside
            continue
        (code if inside else prose).append((n, line))
    return prose, code


def paragraphs(lines: list[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """Runs of non-blank prose lines joined by spaces (an inline code span may wrap), with the first line's number."""
    buf: list[tuple[int, str]] = []
    for n, line in [*lines, (0, "")]:
        if line.strip():
            buf.append((n, line))
        elif buf:
            yield buf[0][0], " ".join(x.strip() for _, x in buf)
            buf = []


def code_snippets(text: str) -> Iterator[tuple[int, str]]:
    """Every inline code span and every line of a code block, with its line number."""
    prose, code = split_fences(text)
    yield from code
    for n, para in paragraphs(prose):
        for m in INLINE_CODE.finditer(para):
            yield n, m.group(1)


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: links to their text, markup and punctuation dropped, lower case,
    spaces to hyphens."""
    t = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    t = re.sub(r"[^\w\- ]", "", t)
    return t.replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    """The anchors of a Markdown file's headings (a repeated heading gets -1, -2, ... as on GitHub)."""
    prose, _ = split_fences(path.read_text())
    seen: dict[str, int] = {}
    out = set()
    for _, line in prose:
        m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        a = slug(m.group(2))
        k = seen.get(a, 0)
        seen[a] = k + 1
        out.add(a if k == 0 else f"{a}-{k}")
    return frozenset(out)


def links(path: Path) -> Iterator[tuple[int, str]]:
    """Every link and image target in the prose of `path` (code spans and blocks are not links)."""
    prose, _ = split_fences(path.read_text())
    for n, line in prose:
        line = INLINE_CODE.sub("", line)
        for rx in (LINK, IMAGE):
            for m in rx.finditer(line):
                yield n, m.group(1)


# ------------------------------------------------------------------------------------------------------
# Links


def test_every_relative_link_resolves():
    bad = []
    for doc in doc_files():
        for n, target in links(doc):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
                continue
            file, _, anchor = target.partition("#")
            dest = (doc.parent / file).resolve() if file else doc
            where = f"{rel(doc)}:{n}: {target}"
            if not dest.exists():
                bad.append(f"{where}: no such file")
            elif not dest.is_relative_to(REPO):
                bad.append(f"{where}: outside the repository")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                bad.append(f"{where}: no heading with anchor #{anchor} in {rel(dest)}")
    assert not bad, "broken links:\n" + "\n".join(bad)


def test_the_link_checker_reads_links_and_anchors_as_github_does(tmp_path):
    doc = tmp_path / "a.md"
    doc.write_text("# Title: `the` thing\n## Again\n## Again\n## LongMemEval's turn→session figures\n"
                   "[x](b.md#y) `[not](a link)` ![img](p.png)\n```\n[nor](this)\n```\n")
    assert anchors(doc) == {"title-the-thing", "again", "again-1", "longmemevals-turnsession-figures"}
    assert list(links(doc)) == [(5, "b.md#y"), (5, "p.png")]


# ------------------------------------------------------------------------------------------------------
# make targets and memrig commands

SEPARATORS = re.compile(r"&&|\|\||[;|()]")
PREFIX = re.compile(r"^(?:[A-Z_][A-Z0-9_]*=\S*|nice|timeout|time|-n|-?\d+|\$)$")


def commands(snippet: str) -> Iterator[list[str]]:
    """The simple commands of a shell snippet, each as its words, the leading env assignments and `nice -n N` left
    out, a trailing comment cut and a `<placeholder>` taken as one word."""
    snippet = re.sub(r"<[^<>]*>", "PLACEHOLDER", re.sub(r"\s#.*$", "", snippet))
    for part in SEPARATORS.split(snippet):
        words = part.split()
        while words and PREFIX.match(words[0]):
            words.pop(0)
        if words:
            yield words


def named(tool: str) -> dict[str, list[str]]:
    """{the word after `tool` (make: every target word), [where]} over every doc's code spans and blocks."""
    found: dict[str, list[str]] = {}
    for doc in doc_files():
        for n, snippet in code_snippets(doc.read_text()):
            for words in commands(snippet):
                if words[0] != tool and not words[0].endswith(f"/{tool}"):
                    continue
                args = words[1:] if tool == "make" else words[1:2]
                for w in args:
                    if not re.fullmatch(r"[a-z][\w.-]*", w):
                        if tool == "make" and "=" not in w and not w.startswith("-"):
                            break
                        continue
                    found.setdefault(w, []).append(f"{rel(doc)}:{n}")
    return found


def makefile_targets() -> set[str]:
    text = (REPO / "Makefile").read_text()
    return {m.group(1) for m in re.finditer(r"^([A-Za-z0-9][\w.-]*)\s*:(?!=)", text, re.M)}


def test_every_make_target_a_doc_names_is_in_the_makefile():
    targets = makefile_targets()
    assert {"test", "bench-all", "setup"} <= targets
    names = named("make")
    assert "bench-all" in names and "test" in names, "the docs name no make target at all: the reader is broken"
    missing = {t: where for t, where in names.items() if t not in targets}
    assert not missing, f"make targets the docs name that the Makefile lacks: {missing}"


def _help(argv: list[str]) -> tuple[int, str]:
    from services.cli import build_parser

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            build_parser().parse_args(argv)
        except SystemExit as e:
            return int(e.code or 0), out.getvalue() + err.getvalue()
    return 0, out.getvalue()


def test_every_memrig_subcommand_a_doc_names_parses():
    names = named("memrig")
    assert {"bench", "bench-all", "compare"} <= set(names), sorted(names)
    bad = {}
    for cmd, where in sorted(names.items()):
        code, text = _help([cmd, "--help"])
        if code != 0 or "usage:" not in text:
            bad[cmd] = (where, code, text[-300:])
    assert not bad, f"`memrig CMD --help` fails for commands the docs name: {bad}"


def test_every_service_memrig_serve_names_exists():
    from services.adapters.registry import all_specs
    from services.launcher import SERVICES

    known = set(SERVICES) | set(all_specs())
    bad = []
    for doc in doc_files():
        for n, snippet in code_snippets(doc.read_text()):
            for words in commands(snippet):
                if words[:2] == ["memrig", "serve"] and len(words) > 2 and re.fullmatch(r"[a-z][\w:-]*", words[2]):
                    name = words[2].removeprefix("adapter:")
                    if name not in known:
                        bad.append(f"{rel(doc)}:{n}: memrig serve {words[2]}")
    assert not bad, f"services the CLI does not know: {bad}"


def test_the_command_reader_finds_targets_and_subcommands():
    assert list(commands("nice -n 10 make bench-lme-s QUESTIONS=100 OUT=x && docker push y  # comment")) == [
        ["make", "bench-lme-s", "QUESTIONS=100", "OUT=x"], ["docker", "push", "y"]]
    assert list(commands("kubectl -n memrig run results")) == [["kubectl", "-n", "memrig", "run", "results"]]
    assert list(commands("MEMRIG_X=1 .venv/bin/memrig bench --suite s")) == [[".venv/bin/memrig", "bench", "--suite",
                                                                            "s"]]


# ------------------------------------------------------------------------------------------------------
# docs/results: every figure with its command, commit, host and load

FIGURE = re.compile(r"(?<![\w@.#/+,-])\d+(?:[.,]\d+)*")
META = ("Command", "Commit", "Host", "Load")
HASH = re.compile(r"(?<![\w/@-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}(?![\w@-])")


def figures(text: str) -> list[str]:
    """Numbers in prose: code spans, link targets and commit hashes are not figures."""
    t = INLINE_CODE.sub("", text)
    t = re.sub(r"\]\([^)]*\)", "]", t)
    t = HASH.sub("", t)
    return FIGURE.findall(t)


def sections(path: Path) -> tuple[str, list[tuple[str, list[str]]]]:
    """(the text before the first `## `, [(heading, body lines)])."""
    lines = path.read_text().splitlines()
    pre: list[str] = []
    out: list[tuple[str, list[str]]] = []
    for line in lines:
        if line.startswith("## "):
            out.append((line[3:].strip(), []))
        elif out:
            out[-1][1].append(line)
        else:
            pre.append(line)
    return "\n".join(pre), out


def metadata(body: list[str]) -> dict[str, str]:
    """The section's opening list (its first run of non-blank lines): {label: value} of its `- **Label:** value`
    items, continuation lines joined."""
    block: list[str] = []
    for line in body:
        if line.strip():
            block.append(line)
        elif block:
            break
    items: dict[str, str] = {}
    key = None
    for line in block:
        m = re.match(r"^[-*]\s+(?:\*\*)?(\w+):(?:\*\*)?\s*(.*)$", line)
        if m:
            key = m.group(1)
            items[key] = m.group(2).strip()
        elif key and line.startswith("  "):
            items[key] += " " + line.strip()
    return items


@cache
def commit_exists(sha: str) -> bool | None:
    """Whether `sha` names a commit of this repository; None when that cannot be told (no git, a shallow clone)."""
    git = shutil.which("git")
    if git is None or not (REPO / ".git").exists():
        return None
    shallow = subprocess.run([git, "rev-parse", "--is-shallow-repository"], cwd=REPO, capture_output=True, text=True)
    if shallow.returncode != 0 or shallow.stdout.strip() == "true":
        return None
    r = subprocess.run([git, "cat-file", "-e", f"{sha}^{{commit}}"], cwd=REPO, capture_output=True)
    return r.returncode == 0


def check_results_file(path: Path, root: Path = REPO) -> list[str]:
    bad = []
    pre, secs = sections(path)
    prose, _ = split_fences(pre)
    if figures("\n".join(x for _, x in prose)):
        bad.append(f"{rel(path, root)}: figures before the first section: {figures(pre)[:5]}")
    for heading, body in secs:
        where = f"{rel(path, root)}: ## {heading}"
        text = "\n".join(body)
        if not figures(text) and not figures(heading):
            continue
        if not re.match(r"^\d{4}-\d{2}-\d{2}\b", heading):
            bad.append(f"{where}: the heading does not start with its date (YYYY-MM-DD)")
        meta = metadata(body)
        for label in META:
            if not meta.get(label):
                bad.append(f"{where}: no `- **{label}:**` line in the list that opens the section")
        if meta.get("Command") and not INLINE_CODE.search(meta["Command"]):
            bad.append(f"{where}: Command names no command in backticks")
        if meta.get("Commit"):
            shas = HASH.findall(meta["Commit"])
            if not shas:
                bad.append(f"{where}: Commit names no commit hash")
            for sha in shas:
                if commit_exists(sha) is False:
                    bad.append(f"{where}: commit {sha} is not in this repository")
    return bad


def test_every_figure_in_the_results_names_its_command_commit_host_and_load():
    files = sorted(RESULTS.glob("*.md"))
    assert len(files) > 1
    bad = [b for f in files for b in check_results_file(f)]
    assert not bad, "docs/results/ convention (docs/results/README.md):\n" + "\n".join(bad)


def test_the_results_check_catches_a_figure_without_its_provenance(tmp_path):
    f = tmp_path / "x.md"
    f.write_text("# Log\n\nOne figure: 12 ms.\n\n## 2026-01-01 · ok\n\n- **Command:** `make test`\n"
                 "- **Commit:** 92b2e34\n- **Host:** h\n- **Load:** quiet\n\n0.5 s\n\n"
                 "## No date\n\n- **Command:** make test\n- **Commit:** soon\n\n3 ms\n\n## Words only\n\nnone\n")
    text = "\n".join(check_results_file(f, root=tmp_path))
    assert "figures before the first section" in text
    assert "## No date: the heading does not start with its date" in text
    assert "## No date: no `- **Host:**`" in text and "## No date: no `- **Load:**`" in text
    assert "## No date: Command names no command in backticks" in text
    assert "## No date: Commit names no commit hash" in text
    assert "## 2026-01-01" not in text and "Words only" not in text
    assert figures("`make t2s` at 92b2e34, recall@1,000 of [x](a/1.md): 0.5 and 1,234") == ["0.5", "1,234"]


# ------------------------------------------------------------------------------------------------------
# The README


def test_the_readme_is_a_front_door_linking_every_doc():
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines (at most {README_MAX_LINES})"
    linked = {(README.parent / t.partition("#")[0]).resolve() for _, t in links(README)}
    unlinked = [rel(p) for p in sorted(DOCS.rglob("*.md")) if p.resolve() not in linked]
    assert not unlinked, f"docs the README does not link: {unlinked}"


@pytest.mark.parametrize("term", ["suite", "probe", "condition", "namespace", "backend", "baseline", "budget",
                                  "verdict"])
def test_the_readme_glossary_defines(term):
    text = README.read_text()
    glossary = text.split("## Glossary", 1)[1].split("\n## ", 1)[0]
    assert re.search(rf"^- \*\*{term}\*\*: ", glossary, re.M), term
