"""The `memrig` command line.

    memrig up [--backends a,b]           start llm-mock and backends in the background (state in .memrig/run)
    memrig down                          stop exactly what `up` started, by PID
    memrig bench --suite S --backends a,b [--out DIR]
    memrig bench-all [--out DIR]         every default suite over the default backends, plus costs, one report
    memrig bench-local [--out DIR]       the local-model profile (make setup-local-llm first)
    memrig ingest --backend B --namespace N FILE.jsonl
    memrig retrieve --backend B --namespace N --query Q [--top-k K] [--json]
    memrig reset --backend B (--namespace N | --all)   clear a namespace in the backend and the CLI's journal
    memrig conformance --target HOST:PORT
    memrig report RUN_DIR                re-score and re-render from samples.jsonl (no re-running; a suite
                                         run or a whole bench-all run with its verdict)
    memrig compare RUN_A RUN_B [--fail-on M] [--json]  what moved between two runs; exit 1 on a gated regression,
                                                      2 on bad input, 3 when incomplete
    memrig judge-agreement --labels FILE [--judge local]  every QA judge against human-labelled answers
    memrig serve SERVICE [--port P] ...  run one service in the foreground
    memrig list                          suites, backends, services
    memrig bench-perf | observe | load | load-bench | fidelity | sensitivity | power ...   each a module's
                                         add_arguments/check/run (services/common/subcommand.py); CMD --help
Exit codes: 0 success, 1 a check/run failed, 2 bad usage or bad input (compare: 3 incomplete), 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
from pathlib import Path

from services.adapters.registry import all_specs, default_backends, get_spec, load_errors, split_names
from services.common import interrupt
from services.common.types import ValidationError
from services.coordinator.plan import parse_csv, parse_options, parse_targets
from services.launcher import SERVICES, Rig

STATE_DIR = Path(os.environ.get("MEMRIG_STATE_DIR", ".memrig"))


# ------------------------------------------------------------------------------------------------------
# up / down

def _llm_choices(args) -> dict[str, str]:
    """{role: mock|local|env} from --llm and the per-role flags; with none given, {} (the environment decides).
    `--no-llm-cache` makes every LLM call of this command and its children refresh its cache entry."""
    from services.common.llm_roles import ROLES, resolve_choices

    if getattr(args, "no_llm_cache", False):
        os.environ["MEMRIG_LLM_CACHE"] = "refresh"
    per_role = {r: getattr(args, f"llm_{r}", None) for r in ROLES}
    if not args.llm and not any(per_role.values()):
        return {}
    try:
        return resolve_choices(args.llm, **per_role)
    except ValueError as e:
        flag, _, msg = str(e).partition(": ")
        raise ValidationError(flag, msg) from None


def cmd_up(args) -> int:
    backends = split_names(args.backends) or default_backends()
    choices = _llm_choices(args)

    async def go():
        rig = Rig(STATE_DIR / "run")
        rig.load_state()
        try:
            roles = await rig.ensure_llm_roles(choices)
            for name in parse_csv(args.services):
                await rig.start_service(name)
            for b in backends:
                await rig.start_backend(b, embedder=args.embedder)
        finally:
            rig.save_state()
        for key, p in rig.procs.items():
            print(f"{key:<28} pid={p.pid:<8} {p.url or p.ports}")
        if choices:
            from services.common.llm_roles import ROLES, short_name

            print("\nLLM roles (export these to point other commands at the same endpoints):")
            for role, cfg in roles.items():
                print(f"  {role:<11} {short_name(cfg.identity())} at {cfg.base_url}")
                print(f"    {ROLES[role]}_BASE_URL={cfg.base_url} {ROLES[role]}_MODEL={cfg.model}"
                      + (f" {ROLES[role]}_MODEL_DIGEST={cfg.model_digest}" if cfg.model_digest else ""))
        print(f"\nstate: {rig.state_file}; stop with `memrig down`")

    asyncio.run(go())
    return 0


def cmd_down(args) -> int:
    rig = Rig(STATE_DIR / "run")
    rig.load_state()
    if not rig.procs:
        print("nothing to stop")
        return 0
    for key in rig.stop_order():
        pid = rig.procs[key].pid
        rig.stop(key)
        print(f"stopped {key} (pid {pid})")
    rig.clear_state()
    return 0


def running_backend(name: str) -> str | None:
    rig = Rig(STATE_DIR / "run")
    rig.load_state()
    return rig.address_of(f"backend/{name}")


# ------------------------------------------------------------------------------------------------------
# bench

@contextlib.contextmanager
def guarded():
    """Every process this command starts is stopped even if it is killed by SIGKILL (services/coordinator/guard.py)."""
    from services.coordinator import guard

    g = guard.protect(log=STATE_DIR / "guard.log")
    try:
        yield g
    finally:
        g.close()


def _bench_config(args, suite: str, backends: list[str], out: str | None):
    from services.coordinator.runner import RunConfig

    return RunConfig(suite=suite, backends=backends, out_dir=out, seed=args.seed, options=parse_options(args.option),
                     resume=not args.fresh, concurrency=args.concurrency, lanes=args.lanes,
                     judge_passes=args.judge_passes, embedder=args.embedder, targets=parse_targets(args.target), in_process=args.in_process,
                     llm_roles=_llm_choices(args), reuse=_reuse_mode(args), deadline_s=args.deadline_s,
                     ingest_deadline_s=args.ingest_deadline_s)


def _reuse_mode(args) -> str:
    """bench and bench-all reuse every stored result whose key is unchanged (services/coordinator/reuse.py);
    --fresh measures everything (and stores it)."""
    return "store" if args.fresh else "on"


def cmd_bench(args) -> int:
    from services.coordinator.results import RESULTS_ROOT, RunDir, new_run_id
    from services.coordinator.runner import TerminalProgress, mark_interrupted, run_suite

    targets = parse_targets(args.target)
    backends = split_names(args.backends) or list(targets) or default_backends()
    for b in backends:
        if b not in targets:  # a --target may be any memory system under a name of your own (README)
            get_spec(b)
    cfg = _bench_config(args, args.suite, backends, args.out)
    run_dir = RunDir(cfg.out_dir or (RESULTS_ROOT / new_run_id(cfg.suite)))
    cfg.out_dir = str(run_dir.path)
    with guarded():
        outcome = interrupt.run(run_suite(cfg, TerminalProgress()), lambda: mark_interrupted(run_dir))
    print(f"\n{outcome.state}: {outcome.run_dir}/report.md")
    for b, label in outcome.reused.items():
        print(f"  backend {b}: {label} (--fresh measures it again)")
    for b, reason in outcome.failures.items():
        print(f"  backend {b}: {reason}")
    return 0 if outcome.state == "succeeded" else 1


def bench_all_plan(args):
    """The bench-all run plan from `memrig bench-all`'s flags (services/coordinator/bench_all.py)."""
    from services.coordinator import bench_all

    return bench_all.plan(out=args.out, suites=parse_csv(args.suites), backends=split_names(args.backends),
                          options=parse_options(args.option), targets=parse_targets(args.target),
                          llm_roles=_llm_choices(args), costs=not args.no_costs, target_wait_s=args.target_wait_s,
                          seed=args.seed, resume=not args.fresh, concurrency=args.concurrency, lanes=args.lanes,
                          judge_passes=args.judge_passes, embedder=args.embedder, in_process=args.in_process,
                          reuse=_reuse_mode(args), deadline_s=args.deadline_s,
                          ingest_deadline_s=args.ingest_deadline_s)


