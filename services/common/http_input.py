"""Bad HTTP input that no single field check sees, located so each service's error can name the field: the rig's
aiohttp services (cortex-mock, fault-proxy, llm-mock) shape the answer their own way (their validation modules)
from what these helpers find.

- Oversized URLs and headers: aiohttp's parser refuses a request line or a header over 8,190 bytes with a raw
  "Got more than 8190 bytes" before any handler runs, naming nothing. The services parse up to `PARSER_LIMIT`
  (`HANDLER_ARGS`, given to `web.Application(handler_args=...)`) and `oversized(request)` refuses past
  `MAX_URL_BYTES` / `MAX_HEADER_BYTES` naming the path parameter, query parameter or header (414 / 431, the
  statuses RFC 9110 §15.5.15 and RFC 6585 §5 give them). Past PARSER_LIMIT aiohttp's own answer stands.
- Nesting too deep to parse: `deepest_field(raw)` counts brackets outside strings and returns the top-level key
  holding the deepest point and that depth.
- NaN and Infinity: not JSON (RFC 8259 §6), yet Python's json module reads them; `nonfinite_path(value)` returns
  where the first one sits.
"""

from __future__ import annotations

import math
import re
from typing import Any

from aiohttp import web

MAX_URL_BYTES = 8190  # aiohttp's own limit, kept: what changes is that the refusal names the field
MAX_HEADER_BYTES = 8190
PARSER_LIMIT = 64 * 1024
HANDLER_ARGS = {"max_line_size": PARSER_LIMIT, "max_field_size": PARSER_LIMIT}

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_KEY_FOLLOWS = re.compile(rb"\s*:")


def oversized(request: web.Request) -> tuple[int, str, str] | None:
    """(status, field, message) when the URL or a header is past its limit, else None. The field is
    `path.<param>` or `query.<param>` for the longest part of a long URL (or `url` when no part stands out),
    `header.<Name>` for a header."""
    url_len = len(request.raw_path)
    if url_len > MAX_URL_BYTES:
        parts = [(f"path.{k}", v) for k, v in (request.match_info or {}).items()]
        parts += [(f"query.{k}", v) for k, v in request.query.items()]
        field, value = max(parts, key=lambda kv: len(kv[1]), default=("url", ""))
        if len(value) * 2 < url_len:
            field = "url"
        return 414, field, (f"{field}: the URL is {url_len} bytes, over the {MAX_URL_BYTES}-byte limit"
                            + (f" ({field} alone is {len(value)} characters)" if field != "url" else ""))
    for name, value in request.headers.items():
        if len(name) + len(value) > MAX_HEADER_BYTES:
            return 431, f"header.{name}", (f"header.{name}: {len(value)} bytes, over the {MAX_HEADER_BYTES}-byte "
                                           "limit for one header")
    return None


def deepest_field(raw: bytes) -> tuple[str | None, int]:
    """(the top-level key whose value holds the deepest point, or None when the body is not an object; the depth
    in arrays/objects). String contents are blanked first (same length, so positions hold) and the brackets
    counted with numpy's cumsum: only run on the error path, but a body can be megabytes."""
    import numpy as np

    blanked = _STRING.sub(lambda m: b'"' + b"x" * (len(m.group()) - 2) + b'"', raw)
    arr = np.frombuffer(blanked, dtype=np.uint8)
    step = np.zeros(arr.shape, dtype=np.int32)
    step[(arr == ord("[")) | (arr == ord("{"))] = 1
    step[(arr == ord("]")) | (arr == ord("}"))] = -1
    depth = np.cumsum(step)
    deepest = int(depth.argmax()) if depth.size else 0
    field = None
    if blanked.lstrip()[:1] == b"{":
        for m in _STRING.finditer(raw):
            if m.start() > deepest:
                break
            if depth[m.start()] == 1 and _KEY_FOLLOWS.match(raw, m.end()):
                field = m.group()[1:-1].decode("utf-8", "replace")
    return field, int(depth[deepest]) if depth.size else 0


def nonfinite_path(value: Any) -> list[Any] | None:
    """The path (keys and indices) of the first NaN or ±Infinity in a parsed body, None if there is none.
    Iterative: the body may be deeply nested."""
    stack: list[tuple[list[Any], Any]] = [([], value)]
    while stack:
        path, v = stack.pop()
        if isinstance(v, float) and not math.isfinite(v):
            return path
        if isinstance(v, dict):
            stack.extend(([*path, k], x) for k, x in reversed(list(v.items())))
        elif isinstance(v, list):
            stack.extend(([*path, i], x) for i, x in reversed(list(enumerate(v))))
    return None


def dotted(path: list[Any]) -> str:
    """["messages", 2, "content"] -> "messages[2].content"."""
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out
