"""405 answers that list every method of the path in ``Allow``.

Starlette answers a request whose path matches but whose method does not from the
first route of that path alone, so ``OPTIONS /urls`` said ``Allow: POST`` although
``DELETE /urls`` exists too.  The handler here collects the methods of every route
that matches the path (RFC 9110, section 15.5.6).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

from fastapi import Request, Response
from fastapi.exception_handlers import http_exception_handler
from starlette.exceptions import HTTPException
from starlette.routing import BaseRoute, Match, Route
from starlette.types import Scope

__all__ = ["allowed_methods", "http_exception_handler_for"]

Handler = Callable[[Request, Exception], Awaitable[Response]]


def allowed_methods(routes: Iterable[BaseRoute], scope: Scope) -> list[str]:
    """The methods of all ``routes`` whose path matches the request's, sorted."""
    methods: set[str] = set()
    for route in routes:
        if isinstance(route, Route) and route.methods and route.matches(scope)[0] != Match.NONE:
            methods |= route.methods
    return sorted(methods)


def http_exception_handler_for(routes: Iterable[BaseRoute]) -> Handler:
    """FastAPI's answer to an HTTP exception, where a 405 lists every method that
    ``routes`` (the app's endpoints, as declared on their routers) serve at its path."""
    endpoints = list(routes)

    async def handler(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 405:
            allow = allowed_methods(endpoints, request.scope)
            if allow:
                headers = {**(exc.headers or {}), "Allow": ", ".join(allow)}
                exc = HTTPException(405, exc.detail, headers=headers)
        return await http_exception_handler(request, exc)

    return handler
