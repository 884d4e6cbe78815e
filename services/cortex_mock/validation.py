"""Request validation with FastAPI/pydantic-v2-shaped errors (the real service is FastAPI):
HTTP 422 `{"detail": [{"type": ..., "loc": ["body", <field>, ...], "msg": ..., "input": ...}]}`.

Each endpoint has a parse_* function returning a plain dict of validated, defaulted fields; every error found
is reported at once. Unknown fields are ignored, as pydantic does by default.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from services.common.errors import InputError
from services.common.http_input import deepest_field, nonfinite_path, oversized
from services.cortex_mock.temporal import parse_datetime

MAX_QUERY_CHARS = 2000  # Cortex rejects a longer query with 422 (Ubundi/openclaw-cortex, docs/CORTEX_API.md)
MAX_TOP_K = 100
# The API's text limits, as the plugin states them (Ubundi/openclaw-cortex 2.22.1, commit 6c531b3,
# src/features/capture/handler.ts): "the Cortex API rejects text > 50,000 chars" (API_MAX_CHARS) and
# API_MAX_MESSAGE_CHARS = 10_000 per message. A conversation's transcript is counted as the plugin estimates
# it: role + 2 + content + 2 characters per message.
MAX_TEXT_CHARS = 50_000
MAX_MESSAGE_CHARS = 10_000
MAX_MESSAGES = 1000
MAX_BATCH_ITEMS = 100
ROLES = ("user", "assistant")
MIN_DATE = datetime(1900, 1, 1, tzinfo=UTC)
MAX_DATE = datetime(2200, 12, 31, 23, 59, 59, tzinfo=UTC)
_MISSING = object()


class RequestInvalid(InputError):
    """Valid JSON with invalid content (422), as FastAPI words it: `errors` lists each problem with its `loc`;
    `field` is the first one's loc dotted ("body.messages.0.content")."""

    status = 422

    def __init__(self, errors: list[dict[str, Any]]):
        super().__init__(first_loc(errors), errors[0]["msg"] if errors else "",
                         text="; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in errors))
        self.errors = errors

    def body(self) -> dict:
        return {"detail": self.errors}


def first_loc(errors: Any) -> str:
    """The first error's loc, dotted; "body" when there is none (a FastAPI detail that is a plain string)."""
    if isinstance(errors, list) and errors and isinstance(errors[0], dict) and errors[0].get("loc"):
        return ".".join(map(str, errors[0]["loc"]))
    return "body"


def _err(loc: list, msg: str, type_: str, value: Any = None) -> dict:
    e = {"type": type_, "loc": ["body", *loc], "msg": msg}
    if value is not None:
        plain = isinstance(value, bool | float) or (isinstance(value, int) and -2**63 <= value < 2**63)
        e["input"] = value if plain else str(value)[:100]  # a 100-digit integer is echoed as text
    return e


class _V:
    def __init__(self, body: Any, prefix: list | None = None):
        self.prefix = prefix or []
        self.errors: list[dict] = []
        if not isinstance(body, dict):
            self.errors.append(_err(self.prefix, "Input should be a valid dictionary", "dict_type", body))
            body = {}
        self.body = body
        self.out: dict[str, Any] = {}

    def _get(self, name: str, required: bool) -> Any:
        v = self.body.get(name, _MISSING)
        if v is _MISSING and required:
            self.errors.append(_err([*self.prefix, name], "Field required", "missing"))
        return v

    def str(self, name: str, *, required: bool = False, default: Any = None, max_len: int | None = None,
            min_len: int = 0, choices: tuple[str, ...] | None = None, blank: bool = True) -> None:
        """`blank=False`: text that is only whitespace is refused (a query or a message with nothing in it would
        be answered or stored as if it said something)."""
        v = self._get(name, required)
        if v is _MISSING or (v is None and not required):
            self.out[name] = default
            return
        loc = [*self.prefix, name]
        if not isinstance(v, str):
            self.errors.append(_err(loc, "Input should be a valid string", "string_type", v))
        elif choices is not None and v not in choices:
            alts = " or ".join(f"'{c}'" for c in choices)
            self.errors.append(_err(loc, f"Input should be {alts}", "enum", v))
        elif len(v) < min_len:
            self.errors.append(_err(loc, f"String should have at least {min_len} character{'s' * (min_len != 1)}",
                                    "string_too_short", v))
        elif max_len is not None and len(v) > max_len:
            self.errors.append(_err(loc, f"String should have at most {max_len} characters", "string_too_long"))
        elif not blank and not v.strip():
            self.errors.append(_err(loc, "String should have at least 1 character that is not whitespace",
                                    "string_blank", v))
        else:
            self.out[name] = v

    def int(self, name: str, *, default: int | None = None, ge: int | None = None, le: int | None = None) -> None:
        v = self._get(name, False)
        if v is _MISSING or v is None:
            self.out[name] = default
            return
        loc = [*self.prefix, name]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not v.is_integer()):
            self.errors.append(_err(loc, "Input should be a valid integer", "int_type", v))
            return
        v = int(v)
        if ge is not None and v < ge:
            self.errors.append(_err(loc, f"Input should be greater than or equal to {ge}", "greater_than_equal", v))
        elif le is not None and v > le:
            self.errors.append(_err(loc, f"Input should be less than or equal to {le}", "less_than_equal", v))
        else:
            self.out[name] = v

    def float(self, name: str, *, default: float | None = None, ge: float | None = None,
              le: float | None = None) -> None:
        v = self._get(name, False)
        if v is _MISSING or v is None:
            self.out[name] = default
            return
        loc = [*self.prefix, name]
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            self.errors.append(_err(loc, "Input should be a valid number", "float_type", v))
        elif not math.isfinite(v):
            self.errors.append(_err(loc, "Input should be a finite number", "finite_number", str(v)))
        elif ge is not None and v < ge:
            self.errors.append(_err(loc, f"Input should be greater than or equal to {ge}", "greater_than_equal", v))
        elif le is not None and v > le:
            self.errors.append(_err(loc, f"Input should be less than or equal to {le}", "less_than_equal", v))
        else:
            self.out[name] = float(v)

    def bool(self, name: str, *, default: bool = False) -> None:
        v = self._get(name, False)
        if v is _MISSING or v is None:
            self.out[name] = default
        elif not isinstance(v, bool):
            self.errors.append(_err([*self.prefix, name], "Input should be a valid boolean", "bool_type", v))
        else:
            self.out[name] = v

    def date(self, name: str) -> None:
        """Optional ISO date/datetime (null allowed); stored as an aware datetime."""
        v = self._get(name, False)
        if v is _MISSING or v is None:
            self.out[name] = None
            return
        dt = parse_datetime(v) if isinstance(v, str) else None
        if dt is None:
            self.errors.append(_err([*self.prefix, name], "Input should be a valid ISO 8601 date or datetime",
                                    "datetime_parsing", v))
        elif not MIN_DATE <= dt <= MAX_DATE:
            # Relative phrases ("last week", "in March") do date arithmetic around it; near year 1 or 9999 that
            # overflows. Dates of conversations fall far inside this range.
            self.errors.append(_err([*self.prefix, name], f"Date should be between {MIN_DATE.year} and "
                                    f"{MAX_DATE.year}", "datetime_range", v))
        else:
            self.out[name] = dt

    def str_list(self, name: str, *, max_items: int = 10_000) -> None:
        v = self._get(name, False)
        if v is _MISSING or v is None:
            self.out[name] = None
            return
        loc = [*self.prefix, name]
        if not isinstance(v, list):
            self.errors.append(_err(loc, "Input should be a valid list", "list_type", v))
            return
        if len(v) > max_items:
            self.errors.append(_err(loc, f"List should have at most {max_items} items", "too_long"))
            return
        bad = [i for i, x in enumerate(v) if not isinstance(x, str)]
        for i in bad:
            self.errors.append(_err([*loc, i], "Input should be a valid string", "string_type", v[i]))
        if not bad:
            self.out[name] = list(v)

    def done(self) -> dict[str, Any]:
        if self.errors:
            raise RequestInvalid(self.errors)
        return self.out


