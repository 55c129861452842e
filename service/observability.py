"""Per-request observability: a request id, a duration histogram and one log line.

:class:`RequestObservation` is pure ASGI middleware, outermost (it sees the
authentication gate's 401s too).  For each HTTP request it

- takes the caller's ``X-Request-ID`` when it is a plain token (at most 128 of
  ``A-Z a-z 0-9 . _ : / + = -``), else makes one, binds it to the log context
  (every record logged while serving the request carries ``request_id``) and
  echoes it in the response's ``X-Request-ID``;
- observes the wall time to the end of the response in
  ``crawlsched_http_request_duration_seconds``, labelled by the route's template
  (``/urls/{url:url}``, never the raw path: one series per route), the method
  and the status class (``2xx`` ...); requests no route matches count as
  ``unmatched``;
- logs ``request`` at INFO with method, route, path (no query string), status and
  duration: never a header or a body.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator, Sequence

import structlog
from fastapi import FastAPI
from starlette.datastructures import MutableHeaders
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.logs import configure_structlog
from service.metrics import Metrics

__all__ = [
    "REQUEST_ID_HEADER",
    "RequestObservation",
    "flat_routes",
    "install",
    "request_id_of",
]

REQUEST_ID_HEADER = "X-Request-ID"
_HEADER = REQUEST_ID_HEADER.lower().encode()
_PLAIN_ID = re.compile(rb"[A-Za-z0-9._:/+=-]{1,128}")
UNMATCHED = "unmatched"

log = structlog.stdlib.get_logger("service.access")


def request_id_of(scope: Scope) -> str:
    """The caller's ``X-Request-ID`` if it is a plain token, else a new random one."""
    for name, value in scope.get("headers", ()):
        if name == _HEADER:
            if _PLAIN_ID.fullmatch(value):
                return str(value.decode("ascii"))
            break
    return uuid.uuid4().hex


def flat_routes(routes: Sequence[BaseRoute]) -> Iterator[BaseRoute]:
    """The routes of a router, those of included routers too (recent FastAPI keeps an
    included router as one lazy entry; the service puts its routes in the app's own
    router, unprefixed, so that no request walks such an entry)."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from flat_routes(inner.routes)
        else:
            yield route


def _route_template(scope: Scope, routes: Sequence[BaseRoute]) -> str:
    """The template of the route that served (or would serve) the request."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    if isinstance(path, str):
        return path
    # answered before routing (the authentication gate): match as the router would
    partial = None
    for candidate in flat_routes(routes):
        match, _ = candidate.matches(scope)
        if match is Match.FULL:
            return str(getattr(candidate, "path", UNMATCHED))
        if match is Match.PARTIAL and partial is None:
            partial = candidate  # the path matches, the method does not (405)
    return str(getattr(partial, "path", UNMATCHED))


class RequestObservation:
    """ASGI middleware: request id, duration histogram, access log (module docstring)."""

    def __init__(self, app: ASGIApp, *, metrics: Metrics, routes: Sequence[BaseRoute]) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = routes  # the router's own list: routes added later count too

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = request_id_of(scope)
        started = time.perf_counter()
        status = 500  # unless the app starts a response

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                MutableHeaders(scope=message)[REQUEST_ID_HEADER] = request_id
            await send(message)

        with structlog.contextvars.bound_contextvars(request_id=request_id):
            try:
                await self.app(scope, receive, send_with_id)
            finally:
                duration_s = time.perf_counter() - started
                route = _route_template(scope, self.routes)
                method = str(scope["method"])
                self.metrics.requests.labels(route, method, f"{status // 100}xx").observe(
                    duration_s
                )
                log.info(
                    "request",
                    method=method,
                    route=route,
                    path=scope["path"],
                    status=status,
                    duration_ms=round(duration_s * 1e3, 3),
                )


def install(app: FastAPI, metrics: Metrics) -> None:
    """Put :class:`RequestObservation` outermost in ``app`` (call after every other
    ``add_middleware``) and send structlog's records to stdlib logging."""
    configure_structlog()
    app.add_middleware(RequestObservation, metrics=metrics, routes=app.router.routes)