def cmd_bench_all(args) -> int:
    from services.coordinator.bench_all import run_bench_all

    with guarded():
        return asyncio.run(run_bench_all(bench_all_plan(args)))


def bench_local_plan(args):
    """The bench-local run plan from `memrig bench-local`'s flags (services/coordinator/bench_local.py)."""
    from services.coordinator import bench_local

    if args.no_llm_cache:
        os.environ["MEMRIG_LLM_CACHE"] = "refresh"
    return bench_local.plan(out=args.out, suites=parse_csv(args.suites), compare_with=args.compare_with, seed=args.seed,
                            resume=not args.fresh, concurrency=args.concurrency)


def cmd_bench_local(args) -> int:
    from services.coordinator.bench_local import run_bench_local

    with guarded():
        return asyncio.run(run_bench_local(bench_local_plan(args)))


# ------------------------------------------------------------------------------------------------------
# ingest / retrieve

def _journal(backend: str, namespace: str):
    from services.cli_state import Journal

    return Journal(backend, namespace, STATE_DIR)


async def _client_for(backend: str, target: str | None, embedder: str | None):
    """(client, rig_or_None, in_process). A running backend (or --target) is used over gRPC; otherwise the
    backend runs in-process, rebuilt from this namespace's journal (services/cli_state.py) so `ingest` then
    `retrieve` work across commands."""
    from services.adapters.base import BackendContext
    from services.adapters.client import GrpcBackendClient, InProcessBackendClient

    addr = target or running_backend(backend)
    if addr:
        return GrpcBackendClient(addr, name=backend), None, False
    get_spec(backend)
    rig = Rig(STATE_DIR / "cli")
    url = await rig.ensure_llm()
    ctx = BackendContext(embedder_name=embedder, llm_base_url=url)
    return InProcessBackendClient.from_spec(backend, context=ctx), rig, True


