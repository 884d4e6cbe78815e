"""Reuse what did not change: a suite × backend result whose key is unchanged is copied, not measured again.

A *result* is one backend's part of one suite run: the samples of the conditions it owns (a condition is owned by
the last backend of its context, as the suites' `condition_backends` reads it), its cost records (run.json
`ingest`), its Prepare summary and its Describe. It is keyed by everything that decides it:

- `common` (the same for every backend of a suite run): the suite, a digest of the data it loaded (every corpus and
  probe, `data_digest`), the seed, the resolved suite options, the sample-making code (`rig_code_files`: the suite's
  module and the suite helpers it imports, services/coordinator/{runner,context}.py, services/coordinator/metrics,
  services/common, services/llm_mock, the gRPC client) with `metrics.budget.GRADER_VERSION` (samples hold the
  `budget` account computed at retrieve time), the package versions the run records, the tokenizer, the embedder
  (name, and the endpoint and model of `remote`), the answerer and judge (judge passes too) and the compaction
  role's model;
- `backend`: its name, module, class and config (variant overrides included), whether it ran in-process, the
  digest of its code (`backend_code_files`: its adapter folder, every services/proto module it imports, the
  adapter framework, services/common, and the services its spec requires, e.g. cortex-mock), the identity of the
  third-party code it runs, not where it lies (`THIRD_PARTY`: OpenClaw's release, Node's version and npm's record
  of the installed tree; Quaid's and Octybot's pinned source digests, which their availability check holds the
  source to, and their runtimes; Mem0's library version) and, when its own code mentions an LLM, the flush and
  compaction roles' models;
- the `backend` parts of the other backends in its conditions (arclight's "native + X" reads OpenClaw too), checked
  when the conditions are known.

How a run decides (services/coordinator/runner.py): before starting backends it looks each one's key up; a backend
with a stored result is not started, its Describe is the stored one; once the suite's conditions are known the
stored result must cover exactly the conditions it owns, every probe, and the same other backends, or the backend
is started and measured after all. Each measured backend's reason is in run.json (`reuse.measured`: "no stored
result", "changed since RUN: backend.code", "--fresh", ...).

An LLM identity leaves out a loopback base URL (llm-mock's and local-llm's ports change every run; the mock's code
and the local model's file digest identify them). A backend at a `--target` is never reused or stored: its code is
not here to digest.

Stored under `$MEMRIG_STATE_DIR/results-cache/<suite>/<key>/` (`.memrig/results-cache` by default): samples.jsonl,
records.json and meta.json (the key's parts, the run it was measured in and when, the conditions it covers, the
SHA-256 of both other files). An entry is written into a temporary directory and renamed into place, meta.json
last; one whose files do not match meta.json's digests, whose samples are not every probe × owned condition with
status ok, or whose meta.json does not parse is ignored (torn). A result is stored only when its backend finished
the suite with every sample ok and no failure, and only from samples this key produced (a resumed run's earlier
samples count when run.json recorded the same key for them).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass, fields, is_dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

REUSE_FORMAT = 1  # bump when what an entry holds, or how a key is made, changes
PROJECT_ROOT = Path(__file__).resolve().parents[2]
_SKIP_DIRS = {"node_modules", "__pycache__", ".pytest_cache"}
# The adapter framework every backend runs on (besides services/common).
FRAMEWORK = ("services/adapters/base.py", "services/adapters/client.py", "services/adapters/server.py",
             "services/adapters/host.py")
# What makes a sample besides the suite's own module: the runner, the probe context, the metrics (a sample's
# `budget` account), the shared code, the offline model, the gRPC client.
RIG_CODE = ("services/coordinator/runner.py", "services/coordinator/context.py", "services/coordinator/metrics",
            "services/common", "services/llm_mock", "services/adapters/client.py", "services/adapters/base.py",
            "proto/memrig/v1")
_LLM_WORD = re.compile(rb"llm", re.I)


def cache_root() -> Path:
    """`$MEMRIG_STATE_DIR/results-cache` (`.memrig/results-cache` by default)."""
    return Path(os.environ.get("MEMRIG_STATE_DIR", ".memrig")) / "results-cache"


def canonical(obj: Any) -> str:
    """`obj` as deterministic JSON (keys sorted, dataclasses as their fields, datetimes as ISO 8601)."""
    return json.dumps(_plain(obj), sort_keys=True, separators=(",", ":"), default=str)


def digest(obj: Any) -> str:
    return hashlib.sha256(canonical(obj).encode()).hexdigest()


def _plain(obj: Any) -> Any:
    if is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _plain(getattr(obj, f.name)) for f in fields(obj)}
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        items = [_plain(v) for v in obj]
        return sorted(items, key=canonical) if isinstance(obj, (set, frozenset)) else items
    if isinstance(obj, (datetime, date)):
        return obj.isoformat()
    return obj


# ------------------------------------------------------------------------------------------------------
# Digests of data and code


def data_digest(data: Any) -> str:
    """SHA-256 of a suite's loaded data (SuiteData): every namespace's corpus (sessions, messages, documents) in
    namespace order, every probe in order, and the load info; one canonical JSON line each, fed as it goes."""
    h = hashlib.sha256()

    def feed(obj: Any) -> None:
        h.update(canonical(obj).encode())
        h.update(b"\n")

    for ns in sorted(data.corpora):
        batch = data.corpora[ns]
        feed(["namespace", ns, batch.batch_id, len(batch.sessions), len(batch.documents)])
        for s in batch.sessions:
            feed(["session", s.session_id, s.started_at, len(s.messages)])
            for m in s.messages:
                feed([m.id, m.role, m.content, m.ts])
        for d in batch.documents:
            feed(d)
    for p in data.probes:
        feed(p)
    feed(data.info)
    return h.hexdigest()


_FILE_SHA: dict[tuple[str, int, int], str] = {}


def file_sha(path: Path) -> str:
    """SHA-256 of a file's bytes (remembered by path, size and modification time)."""
    st = path.stat()
    k = (str(path), st.st_size, st.st_mtime_ns)
    if k not in _FILE_SHA:
        _FILE_SHA[k] = hashlib.sha256(path.read_bytes()).hexdigest()
    return _FILE_SHA[k]


