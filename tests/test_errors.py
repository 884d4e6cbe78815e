"""The error root (services/common/errors.py): every exception class the rig defines descends from MemrigError,
every bad-input class is an InputError carrying its field, each family maps to one HTTP and one gRPC status, and
the runner sorts a failed probe by the exception's type."""

from __future__ import annotations

import ast
import functools
import importlib
import re
import sys
from pathlib import Path

import grpc
import pytest

from services.common.errors import (
    BackendError,
    BackendFailed,
    BackendUnavailable,
    DependencyError,
    InputError,
    MemrigError,
    http_status,
)

ROOT = Path(__file__).resolve().parent.parent
# exceptions used for control flow inside one function, never raised to a caller
CONTROL_FLOW = {("services.k8s_check.argv", "_Serve"), ("services.fault_proxy.app", "_Done")}


CLASS_LINE = re.compile(r"^[ \t]*class[ \t]+([A-Za-z_]\w*)", re.M)

# Importing locust (or gevent) monkey-patches the process; loadtests' locustfiles and the modules they pull in are
# checked from their source instead of imported.
PATCHING = {"locust", "gevent"}


def _imported_modules(tree: ast.AST) -> set[str]:
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            out.update(a.name for a in n.names)
        elif isinstance(n, ast.ImportFrom) and n.module and not n.level:
            out.add(n.module)
    return out


def _patching_modules() -> set[str]:
    """loadtests modules that import locust or gevent, directly or through another loadtests module."""
    imports = {".".join(p.relative_to(ROOT).with_suffix("").parts): _imported_modules(ast.parse(p.read_text()))
               for p in sorted((ROOT / "loadtests").glob("*.py"))}
    bound = {m for m, imp in imports.items() if any(i.split(".")[0] in PATCHING for i in imp)}
    while True:
        more = {m for m, imp in imports.items() if m not in bound and imp & bound}
        if not more:
            return bound
        bound |= more


@functools.cache
def _defined_exceptions() -> list[type[BaseException]]:
    """Every exception class defined under services/, collectors/ and loadtests/, found by reading the source (a
    class whose bases name an error, exception or another class of the module) and importing its module; the
    locust-bound loadtests modules are left to `test_locust_bound_exceptions_descend_from_memrig_error`."""
    found = []
    patching = _patching_modules()
    for folder in ("services", "collectors", "loadtests"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "node_modules" in path.parts:  # installed npm packages (openclaw ships scripts): not the rig's code
                continue
            text = path.read_text()
            if not any(w in text for w in ("Error", "Exception", "Unavailable", "Invalid")):
                continue
            # every class statement, nested ones too (a line in a string that looks like one names nothing the
            # module defines, and getattr below drops it); a regex, not an AST walk of ~300 files (~4 s)
            names = CLASS_LINE.findall(text)
            if not names:
                continue
            mod_name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            if mod_name in patching:
                continue
            mod = importlib.import_module(mod_name)
            for name in names:
                cls = getattr(mod, name, None)
                if (isinstance(cls, type) and issubclass(cls, BaseException) and cls.__module__ == mod_name
                        and (mod_name, name) not in CONTROL_FLOW):
                    found.append(cls)
    return found


def test_every_exception_class_descends_from_memrig_error():
    classes = _defined_exceptions()
    assert len(classes) >= 30  # the walk found the classes (39 in the count, a few since merged)
    outside = sorted(f"{c.__module__}.{c.__qualname__}" for c in classes if not issubclass(c, MemrigError))
    assert outside == []
    loadtests = {f"{c.__module__}.{c.__qualname__}" for c in classes if c.__module__.startswith("loadtests.")}
    assert {"loadtests.open_loop.HttpStatusError", "loadtests.http_client.ServerDisconnected",
            "loadtests.http_client.BadResponse", "loadtests.fault_timeline.FaultAdminError"} <= loadtests
    assert not {m.split(".")[0] for m in sys.modules} & PATCHING  # the walk imported no locust-bound module


def test_locust_bound_exceptions_descend_from_memrig_error():
    """A locust-bound module's exception classes (read, not imported) each name a base imported from
    services/common/errors.py."""
    patching = _patching_modules()
    assert "loadtests.cortex_locustfile" in patching and "loadtests.locust_hooks" in patching
    checked = []
    for mod_name in sorted(patching):
        tree = ast.parse((ROOT / (mod_name.replace(".", "/") + ".py")).read_text())
        rooted = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                  and n.module == "services.common.errors" for a in n.names}
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            bases = {b.id for b in cls.bases if isinstance(b, ast.Name)}
            if any(b.endswith(("Error", "Exception")) for b in bases) or bases & rooted:
                checked.append((mod_name, cls.name, bool(bases & rooted)))
    assert ("loadtests.cortex_locustfile", "JobFailed", True) in checked
    assert [c for c in checked if not c[2]] == []