PROVENANCE_FIELDS = ("user_id", "source_origin", "derivation_mode", "source_app", "source_channel",
                     "origin_session_id", "session_goal", "enrichment_mode", "capture_reason", "source_reason")


def _provenance(v: _V) -> None:
    for f in PROVENANCE_FIELDS:
        v.str(f, max_len=1000)


def parse_retrieve(body: Any) -> dict[str, Any]:
    v = _V(body)
    v.str("query", required=True, min_len=1, max_len=MAX_QUERY_CHARS, blank=False)
    v.int("top_k", default=5, ge=1, le=MAX_TOP_K)
    v.str("mode", default="full", choices=("fast", "full"))
    v.str("query_type", default="factual", choices=("factual", "emotional", "combined", "codex"))
    v.date("reference_date")
    v.bool("debug", default=False)
    v.str("user_id", max_len=1000)
    v.str("session_id", max_len=1000)
    v.int("force_tier", ge=1, le=3)
    v.str("session_goal", max_len=MAX_QUERY_CHARS)
    v.int("token_budget", ge=1, le=1_000_000)
    return v.done()


def parse_recall(body: Any) -> dict[str, Any]:
    v = _V(body)
    v.str("query", required=True, min_len=1, max_len=MAX_QUERY_CHARS, blank=False)
    v.int("limit", default=10, ge=1, le=50)
    v.str("context", max_len=MAX_QUERY_CHARS)
    v.str("session_filter", max_len=1000)
    v.str("user_id", max_len=1000)
    v.str("query_type", default="factual", choices=("factual", "emotional", "combined", "codex"))
    v.float("min_confidence", ge=0.0, le=1.0)
    v.bool("include_ungrounded", default=False)
    v.str("memory_type", max_len=100)
    v.str_list("include_origins", max_items=100)
    v.str_list("exclude_origins", max_items=100)
    v.str("derivation_mode", max_len=100)
    v.date("reference_date")
    return v.done()


