"""Bearer tokens in gRPC metadata: the HTTP API's tokens and roles
(:mod:`service.auth`), sent as ``authorization: Bearer <token>``.

A missing or unknown token is answered ``UNAUTHENTICATED``, a token of a role the
call does not admit ``PERMISSION_DENIED``; the roles of each call are listed in
docs/urlfrontier.md.
"""

from __future__ import annotations

from typing import Any

import grpc

from service.auth import Role, TokenTable, authenticate
from service.errors import Unauthenticated

__all__ = ["admit", "caller_role"]


def _authorization(context: grpc.aio.ServicerContext[Any, Any]) -> str:
    for key, value in context.invocation_metadata() or ():
        if key.lower() == "authorization":
            return value if isinstance(value, str) else value.decode("latin-1")
    return ""


async def caller_role(context: grpc.aio.ServicerContext[Any, Any], tokens: TokenTable) -> Role:
    """The caller's role (``admin`` when no token is configured); aborts the call with
    ``UNAUTHENTICATED`` without a known bearer token."""
    scheme, _, credentials = _authorization(context).strip().partition(" ")
    try:
        return authenticate(tokens, scheme, credentials.strip())
    except Unauthenticated as exc:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, str(exc))
        raise  # pragma: no cover - abort raises


async def admit(
    context: grpc.aio.ServicerContext[Any, Any], tokens: TokenTable, role: Role
) -> Role:
    """The caller's role if it is ``role`` or ``admin``; otherwise the call is aborted
    (``UNAUTHENTICATED`` or ``PERMISSION_DENIED``)."""
    found = await caller_role(context, tokens)
    if found not in (role, Role.ADMIN):
        needed = role.value if role is Role.ADMIN else f"{role.value} or admin"
        await context.abort(
            grpc.StatusCode.PERMISSION_DENIED,
            f"this call needs the role {needed}; the token has {found.value}",
        )
    return found