# (class, constructor arguments, the field it must carry)
def _bad_input_cases():
    from services.adapters.http.mapping import MappingError
    from services.adapters.http.template import TemplateError
    from services.common.types import ValidationError
    from services.coordinator.compare import CompareError
    from services.coordinator.credit_agreement import CreditLabelError
    from services.coordinator.merge import MergeError
    from services.coordinator.metrics.budget import SpanError
    from services.coordinator.metrics.registry import UnknownMetric
    from services.coordinator.suites.base import OptionError
    from services.coordinator.suites.beam import BeamDataError
    from services.coordinator.verdict import VerdictError
    from services.cortex_mock.app import AuthError, BodyInvalid
    from services.cortex_mock.validation import RequestInvalid
    from services.datasets import DigestMismatch
    from services.embeddings_api.service import EmbeddingRequestError
    from services.fault_proxy.actions import FaultError
    from services.fault_proxy.store import FaultExists, FaultNotFound
    from services.k8s_check.argv import ParseFailed
    from services.llm_mock.validation import RequestError

    return [
        (ValidationError, ("query", "must not be empty"), "query"),
        (OptionError, ("limit", "expected an integer"), "options.limit"),
        (FaultError, ("attributes.ms", "must be >= 0"), "attributes.ms"),
        (MappingError, ("ingest.key", "needs a key template"), "ingest.key"),
        (TemplateError, ("user.name", "unknown variable"), "user.name"),
        (RequestError, ("temperature", "must be <= 2"), "temperature"),
        (RequestError, (None, "not JSON"), "body"),
        (EmbeddingRequestError, ("dimensions", "must be 384"), "dimensions"),
        (RequestInvalid, ([{"type": "missing", "loc": ["body", "text"], "msg": "Field required"}],), "body.text"),
        (BodyInvalid, (422, [{"type": "string_unicode", "loc": ["query", "q"], "msg": "lone surrogate"}]), "query.q"),
        (BodyInvalid, (400, "Malformed JSON body"), "body"),
        (AuthError, (401, "Missing x-api-key header"), "header.x-api-key"),
        (SpanError, ("memories[2].evidence_spans[0].end", "past the text"), "memories[2].evidence_spans[0].end"),
        (CompareError, ("--fail-on", "matches no metric"), "--fail-on"),
        (MergeError, ("b/run.json: seed", "1 differs from a's 0"), "b/run.json: seed"),
        (UnknownMetric, ("made_up", "unknown metric 'made_up'"), "metric"),
        (VerdictError, ("run/run.json", "missing"), "run/run.json"),
        (DigestMismatch, ("locomo.json", "ab", "cd"), "locomo.json"),
        (FaultExists, ("slow",), "name"),
        (FaultNotFound, ("slow",), "name"),
        (ParseFailed, ("unrecognized arguments: --x",), "args"),
        (CreditLabelError, ("credit_labels.jsonl:3.label", "3 is not 0, 1 or 2"), "credit_labels.jsonl:3.label"),
        (BeamDataError, ("beam-100K-2.chat_batches[0].turns[3][1].role", "missing"),
         "beam-100K-2.chat_batches[0].turns[3][1].role"),
    ]


def test_every_bad_input_class_is_an_input_error_carrying_its_field():
    cases = _bad_input_cases()
    for cls, args, field in cases:
        e = cls(*args)
        assert isinstance(e, InputError) and isinstance(e, MemrigError) and isinstance(e, ValueError), cls
        assert e.field == field, (cls, e.field)
    # the walk: every InputError subclass the rig defines is among the cases above (a new one needs a case)
    _defined_exceptions()
    seen, todo = set(), [InputError]
    while todo:
        c = todo.pop()
        for sub in c.__subclasses__():
            if sub.__module__.startswith(("services.", "collectors.", "loadtests.")) and sub not in seen:
                seen.add(sub)
                todo.append(sub)
    assert seen == {cls for cls, _, _ in cases}


