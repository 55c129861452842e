"""A deadline on request headers, which uvicorn does not keep.

uvicorn closes a keep-alive connection that stays idle after a response
(``timeout_keep_alive``), but a connection that never sends a byte, or sends half
its request headers and stalls, stays open for good: enough of them exhaust the
server's sockets.  :class:`HeaderTimeoutProtocol` closes a connection whose request
headers are not complete ``header_timeout_s`` wall seconds after it opened or after
its previous response.  (A body that stalls is answered 408 by
:mod:`service.body_limit`.)

Run with ``uvicorn.run(app, **uvicorn_options(settings))``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from service.settings import Settings

__all__ = ["HeaderTimeoutProtocol", "uvicorn_options"]


class HeaderTimeoutProtocol(HttpToolsProtocol):
    """uvicorn's HTTP/1.1 protocol (httptools) with a deadline on request headers."""

    #: Wall seconds the request headers may take, from the connection or the last
    #: response (``CRAWLSCHED_HEADER_TIMEOUT_S``).
    header_timeout_s: float = 10.0

    _header_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        super().connection_lost(exc)

    def on_headers_complete(self) -> None:
        self._stop_waiting()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # idle again (uvicorn armed its keep-alive timer): the next headers are due
        if not self.transport.is_closing() and self.timeout_keep_alive_task is not None:
            self._await_headers()

    def _await_headers(self) -> None:
        self._stop_waiting()
        self._header_deadline = self.loop.call_later(self.header_timeout_s, self._headers_late)

    def _stop_waiting(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_late(self) -> None:
        self._header_deadline = None
        if not self.transport.is_closing():
            self.transport.close()


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """Keyword arguments of ``uvicorn.run`` / ``uvicorn.Config`` that bound how long a
    connection may wait: the header deadline of ``settings`` and uvicorn's keep-alive
    timeout."""
    protocol = type(
        "HeaderTimeoutProtocol",
        (HeaderTimeoutProtocol,),
        {"header_timeout_s": settings.header_timeout_s},
    )
    return {"http": protocol, "timeout_keep_alive": settings.keep_alive_s}
