"""Request bodies that parse badly or hold text no encoder accepts: named 400s instead of 500s.

Two cases reach past `json.loads`' own errors:
- nesting so deep the parser recurses out (`RecursionError`): `nesting_error(raw)` names the depth and the
  top-level field holding the deepest point (services/common/http_input.py's `deepest_field`).
- lone UTF-16 surrogates written as escapes (`"\\ud800"`): JSON allows them, Python decodes them, but every
  UTF-8 encoder (the tokenizer, the response cache key) rejects them later. `lone_surrogate_path(raw, body)`
  returns the path of the first such string (or key); the whole body is walked only when the raw bytes hold a
  `\\uD8..`-`\\uDF..` escape at all.
"""

from __future__ import annotations

import re
from typing import Any

from services.common.http_input import deepest_field
from services.llm_mock.validation import RequestError

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def nesting_error(raw: bytes) -> RequestError:
    field, max_depth = deepest_field(raw)
    where = f" in '{field}'" if field else ""
    return RequestError(field, f"The JSON body is nested too deeply{where}: {max_depth} levels of arrays/objects; "
                        "the parser gave up. Send a flatter body.", "nesting_too_deep")


def _has_lone_surrogate(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def lone_surrogate_path(raw: bytes, body: Any) -> str | None:
    if not _SURROGATE_ESCAPE.search(raw):
        return None
    stack: list[tuple[str, Any]] = [("", body)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            if _has_lone_surrogate(value):
                return path or None
        elif isinstance(value, dict):
            children = []
            for k, v in value.items():
                child = f"{path}.{k}" if path else str(k)
                if _has_lone_surrogate(k):
                    return child
                children.append((child, v))
            stack.extend(reversed(children))
        elif isinstance(value, list):
            stack.extend(reversed([(f"{path}[{i}]", v) for i, v in enumerate(value)]))
    return None


def surrogate_error(path: str | None) -> RequestError:
    where = f"'{path}'" if path else "the request body"
    return RequestError(path, f"Invalid string in {where}: it holds a lone UTF-16 surrogate escape (\\uD800-\\uDFFF "
                        "without its pair), which is not valid Unicode text.", "invalid_unicode")