def parse_ingest_text(body: Any, prefix: list | None = None) -> dict[str, Any]:
    v = _V(body, prefix)
    v.str("text", required=True, min_len=1, max_len=MAX_TEXT_CHARS, blank=False)
    v.str("session_id", max_len=1000)
    v.date("reference_date")
    v.str_list("message_ids", max_items=MAX_MESSAGES)
    _provenance(v)
    return v.done()


def parse_ingest_conversation(body: Any) -> dict[str, Any]:
    v = _V(body)
    msgs = v._get("messages", True)
    parsed: list[dict] = []
    if msgs is not _MISSING:
        if not isinstance(msgs, list):
            v.errors.append(_err(["messages"], "Input should be a valid list", "list_type", msgs))
        elif not msgs:
            v.errors.append(_err(["messages"], "List should have at least 1 item after validation, not 0",
                                 "too_short"))
        elif len(msgs) > MAX_MESSAGES:
            v.errors.append(_err(["messages"], f"List should have at most {MAX_MESSAGES} items", "too_long"))
        else:
            for i, m in enumerate(msgs):
                mv = _V(m, ["messages", i])
                # Exactly "user" or "assistant": the extractor reads no other role, and a message must never
                # be accepted and then dropped silently (issue 14).
                mv.str("role", required=True, choices=ROLES)
                mv.str("content", required=True, min_len=1, max_len=MAX_MESSAGE_CHARS, blank=False)
                mv.str("id", max_len=1000)
                mv.date("timestamp")
                mv.date("created_at")
                v.errors += mv.errors
                parsed.append(mv.out)
            chars = sum(len(m["role"]) + len(m["content"]) + 4 for m in parsed
                        if isinstance(m.get("role"), str) and isinstance(m.get("content"), str))
            if chars > MAX_TEXT_CHARS:
                v.errors.append(_err(["messages"], f"Transcript has {chars} characters (role + content + 4 per "
                                     f"message); the API accepts at most {MAX_TEXT_CHARS}", "too_long"))
    v.str("session_id", max_len=1000)
    v.date("reference_date")
    v.str_list("message_ids", max_items=MAX_MESSAGES)
    _provenance(v)
    out = v.done()
    if out["message_ids"] is not None and len(out["message_ids"]) != len(parsed):
        raise RequestInvalid([_err(["message_ids"], f"message_ids has {len(out['message_ids'])} items but messages"
                                   f" has {len(parsed)}; give one id per message", "value_error")])
    out["messages"] = parsed
    return out


