"""The open-loop driver's HTTP/1.1 client (loadtests/http_client.py) against hand-written servers: framing,
keep-alive, failures, cancellation, and the request bytes it sends."""

from __future__ import annotations

import asyncio

import pytest

from loadtests.http_client import BadResponse, HttpClient, ServerDisconnected, _Conn, post_request
from loadtests.open_loop import HttpRetrieveTarget, HttpStatusError, error_kind


@pytest.fixture(autouse=True)
async def no_callback_errors():
    """An exception inside a protocol callback never reaches the caller: the loop's exception handler logs it.
    Every test here fails if one happened."""
    loop = asyncio.get_running_loop()
    seen: list[dict] = []
    loop.set_exception_handler(lambda _loop, ctx: seen.append(ctx))
    yield
    await asyncio.sleep(0.01)  # close callbacks still pending
    loop.set_exception_handler(None)
    assert seen == []


class RawServer:
    """A TCP server answering each request (read up to its blank line + Content-Length body) with the next
    scripted reply: bytes to send, optionally followed by closing the connection ("close") or nothing at all
    ("hang": read, never answer)."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.requests: list[bytes] = []
        self.connections = 0
        self.eofs = 0  # connections the client closed (EOF seen between requests)
        self.server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                n = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        n = int(line.split(b":")[1])
                self.requests.append(head + await reader.readexactly(n))
                reply = self.replies.pop(0)
                if reply == "hang":
                    await asyncio.sleep(3600)
                data, close = (reply, False) if isinstance(reply, bytes) else reply
                writer.write(data)
                await writer.drain()
                if close:
                    writer.close()
                    return
        except asyncio.IncompleteReadError as e:
            self.eofs += not e.partial
            writer.close()
        except (ConnectionError, asyncio.CancelledError):
            writer.close()

    async def __aenter__(self):
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc):
        self.server.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"


def ok(body: bytes, extra: str = "") -> bytes:
    return f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n{extra}\r\n".encode() + body


REQ = post_request("h", "/x", b"{}", {})


def test_post_request_bytes_are_exactly_an_http11_post():
    assert post_request("127.0.0.1:8792", "/v1/retrieve", b'{"q":1}', {"x-api-key": "k", "A": "b"}) == (
        b"POST /v1/retrieve HTTP/1.1\r\nHost: 127.0.0.1:8792\r\nContent-Length: 7\r\nx-api-key: k\r\nA: b\r\n\r\n"
        b'{"q":1}')
    for bad in ({"x-api-key": "k\r\nX-Evil: 1"}, {"k\n": "v"}, {"k": "caf\u00e9"}):
        with pytest.raises(ValueError, match="headers"):
            post_request("h", "/", b"", bad)


def test_client_rejects_what_it_cannot_speak():
    with pytest.raises(ValueError, match="base_url"):
        HttpClient("https://127.0.0.1:1")
    with pytest.raises(ValueError, match="base_url"):
        HttpClient("127.0.0.1:1")
    with pytest.raises(ValueError, match="base_url"):
        HttpClient("ftp://127.0.0.1:1")
    with pytest.raises(ValueError, match="limit"):
        HttpClient("http://127.0.0.1:1", limit=0)
    c = HttpClient("http://example.test")
    assert (c.host, c.port, c.host_header(), c.limit) == ("example.test", 80, "example.test", 64)
    assert HttpClient("http://127.0.0.1:8792").host_header() == "127.0.0.1:8792"
    assert HttpClient("http://h:79").host_header() == "h:79" and HttpClient("http://h:80").host_header() == "h"


async def test_keep_alive_reuses_one_connection_and_reads_each_framing():
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
    async with RawServer([ok(b"first"), chunked, ok(b""), ok(b"x", "X-Other: 1\r\n")]) as srv:
        c = HttpClient(srv.url, limit=4)
        got = [await c.request(REQ) for _ in range(4)]
        await c.close()
        await asyncio.sleep(0.05)
    assert got == [(200, b"first"), (200, b"abcde"), (200, b""), (200, b"x")]
    assert srv.connections == 1 == c.connections_made and srv.requests == [REQ] * 4
    assert srv.eofs == 1  # close() closed the idle connection
    with pytest.raises(RuntimeError, match="closed"):
        await c.request(REQ)


async def test_connection_close_and_http10_retire_the_connection():
    replies = [ok(b"a", "Connection: close\r\n"), b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nb", ok(b"c")]
    async with RawServer(replies) as srv:
        c = HttpClient(srv.url)
        got = [await c.request(REQ) for _ in range(3)]
        await c.close()
    assert got == [(200, b"a"), (200, b"b"), (200, b"c")]
    assert c.connections_made == 3


async def test_status_and_body_of_errors_reach_the_target():
    async with RawServer([b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy", ok(b"{}")]) as srv:
        host = srv.url.removeprefix("http://")
        t = HttpRetrieveTarget(srv.url + "/", "k9", concurrency=2, queries=["q1"], top_k=3)
        await t.start()
        with pytest.raises(HttpStatusError) as e:
            await t.call(0)
        await t.call(1)
        await t.close()
    assert (e.value.status, error_kind(e.value), str(e.value)) == (503, "http_503", "HTTP 503: b'busy'")
    body = b'{"query":"q1","top_k":3,"mode":"fast"}'
    assert srv.requests == [(f"POST /v1/retrieve HTTP/1.1\r\nHost: {host}\r\nContent-Length: {len(body)}\r\n"
                             "x-api-key: k9\r\nContent-Type: application/json\r\n\r\n").encode() + body] * 2
    assert t._client.limit == 2 and t._client.closed


async def test_a_close_before_the_whole_response_fails_that_request_only():
    truncated = (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", True)
    async with RawServer([truncated, ok(b"next")]) as srv:
        c = HttpClient(srv.url)
        with pytest.raises(ServerDisconnected) as e:
            await c.request(REQ)
        assert error_kind(e.value) == "ServerDisconnected"
        assert await c.request(REQ) == (200, b"next")  # a fresh connection
        await c.close()
    assert c.connections_made == 2


async def test_garbage_is_a_bad_response_and_the_connection_is_dropped():
    async with RawServer([b"SMTP ready\r\n\r\n", ok(b"fine")]) as srv:
        c = HttpClient(srv.url)
        with pytest.raises(BadResponse, match="invalid HTTP response"):
            await c.request(REQ)
        assert await c.request(REQ) == (200, b"fine")
        await c.close()
    assert c.connections_made == 2


async def test_a_cancelled_request_never_answers_the_next_one():
    # The first request's answer comes late (after the caller gave up): it must not be read as the second's.
    class Late(RawServer):
        async def _serve(self, reader, writer):
            self.connections += 1
            head = await reader.readuntil(b"\r\n\r\n")
            await reader.readexactly(2)
            self.requests.append(head)
            await asyncio.sleep(0.2 if self.connections == 1 else 0)
            writer.write(ok(b"late" if self.connections == 1 else b"fresh"))
            await writer.drain()
            try:
                await reader.read()
            finally:
                writer.close()

    async with Late([]) as srv:
        c = HttpClient(srv.url)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await c.request(REQ)
        assert await c.request(REQ) == (200, b"fresh")
        await asyncio.sleep(0.3)
        await c.close()
    assert c.connections_made == 2


async def test_at_most_limit_connections_are_open():
    gate = asyncio.Event()

    class Slow(RawServer):
        async def _serve(self, reader, writer):
            self.connections += 1
            while True:
                try:
                    await reader.readuntil(b"\r\n\r\n")
                    await reader.readexactly(2)
                except (asyncio.IncompleteReadError, ConnectionError):
                    writer.close()
                    return
                await gate.wait()
                writer.write(ok(b"k"))
                await writer.drain()

    async with Slow([]) as srv:
        c = HttpClient(srv.url, limit=2)
        calls = [asyncio.create_task(c.request(REQ)) for _ in range(5)]
        await asyncio.sleep(0.1)
        opened = srv.connections
        gate.set()
        got = await asyncio.gather(*calls)
        await c.close()
    assert opened == 2 and c.connections_made == 2 and got == [(200, b"k")] * 5


async def test_an_idle_connection_the_server_closed_is_not_reused():
    async with RawServer([(ok(b"one"), True), ok(b"two")]) as srv:  # keep-alive headers, then the server closes
        c = HttpClient(srv.url)
        assert await c.request(REQ) == (200, b"one")
        await asyncio.sleep(0.05)
        async with asyncio.timeout(2):
            assert await c.request(REQ) == (200, b"two")
        await c.close()
    assert c.connections_made == 2


async def test_an_unsolicited_response_retires_the_connection():
    async with RawServer([ok(b"asked") + ok(b"extra"), ok(b"own")]) as srv:
        c = HttpClient(srv.url)
        assert await c.request(REQ) == (200, b"asked")
        assert await c.request(REQ) == (200, b"own")  # not "extra": a new connection
        await c.close()
    assert c.connections_made == 2


async def test_switching_protocols_answers_101_and_retires_the_connection():
    upgrade = b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
    async with RawServer([upgrade, ok(b"after")]) as srv:
        c = HttpClient(srv.url)
        assert await c.request(REQ) == (101, b"")  # llhttp completes the 101, then stops parsing HTTP
        assert await c.request(REQ) == (200, b"after")
        await c.close()
    assert c.connections_made == 2


async def test_disconnect_messages_say_why():
    fut = asyncio.get_running_loop().create_future()
    conn = _Conn()
    conn.waiter = fut
    conn.connection_lost(OSError("reset by peer"))
    with pytest.raises(ServerDisconnected) as e:
        await fut
    assert str(e.value) == "the server closed the connection before the response was complete: reset by peer"
    assert conn.waiter is None
    conn.waiter = fut2 = asyncio.get_running_loop().create_future()
    conn.connection_lost(None)
    assert str(fut2.exception()) == "the server closed the connection before the response was complete"
    conn.connection_lost(None)  # nothing waits: nothing to tell
