"""A lean HTTP/1.1 client for the timed loops.

On two cores the client shares the machine with the API and Redis: httpx cost 5-8 ms
of client CPU per ``GET /next`` here (~0.6 ms of it httpcore retrying a failing
``import sniffio`` 4-5 times per request: sniffio is not installed), this client
~1.5 ms.  :class:`HttpConnection` is one keep-alive connection, :class:`HttpPool` a set
of them for open-loop requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import re


class Refused(RuntimeError):
    """The API answered ``503`` with ``Retry-After`` (backpressure: the fold lags)."""

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class HttpConnection:
    """One keep-alive HTTP/1.1 connection to the API with the least client work per
    request (the timed loops use it: on two cores, httpx's own CPU per request would
    take a large share of the machine from the server being measured).

    Answers must carry ``Content-Length`` (uvicorn's JSON answers do).
    """

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str
    ) -> None:
        self._reader, self._writer = reader, writer
        self._host = host.encode()

    @classmethod
    async def open(cls, base: str) -> HttpConnection:
        """Connect to ``base`` (``http://host:port``)."""
        netloc = base.split("://", 1)[1].rstrip("/")
        host, _, port = netloc.rpartition(":")
        return cls(*await asyncio.open_connection(host, int(port)), netloc)

    async def request(self, method: str, path: str, body: bytes | None = None) -> bytes:
        """Send one request; its answer's body.

        Raises
        ------
        Refused
            If the status is 503 with ``Retry-After`` (the request changed nothing).
        RuntimeError
            If the status is another than 200 or the answer has no ``Content-Length``.
        """
        head = b"%s %s HTTP/1.1\r\nHost: %s\r\n" % (method.encode(), path.encode(), self._host)
        if body is not None:
            head += b"Content-Type: application/json\r\nContent-Length: %d\r\n" % len(body)
        self._writer.write(head + b"\r\n" + (body or b""))
        headers = await self._reader.readuntil(b"\r\n\r\n")
        m = re.search(rb"(?im)^content-length:\s*(\d+)", headers)
        if m is None:
            raise RuntimeError(f"answer without Content-Length: {headers[:200]!r}")
        answer = await self._reader.readexactly(int(m.group(1)))
        wait = re.search(rb"(?im)^retry-after:\s*(\d+)", headers)
        if headers[9:12] == b"503" and wait is not None:
            raise Refused(f"{method} {path}: 503 {answer[:300]!r}", float(wait.group(1)))
        if headers[9:12] != b"200":
            raise RuntimeError(f"{method} {path}: {headers[:12].decode()} {answer[:300]!r}")
        return answer

    async def close(self) -> None:
        """Close the socket."""
        self._writer.close()
        with contextlib.suppress(ConnectionError):
            await self._writer.wait_closed()


class HttpPool:
    """Idle :class:`HttpConnection` s to reuse; a new one when none is idle."""

    def __init__(self, base: str) -> None:
        self._base = base
        self._idle: list[HttpConnection] = []
        self._all: list[HttpConnection] = []

    async def request(self, method: str, path: str, body: bytes | None = None) -> bytes:
        """:meth:`HttpConnection.request` on an idle (or new) connection.  An idle
        connection the server has closed meanwhile (uvicorn drops keep-alive connections
        idle for 5 s; a burst can leave some that long in the pool) answers nothing: the
        request goes again on a new connection (the server never saw it)."""
        if self._idle:
            conn = self._idle.pop()
            try:
                answer = await conn.request(method, path, body)
            except (asyncio.IncompleteReadError, ConnectionResetError) as exc:
                if getattr(exc, "partial", b""):
                    raise
                await conn.close()
                return await self.request(method, path, body)
            self._idle.append(conn)
            return answer
        conn = await HttpConnection.open(self._base)
        self._all.append(conn)
        answer = await conn.request(method, path, body)
        self._idle.append(conn)
        return answer

    async def close(self) -> None:
        """Close every connection."""
        for conn in self._all:
            await conn.close()
