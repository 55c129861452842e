"""Bounded request bodies: at most ``max_bytes`` are read, within ``timeout_s``.

A pure ASGI middleware around the app.  It counts the body as the app reads it:

- a read of a body whose ``Content-Length`` is above the limit raises a 413 at once,
  before a byte of it is taken from the server;
- the read that passes the limit (a chunked body, or one longer than it said)
  raises a 413;
- a read still waiting when ``timeout_s`` wall seconds have passed since the headers
  raises a 408.

The refusals are :class:`~starlette.exceptions.HTTPException` s, so the app's own
exception handling answers them (FastAPI passes them through its body parsing); one
that escapes the app is answered here.  Both carry ``Connection: close``, and so does
any answer to a request that announced too large a body: the server then reads
nothing more of it.  Nothing is buffered or read ahead here, so a layer that refuses
a request before reading it (authentication, routing) answers as if this were not
there, wherever it stands.
"""

from __future__ import annotations

from collections.abc import Iterable

import anyio
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["BodyLimit", "BodyRefused"]


class BodyRefused(HTTPException):
    """A request body too large (413) or too slow (408); the connection is closed."""

    def __init__(self, status_code: int, detail: str) -> None:
        super().__init__(status_code, detail, headers={"Connection": "close"})


class BodyLimit:
    """ASGI middleware that bounds the size of request bodies and the time they take.

    Parameters
    ----------
    app : ASGI application
        What the bounded requests go to.
    max_bytes : int
        Largest body accepted, bytes (``CRAWLSCHED_MAX_BODY_BYTES``).
    timeout_s : float
        Wall seconds a body may take to arrive, counted from its headers
        (``CRAWLSCHED_BODY_TIMEOUT_S``).

    Raises
    ------
    ValueError
        If ``max_bytes`` is negative or ``timeout_s`` not positive.
    """

    def __init__(self, app: ASGIApp, *, max_bytes: int, timeout_s: float) -> None:
        if max_bytes < 0 or not timeout_s > 0:
            raise ValueError("max_bytes must be >= 0 and timeout_s > 0")
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        oversized = declared is not None and declared > self.max_bytes
        reader = _Reader(self, receive, anyio.current_time() + self.timeout_s, oversized)
        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                if oversized:  # its body stays unread: the server must not drain it
                    message = {**message, "headers": _closing(message.get("headers", []))}
            await send(message)

        try:
            await self.app(scope, reader.receive, watched)
        except BodyRefused as refusal:
            if started:
                raise
            await _answer(scope, send, refusal)

    def _too_large(self) -> BodyRefused:
        return BodyRefused(413, f"request body larger than {self.max_bytes} bytes")

    def _too_slow(self) -> BodyRefused:
        return BodyRefused(408, f"request body did not arrive within {self.timeout_s:g} s")


class _Reader:
    """The app's ``receive``: counts body bytes and keeps the deadline until the body
    is complete, then defers to the server's (a disconnect)."""

    def __init__(
        self, limit: BodyLimit, receive: Receive, deadline: float, oversized: bool
    ) -> None:
        self.limit = limit
        self._receive = receive
        self.deadline = deadline
        self.oversized = oversized
        self.size = 0
        self.complete = False

    async def receive(self) -> Message:
        if self.complete:
            return await self._receive()
        if self.oversized:
            raise self.limit._too_large()
        with anyio.move_on_after(self.deadline - anyio.current_time()) as waiting:
            message = await self._receive()
        if waiting.cancelled_caught:
            raise self.limit._too_slow()
        if message["type"] == "http.request":
            self.size += len(message.get("body", b""))
            if self.size > self.limit.max_bytes:
                raise self.limit._too_large()
            self.complete = not message.get("more_body", False)
        return message


def _closing(headers: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """``headers`` saying ``Connection: close``."""
    kept = [(k, v) for k, v in headers if k.lower() != b"connection"]
    return [*kept, (b"connection", b"close")]


async def _answer(scope: Scope, send: Send, refusal: BodyRefused) -> None:
    response = JSONResponse(
        {"detail": refusal.detail}, refusal.status_code, headers=refusal.headers
    )
    await response(scope, _nothing, send)


async def _nothing() -> Message:
    return {"type": "http.disconnect"}


def _content_length(scope: Scope) -> int | None:
    """The declared body size; None when absent or not a number (the server refuses
    a malformed one before the app sees the request)."""
    value = Headers(scope=scope).get("content-length", "").strip()
    return int(value) if value.isascii() and value.isdigit() else None