def tree_files(rel: str) -> set[Path]:
    """A file, or every file under a directory (node_modules, __pycache__ and *.pyc left out), by project path."""
    p = PROJECT_ROOT / rel
    if p.is_file():
        return {p}
    if not p.is_dir():
        return set()
    out: set[Path] = set()
    # The skipped directories are never entered (openclaw_real's node_modules alone holds ~38,000 files: walked and
    # dropped, it cost ~1.5 s a call, twice per suite and OpenClaw profile). Like rglob: symlinked directories are
    # not followed, a symlink to a file counts, a dangling one does not.
    for root, dirs, names in os.walk(p):
        dirs[:] = [d for d in dirs if d not in _SKIP_DIRS]
        for name in names:
            f = Path(root, name)
            if name not in _SKIP_DIRS and f.suffix != ".pyc" and f.is_file():
                out.add(f)
    return out


def files_digest(files: set[Path]) -> str:
    """SHA-256 over "<sha256>  <project path>" lines, sorted by path."""
    rels = sorted((f.relative_to(PROJECT_ROOT).as_posix(), f) for f in files)
    return hashlib.sha256("".join(f"{file_sha(f)}  {r}\n" for r, f in rels).encode()).hexdigest()


# The imported names: a parenthesised list (which may span lines) or the rest of the line. A names pattern that could
# cross a line break swallowed the next line's `from`, and that import went unseen.
_NAMES = r"(\([\w\s,]*\)|[\w \t,*]+)"
_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+((?:services|proto)(?:\.\w+)*)[ \t]+import[ \t]+" + _NAMES +
                     r"|import[ \t]+((?:services|proto)(?:\.\w+)*))", re.M)
