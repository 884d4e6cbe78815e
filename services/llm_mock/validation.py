"""Validation of a chat-completions request, with errors shaped like the OpenAI API's.

Every problem raises `RequestError(param, message)`, rendered as HTTP 400
`{"error": {"message", "type": "invalid_request_error", "param", "code"}}` where `param` names the field
(`messages[2].role`, `temperature`, ...). Unknown extra fields are ignored, as clients send many.
Message content may be a string or a list of `{"type": "text", "text": ...}` parts (joined with newlines).
`stream` / `stream_options.include_usage` and `response_format` (`text`, `json_object`, `json_schema`) are
checked the way the OpenAI API checks them (json_object needs the word "json" in the messages; stream_options
needs stream).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from services.common.errors import InputError
from services.common.http_input import dotted, nonfinite_path, oversized

ROLES = ("system", "developer", "user", "assistant", "tool", "function")
RESPONSE_FORMATS = ("text", "json_object", "json_schema")
# The OpenAI API's rule for json_schema.name (platform.openai.com API reference, "response_format").
SCHEMA_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class RequestError(InputError):
    """A bad chat request, in the OpenAI API's terms: `param` names the parameter (None: the body as a whole),
    `code` the error code; `field` is `param` or "body", str(e) the message alone (it names the parameter)."""

    def __init__(self, param: str | None, message: str, code: str | None = "invalid_value"):
        super().__init__(param or "body", message, text=message)
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": "invalid_request_error", "param": self.param,
                          "code": self.code}}


@dataclass(frozen=True)
class ChatRequest:
    model: str
    messages: list[dict[str, str]]  # role + content (text), normalised
    temperature: float = 1.0
    max_tokens: int | None = None
    n: int = 1
    seed: int | None = None
    stream: bool = False
    include_usage: bool = False  # stream_options.include_usage: a last chunk carrying usage
    response_format: str = "text"
    json_schema: dict[str, Any] | None = None  # response_format.json_schema.schema when type is json_schema


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _content_text(i: int, m: dict[str, Any]) -> str:
    param = f"messages[{i}].content"
    if "content" not in m:
        raise RequestError(param, f"Missing required parameter: '{param}'.", "missing_required_parameter")
    c = m["content"]
    if c is None and m.get("role") == "assistant" and (m.get("tool_calls") or m.get("function_call")):
        return ""
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        parts = []
        for j, p in enumerate(c):
            if not isinstance(p, dict) or p.get("type") != "text" or not isinstance(p.get("text"), str):
                raise RequestError(f"{param}[{j}]", f"Invalid content part at '{param}[{j}]': only "
                                   "{'type': 'text', 'text': <string>} parts are supported.")
            parts.append(p["text"])
        return "\n".join(parts)
    raise RequestError(param, f"Invalid type for '{param}': expected a string or an array of content parts.",
                       "invalid_type")


def _number(body: dict[str, Any], name: str, lo: float, hi: float) -> float | None:
    if name not in body or body[name] is None:
        return None
    v = body[name]
    if not _is_number(v):
        raise RequestError(name, f"Invalid type for '{name}': expected a number.", "invalid_type")
    if not lo <= v <= hi:
        raise RequestError(name, f"Invalid '{name}': {v} is out of range; expected a value between {lo:g} and "
                           f"{hi:g}.")
    return float(v)


def _int(body: dict[str, Any], name: str, lo: int, hi: int | None = None) -> int | None:
    if name not in body or body[name] is None:
        return None
    v = body[name]
    if not _is_int(v):
        raise RequestError(name, f"Invalid type for '{name}': expected an integer.", "invalid_type")
    if v < lo or (hi is not None and v > hi):
        rng = f">= {lo}" if hi is None else f"between {lo} and {hi}"
        raise RequestError(name, f"Invalid '{name}': {v}; expected an integer {rng}.")
    return v


def validate_chat(body: Any) -> ChatRequest:
    if not isinstance(body, dict):
        raise RequestError(None, "The request body must be a JSON object.", "invalid_type")
    bad = nonfinite_path(body)  # json.loads reads NaN / Infinity; they are not JSON and no field takes them
    if bad is not None:
        raise RequestError(dotted(bad), f"Invalid value for '{dotted(bad)}': NaN and Infinity are not JSON numbers.",
                           "invalid_value")
    model = body.get("model")
    if model is None:
        raise RequestError("model", "Missing required parameter: 'model'.", "missing_required_parameter")
    if not isinstance(model, str) or not model.strip():
        raise RequestError("model", "Invalid 'model': expected a non-empty string.", "invalid_type")
    if "messages" not in body:
        raise RequestError("messages", "Missing required parameter: 'messages'.", "missing_required_parameter")
    msgs = body["messages"]
    if not isinstance(msgs, list):
        raise RequestError("messages", "Invalid type for 'messages': expected an array of message objects.",
                           "invalid_type")
    if not msgs:
        raise RequestError("messages", "Invalid 'messages': empty array. Expected an array with minimum length 1.",
                           "empty_array")
    norm: list[dict[str, str]] = []
    for i, m in enumerate(msgs):
        if not isinstance(m, dict):
            raise RequestError(f"messages[{i}]", f"Invalid type for 'messages[{i}]': expected an object.",
                               "invalid_type")
        if "role" not in m:
            raise RequestError(f"messages[{i}].role", f"Missing required parameter: 'messages[{i}].role'.",
                               "missing_required_parameter")
        role = m["role"]
        if role not in ROLES:
            raise RequestError(f"messages[{i}].role", f"Invalid value: {role!r}. Supported values are: "
                               + ", ".join(repr(r) for r in ROLES) + ".")
        norm.append({"role": role, "content": _content_text(i, m)})
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise RequestError("stream", "Invalid type for 'stream': expected a boolean.", "invalid_type")
    include_usage = _stream_options(body, bool(stream))
    fmt, schema = _response_format(body, norm)
    temperature = _number(body, "temperature", 0.0, 2.0)
    _number(body, "top_p", 0.0, 1.0)
    _number(body, "presence_penalty", -2.0, 2.0)
    _number(body, "frequency_penalty", -2.0, 2.0)
    max_tokens = _int(body, "max_tokens", 1)
    max_completion = _int(body, "max_completion_tokens", 1)
    n = _int(body, "n", 1, 128)
    seed = _int(body, "seed", -(2**63), 2**63 - 1)
    return ChatRequest(
        model=model,
        messages=norm,
        temperature=1.0 if temperature is None else temperature,
        max_tokens=max_completion if max_completion is not None else max_tokens,
        n=n or 1,
        seed=seed,
        stream=bool(stream),
        include_usage=include_usage,
        response_format=fmt,
        json_schema=schema,
    )


def _stream_options(body: dict[str, Any], stream: bool) -> bool:
    opts = body.get("stream_options")
    if opts is None:
        return False
    if not stream:
        raise RequestError("stream_options", "The 'stream_options' parameter is only allowed when 'stream' is "
                           "enabled.")
    if not isinstance(opts, dict):
        raise RequestError("stream_options", "Invalid type for 'stream_options': expected an object.",
                           "invalid_type")
    usage = opts.get("include_usage")
    if usage is not None and not isinstance(usage, bool):
        raise RequestError("stream_options.include_usage",
                           "Invalid type for 'stream_options.include_usage': expected a boolean.", "invalid_type")
    return bool(usage)


def _response_format(body: dict[str, Any], messages: list[dict[str, str]]) -> tuple[str, dict[str, Any] | None]:
    rf = body.get("response_format")
    if rf is None:
        return "text", None
    if not isinstance(rf, dict):
        raise RequestError("response_format", "Invalid type for 'response_format': expected an object.",
                           "invalid_type")
    kind = rf.get("type")
    if kind is None:
        raise RequestError("response_format.type", "Missing required parameter: 'response_format.type'.",
                           "missing_required_parameter")
    if kind not in RESPONSE_FORMATS:
        raise RequestError("response_format.type", f"Invalid value: {kind!r}. Supported values are: "
                           + ", ".join(repr(f) for f in RESPONSE_FORMATS) + ".")
    if kind == "json_object":
        if not any("json" in m["content"].lower() for m in messages):
            raise RequestError("messages", "'messages' must contain the word 'json' in some form, to use "
                               "'response_format' of type 'json_object'.")
        return kind, None
    if kind == "text":
        return kind, None
    js = rf.get("json_schema")
    if js is None:
        raise RequestError("response_format.json_schema", "Missing required parameter: "
                           "'response_format.json_schema'.", "missing_required_parameter")
    if not isinstance(js, dict):
        raise RequestError("response_format.json_schema", "Invalid type for 'response_format.json_schema': "
                           "expected an object.", "invalid_type")
    name = js.get("name")
    if name is None:
        raise RequestError("response_format.json_schema.name", "Missing required parameter: "
                           "'response_format.json_schema.name'.", "missing_required_parameter")
    if not isinstance(name, str) or not SCHEMA_NAME.match(name):
        raise RequestError("response_format.json_schema.name", "Invalid 'response_format.json_schema.name': "
                           "expected 1-64 characters from a-z, A-Z, 0-9, '_' and '-'.")
    schema = js.get("schema", {})
    if not isinstance(schema, dict):
        raise RequestError("response_format.json_schema.schema", "Invalid type for "
                           "'response_format.json_schema.schema': expected an object (a JSON Schema).",
                           "invalid_type")
    strict = js.get("strict")
    if strict is not None and not isinstance(strict, bool):
        raise RequestError("response_format.json_schema.strict", "Invalid type for "
                           "'response_format.json_schema.strict': expected a boolean.", "invalid_type")
    return kind, schema


def oversize_error(request: Any) -> tuple[int, RequestError] | None:
    """(414 or 431, the error) when the URL or a header is over its limit (services/common/http_input.py), with
    `param` naming the path or query parameter or the header."""
    hit = oversized(request)
    if hit is None:
        return None
    return hit[0], too_long_error(*hit)


def too_long_error(status: int, field: str, message: str) -> RequestError:
    """The 414 / 431 error: `param` the field ("query.x", "header.X-Trace"; "url" or "header" past the parser's
    limits, services/common/http_input.py), code url_too_long / header_too_large."""
    return RequestError(field, message, "url_too_long" if status == 414 else "header_too_large")