def parse_remember(body: Any) -> tuple[str, dict[str, Any]]:
    """`POST /v1/remember` takes `text` (the plugin's remember) or `messages` (rememberConversation), never
    both. Returns (job kind, validated body)."""
    if isinstance(body, dict) and "messages" in body:
        if body.get("text") is not None:
            raise RequestInvalid([_err(["text"], "Give either text or messages, not both", "value_error")])
        return "ingest_conversation", parse_ingest_conversation(body)
    if isinstance(body, dict) and "text" not in body:
        raise RequestInvalid([_err(["text"], "Field required (or give messages)", "missing")])
    return "ingest", parse_ingest_text(body)


def parse_batch(body: Any) -> list[dict[str, Any]]:
    """`POST /v1/ingest/batch`: `{"items": [IngestRequest, ...]}`; every item is validated before any is
    ingested, so a bad item stores nothing."""
    v = _V(body)
    items = v._get("items", True)
    out: list[dict[str, Any]] = []
    if items is not _MISSING:
        if not isinstance(items, list):
            v.errors.append(_err(["items"], "Input should be a valid list", "list_type", items))
        elif not items:
            v.errors.append(_err(["items"], "List should have at least 1 item after validation, not 0", "too_short"))
        elif len(items) > MAX_BATCH_ITEMS:
            v.errors.append(_err(["items"], f"List should have at most {MAX_BATCH_ITEMS} items", "too_long"))
        else:
            for i, item in enumerate(items):
                try:
                    out.append(parse_ingest_text(item, ["items", i]))
                except RequestInvalid as e:
                    v.errors += e.errors
    v.done()
    return out


def lone_surrogate_path(value: Any) -> list | None:
    """Location of the first string (or key) holding a lone UTF-16 surrogate ("\\ud800" decodes to one),
    which no UTF-8 store can hold; None if there is none. Iterative: the body may be deeply nested."""
    stack: list[tuple[list, Any]] = [([], value)]
    while stack:
        path, v = stack.pop()
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                return path
        elif isinstance(v, dict):
            for k, x in v.items():
                try:
                    k.encode("utf-8")
                except UnicodeEncodeError:
                    return [*path, k.encode("utf-8", "backslashreplace").decode()]
                stack.append(([*path, k], x))
        elif isinstance(v, list):
            stack.extend(([*path, i], x) for i, x in enumerate(v))
    return None


def parse_reflect(body: Any) -> dict[str, Any]:
    v = _V(body if body is not None else {})
    v.str("session_id", max_len=1000)
    v.str("user_id", max_len=1000)
    return v.done()


# -- what no field check sees (services/common/http_input.py locates it; the errors name the field) ----------
def nonfinite_invalid(value: Any) -> RequestInvalid | None:
    """NaN / Infinity somewhere in a body (not JSON; orjson refuses them with a column number only)."""
    path = nonfinite_path(value)
    if path is None:
        return None
    return RequestInvalid([{"type": "finite_number", "loc": ["body", *path],
                            "msg": "Input should be a finite number (NaN and Infinity are not JSON)"}])


def nesting_invalid(raw: bytes, limit: int = 1024) -> RequestInvalid:
    """A body nested past the parser's limit: 422 at the top-level field holding the deepest point (the body
    itself when it is not an object)."""
    field, depth = deepest_field(raw)
    return RequestInvalid([{"type": "json_too_deep", "loc": ["body", *([field] if field else [])],
                            "msg": f"Nested {depth} levels of arrays/objects deep; at most {limit} are accepted"}])


def oversize_invalid(request: Any) -> tuple[int, dict[str, Any]] | None:
    """(status, body) when the URL or a header is over its limit: 414 / 431 with the path, query parameter or
    header named in `loc`, as the API's validation errors name a body field."""
    hit = oversized(request)
    if hit is None:
        return None
    status, field, msg = hit
    return status, too_long_body(field, msg)


def too_long_body(field: str, msg: str) -> dict[str, Any]:
    """The 414 / 431 body: `field` ("query.user_id", "header.X-Trace"; "url" or "header" past the parser's
    limits, services/common/http_input.py) as a `loc`."""
    where, _, name = field.partition(".")
    return {"detail": [{"type": "too_long", "loc": [where, name] if name else [where], "msg": msg}]}