_REL_IMPORT = re.compile(r"^[ \t]*from[ \t]+(\.+)(\w*(?:\.\w+)*)[ \t]+import[ \t]+" + _NAMES, re.M)


def _module_file(module: str) -> Path | None:
    p = PROJECT_ROOT / module.replace(".", "/")
    if p.is_dir():
        return p / "__init__.py" if (p / "__init__.py").is_file() else None
    f = p.with_suffix(".py")
    return f if f.is_file() else None


def import_closure(modules: list[str]) -> set[Path]:
    """The files of these modules and of every services.* / proto.* module they import, transitively (a static
    scan of import lines, function-level imports included; `from a import b` counts a.b when it is a module)."""
    seen: set[Path] = set()
    todo = list(modules)
    while todo:
        mod = todo.pop()
        f = _module_file(mod)
        if f is None or f in seen:
            continue
        seen.add(f)
        # a module's package __init__ runs first
        parts = mod.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        text = f.read_text(errors="replace")
        package = mod if f.name == "__init__.py" else mod.rpartition(".")[0]
        for base, names, plain in _IMPORT.findall(text):
            if plain:
                todo.append(plain)
                continue
            todo.append(base)
            todo += [f"{base}.{n}" for n in re.findall(r"\w+", names)]
        for dots, rest, names in _REL_IMPORT.findall(text):
            pkg = package.split(".")
            pkg = pkg[:len(pkg) - (len(dots) - 1)]
            base = ".".join(pkg + ([rest] if rest else []))
            todo.append(base)
            todo += [f"{base}.{n}" for n in re.findall(r"\w+", names)]
    return seen


def adapter_folder(spec: Any) -> str | None:
    """The adapter folder a backend runs from (services/adapters/<folder>), from its spec's module."""
    parts = spec.module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["services", "adapters"] else None


def backend_code_files(spec: Any) -> tuple[set[Path], set[Path]]:
    """(every file of a backend's code, its own files): its adapter folder (sidecar scripts and lockfiles
    included, installed node_modules not), what its module and class import, and the services its spec requires
    (with what they import); every backend also runs on the adapter framework and services/common (in the first
    set, not its own)."""
    from services.launcher import SERVICES

    folder = adapter_folder(spec)
    own = tree_files(f"services/adapters/{folder}") if folder else set()
    mods = [spec.module, f"{spec.module}.__main__", spec.cls.partition(":")[0]]
    for r in spec.requires:
        if r in SERVICES:
            mods.append(SERVICES[r].module)
            own |= tree_files(SERVICES[r].module.replace(".", "/"))
    shared = {f for rel in (*FRAMEWORK, "services/common") for f in tree_files(rel)}
    own |= {f for f in import_closure(mods) if f not in shared}
    return own | shared, own


def uses_llm(own: set[Path]) -> bool:
    """Whether a backend's own code mentions an LLM (then the flush and compaction roles' models are part of its
    key): conservative, a mention is enough."""
    return any(_LLM_WORD.search(f.read_bytes()) for f in own if f.suffix in (".py", ".mjs", ".js", ".ts", ".json")
               and f.name != "package-lock.json")


# Coordinator modules a suite imports that only score samples (metrics.json, intervals), never a sample's fields: a
# change to them is scored again on a rerun, not measured again. Every other coordinator module a suite imports is
# part of its key (tests/test_reuse.py holds the split whole: a new module must be put on one side).
SCORING_ONLY = ("services/coordinator/stats.py",)


def rig_code_files(suite: Any) -> set[Path]:
    """The code that makes a suite's samples besides the backends: the coordinator modules the suite's module and the
    probe context import (the suite's own, the judges, the grader ...) but SCORING_ONLY, and RIG_CODE."""
    import inspect

    module = type(suite).__module__
    files = {f for f in import_closure([module, "services.coordinator.context"])
             if (rel := f.relative_to(PROJECT_ROOT).as_posix()).startswith("services/coordinator/")
             and rel not in SCORING_ONLY}
    src = inspect.getsourcefile(type(suite))
    if src:
        files.add(Path(src).resolve())
    for rel in RIG_CODE:
        files |= tree_files(rel)
    return {f for f in files if f.is_relative_to(PROJECT_ROOT)}


