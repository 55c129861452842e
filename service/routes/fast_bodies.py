"""A route class that serves event batches from msgspec-decoded bodies.

A route whose endpoint has a fast handler (:data:`FAST_HANDLERS`) first tries it: when
the caller is admitted, the ``Idempotency-Key`` header is valid, the body is JSON
(``Content-Type: application/json``) and :mod:`service.event_bodies` decodes it, the
fast handler answers.  Anything else goes to FastAPI's own handler of the route, whose
pydantic models and dependencies answer as they always did: a refusal is the same
(status and body) with or without the fast path.  ``app.state.fast_bodies = False``
turns the fast path off (tests compare both).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import orjson
from fastapi import Request, Response
from fastapi.routing import APIRoute

from service.auth import Role, admits
from service.scheduler.context import Context
from service.schemas import BatchOut

__all__ = ["FAST_HANDLERS", "FastBodyRoute", "batch_response"]

#: A fast handler: (context, raw body, idempotency key) → the answer, or None when the
#: body is not one the fast decoder accepts.
FastHandler = Callable[[Context, bytes, str | None], Awaitable[Response | None]]

#: Endpoint function → (role it requires, its fast handler).
FAST_HANDLERS: dict[Callable[..., Any], tuple[Role, FastHandler]] = {}

#: Longest ``Idempotency-Key`` accepted (service.deps.IdempotencyKeyHeader).
_KEY_CHARS = 255


def batch_response(out: BatchOut) -> Response:
    """``out`` as JSON bytes (orjson), the answer of both paths."""
    body = {"accepted": out.accepted, "ignored": [e.model_dump() for e in out.ignored]}
    return Response(orjson.dumps(body), media_type="application/json")


class FastBodyRoute(APIRoute):
    """An :class:`~fastapi.routing.APIRoute` that tries its endpoint's fast handler."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        original = super().get_route_handler()
        endpoint = self.endpoint

        async def handler(request: Request) -> Response:
            entry = FAST_HANDLERS.get(endpoint)  # registered after the route is made
            answer = None if entry is None else await _try_fast(request, *entry)
            return answer if answer is not None else await original(request)

        return handler


async def _try_fast(request: Request, role: Role, fast: FastHandler) -> Response | None:
    state = request.app.state
    if not getattr(state, "fast_bodies", True):
        return None
    headers = request.headers
    if headers.get("content-type") != "application/json":
        return None
    key = headers.get("idempotency-key")
    if key is not None and not 0 < len(key) <= _KEY_CHARS:
        return None
    tokens = getattr(state, "tokens", None)
    ctx = getattr(state, "context", None)
    if tokens is None or ctx is None or not admits(tokens, headers.get("authorization"), role):
        return None
    body = await request.body()
    return await fast(ctx, body, key) if body else None
