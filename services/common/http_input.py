"""Bad HTTP input that no single field check sees, located so each service's error can name the field: the rig's
aiohttp services (cortex-mock, fault-proxy, llm-mock) shape the answer their own way (their validation modules)
from what these helpers find.

- Oversized URLs and headers: aiohttp's parser refuses a request line or a header over 8,190 bytes with a raw
  400 "Got more than 8190 bytes" before any handler runs, naming nothing. Every aiohttp app of the rig is made by
  `application(answer, ...)`: its parser reads a request line up to `LINE_LIMIT` and a header line up to
  `FIELD_LIMIT` (`HANDLER_ARGS`, aiohttp's `max_line_size` / `max_field_size`), and `oversized(request)` refuses
  past `MAX_URL_BYTES` / `MAX_HEADER_BYTES` naming the path parameter, query parameter or header (414 / 431, the
  statuses RFC 9110 §15.5.15 and RFC 6585 §5 give them). Past the parser's limits no handler runs: the app
  answers 414 (field `url`) or 431 (field `header`) naming the limit, in the service's error shape (`answer`),
  instead of aiohttp's 400 (`past_parser_limit`).
- Nesting too deep to parse: `deepest_field(raw)` counts brackets outside strings and returns the top-level key
  holding the deepest point and that depth.
- NaN and Infinity: not JSON (RFC 8259 §6), yet Python's json module reads them; `nonfinite_path(value)` returns
  where the first one sits.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import LineTooLong
from aiohttp.web_protocol import RequestHandler

MAX_URL_BYTES = 8190  # aiohttp's own limit, kept: what changes is that the refusal names the field
MAX_HEADER_BYTES = 8190
# What aiohttp's parser reads before it gives up (a request line; one header line, name and value). The two differ
# so that its LineTooLong, which carries only the limit it passed, says which one it was.
LINE_LIMIT = 64 * 1024
FIELD_LIMIT = 32 * 1024
HANDLER_ARGS = {"max_line_size": LINE_LIMIT, "max_field_size": FIELD_LIMIT}

# (status, field, message) -> the service's error response
Answer = Callable[[int, str, str], web.StreamResponse]


def plain_answer(status: int, field: str, message: str) -> web.Response:
    """The default error shape: `{"error": <message>, "field": <field>, "status": <status>}`."""
    return web.json_response({"error": message, "field": field, "status": status}, status=status)


def past_parser_limit(exc: BaseException | None, line_limit: int, field_limit: int) -> tuple[int, str, str] | None:
    """(414, "url", message) when aiohttp's parser gave up on a request line longer than `line_limit`, (431,
    "header", message) on a header line longer than `field_limit`, None for any other error. The limit the
    `LineTooLong` carries says which; a line that starts `Name:` is a header line whichever limit it passed (aiohttp's
    pure-Python parser checks an unfinished line of any kind against the line limit)."""
    if not isinstance(exc, LineTooLong) or line_limit == field_limit:
        return None
    line, limit = exc.args[0], exc.args[1]
    head = bytes(line) if isinstance(line, bytes | bytearray) else str(line).encode()
    if limit == line_limit and not head.split(b" ", 1)[0].endswith(b":"):
        return 414, "url", f"url: the request line is longer than {line_limit} bytes, more than this server reads"
    if limit in (line_limit, field_limit):
        return 431, "header", (f"header: a header line is longer than {field_limit} bytes, more than this server reads "
                               "for one header")
    return None


class _NamingRequestHandler(RequestHandler):
    """aiohttp's connection handler, except that a request line or header past the parser's limits is answered
    414 / 431 by the app's `answer` (aiohttp's own: a 400 "Got more than N bytes" and an error log with a
    traceback)."""

    __slots__ = ("answer",)

    def handle_error(self, request: Any, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        hit = past_parser_limit(exc, self.max_line_size, self.max_field_size) if status == 400 else None
        if hit is None or request.writer.output_size > 0:
            return super().handle_error(request, status, exc, message)
        resp = self.answer(*hit)
        resp.force_close()  # the parser stopped inside the message: the connection carries no further request
        return resp


class _NamingServer(web.Server):
    answer: Answer

    def __call__(self) -> RequestHandler:
        handler = _NamingRequestHandler(self, loop=self._loop, **self._kwargs)
        handler.answer = self.answer
        return handler


def application(answer: Answer = plain_answer, **kwargs: Any) -> web.Application:
    """`web.Application(**kwargs)` reading request lines up to LINE_LIMIT and header lines up to FIELD_LIMIT, and
    answering a longer one with `answer(414 or 431, "url" or "header", message naming the limit)`. Every runner of
    the app (AppRunner, run_app, aiohttp's test server) builds its connections through the app's `_make_handler`,
    so the hook is there: the aiohttp Server it returns makes `_NamingRequestHandler`s."""
    app = web.Application(handler_args={**HANDLER_ARGS, **kwargs.pop("handler_args", {})}, **kwargs)
    make = app._make_handler

    def make_handler(**kw: Any) -> web.Server:
        server = make(**kw)
        server.__class__ = _NamingServer  # the same object (no state of its own), making the handlers above
        server.answer = answer
        return server

    object.__setattr__(app, "_make_handler", make_handler)  # not app.x = ...: aiohttp warns on that in debug mode
    return app

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
