"""Bearer tokens in gRPC metadata: the HTTP API's tokens and roles
(:mod:`service.auth`), sent as ``authorization: Bearer <token>``.

A missing or unknown token is answered ``UNAUTHENTICATED``, a token of a role the
call does not admit ``PERMISSION_DENIED``; the roles of each call are listed in
docs/urlfrontier.md.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from service.auth import Role, TokenTable, authenticate
from service.errors import Unauthenticated

__all__ = ["BeforeRefusal", "admit", "caller_role", "refuse"]


def _authorization(context: grpc.aio.ServicerContext[Any, Any]) -> str:
    for key, value in context.invocation_metadata() or ():
        if key.lower() == "authorization":
            return value if isinstance(value, str) else value.decode("latin-1")
    return ""


#: What a refused call does before it answers (a request-streaming call reads the rest
#: of its stream: :func:`service.grpc.servicer.drainer`); None: nothing.
BeforeRefusal = Callable[[], Awaitable[None]] | None


async def refuse(
    context: grpc.aio.ServicerContext[Any, Any],
    code: grpc.StatusCode,
    details: str,
    before: BeforeRefusal = None,
) -> None:
    """End the call with ``code`` and ``details`` (raises, as ``context.abort`` does),
    after ``before``."""
    if before is not None:
        await before()
    await context.abort(code, details)


async def caller_role(
    context: grpc.aio.ServicerContext[Any, Any], tokens: TokenTable, before: BeforeRefusal = None
) -> Role:
    """The caller's role (``admin`` when no token is configured); aborts the call with
    ``UNAUTHENTICATED`` without a known bearer token (after ``before``)."""
    scheme, _, credentials = _authorization(context).strip().partition(" ")
    try:
        return authenticate(tokens, scheme, credentials.strip())
    except Unauthenticated as exc:
        await refuse(context, grpc.StatusCode.UNAUTHENTICATED, str(exc), before)
        raise  # pragma: no cover - abort raises


async def admit(
    context: grpc.aio.ServicerContext[Any, Any],
    tokens: TokenTable,
    role: Role,
    before: BeforeRefusal = None,
) -> Role:
    """The caller's role if it is ``role`` or ``admin``; otherwise the call is aborted
    (``UNAUTHENTICATED`` or ``PERMISSION_DENIED``, after ``before``)."""
    found = await caller_role(context, tokens, before)
    if found not in (role, Role.ADMIN):
        needed = role.value if role is Role.ADMIN else f"{role.value} or admin"
        await refuse(
            context,
            grpc.StatusCode.PERMISSION_DENIED,
            f"this call needs the role {needed}; the token has {found.value}",
            before,
        )
    return found