# ------------------------------------------------------------------------------------------------------
# Third-party code an adapter runs (by adapter folder): what the adapter already pins or checks


def _sha_or_none(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def _openclaw_real() -> dict[str, Any]:
    from services.adapters.openclaw_real import node

    return {**_found(node.availability()),
            # npm's record of the installed tree (npm ci from sidecar/package-lock.json, which the folder digest has)
            "installed_tree": _sha_or_none(node.SIDECAR_DIR / "node_modules" / ".package-lock.json")}


def _found(a: Any) -> dict[str, Any]:
    """What an Availability says of the code that runs, without where it lies (a moved clone is the same code)."""
    if not a.ok:
        return {"ok": False, "reason": a.reason}
    return {"ok": True, "system": a.system, "version": a.version, "runtime_version": a.runtime_version,
            "notes": list(a.notes)}


def _pinned(module: str) -> dict[str, Any]:
    import importlib

    m = importlib.import_module(module)
    a = m.availability()
    return {**_found(a),
            # availability() checked the source's tree digest against the pin: the pin is the source's digest
            "source_digest": m.SOURCE.digest if a.ok else None, "commit": m.SOURCE.commit}


def _mem0_oss() -> dict[str, Any]:
    from importlib import metadata

    out = {}
    for dist in ("mem0ai", "qdrant-client"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


THIRD_PARTY = {
    "openclaw_real": _openclaw_real,
    "quaid_real": lambda: _pinned("services.adapters.quaid_real.source"),
    "octybot_real": lambda: _pinned("services.adapters.octybot_real.runtime"),
    "mem0_oss": _mem0_oss,
}


_THIRD_PARTY_SEEN: dict[tuple[str, Any], dict[str, Any]] = {}


def third_party_identity(folder: str | None) -> dict[str, Any]:
    """THIRD_PARTY's identity for an adapter folder ({} when it runs no third-party code), read once per process
    (OpenClaw's asks Node for its version: a bench-all would otherwise ask it per suite and profile)."""
    fn = THIRD_PARTY.get(folder or "")
    if fn is None:
        return {}
    if (folder, fn) not in _THIRD_PARTY_SEEN:
        try:
            _THIRD_PARTY_SEEN[(folder, fn)] = fn()
        except Exception as e:  # an identity that cannot be read is still an identity: it never matches a good one
            _THIRD_PARTY_SEEN[(folder, fn)] = {"error": f"{type(e).__name__}: {e}"}
    return _THIRD_PARTY_SEEN[(folder, fn)]


# ------------------------------------------------------------------------------------------------------
# Identities of the models and the embedder


def llm_key(ident: dict[str, Any] | None) -> dict[str, Any]:
    """An LLM identity as a key part: the base URL only when it is not on this host (llm-mock's and local-llm's
    ports change every run), the response-cache mode never (it decides whether a call is made, not its answer);
    the offline mock with a digest of its code."""
    ident = dict(ident or {})
    ident.pop("response_cache", None)
    url = str(ident.get("base_url") or "")
    if re.match(r"^https?://(127\.\d+\.\d+\.\d+|localhost|\[::1\])(:\d+)?(/|$)", url):
        ident.pop("base_url")
    if ident.get("offline_mock"):
        ident["mock_code"] = files_digest(tree_files("services/llm_mock"))
    return ident


def embedder_key(embedder: str | None, env: dict[str, str]) -> dict[str, Any]:
    """The run's embedder as the backends get it: the name (as services/common/embeddings.get_embedder resolves
    it), and for `remote` its endpoint and model."""
    from services.common.embeddings import DEFAULT_EMBEDDER

    name = (embedder or env.get("MEMRIG_EMBEDDER") or ("remote" if env.get("MEMRIG_EMBED_BASE_URL")
                                                        else DEFAULT_EMBEDDER)).lower()
    out: dict[str, Any] = {"name": name}
    if name == "remote":
        out.update(base_url=env.get("MEMRIG_EMBED_BASE_URL"), model=env.get("MEMRIG_EMBED_MODEL"))
    return out


# ------------------------------------------------------------------------------------------------------
# The store


@dataclass
class Entry:
    """A stored result: meta.json, the samples, the records (describe, ingest, prepare)."""

    path: Path
    meta: dict[str, Any]
    samples: list[dict[str, Any]]
    records: dict[str, Any]

    @property
    def label(self) -> str:
        return f"reused from {self.meta.get('run_dir')}, measured at {self.meta.get('measured_at')}"

    def note(self) -> dict[str, Any]:
        """What run.json says of a reused result."""
        return {"run_dir": self.meta.get("run_dir"), "run_id": self.meta.get("run_id"),
                "measured_at": self.meta.get("measured_at"), "key": self.meta.get("key"),
                "samples": len(self.samples), "entry": str(self.path)}


class ResultStore:
    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root is not None else cache_root()

    def entry_dir(self, suite: str, key: str) -> Path:
        return self.root / suite / key

    def load(self, suite: str, key: str) -> Entry | None:
        """The entry, or None when it is absent or torn (a file missing or not matching meta.json's digest, a
        sample that does not parse or is not ok)."""
        d = self.entry_dir(suite, key)
        try:
            meta = json.loads((d / "meta.json").read_text())
            if meta.get("format") != REUSE_FORMAT or meta.get("key") != key:
                return None
            raw = {n: (d / n).read_bytes() for n in ("samples.jsonl", "records.json")}
            if any(hashlib.sha256(b).hexdigest() != meta["files"][n] for n, b in raw.items()):
                return None
            samples = [json.loads(x) for x in raw["samples.jsonl"].decode().splitlines() if x.strip()]
            records = json.loads(raw["records.json"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        if len(samples) != meta.get("samples") or any(s.get("status") != "ok" for s in samples):
            return None
        return Entry(d, meta, samples, records)

    def save(self, suite: str, key: str, meta: dict[str, Any], samples: list[dict[str, Any]],
             records: dict[str, Any]) -> Path:
        """Write an entry whole: a temporary directory beside it, meta.json last, then renamed into place (an
        existing entry of the same key is replaced)."""
        d = self.entry_dir(suite, key)
        d.parent.mkdir(parents=True, exist_ok=True)
        tmp = d.parent / f".{key}.{os.getpid()}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            body = {"samples.jsonl": "".join(json.dumps(s, default=str) + "\n" for s in samples).encode(),
                    "records.json": json.dumps(records, default=str, indent=1).encode()}
            for name, b in body.items():
                (tmp / name).write_bytes(b)
            meta = {**meta, "format": REUSE_FORMAT, "key": key, "samples": len(samples),
                    "files": {n: hashlib.sha256(b).hexdigest() for n, b in body.items()}}
            (tmp / "meta.json").write_text(json.dumps(meta, default=str, indent=1))
            if d.exists():
                old = d.parent / f".{key}.{os.getpid()}.old"
                os.replace(d, old)
                shutil.rmtree(old, ignore_errors=True)
            try:
                os.replace(tmp, d)
            except OSError:
                if self.load(suite, key) is None:  # not another process's entry of the same key, written meanwhile
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return d

    def latest(self, suite: str, backend: str) -> dict[str, Any] | None:
        """meta.json of the most recently stored entry of this suite and backend (for saying what changed)."""
        best = None
        for m in (self.root / suite).glob("*/meta.json"):
            try:
                meta = json.loads(m.read_text())
            except (OSError, ValueError):
                continue
            if meta.get("backend") == backend and (best is None or meta.get("measured_at", "") > best.get(
                    "measured_at", "")):
                best = meta
        return best


def changed_parts(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The names of the key parts that differ between two entries' `parts` ("data", "backend.code", ...)."""
    out = []
    for side in ("common", "backend"):
        a, b = old.get(side) or {}, new.get(side) or {}
        for k in sorted(set(a) | set(b)):
            if canonical(a.get(k)) != canonical(b.get(k)):
                out.append(k if side == "common" else f"backend.{k}")
    return out


# ------------------------------------------------------------------------------------------------------
# One suite run's view


def owner(cond: Any) -> str | None:
    """The backend a condition measures: the last backend of its context (None: no backend, e.g. compaction)."""
    return cond.backends[-1] if cond.backends else None


class Reuse:
    """The keys of one suite run's results, and what it reuses and stores. `read`: look stored results up
    (off under --fresh); `write`: store what this run measures."""

    def __init__(self, suite: Any, data: Any, cfg: Any, roles: dict[str, Any], env: dict[str, str],
                 read: bool = True, write: bool = True, store: ResultStore | None = None):
        from services.common.tokens import tokenizer_name
        from services.coordinator.metrics.budget import GRADER_VERSION
        from services.coordinator.results import package_versions

        self.suite, self.cfg, self.read, self.write = suite, cfg, read, write
        self.store = store or ResultStore()
        ident = {r: c.identity() for r, c in roles.items()}
        self._roles = ident
        self.common = {
            "format": REUSE_FORMAT,
            "suite": suite.name,
            "data": data_digest(data),
            "seed": cfg.seed,
            "options": suite.options,
            "grader": {"version": GRADER_VERSION, "code": files_digest(rig_code_files(suite))},
            "packages": package_versions(),
            "tokenizer": tokenizer_name(),
            "embedder": embedder_key(cfg.embedder, env),
            "llm": {"answerer": llm_key(ident.get("answerer")), "judge": llm_key(ident.get("judge")),
                    "judge_passes": cfg.judge_passes, "compaction": llm_key(ident.get("compaction"))},
        }
        self._parts: dict[str, dict[str, Any] | None] = {}
        self.why: dict[str, str] = {}  # backend -> why it is measured (not reused)

    # -- keys --------------------------------------------------------------------------------------
    def backend_part(self, name: str) -> dict[str, Any] | None:
        """The backend's own key part, or None when it cannot be keyed (a --target, a name the registry does not
        know)."""
        if name not in self._parts:
            self._parts[name] = None if name in self.cfg.targets else self._backend_part(name)
        return self._parts[name]

    def _backend_part(self, name: str) -> dict[str, Any] | None:
        from services.adapters.registry import get_spec

        try:
            spec = get_spec(name)
        except KeyError:
            return None
        files, own = backend_code_files(spec)
        part = {"name": name, "module": spec.module, "cls": spec.cls, "config": spec.config,
                "requires": list(spec.requires), "in_process": bool(self.cfg.in_process),
                "code": files_digest(files), "third_party": third_party_identity(adapter_folder(spec))}
        if uses_llm(own):
            part["llm"] = {"flush": llm_key(self._roles.get("flush")),
                           "compaction": llm_key(self._roles.get("compaction"))}
        return part

    def parts(self, name: str) -> dict[str, Any] | None:
        part = self.backend_part(name)
        return None if part is None else {"common": self.common, "backend": part}

    def key(self, name: str) -> str | None:
        parts = self.parts(name)
        return None if parts is None else digest(parts)

    def code_changed(self, name: str) -> bool:
        """Whether the grader's or this backend's code on disk differs from what the key was made of (the key is
        taken when the suite starts; an edit during the run would store samples under a key they do not match)."""
        from services.adapters.registry import get_spec

        if files_digest(rig_code_files(self.suite)) != self.common["grader"]["code"]:
            return True
        part = self.backend_part(name)
        if part is None:
            return False
        return files_digest(backend_code_files(get_spec(name))[0]) != part["code"]

    # -- reading -----------------------------------------------------------------------------------
    def lookup(self, name: str) -> Entry | None:
        """The stored result of this backend under its current key (before the conditions are known), or None
        with the reason in `why`."""
        key = self.key(name)
        if key is None:
            self.why[name] = "a --target (its code is not here to digest)" if name in self.cfg.targets else \
                "not a registered backend"
            return None
        if not self.read:
            self.why[name] = "--fresh"
            return None
        entry = self.store.load(self.suite.name, key)
        if entry is None:
            self.why[name] = self._what_changed(name)
        return entry

    def _what_changed(self, name: str) -> str:
        last = self.store.latest(self.suite.name, name)
        if last is None:
            return "no stored result"
        diff = changed_parts(last.get("parts") or {}, self.parts(name) or {})
        if not diff:
            return f"the stored result from {last.get('run_dir')} is unreadable (torn)"
        return f"changed since {last.get('run_dir')}: {', '.join(diff)}"

    def companions(self, name: str, owned: list[Any]) -> dict[str, str | None]:
        """The other backends in the conditions a backend owns, with the digest of their key parts."""
        others = sorted({b for c in owned for b in c.backends if b != name})
        return {b: (None if self.backend_part(b) is None else digest(self.backend_part(b))) for b in others}

    def confirm(self, entries: dict[str, Entry], conditions: list[Any], probes: list[Any]) -> dict[str, Entry]:
        """The entries that hold exactly what this run asks of their backend: the same owned conditions, a
        sample for every probe of each, and the same companion backends."""
        from services.coordinator.results import sample_key

        out = {}
        for name, e in entries.items():
            owned = [c for c in conditions if owner(c) == name]
            comp = self.companions(name, owned)
            want = {sample_key(c, p) for c in owned for p in probes}
            if not owned:
                self.why[name] = "it owns no condition in this suite"
            elif [[c.name, list(c.context)] for c in owned] != e.meta.get("conditions"):
                self.why[name] = "its conditions differ from the stored result's"
            elif None in comp.values() or comp != e.meta.get("companions"):
                self.why[name] = "a backend in its conditions changed"
            elif {s.get("key") for s in e.samples} != want:
                self.why[name] = "the stored samples are not this run's probes"
            else:
                out[name] = e
                self.why.pop(name, None)
        return out

    # -- writing -----------------------------------------------------------------------------------
    def save(self, name: str, conditions: list[Any], probes: list[Any], samples: list[dict[str, Any]],
             run: dict[str, Any], run_dir: Any) -> Path | None:
        """Store this backend's result when it is complete (every probe of every owned condition ok); returns
        the entry's directory, or None when nothing was stored."""
        from services.coordinator.results import sample_key

        key, parts = self.key(name), self.parts(name)
        owned = [c for c in conditions if owner(c) == name]
        if not self.write or key is None or parts is None or not owned:
            return None
        if self.code_changed(name):  # the samples may come from code other than the key's: never store them
            self.why[name] = "its code or the grader's changed while the run was going: not stored"
            return None
        comp = self.companions(name, owned)
        if None in comp.values():
            return None
        want = {sample_key(c, p) for c in owned for p in probes}
        mine = [s for s in samples if s.get("key") in want]
        if len(mine) != len(want) or any(s.get("status") != "ok" for s in mine):
            return None
        mine.sort(key=lambda s: s["key"])
        info = (run.get("backends") or {}).get(name) or {}
        records = {"describe": info.get("describe"), "ingest": (run.get("ingest") or {}).get(name),
                   "prepare": (run.get("prepare") or {}).get(name)}
        meta = {"suite": self.suite.name, "backend": name, "parts": parts, "companions": comp,
                "conditions": [[c.name, list(c.context)] for c in owned],
                "run_dir": str(run_dir.path), "run_id": run.get("run_id"),
                "measured_at": datetime.now(UTC).isoformat(timespec="seconds")}
        return self.store.save(self.suite.name, key, meta, mine, records)