async def _replay(client, journal, sessions: list) -> None:
    """Ingest the journaled sessions as the one batch they were checked as; a refusal names the journal."""
    from services.adapters.client import BackendError
    from services.cli_state import reset_command
    from services.common.types import IngestBatch

    if not sessions:
        return
    try:
        await client.ingest(journal.namespace, IngestBatch(sessions=tuple(sessions)))
    except (ValidationError, BackendError) as e:
        raise ValidationError(str(journal.path), f"the backend refused this journal's replay ({e}); clear it with "
                              f"`{reset_command(journal.backend, journal.namespace)}`") from None
    await client.settle(journal.namespace, 600)


def _read_sessions_file(path: str) -> tuple[list, list[int]]:
    """The sessions of a JSONL file and the line each came from. Bad input is a ValidationError naming the
    file (and line or byte), never a traceback: a directory, an unreadable file, bytes that are not UTF-8."""
    from services.common.interchange import parse_sessions_jsonl

    p = Path(path)
    if p.is_dir():
        raise ValidationError(path, "is a directory; give a .jsonl file of sessions")
    try:
        raw = p.read_bytes()
    except OSError as e:  # missing, permission denied, ...
        raise ValidationError(path, f"cannot be read: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise ValidationError(f"{p.name}:{line}", f"is not valid UTF-8 (byte {e.start} of the file)") from None
    lines = text.splitlines()
    sessions = parse_sessions_jsonl(lines, source=p.name)
    line_of = [n for n, line in enumerate(lines, start=1) if line.strip()]
    return sessions, line_of


def _with_file_line(e: ValidationError, file: str, line_of: list[int]) -> ValidationError:
    """`sessions[i].x` → `FILE:LINE sessions[i].x` (the batch index alone does not tell a user which line)."""
    import re

    m = re.match(r"sessions\[(\d+)\]", e.field)
    if not m or int(m.group(1)) >= len(line_of):
        return e
    return ValidationError(f"{Path(file).name}:{line_of[int(m.group(1))]} ({e.field})", e.message)


def cmd_ingest(args) -> int:
    from services.common.types import IngestBatch, validate_batch

    sessions, line_of = _read_sessions_file(args.file)
    try:
        validate_batch(IngestBatch(sessions=tuple(sessions)))  # locally first: errors name the file line
    except ValidationError as e:
        raise _with_file_line(e, args.file, line_of) from None
    where = f"{args.backend}/{args.namespace}"

    async def over_grpc(addr: str):
        from services.adapters.client import GrpcBackendClient

        client = GrpcBackendClient(addr, name=args.backend)
        try:
            counts = await client.ingest(args.namespace, IngestBatch(sessions=tuple(sessions)))
            settled = await client.settle(args.namespace, 600)
        finally:
            await client.close()
        print(f"ingested into {where}: {counts['sessions_accepted']} sessions, {counts['messages_accepted']} messages "
              f"(settled={settled.settled}, gRPC at {addr}: the backend keeps its own state)")

    async def in_process():
        j = _journal(args.backend, args.namespace)
        with j.lock():
            stored = j.load()
            plan = j.plan(stored, sessions, Path(args.file).name, line_of)
            skipped = (f"; skipped {len(plan.skipped)} already stored with the same content "
                       f"({', '.join(s.session_id for s in plan.skipped[:10])}{', ...' if len(plan.skipped) > 10 else ''})"
                       if plan.skipped else "")
            if not plan.new:
                print(f"nothing new for {where}: all {len(sessions)} session(s) of {Path(args.file).name} are already "
                      f"stored with the same content (journal {j.path})")
                return
            client, rig, _ = await _client_for(args.backend, None, args.embedder)
            stop = interrupt.on_exit(rig.stop_all)
            try:  # the whole namespace as the one batch the next replay ingests: journaled only if it is taken
                await client.ingest(args.namespace, IngestBatch(sessions=tuple(stored + plan.new)))
                settled = await client.settle(args.namespace, 600)
            finally:
                await client.close()
                rig.stop_all()
                interrupt.forget(stop)
            with interrupt.critical():  # Ctrl-C waits for the commit: the journal is never half written
                j.commit(stored, plan.new)
                state["journaled"] = str(j.path)
        print(f"ingested into {where}: {len(plan.new)} sessions, {sum(len(s.messages) for s in plan.new)} messages "
              f"(settled={settled.settled}, in-process, journaled at {j.path}){skipped}")

    def interrupted() -> str:
        if addr:
            return (f"interrupted: the ingest into {where} over gRPC at {addr} was cut; the backend keeps its own "
                    "state and may hold part of the batch (`memrig reset` clears the namespace)")
        if state.get("journaled"):
            return f"interrupted after the ingest into {where} was journaled at {state['journaled']}"
        return (f"interrupted: nothing ingested into {where}; its journal is as it was (the next ingest of "
                f"{Path(args.file).name} starts over)")

    get_spec(args.backend)
    state: dict[str, str] = {}
    addr = args.target or running_backend(args.backend)
    interrupt.run(over_grpc(addr) if addr else in_process(), interrupted)
    return 0


def cmd_retrieve(args) -> int:
    from services.common.types import RetrieveQuery, parse_iso

    ref = parse_iso(args.reference_time, "--reference-time") if args.reference_time else None

    async def go():
        stored, j = [], None
        if not (args.target or running_backend(args.backend)):
            get_spec(args.backend)
            j = _journal(args.backend, args.namespace)
            with j.lock():
                stored = j.load()  # a damaged journal is an error naming it, before any process starts
        client, rig, in_process = await _client_for(args.backend, args.target, args.embedder)
        try:
            if in_process:
                await _replay(client, j, stored)
            res, ns = await client.retrieve(args.namespace, RetrieveQuery(args.query, args.top_k, args.mode, ref))
        finally:
            await client.close()
            if rig:
                rig.stop_all()
        if in_process and not stored and not args.json:
            print(f"(namespace {args.namespace!r} of {args.backend} is empty here: nothing journaled at {j.path}; "
                  "`memrig ingest` first)")
        if args.json:
            print(json.dumps({
                "backend": args.backend, "namespace": args.namespace, "query": args.query,
                "latency_ms": ns / 1e6, "server_ms": res.server_duration_ns / 1e6,
                "degraded": res.degraded, "degraded_reason": res.degraded_reason,
                "memories": [m.to_json() for m in res.memories],
                "formatted_context": res.formatted_context,
            }, indent=2))
        else:
            if not res.memories:
                print("(no memories)" + (f" degraded: {res.degraded_reason}" if res.degraded else ""))
            for i, m in enumerate(res.memories, 1):
                ch = " ".join(f"{k}={v:.3f}" for k, v in m.channel_scores.items())
                print(f"{i}. [{m.score:.3f}] {m.source} {ch}\n   {m.text[:300]}\n   evidence: {', '.join(m.evidence_ids)}")

    asyncio.run(go())
    return 0


# ------------------------------------------------------------------------------------------------------

def cmd_conformance(args) -> int:
    from services.conformance import main as conformance_main

    return conformance_main(args.target)


def cmd_report(args) -> int:
    from services.coordinator.results import RunDir
    from services.coordinator.run_report import is_bench_all_dir, rerender
    from services.coordinator.runner import finalize

    if not Path(args.run_dir).is_dir():
        raise ValidationError(args.run_dir, "not a directory")
    if is_bench_all_dir(args.run_dir):  # a bench-all run: each suite re-scored, then the verdict and report
        print(f"re-rendered: {rerender(args.run_dir, rescore=not args.no_rescore)}")
        return 0
    rd = RunDir(args.run_dir)
    if not rd.run_json.exists():
        print(f"error: {args.run_dir} has neither run.json (a suite run) nor report.json (a bench-all run)",
              file=sys.stderr)
        return 2
    metrics, state = finalize(rd)
    print(f"{state}: {rd.path / 'report.md'}")
    return 0


def cmd_compare(args) -> int:
    from services.coordinator.compare import CompareError, compare_runs, render_markdown

    try:
        res = compare_runs(args.run_a, args.run_b, fail_on=args.fail_on,
                           backends=split_names(args.backends) or None)
    except CompareError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    text = json.dumps(res, indent=2, default=str) if args.json else render_markdown(res)
    if args.out:
        Path(args.out).write_text(text)
        print(f"{'regression' if res['exit_status'] else 'no gated regression'}: {args.out}")
    else:
        print(text, end="")
    return res["exit_status"]


def cmd_reset(args) -> int:
    """Clear a namespace (or every namespace with --all) in the backend and the CLI's journal."""
    from services.adapters.client import GrpcBackendClient
    from services.cli_state import journaled

    if not args.all and not (args.backend and args.namespace):
        raise ValidationError("--namespace" if args.backend else "--backend",
                              "required: memrig reset --backend B --namespace N (or --backend B --all, or --all)")
    if args.all and args.namespace:
        raise ValidationError("--namespace", "give a namespace or --all, not both")
    if args.target and not args.backend:
        raise ValidationError("--backend", "required with --target")
    if args.backend:
        get_spec(args.backend)
    rig = Rig(STATE_DIR / "run")
    rig.load_state()
    running = ([args.backend] if args.backend else
               [k.split("/", 1)[1] for k in rig.procs if k.startswith("backend/")])
    done: list[str] = []

    async def go():
        for b in running:
            addr = args.target or rig.address_of(f"backend/{b}")
            if not addr:
                continue
            client = GrpcBackendClient(addr, name=b)
            try:
                names = ([args.namespace] if args.namespace else
                         [n.namespace for n in (await client.stats())["namespaces"]])
                for ns in names:
                    removed = await client.reset(ns)
                    done.append(f"reset {b}/{ns} at {addr}: {removed} item(s) removed")
            finally:
                await client.close()

    asyncio.run(go())
    pairs = ([(args.backend, args.namespace)] if args.namespace else journaled(STATE_DIR, args.backend))
    for b, ns in pairs:
        j = _journal(b, ns)
        with j.lock():
            if j.remove():
                done.append(f"cleared the journal of {b}/{ns} ({j.path}); in-process backends keep nothing else")
    if not done:
        what = f"{args.backend}/{args.namespace}" if args.namespace else (args.backend or "any backend")
        print(f"nothing to reset for {what}: no journal under {STATE_DIR / 'journal'} and no running backend")
    for line in done:
        print(line)
    return 0


def cmd_judge_agreement(args) -> int:
    """Every QA judge against a human-labelled set (services/coordinator/judge_agreement.py)."""
    from services.common import llm_roles
    from services.coordinator import judge_agreement as JA
    from services.coordinator.results import git_sha
    from services.coordinator.suites.common import resolve_data_file

    data_file = Path(args.data) if args.data else resolve_data_file(None, "locomo", "locomo10_dev.json")
    if not data_file.exists():
        raise FileNotFoundError(f"--data: {data_file} not found")
    try:
        items = JA.load_labels(args.labels, data_file)
    except ValueError as e:
        raise ValidationError("--labels", str(e)) from None
    choices = _llm_choices(args)
    choices = {"judge": choices["judge"]} if choices else {}
    judges = parse_csv(args.judges)
    for j in judges:
        if j not in JA.MODEL_JUDGES:
            raise ValidationError("--judges", f"{j!r} is not a model judge; expected {', '.join(JA.MODEL_JUDGES)}")
    if args.record and set(judges) != set(JA.MODEL_JUDGES):
        raise ValidationError("--record", "a record needs both model judges (--judges 0-3,binary)")

    async def go():
        from services.common.llm_client import LLMClient

        rig = Rig(STATE_DIR / "judge-agreement")
        try:
            roles = await rig.ensure_llm_roles(choices)
            async with LLMClient(roles["judge"]) as client:
                res, raw = await JA.measure(items, client, seed=args.seed, judges=judges,
                                            score_tokens=args.score_tokens or None)
                return res, raw, roles["judge"].identity(), client.cache_stats()
        finally:
            rig.stop_all()

    res, raw, ident, cache = asyncio.run(go())
    digest = JA.labels_digest(args.labels)
    name = llm_roles.short_name(ident)
    command = "memrig judge-agreement --labels " + JA._rel(args.labels) + (f" --judge {choices['judge']}" if choices
                                                                         else "")
    text = JA.render_labels(res, name, JA._rel(args.labels), digest, items)
    text += f"\n\nModel calls: {cache['hits']} from the response cache, {cache['misses']} answered by the model."
    if args.json:
        print(json.dumps({"result": res, "model_raw": raw, "judge": ident, "labels_sha256": digest}, indent=1))
    else:
        print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    if args.record:
        rec = JA.make_record(res, JA._rel(args.labels), digest, ident, git_sha(), command)
        path = JA.record_path(args.labels)
        path.write_text(json.dumps(rec, indent=1, ensure_ascii=False) + "\n")
        print(f"\nrecorded: {path}", file=sys.stderr)
    return 0


def cmd_serve(args, extra: list[str]) -> int:
    if args.service in SERVICES:
        module = SERVICES[args.service].module
    elif args.service.startswith("adapter:") or args.service in all_specs():
        spec = get_spec(args.service.removeprefix("adapter:"))
        module = spec.module
        if spec.config and "--config" not in extra:
            extra = ["--config", json.dumps(spec.config), *extra]
    else:
        print(f"error: unknown service {args.service!r}; known: {', '.join([*SERVICES, *all_specs()])}",
              file=sys.stderr)
        return 2
    argv = [sys.executable, "-m", module, "--port", str(args.port), *extra]
    os.execv(sys.executable, argv)
    return 0  # pragma: no cover


def cmd_list(args) -> int:
    from services.coordinator.suites.registry import all_suites

    print("suites:")
    for n, s in sorted(all_suites().items()):
        print(f"  {n:<18} {s.description[:100]}")
    print("backends (* = in make bench-all):")
    for n, s in all_specs().items():
        print(f"  {n:<18}{'*' if s.default else ' '} {s.description[:100]}")
    for folder, why in load_errors().items():
        print(f"  (services/adapters/{folder} did not load: {why})")
    print("services:")
    for n, s in SERVICES.items():
        print(f"  {n:<18} {s.description}")
    return 0


class CommandParser(argparse.ArgumentParser):
    """A subcommand's parser. With `module=`, the subcommand lives in that module (services/common/subcommand.py:
    add_arguments, check, run), imported only when this parser parses: `import services.cli` and every other
    command leave it, and what it imports (aiohttp, numpy, a study's adapters), unloaded. Locust never runs in
    this process either way: `memrig load` and `memrig load-bench` start it as processes of their own."""

    def __init__(self, *args, module: str | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.module = module
        self._loaded = None

    def load(self):
        """The module, its flags added and its `run` set as the command (once)."""
        if self.module is not None and self._loaded is None:
            import importlib

            try:
                mod = importlib.import_module(self.module)
            except ModuleNotFoundError as e:
                self.exit(2, f"error: {self.module} is not available in this checkout ({e})\n")
            mod.add_arguments(self)
            self.set_defaults(fn=_module_run(mod.run))
            self._loaded = mod
        return self._loaded

    def parse_known_args(self, args=None, namespace=None):
        from services.common.subcommand import apply_check

        mod = self.load()
        ns, extra = super().parse_known_args(args, namespace)
        if mod is not None:
            ns.argv = list(sys.argv[1:] if args is None else args)
            apply_check(self, ns, getattr(mod, "check", None))
        return ns, extra


def _module_run(run):
    """The module's run(args) on its own flags (the CLI's `cmd` and `fn` left out); its return is the exit code."""
    def call(args) -> int:
        own = argparse.Namespace(**{k: v for k, v in vars(args).items() if k not in ("cmd", "fn")})
        return int(run(own) or 0)

    return call


# `memrig CMD` → (module holding its add_arguments/check/run, the one-line help `memrig --help` shows)
MODULE_COMMANDS = {
    "bench-perf": ("services.perf.scaling", "scale and overhead benchmark (ratios in one run)"),
    "observe": ("services.observe", "start Prometheus (and Grafana) against a running rig"),
    "load": ("loadtests.run", "locust master + workers against a local rig"),
    "load-bench": ("loadtests.capacity", "highest sustained retrieve rate and proxy overhead"),
    "fidelity": ("services.studies.fidelity", "port vs real OpenClaw, query by query"),
    "sensitivity": ("services.studies.sensitivity", "native baseline by embedder × minScore"),
    "power": ("services.coordinator.power", "what a run could detect, and the units a difference needs"),
    "drill": ("services.drills.rig_faults", "drills against the rig itself: `memrig drill rig-faults` kills, hangs, "
                                            "feeds garbage to and fills the disk of a small run's processes"),
    "credit-agreement": ("services.coordinator.credit_agreement",
                         "which rule of what the agent was shown agrees with blind labels (weighted kappa)"),
}


def llm_flags(p: argparse.ArgumentParser) -> None:
    """Which model plays each LLM role (services/common/llm_roles.py) and the response cache."""
    choices = ("mock", "local", "env")
    p.add_argument("--llm", choices=choices, default=None,
                   help="every LLM role: mock (offline llm-mock), local (the local model, make setup-local-llm) or "
                        "env (MEMRIG_LLM_* / MEMRIG_<ROLE>_*; the default)")
    for role, what in (("answerer", "the answers"), ("judge", "the judgements"),
                       ("flush", "the backends' memory writers (OpenClaw flush notes, extraction)"),
                       ("compaction", "the compaction summary")):
        p.add_argument(f"--{role}", dest=f"llm_{role}", choices=choices, default=None,
                       help=f"the model for {what} (overrides --llm)")
    p.add_argument("--no-llm-cache", action="store_true",
                   help="call the model for every request and overwrite its response-cache entry")


def positive_seconds(text: str) -> float:
    """A flag's number of seconds, > 0 and finite (argparse names the flag in its error)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < v < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {text!r}")
    return v


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="memrig", description="A measurement rig for AI coding agents' memory.")
    sub = ap.add_subparsers(dest="cmd", required=True, parser_class=CommandParser)

    p = sub.add_parser("up", help="start llm-mock (or the local model) and backends in the background")
    p.add_argument("--backends", help="comma-separated backend names (default: the bench-all defaults)")
    p.add_argument("--services", default="", help="extra services to start (e.g. cortex-mock,fault-proxy)")
    p.add_argument("--embedder", default=None)
    llm_flags(p)
    p.set_defaults(fn=cmd_up)
    sub.add_parser("down", help="stop what `memrig up` started").set_defaults(fn=cmd_down)

    def bench_flags(p):
        p.add_argument("--out", default=None, help="run directory (default results/<run-id>); reused = resume")
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--option", action="append", default=[], help="suite option key=value (repeatable)")
        p.add_argument("--concurrency", type=int, default=4)
        p.add_argument("--lanes", type=int, default=2,
                       help="backends ingesting at the same time (each is its own process; 1 = one after another, "
                            "so each backend's cost table is its own)")
        p.add_argument("--judge-passes", type=int, default=1)
        p.add_argument("--embedder", default=None, help="minilm (default), wordllama, remote (MEMRIG_EMBED_BASE_URL), hash (tests only)")
        p.add_argument("--target", action="append", default=[],
                       help="backend=HOST:PORT of a running backend (repeatable; without --backends, the targets "
                            "are the backends)")
        p.add_argument("--in-process", action="store_true", help="run backends inside this process")
        p.add_argument("--deadline-s", type=positive_seconds, default=60.0,
                       help="deadline of each Describe, Reset, Retrieve and Stats call to a backend (a backend "
                            "that does not answer in time fails that call, named with the backend and the call)")
        p.add_argument("--ingest-deadline-s", type=positive_seconds, default=600.0,
                       help="deadline of each Ingest and Prepare call (Settle waits the settle timeout + 30 s)")
        p.add_argument("--fresh", action="store_true",
                       help="measure everything: discard existing samples in --out instead of resuming, and reuse "
                            "no stored result (without it, a suite × backend result whose key is unchanged is "
                            "copied from $MEMRIG_STATE_DIR/results-cache, default .memrig/results-cache, and that "
                            "backend is not started; results measured are stored either way)")
        llm_flags(p)

    p = sub.add_parser("bench", help="run one suite over backends")
    p.add_argument("--suite", required=True)
    p.add_argument("--backends", default="")
    bench_flags(p)
    p.set_defaults(fn=cmd_bench)

    p = sub.add_parser("bench-all", help="every default suite + costs, one report")
    p.add_argument("--backends", default="")
    p.add_argument("--suites", default="", help="comma-separated suites (default: all default suites)")
    p.add_argument("--no-costs", action="store_true", help="skip the latency/resources/drills section")
    p.add_argument("--target-wait-s", type=float, default=0.0,
                   help="wait up to this long for each --target to report SERVING before the suites start")
    bench_flags(p)
    p.set_defaults(fn=cmd_bench_all)

    p = sub.add_parser("bench-local", help="the quality suites with the local model in every LLM role",
                       description="The quality suites with a real language model, offline "
                                   "(services/coordinator/bench_local.py).")
    p.add_argument("--out", default=None, help="results directory (default results/bench-local-<time>)")
    p.add_argument("--suites", default="", help="comma-separated subset of cortex-v1, locomo, longmemeval")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--concurrency", type=int, default=2,
                   help="probes in flight (the model decodes one request at a time; 2 keeps it busy)")
    p.add_argument("--fresh", action="store_true", help="discard samples already in --out instead of resuming")
    p.add_argument("--compare-with", default=None,
                   help="a previous bench-local directory: every table must be identical (timings apart)")
    p.add_argument("--no-llm-cache", action="store_true", help="call the model for every request (refresh the cache)")
    p.set_defaults(fn=cmd_bench_local)

    for name in ("ingest", "retrieve"):
        p = sub.add_parser(name, help=f"{name} against one backend")
        p.add_argument("--backend", required=True)
        p.add_argument("--namespace", required=True)
        p.add_argument("--target", default=None, help="HOST:PORT of a running backend")
        p.add_argument("--embedder", default=None)
        if name == "ingest":
            p.add_argument("file", help="sessions JSONL (one session a line)")
            p.set_defaults(fn=cmd_ingest)
        else:
            p.add_argument("--query", required=True)
            p.add_argument("--top-k", type=int, default=6)
            p.add_argument("--mode", default="fast", choices=["fast", "full"])
            p.add_argument("--reference-time", default=None, help="ISO 8601 'now' for decay/temporal reasoning")
            p.add_argument("--json", action="store_true")
            p.set_defaults(fn=cmd_retrieve)

    p = sub.add_parser("conformance", help="check a MemoryBackendService at HOST:PORT")
    p.add_argument("--target", required=True)
    p.set_defaults(fn=cmd_conformance)

    p = sub.add_parser("report", help="re-score and re-render a run directory (a suite run or a bench-all run)")
    p.add_argument("run_dir")
    p.add_argument("--no-rescore", action="store_true",
                   help="bench-all run: re-render the verdict and report from the suites' saved metrics only")
    p.set_defaults(fn=cmd_report)

    p = sub.add_parser("compare", help="which metrics moved between two runs beyond their intervals, what changed; "
                       "exit 1 gated regression, 2 bad input, 3 incomplete (a suite or backend failing or missing "
                       "in one run, errored probes, lost samples)")
    p.add_argument("run_a", help="the reference run (a suite run dir or a bench-all run dir)")
    p.add_argument("run_b", help="the run to check against it")
    p.add_argument("--fail-on", action="append", default=[], metavar="SPEC",
                   help="exit 1 when one regressed: headline, any, METRIC or SUITE:METRIC (comma-separated or repeated)")
    p.add_argument("--backends", default="", help="only these backends (comma-separated)")
    p.add_argument("--json", action="store_true", help="JSON instead of Markdown")
    p.add_argument("--out", default=None, help="write the report to this file instead of stdout")
    p.set_defaults(fn=cmd_compare)

    p = sub.add_parser("reset", help="clear a namespace in the backend and the CLI's journal")
    p.add_argument("--backend", default=None)
    p.add_argument("--namespace", default=None)
    p.add_argument("--all", action="store_true", help="every namespace (of --backend, or of every backend)")
    p.add_argument("--target", default=None, help="HOST:PORT of a running backend")
    p.set_defaults(fn=cmd_reset)

    p = sub.add_parser("judge-agreement", help="every QA judge against human-labelled answers (kappa, CI, misses)")
    p.add_argument("--labels", required=True, help="labels JSONL (services/coordinator/suites/data/"
                                                    "judge_labels_locomo.jsonl; format in its .md)")
    p.add_argument("--data", default=None, help="the LoCoMo file the labels point into (default: "
                                                  "$MEMRIG_DATA_DIR or ../shared/data, locomo/locomo10_dev.json)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p.add_argument("--judges", default="0-3,binary", help="the model judges to run (0-3, binary; comma-separated)")
    p.add_argument("--score-tokens", type=int, default=12,
                   help="cap the 0-3 judge's reply at this many tokens (its score comes first; greedy decoding "
                        "gives the same score; 0 = uncapped)")
    p.add_argument("--json", action="store_true", help="JSON instead of Markdown")
    p.add_argument("--out", default=None, help="also write the Markdown to this file")
    p.add_argument("--record", action="store_true",
                   help="write the agreement record beside the labels (<stem>.agreement.json), which suite reports "
                        "quote beside model-made QA figures")
    llm_flags(p)
    p.set_defaults(fn=cmd_judge_agreement)

    p = sub.add_parser("serve", help="run one service in the foreground (extra flags are passed on)")
    p.add_argument("service")
    p.add_argument("--port", type=int, default=0)
    p.set_defaults(fn=cmd_serve, passthrough=True)

    sub.add_parser("list", help="suites, backends and services").set_defaults(fn=cmd_list)
    for name, (module, helptext) in MODULE_COMMANDS.items():
        sub.add_parser(name, help=helptext, module=module)
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = build_parser()
    args, extra = ap.parse_known_args(argv)
    try:
        if getattr(args, "passthrough", False):
            code = args.fn(args, extra)
        else:
            if extra:
                ap.error(f"unrecognized arguments: {' '.join(extra)}")
            code = args.fn(args)
    except ValidationError as e:
        print(f"error: {e}", file=sys.stderr)
        code = 2
    except KeyError as e:
        print(f"error: {e.args[0] if e.args else e}", file=sys.stderr)
        code = 2
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        code = 2
    except Exception as e:  # turned into one line; only unknown errors keep a traceback
        msg = _friendly_error(e, args)
        if msg is None:
            raise
        print(f"error: {msg}", file=sys.stderr)
        code = 2
    sys.exit(code)


def _friendly_error(e: Exception, args) -> str | None:
    """One line for the errors a user causes (unreachable --target, a backend refusing the input), None for
    anything else (a bug keeps its traceback)."""
    import grpc

    from services.common.errors import BackendError, BackendUnavailable
    from services.coordinator.suites.base import SuiteUnavailable
    from services.launcher import LaunchError

    if isinstance(e, LaunchError) and str(e).startswith("local-llm cannot start"):
        return str(e)  # the local model is not set up: the message says what to run
    if isinstance(e, SuiteUnavailable):
        return str(e)  # its data is not here: the message says where to put it or what fetches it
    if isinstance(e, BackendError):
        where = getattr(args, "target", None) or e.backend
        if isinstance(e, BackendUnavailable):
            return f"cannot reach {where}: {e}"
        return f"{where} failed: {e}"
    if isinstance(e, grpc.aio.AioRpcError | grpc.RpcError):
        code = e.code() if callable(getattr(e, "code", None)) else None
        where = getattr(args, "target", None) or "the backend"
        details = e.details() if callable(getattr(e, "details", None)) else str(e)
        if code == grpc.StatusCode.UNAVAILABLE:
            return f"cannot reach {where}: {details}"
        if code == grpc.StatusCode.INVALID_ARGUMENT:
            return f"{where} refused the input: {details}"
        return f"{where} answered {code.name if code else 'an error'}: {details}"
    if isinstance(e, ConnectionError | TimeoutError):
        return f"cannot reach {getattr(args, 'target', None) or 'the service'}: {e}"
    from services.coordinator.results import ResultsWriteError

    if isinstance(e, ResultsWriteError):
        return str(e)  # names the file; what was written before is intact
    if isinstance(e, IsADirectoryError | PermissionError | UnicodeDecodeError):
        return str(e)
    return None


if __name__ == "__main__":
    main()
