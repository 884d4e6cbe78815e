"""The declarative mapping file that tells the `http` adapter how to talk to one memory service.

A mapping (YAML or JSON, one file per service) says how to reset a namespace, ingest (per message, session
or whole batch, documents separately), wait for settle (poll a job URL and/or until some totals stop moving,
or a fixed wait), retrieve (request template, where the results list is, which fields are id/text/score/...),
where the auth header's secret comes from, and the timeouts and retries. `load_mapping` validates the whole
file with pydantic (unknown or missing keys are errors) and then renders every template against sample
values, so a typo in a placeholder fails at load time with the key that holds it, not mid-benchmark.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from services.adapters.http.template import TemplateError, render, render_string
from services.common.errors import InputError

MAPPINGS_DIR = Path(__file__).parent / "mappings"


class MappingError(InputError):
    """A bad mapping file; `field` is the offending key (or the file, for a problem of the file as a whole, with
    the key inside the message); str(e) is "field: message"."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Request(_Strict):
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    path: str  # appended to base_url; placeholders in it are URL-quoted
    body: Any = None  # a template; None sends no body
    ok_status: list[int] = Field(default_factory=list)  # non-2xx answers that still count as success (e.g. 404)


class Auth(_Strict):
    header: str
    value: str = "{{secret}}"  # template; {{secret}} is $env, else `default`
    env: str = ""
    default: str = ""


class Retries(_Strict):
    attempts: int = Field(3, ge=1, le=20)  # total tries per request
    backoff_ms: int = Field(200, ge=0)  # doubled after each failed try
    on_status: list[int] = Field(default_factory=lambda: [429, 502, 503, 504])
    on_timeout: bool = True


class Timeouts(_Strict):
    ingest: int = Field(10000, gt=0)
    settle: int = Field(10000, gt=0)
    retrieve: int = Field(5000, gt=0)
    reset: int = Field(30000, gt=0)


class Ingest(_Strict):
    per: Literal["message", "session", "batch"]
    request: Request
    key: str = ""  # template: the unit's own id at the service (used by reset per unit and to map evidence back)
    job_id: str | None = None  # response path of a job to poll while settling
    item_id: str | None = None  # response path of the stored item's id (reset per item, evidence by id)
    done_field: str | None = None  # response path; a job whose value is in done_values is complete at once
    done_values: list[str] = Field(default_factory=list)


class Documents(_Strict):
    request: Request
    key: str = ""
    job_id: str | None = None
    item_id: str | None = None
    done_field: str | None = None
    done_values: list[str] = Field(default_factory=list)


class JobPoll(_Strict):
    request: Request
    status: str  # response path of the job's state
    done: list[str]
    failed: list[str] = Field(default_factory=list)


class Stable(_Strict):
    request: Request
    fields: list[str] = Field(min_length=1)  # response paths that must hold still
    polls: int = Field(2, ge=1)  # consecutive equal readings


class Settle(_Strict):
    job: JobPoll | None = None
    stable: Stable | None = None
    wait_s: float = Field(0.0, ge=0)  # a fixed wait after ingest (services with no way to ask)
    poll_ms: int = Field(200, gt=0)
    timeout_s: float = Field(180.0, gt=0)


class Fields(_Strict):
    text: str  # response path inside one result
    id: str | None = None
    score: str | None = None  # absent: rank order, score 1/(1+rank)
    created_at: str | None = None
    evidence_ids: str | None = None
    ref: str | None = None  # a unit key or item id the adapter sent, to map evidence back when evidence_ids is empty
    kind: str | None = None


class Retrieve(_Strict):
    request: Request
    results: str  # response path of the results list; "." when the body is one result
    fields: Fields


class Reset(_Strict):
    # unit: one request per ingested unit (session/message/document); item: one per stored item id;
    # namespace: one request; none: the service cannot forget, so the adapter moves the namespace to a
    # fresh {{scope}} (namespace plus a generation suffix) and never reads the old one again.
    per: Literal["unit", "item", "namespace", "none"]
    request: Request | None = None

    @model_validator(mode="after")
    def _needs_request(self) -> Reset:
        if self.per != "none" and self.request is None:
            raise ValueError(f"reset.per={self.per!r} needs a request")
        return self


