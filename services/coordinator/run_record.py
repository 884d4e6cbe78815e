"""run.json of one suite run: the record `run_suite` (services/coordinator/runner.py) fills once and writes one way.

What run.json holds, in this order (`RunRecord.to_json`; a part not known yet is left out):

- the identity (`identify`, once, when the LLM roles are known): the run, the suite, its options and seed, the
  backends asked for, the config, the answerer and the judge, the prompts' hash, the tokenizer, the rig-wide
  embedder, the data loaded and its namespaces, the provenance (services/coordinator/results.py), for a resumed
  run when its first attempt started, and every LLM role;
- `backends` (`backend_status`, the one place it is built): per backend asked for, its Describe, ok or failed
  with the reason, its result key and where a reused result came from; built from the record's `describes` and
  `failures`, which the runner fills as backends start and fail, so every write says how they stand then;
- `replay_views`, `ingest` and `prepare`: the last two over the resumed run's (`prev`) and the reused results';
- once the probes are done (`close`): the LLM response cache, the failures, the embedding cache; each cache is read
  before the run and after it (`CacheMeter`) and run.json says what changed; then what was reused and stored
  (`store_results`) and the duration. A resumed run also keeps its sittings: `sittings_s`, the length of each
  earlier sitting (its `duration_s` if it finished, else the `elapsed_s` its interrupt recorded; None for one killed
  without a word), and with the duration `duration_all_s`, every sitting's length summed (left out when one is
  unknown): how long a suite measured over several sittings took in all.

Every write goes through `RunRecord.write` (RunDir.write_run: whole or not at all), the streamed ingest's
checkpoints and the interrupt hook's included; `amend` adds to a run.json on disk (`memrig bench`'s Ctrl-C).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from services.common import llm_cache, llm_roles, prompts
from services.common.embeddings import cache_rows
from services.common.llm_client import LLMClient, LLMConfig
from services.common.tokens import tokenizer_name
from services.coordinator.results import RunDir, provenance, sample_key
from services.coordinator.reuse import owner


def judge_identity(cfg: LLMConfig, passes: int) -> dict[str, Any]:
    ident = cfg.identity()
    ident["passes"] = passes
    ident["label"] = ("offline rubric judge (llm-mock), not a model" if cfg.is_mock
                      else f"LLM judge {llm_roles.short_name(ident)}")
    return ident


class CacheMeter:
    """A cache read before the run (`start`) and after it (`finish`): `read()` takes a reading, `diff(before,
    after)` says what the run changed. The one way run.json measures a cache (the LLM responses, the vectors)."""

    def __init__(self, read: Callable[[], Any], diff: Callable[[Any, Any], dict[str, Any]]):
        self.read, self.diff = read, diff
        self.before: Any = None
        self.started = False

    def start(self) -> None:
        self.before = self.read()
        self.started = True

    def finish(self) -> tuple[Any, dict[str, Any]]:
        """(the reading now, what changed since `start`)."""
        if not self.started:
            # RuntimeError, no MemrigError branch: the rig's own code called it out of order (no input, no dependency)
            raise RuntimeError("CacheMeter.finish before start: there is no reading to compare with")
        after = self.read()
        return after, self.diff(self.before, after)


def vectors_added(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """Per embedding model, the vectors stored since `before` (models whose count did not move left out)."""
    return {m: n - before.get(m, 0) for m, n in after.items() if n != before.get(m, 0)}


def embedding_meter(cache_file: Path) -> CacheMeter:
    """The embedding cache every process of the rig shares: vectors stored per model."""
    return CacheMeter(lambda: cache_rows(cache_file), vectors_added)


def llm_meter(roles: dict[str, LLMConfig]) -> CacheMeter | None:
    """The response cache of the first role that caches (None when none does): its counters, read by every
    process, so the difference counts every process's calls, the backends' flush writers included."""
    cfgs = [c for c in roles.values() if c.caches]
    if not cfgs:
        return None
    return CacheMeter(lambda: llm_cache.shared(cfgs[0].cache_path or None).stats(), llm_cache.stats_delta)


class RunRecord:
    """run.json of one suite run (see the module's docstring). The runner fills `describes` and `failures` (the
    dicts are the run's own: start failures, ingest failures, mid-run failures), sets `result_keys` and `reused`
    when it knows them, and calls the methods below; nothing else writes run.json while the run goes on."""

    def __init__(self, run_dir: RunDir, cfg: Any, embedding_cache: Path):
        self.run_dir = run_dir
        self.cfg = cfg
        self.prev: dict[str, Any] = run_dir.read_run()  # the resumed run's run.json ({} for a fresh run)
        self.vectors = embedding_meter(embedding_cache)
        self.vectors.start()
        self.embedding_cache = embedding_cache
        self.identity: dict[str, Any] | None = None
        self.roles: dict[str, LLMConfig] = {}
        self.responses: CacheMeter | None = None
        self.describes: dict[str, dict[str, Any]] = {}
        self.failures: dict[str, str] = {}
        self.result_keys: dict[str, str | None] = {}
        self.reused: dict[str, Any] = {}  # backend -> its stored result (services/coordinator/reuse.py Entry)
        self.started = False  # every backend asked for started (or failed to, or stands in stored)
        self.replay_views: dict[str, dict[str, str]] = {}
        self.ingest: dict[str, Any] | None = None
        self.prepare: dict[str, Any] | None = None
        self.closing: dict[str, Any] | None = None  # llm_cache, failures, embedding_cache
        self.reuse: dict[str, Any] | None = None
        self.duration_s: float | None = None

    # -- filling -----------------------------------------------------------------------------------
    def identify(self, suite: Any, data: Any, roles: dict[str, LLMConfig]) -> None:
        """Who and what ran: set once, when the LLM roles are known (llm-mock and local-llm started); the response
        cache is read here, before any backend starts."""
        if self.identity is not None:
            # RuntimeError, no MemrigError branch: the rig's own code called it out of order (no input, no dependency)
            raise RuntimeError("RunRecord.identify called twice: a run's identity is set once")
        cfg = self.cfg
        ident = {
            "run_id": self.run_dir.run_id,
            "suite": suite.name,
            "suite_description": suite.description,
            "options": suite.options,
            "seed": cfg.seed,
            "backends_requested": cfg.backends,
            "config": {k: v for k, v in asdict(cfg).items() if k not in ("options",)},
            "llm": roles["answerer"].identity(),
            "judge": judge_identity(roles["judge"], cfg.judge_passes),
            "prompts_hash": prompts.prompts_hash(),
            "tokenizer": tokenizer_name(),
            # The rig-wide embedder setting; each backend's own (name, dimension) is in backends[].describe.
            "embedder": cfg.embedder or os.environ.get("MEMRIG_EMBEDDER") or "minilm",
            "data": data.info,
            "probes": len(data.probes),
            "namespaces": {ns: {"sessions": len(b.sessions), "messages": b.message_count, "documents": len(b.documents)}
                           for ns, b in data.corpora.items()},
            **provenance(),
        }
        if self.prev.get("started_at"):
            ident["first_started_at"] = self.prev.get("first_started_at", self.prev["started_at"])
            ident["resumed"] = True
            ident["sittings_s"] = [*self.prev.get("sittings_s", []), sitting_length(self.prev)]
        ident["llm_roles"] = {**llm_roles.identities(roles), "choices": dict(cfg.llm_roles)}
        self.identity = ident
        self.roles = roles
        self.responses = llm_meter(roles)
        if self.responses is not None:
            self.responses.start()

    def backends_started(self) -> None:
        """Every backend asked for has started, failed to, or stands in stored: from now on run.json says how each
        stands. The Describes and failures so far are put in the order the backends were asked for (they started
        side by side; one started later keeps its place after them)."""
        for record in (self.describes, self.failures):
            ordered = {n: record[n] for n in self.cfg.backends if n in record}
            rest = {n: v for n, v in record.items() if n not in ordered}
            record.clear()
            record.update({**ordered, **rest})
        self.started = True

    def backend_status(self) -> dict[str, Any]:
        """run.json's `backends`: per backend asked for, its Describe, "ok" or "failed" with the reason, its result
        key (when it has one) and, when its result was reused, where from."""
        return {n: {"describe": self.describes.get(n), "status": "failed" if n in self.failures else "ok",
                    "reason": self.failures.get(n, ""),
                    **({"result_key": self.result_keys[n]} if self.result_keys.get(n) else {}),
                    **({"reused": self.reused[n].note()} if n in self.reused else {})} for n in self.cfg.backends}

    def _merged(self, part: str, measured: dict[str, Any]) -> dict[str, Any]:
        """A per-backend part (ingest, prepare): the resumed run's, then the reused results', then this run's."""
        stored = {n: e.records[part] for n, e in self.reused.items() if e.records.get(part)}
        return {**self.prev.get(part, {}), **stored, **measured}

    def ingested(self, info: dict[str, Any]) -> None:
        """The cost records measured so far (`info`, per backend), written at once: a checkpoint of a streamed run,
        or its end."""
        self.ingest = self._merged("ingest", info)
        self.write()

    def prepared(self, summary: dict[str, Any]) -> None:
        """The Prepare records (services/coordinator/context.py `prepare_summary`): setup before each namespace's
        first timed retrieve."""
        self.prepare = self._merged("prepare", summary)

    def close(self, clients: dict[int, LLMClient]) -> None:
        """The probes are done: the caches read again, and the failures as they end."""
        vectors, added = self.vectors.finish()
        self.closing = {
            "llm_cache": self._llm_cache(clients),
            "failures": self.failures,
            "embedding_cache": {"path": str(self.embedding_cache), "vectors_added": added,
                                "vectors": sum(vectors.values())},
        }

    def _llm_cache(self, made: dict[int, LLMClient]) -> dict[str, Any]:
        """What run.json says about the response cache: per coordinator client (named by the roles it serves),
        and for the whole run (all processes) the hits and the new entries (calls no entry answered)."""
        names: dict[int, list[str]] = {}
        for role, cfg in self.roles.items():
            for key, c in made.items():
                if c.config == cfg:
                    names.setdefault(key, []).append(role)
        out: dict[str, Any] = {"clients": {"+".join(names.get(k, ["?"])): {"model": c.config.model, **c.cache_stats()}
                                           for k, c in made.items()}}
        if self.responses is not None:
            after, delta = self.responses.finish()
            cfg = next(c for c in self.roles.values() if c.caches)
            out["all_processes"] = {**delta, "mode": cfg.cache, "path": after["path"]}
        return out

    def own_samples(self, conditions: list[Any], probes: list[Any], done: set[str]) -> dict[str, bool]:
        """Per keyed backend, whether the samples of it already in --out (a resumed run's) were made under its
        current key (the resumed run's run.json recorded the same key for it), or there are none: only then may its
        result be stored."""
        prev_keys = {n: (b or {}).get("result_key") for n, b in (self.prev.get("backends") or {}).items()}
        return {n: prev_keys.get(n) == k or not any(owner(c) == n and sample_key(c, p) in done
                                                    for p in probes for c in conditions)
                for n, k in self.result_keys.items()}

    def store_results(self, reuse: Any, conditions: list[Any], probes: list[Any], trusted: dict[str, bool]) -> None:
        """Store every result this run measured whole (services/coordinator/reuse.py decides what is whole); run.json's
        `reuse` says the mode, the store, what was reused (run, time, key), why each other backend was measured and
        what was stored."""
        samples = self.run_dir.samples()
        run = self.to_json()
        asked = self.cfg.backends
        saved, errors = {}, {}
        for n in asked:
            if n not in self.reused and n not in self.failures and trusted.get(n):
                try:
                    path = reuse.save(n, conditions, probes, samples, run, self.run_dir)
                except OSError as e:  # a full disk or a read-only store costs the next run time, never this run
                    errors[n] = f"{type(e).__name__}: {e}"[:300]
                    continue
                if path is not None:
                    saved[n] = str(path)
        self.reuse = {"mode": "on" if reuse.read else "store (--fresh)", "store": str(reuse.store.root),
                      "reused": {n: e.note() for n, e in self.reused.items()},
                      "measured": {n: reuse.why.get(n, "") for n in asked if n not in self.reused},
                      "stored": saved, **({"store_errors": errors} if errors else {})}

    def finished(self, duration_s: float) -> None:
        self.duration_s = duration_s
        self.write()

    # -- writing -----------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """run.json as the record stands, in its fixed order."""
        if self.identity is None:
            # RuntimeError, no MemrigError branch: the rig's own code called it out of order (no input, no dependency)
            raise RuntimeError("RunRecord.to_json before identify: run.json starts with the run's identity")
        run = dict(self.identity)
        if self.started:
            run["backends"] = self.backend_status()
        if self.replay_views:
            run["replay_views"] = self.replay_views
        if self.ingest is not None:
            run["ingest"] = self.ingest
        if self.prepare is not None:
            run["prepare"] = self.prepare
        if self.closing is not None:
            run.update(self.closing)
        if self.reuse is not None:
            run["reuse"] = self.reuse
        if self.duration_s is not None:
            run["duration_s"] = self.duration_s
            earlier = run.get("sittings_s") or []
            if earlier and all(isinstance(x, int | float) for x in earlier):
                run["duration_all_s"] = sum(earlier) + self.duration_s
        return run

    def write(self) -> None:
        """run.json replaced whole with the record as it stands (services/coordinator/results.py `write_run`)."""
        self.run_dir.write_run(self.to_json())


def sitting_length(run: dict[str, Any]) -> float | None:
    """How long the sitting that wrote `run` (a run.json) lasted: its duration if it finished, the elapsed time its
    interrupt recorded if it was stopped, None if neither (killed without a word, or a run.json before either)."""
    if isinstance(d := run.get("duration_s"), int | float):
        return float(d)
    stop = run.get("interrupted")
    if isinstance(stop, dict) and isinstance(e := stop.get("elapsed_s"), int | float):
        return float(e)
    return None


def amend(run_dir: RunDir, **parts: Any) -> dict[str, Any]:
    """Add `parts` to the run.json on disk (after what it holds) and write it back; returns it. For what happens
    to a run after `run_suite` has let go of it (an interrupt)."""
    run = run_dir.read_run()
    run.update(parts)
    run_dir.write_run(run)
    return run