def test_input_error_text_is_unchanged_by_the_root():
    from services.coordinator.suites.base import OptionError
    from services.cortex_mock.validation import RequestInvalid
    from services.fault_proxy.store import FaultNotFound
    from services.llm_mock.validation import RequestError

    assert str(OptionError("limit", "expected an integer")) == "options.limit: expected an integer"
    assert str(RequestError("temperature", "'temperature' must be <= 2")) == "'temperature' must be <= 2"
    errs = [{"loc": ["body", "a"], "msg": "m1"}, {"loc": ["body", "b", 0], "msg": "m2"}]
    assert str(RequestInvalid(errs)) == "body.a: m1; body.b.0: m2"
    assert str(FaultNotFound("slow")) == "slow" and FaultNotFound("slow").message == "fault 'slow' not found"


def test_http_status_of_each_family():
    from services.common.llm_client import LLMError
    from services.cortex_mock.app import AuthError, BodyInvalid
    from services.cortex_mock.validation import RequestInvalid
    from services.embeddings_api.service import EmbeddingRequestError
    from services.fault_proxy.store import FaultExists, FaultNotFound
    from services.launcher import LaunchError

    assert http_status(InputError("f", "bad")) == 400
    assert http_status(RequestInvalid([{"loc": ["body", "x"], "msg": "m"}])) == 422
    assert http_status(BodyInvalid(400, "Malformed JSON body")) == 400
    assert http_status(AuthError(403, "Invalid API key")) == 403
    assert http_status(EmbeddingRequestError(None, "too large", "request_too_large", 413)) == 413
    assert http_status(FaultNotFound("x")) == 404
    assert http_status(FaultExists("x")) == 409
    assert http_status(DependencyError("down")) == 502
    assert http_status(LLMError("refused", 401)) == 502
    assert http_status(LaunchError("no READY")) == 502
    assert http_status(BackendUnavailable("b", "UNAVAILABLE", "down")) == 503
    assert http_status(BackendFailed("b", "INTERNAL", "boom")) == 502
    assert http_status(KeyError("k")) == 500


def test_grpc_status_of_each_family():
    from services.common.grpc_status import status_for

    for cls, args, _ in _bad_input_cases():
        e = cls(*args)
        assert status_for(e, "b") == (grpc.StatusCode.INVALID_ARGUMENT, str(e)), cls
    assert status_for(DependencyError("down"), "b")[0] == grpc.StatusCode.UNAVAILABLE
    assert status_for(DependencyError("no", 403), "b")[0] == grpc.StatusCode.FAILED_PRECONDITION
    assert status_for(RuntimeError("x"), "b")[0] == grpc.StatusCode.INTERNAL


def test_grpc_client_sorts_each_status_into_a_family():
    from services.adapters.client import backend_error

    expected = {"UNAVAILABLE": BackendUnavailable, "DEADLINE_EXCEEDED": BackendUnavailable,
                "FAILED_PRECONDITION": BackendFailed, "CANCELLED": BackendFailed, "UNKNOWN": BackendFailed,
                "INTERNAL": BackendFailed, "UNIMPLEMENTED": BackendError, "RESOURCE_EXHAUSTED": BackendError,
                "NOT_FOUND": BackendError}
    for code, cls in expected.items():
        e = backend_error("b", code, "why")
        assert type(e) is cls and e.code == code and e.backend == "b" and str(e) == f"b: {code}: why"