class Mapping(_Strict):
    service: str = Field(min_length=1)
    service_version: str = ""
    description: str = ""
    source: str = ""  # where the API shapes were read (file, commit)
    base_url: str = Field(min_length=1)
    recall: Literal["exact", "lossy", "none"] = "exact"
    vars: dict[str, str] = Field(default_factory=dict)  # extra templates, rendered in order before each request
    headers: dict[str, str] = Field(default_factory=dict)
    auth: Auth | None = None
    timeouts_ms: Timeouts = Field(default_factory=Timeouts)
    retries: Retries = Field(default_factory=Retries)
    reset: Reset
    ingest: Ingest
    documents: Documents | None = None  # absent: documents are rejected
    settle: Settle = Field(default_factory=Settle)
    retrieve: Retrieve


# -- sample values for the load-time check ----------------------------------------------------------------
_T = datetime(2026, 1, 1, tzinfo=UTC)
_MSG = {"id": "m1", "role": "user", "content": "hello", "ts": _T, "index": 0}
_SESSION = {"id": "s1", "started_at": _T, "messages": [_MSG]}
_DOC = {"id": "d1", "text": "doc", "path": "a.md", "created_at": _T, "evidence_ids": ["d1"]}


def sample_vars(m: Mapping) -> dict[str, Any]:
    v: dict[str, Any] = {"namespace": "ns", "scope": "ns", "secret": "k", "session": _SESSION, "message": _MSG,
                         "sessions": [_SESSION], "messages": [_MSG], "document": _DOC, "documents": [_DOC],
                         "query": {"text": "q", "top_k": 5, "mode": "fast", "reference_time": _T},
                         "job_id": "j1", "unit": {"key": "u1", "item_id": "i1"}, "item_id": "i1"}
    for k, t in m.vars.items():
        v[k] = render_string(t, v)
    return v


def _check_templates(m: Mapping) -> None:
    try:
        v = sample_vars(m)
    except TemplateError as e:
        raise MappingError("vars", str(e)) from None
    checks: list[tuple[str, Any, bool]] = []  # (key, template, is a URL path)

    def req(key: str, r: Request | None) -> None:
        if r is not None:
            checks.append((f"{key}.path", r.path, True))
            checks.append((f"{key}.body", r.body, False))

    req("reset.request", m.reset.request)
    req("ingest.request", m.ingest.request)
    checks.append(("ingest.key", m.ingest.key, False))
    if m.documents:
        req("documents.request", m.documents.request)
        checks.append(("documents.key", m.documents.key, False))
    if m.settle.job:
        req("settle.job.request", m.settle.job.request)
    if m.settle.stable:
        req("settle.stable.request", m.settle.stable.request)
    req("retrieve.request", m.retrieve.request)
    if m.auth:
        checks.append(("auth.value", m.auth.value, False))
    checks += [(f"headers.{k}", t, False) for k, t in m.headers.items()]
    for key, t, is_path in checks:
        try:
            render_string(t, v, url_quote=True) if is_path else render(t, v)
        except TemplateError as e:
            raise MappingError(key, str(e)) from None
    if m.ingest.per == "batch" and m.reset.per == "unit" and not m.ingest.key:
        raise MappingError("ingest.key", "reset.per 'unit' needs a key template for each ingested unit")
    if m.reset.per == "item" and not m.ingest.item_id:
        raise MappingError("ingest.item_id", "reset.per 'item' needs the response path of each stored item's id")


def resolve_path(name_or_path: str) -> Path:
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml", ".json") and p.exists():
        return p
    for ext in (".yaml", ".yml", ".json"):
        cand = MAPPINGS_DIR / f"{name_or_path}{ext}"
        if cand.exists():
            return cand
    shipped = sorted(f.stem for f in MAPPINGS_DIR.iterdir() if f.suffix in (".yaml", ".yml", ".json"))
    raise MappingError("mapping", f"no file {name_or_path!r} and no shipped mapping of that name; shipped: {shipped}")


def parse_mapping(raw: Any, origin: str = "<mapping>") -> Mapping:
    if not isinstance(raw, dict):
        raise MappingError(origin, f"a mapping must be an object at the top level, got {type(raw).__name__}")
    try:
        m = Mapping.model_validate(raw)
    except ValidationError as e:
        errs = "; ".join(f"{'.'.join(str(x) for x in err['loc']) or '<top>'}: {err['msg']}" for err in e.errors())
        raise MappingError(origin, errs) from None
    try:
        _check_templates(m)
    except MappingError as e:
        raise MappingError(origin, str(e)) from None
    return m


def load_mapping(name_or_path: str) -> tuple[Mapping, Path]:
    path = resolve_path(name_or_path)
    text = path.read_text()
    try:
        raw = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as e:
        raise MappingError(str(path), f"not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {e}") from None
    return parse_mapping(raw, str(path)), path
