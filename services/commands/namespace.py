"""`memrig ingest`, `memrig retrieve` and `memrig reset`: one backend's namespace. A running backend (`memrig up`,
or --target) is used over gRPC and keeps its own state; otherwise the backend runs in this process, rebuilt each
time from the namespace's journal (services/cli_state.py), which `reset` clears."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from services.adapters.registry import get_spec
from services.commands.common import state_dir
from services.commands.rig import running_backend
from services.common import interrupt
from services.common.subcommand import Command
from services.common.types import ValidationError
from services.launcher import Rig


def _backend_flags(p: argparse.ArgumentParser) -> None:
    """The flags ingest and retrieve share."""
    p.add_argument("--backend", required=True)
    p.add_argument("--namespace", required=True)
    p.add_argument("--target", default=None, help="HOST:PORT of a running backend")
    p.add_argument("--embedder", default=None)


def _journal(backend: str, namespace: str):
    from services.cli_state import Journal

    return Journal(backend, namespace, state_dir())


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
    rig = Rig(state_dir() / "cli")
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


def add_ingest_arguments(p: argparse.ArgumentParser) -> None:
    """`memrig ingest`'s flags."""
    _backend_flags(p)
    p.add_argument("file", help="sessions JSONL (one session a line)")


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


def add_retrieve_arguments(p: argparse.ArgumentParser) -> None:
    """`memrig retrieve`'s flags."""
    _backend_flags(p)
    p.add_argument("--query", required=True)
    p.add_argument("--top-k", type=int, default=6)
    p.add_argument("--mode", default="fast", choices=["fast", "full"])
    p.add_argument("--reference-time", default=None, help="ISO 8601 'now' for decay/temporal reasoning")
    p.add_argument("--json", action="store_true")


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


def add_reset_arguments(p: argparse.ArgumentParser) -> None:
    """`memrig reset`'s flags."""
    p.add_argument("--backend", default=None)
    p.add_argument("--namespace", default=None)
    p.add_argument("--all", action="store_true", help="every namespace (of --backend, or of every backend)")
    p.add_argument("--target", default=None, help="HOST:PORT of a running backend")


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
    rig = Rig(state_dir() / "run")
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
    pairs = ([(args.backend, args.namespace)] if args.namespace else journaled(state_dir(), args.backend))
    for b, ns in pairs:
        j = _journal(b, ns)
        with j.lock():
            if j.remove():
                done.append(f"cleared the journal of {b}/{ns} ({j.path}); in-process backends keep nothing else")
    if not done:
        what = f"{args.backend}/{args.namespace}" if args.namespace else (args.backend or "any backend")
        print(f"nothing to reset for {what}: no journal under {state_dir() / 'journal'} and no running backend")
    for line in done:
        print(line)
    return 0


INGEST = Command(add_ingest_arguments, cmd_ingest)
RETRIEVE = Command(add_retrieve_arguments, cmd_retrieve)
RESET = Command(add_reset_arguments, cmd_reset)