@pytest.mark.parametrize(("raised", "marks_dead", "traceback"), [
    (BackendUnavailable("t", "UNAVAILABLE", "down"), True, False),
    (BackendFailed("t", "INTERNAL", "boom"), True, False),
    (BackendError("t", "UNIMPLEMENTED", "no Prepare"), False, False),
    (InputError("query", "too long"), False, True),
    (DependencyError("the LLM endpoint is down"), False, True),
    (TimeoutError("slow"), False, True),
])
async def test_runner_classifies_a_failed_probe_by_type(raised, marks_dead, traceback):
    from services.coordinator.runner import run_one
    from services.coordinator.suites.base import Condition, Probe

    class Failing:
        name = "s"

        async def run_probe(self, ctx, probe, cond):
            raise raised

    failures: dict[str, str] = {}
    cond = Condition("t", ("backend:t",))
    out = await run_one(Failing(), None, Probe(id="p1", question="q"), cond, failures)
    assert out["status"] == "error"
    assert ("t" in failures) is marks_dead
    if marks_dead:
        assert failures["t"] == f"failed mid-run: {raised.code}: {str(raised)[:300]}"
    assert ("traceback" in out) is traceback


async def test_runner_lets_an_unknown_exception_through():
    from services.coordinator.runner import run_one
    from services.coordinator.suites.base import Condition, Probe

    class Buggy:
        name = "s"

        async def run_probe(self, ctx, probe, cond):
            raise KeyError("bug")

    with pytest.raises(KeyError):
        await run_one(Buggy(), None, Probe(id="p1", question="q"), Condition("t", ("backend:t",)), {})


# -- a dependency's failure stays a DependencyError, with the caller's context in its message ---------------------
async def test_a_failed_cortex_reset_is_the_cortex_apis_error_naming_the_reset():
    from services.adapters.cortex.backend import CortexBackend
    from services.adapters.cortex.client import CortexError, CortexHTTPError
    from services.common.grpc_status import status_for

    class Forgets:
        def __init__(self, status: int):
            self.status = status

        async def forget_session(self, sid, timeout_ms, key):
            raise CortexHTTPError("forget", self.status, "no")

    b = CortexBackend({"base_url": "http://127.0.0.1:9"})
    b.sent_sessions["ns"] = {"s1": {"m1"}}
    b.client = Forgets(404)  # type: ignore[assignment]  # nothing stored under that session: not a failure
    await b.reset("ns")
    for status, code in ((503, grpc.StatusCode.UNAVAILABLE), (401, grpc.StatusCode.FAILED_PRECONDITION)):
        b.sent_sessions["ns"] = {"s1": {"m1"}}
        b.client = Forgets(status)  # type: ignore[assignment]
        with pytest.raises(CortexError, match=f"cortex reset of 'ns' failed: Cortex forget failed: {status}") as e:
            await b.reset("ns")
        assert e.value.status == status and status_for(e.value, "cortex") == (
            code, f"cortex needs the Cortex API, which {'refused the request' if status == 401 else 'is unavailable ('}"
            + (f": {e.value}" if status == 401 else f"{e.value}); {CortexError.hint}."))


def test_a_kustomization_that_does_not_build_is_bad_input_naming_its_directory(monkeypatch, tmp_path):
    import subprocess

    from services.k8s_check import kubectl

    monkeypatch.setattr(kubectl, "kubectl_path", lambda: "kubectl")
    monkeypatch.setattr(kubectl.subprocess, "run", lambda argv, **kw: subprocess.CompletedProcess(
        argv, 1, "", "error: accumulating resources: missing.yaml\n"))
    with pytest.raises(InputError) as e:
        kubectl.render(tmp_path)
    assert e.value.field == str(tmp_path) and e.value.message == "error: accumulating resources: missing.yaml"
    assert str(e.value) == f"kubectl kustomize {tmp_path}: error: accumulating resources: missing.yaml"


def test_an_unreachable_remote_embedder_is_a_dependency_with_its_hint():
    from services.common.embeddings import EmbedderError, RemoteEmbedder
    from services.common.grpc_status import status_for

    emb = object.__new__(RemoteEmbedder)  # not __init__: it probes the endpoint at once
    emb.base_url, emb.model, emb.api_key, emb.timeout_s = "http://127.0.0.1:9/v1", "m", "", 2.0
    emb.name = "remote:m@127.0.0.1:9"
    with pytest.raises(EmbedderError, match=r"embedder remote:m@127.0.0.1:9: URLError") as e:
        emb._encode_uncached(["x"])
    code, msg = status_for(e.value, "dense")
    assert code == grpc.StatusCode.UNAVAILABLE and msg.startswith("dense needs the embeddings endpoint")
    assert msg.endswith(EmbedderError.hint + ".")
