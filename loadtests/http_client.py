"""A lean keep-alive HTTP/1.1 client for the open-loop driver: pre-encoded requests, responses parsed by httptools
(llhttp, the parser Node.js uses), one request at a time per connection.

Why not aiohttp's client: the generator shares the 2 cores with the system under test, so every millisecond it
spends per request is taken from the target. `make load-bench` reads the generator's CPU per request at every step
(loadtests/README.md "Figures" has the same-day comparison with aiohttp's ClientSession). wrk and locust's
FastHttpUser make the same trade: a minimal client, so the load test measures the server.

What it does and checks:
* Up to `limit` connections to one host:port, reused LIFO while the server keeps them alive (`Connection: close`
  or HTTP/1.0 without keep-alive retires one after its response).
* A response is complete when the parser says so (Content-Length or chunked framing); a connection that closes
  before that fails the request with `ServerDisconnected`, bytes the parser rejects (or a response no request
  waits for) with `BadResponse`, and the connection is dropped. A 101 answers its request and retires the
  connection (what follows is not HTTP). A request cancelled while in flight (the driver's timeout) closes its
  connection: the late response must never be read as the answer to the next request.
"""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import httptools

from services.common.errors import DependencyError


class ServerDisconnected(DependencyError, ConnectionError):
    """The connection closed before a complete response arrived (still a ConnectionError, as before the root)."""

    dependency = "the target under load"


class BadResponse(DependencyError):
    """The server's bytes are not a valid HTTP/1.x response."""

    dependency = "the target under load"


class _Conn(asyncio.Protocol):
    """One connection; `request` sends bytes and waits for one whole response."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport = None  # type: ignore[assignment]  # set by connection_made
        self.parser = httptools.HttpResponseParser(self)
        self.waiter: asyncio.Future | None = None  # the pending request's future, None between requests
        self.body: list[bytes] = []

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self._settle(ServerDisconnected("the server closed the connection before the response was complete"
                                        + (f": {exc}" if exc else "")))

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:  # after a complete 101 (already answered): what follows is not HTTP
            self.transport.close()
        except httptools.HttpParserError as e:  # (a callback's own error arrives as HttpParserCallbackError)
            self._fail(BadResponse(f"invalid HTTP response: {e}"))

    # httptools callbacks
    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        w, self.waiter = self.waiter, None
        if w is None:  # a response no request is waiting for: the connection is out of step
            raise BadResponse("a response arrived with no request waiting for it")
        # (a waiter is never done here: a request that gave up closed the connection, so no more bytes arrive)
        w.set_result((self.parser.get_status_code(), b"".join(self.body), self.parser.should_keep_alive()))

    def _settle(self, e: BaseException) -> None:
        w, self.waiter = self.waiter, None
        if w is not None and not w.done():  # (done: the request was cancelled)
            w.set_exception(e)

    def _fail(self, e: BaseException) -> None:
        self._settle(e)
        self.transport.close()

    @property
    def usable(self) -> bool:
        return not self.transport.is_closing()

    async def request(self, raw: bytes) -> tuple[int, bytes, bool]:
        self.body = []
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(raw)
        return await self.waiter


class HttpClient:
    """Keep-alive connections to one origin (`http://host:port`), at most `limit` open at once."""

    def __init__(self, base_url: str, limit: int = 64):
        u = urlsplit(base_url)
        if u.scheme != "http" or not u.hostname:
            raise ValueError(f"base_url: expected http://host[:port], got {base_url!r}")
        if limit < 1:
            raise ValueError(f"limit: must be >= 1, got {limit}")
        self.host, self.port = u.hostname, u.port or 80
        self.limit = limit
        self._slots = asyncio.Semaphore(limit)
        self._idle: list[_Conn] = []
        self._open: set[_Conn] = set()
        self.closed = False
        self.connections_made = 0

    def host_header(self) -> str:
        return self.host if self.port == 80 else f"{self.host}:{self.port}"

    async def request(self, raw: bytes) -> tuple[int, bytes]:
        """Send one complete pre-encoded request; (status, body) of its response."""
        if self.closed:
            # RuntimeError, no MemrigError branch: a call after close() is a bug in the caller, not bad input
            # or a failed dependency (as aiohttp's "Session is closed")
            raise RuntimeError("HttpClient is closed")
        async with self._slots:
            conn = None
            while self._idle:
                c = self._idle.pop()
                if c.usable:
                    conn = c
                    break
                self._open.discard(c)
            if conn is None:
                _, conn = await asyncio.get_running_loop().create_connection(_Conn, self.host, self.port)
                self._open.add(conn)
                self.connections_made += 1
            try:
                status, body, keep_alive = await conn.request(raw)
            except BaseException:  # cancelled (timeout) or failed: its late bytes must not answer another request
                conn.transport.close()
                self._open.discard(conn)
                raise
            if keep_alive and conn.usable:  # (a client closed meanwhile closed this connection too)
                self._idle.append(conn)
            else:
                conn.transport.close()
                self._open.discard(conn)
            return status, body

    async def close(self) -> None:
        self.closed = True
        for c in self._open:
            c.transport.close()
        self._open.clear()
        self._idle.clear()


def post_request(host: str, path: str, body: bytes, headers: dict[str, str]) -> bytes:
    """The bytes of an HTTP/1.1 POST with a Content-Length body (header values must be ASCII, no CR/LF)."""
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}", f"Content-Length: {len(body)}"]
    for k, v in headers.items():
        if any(ch in k + v for ch in "\r\n") or not (k + v).isascii():
            raise ValueError(f"headers: {k!r} must be ASCII without CR/LF")
        lines.append(f"{k}: {v}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii") + body
