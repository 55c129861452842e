"""Bearer-token authentication with roles, checked by one dependency per route.

Tokens come from ``CRAWLSCHED_AUTH_TOKENS`` (``role:token`` pairs, comma-separated)
and/or the file named by ``CRAWLSCHED_AUTH_TOKENS_FILE`` (one pair a line; blank
lines and ``#`` comments are skipped); see :class:`service.settings.Settings`.
With no token configured authentication is off and every caller acts as
``admin`` (``crawlsched serve`` then binds only to loopback).

==========  ==========================================================
role        may call
==========  ==========================================================
``worker``  ``GET /next``, ``POST /crawl-result``
``events``  ``POST /signal``, ``POST /click``
``read``    ``GET /urls/{url}``, ``GET /hosts/{host}``, ``GET /metrics``
``admin``   everything, and only it: ``POST``/``DELETE /urls``, lease ids
==========  ==========================================================

``/healthz``, ``/docs`` and ``/openapi.json`` stay open.  A missing or unknown
token is answered 401 with ``WWW-Authenticate: Bearer`` by :class:`AuthenticationGate`
before the request body is read (an anonymous caller cannot make the service
parse anything); a known token of a role the route does not admit gets 403 from
the route's :func:`require` dependency.  Tokens are kept as SHA-256 digests and compared
with :func:`hmac.compare_digest` against every configured one (no early exit), so
the time taken says nothing about which token, or how much of one, matched.

References: RFC 6750 (The OAuth 2.0 Authorization Framework: Bearer Token Usage),
sections 2.1 (the header and the ``b64token`` syntax) and 3 (``WWW-Authenticate``).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable
from enum import StrEnum
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.security.utils import get_authorization_scheme_param
from pydantic import SecretStr
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from service.errors import Forbidden, Unauthenticated

__all__ = [
    "OPEN_PATHS",
    "AuthenticationGate",
    "ReadCaller",
    "Role",
    "TokenTable",
    "admits",
    "authenticate",
    "get_tokens",
    "install",
    "parse_tokens",
    "require",
    "unauthenticated_response",
]

#: Routes any caller may use (besides the app's documentation and schema).
OPEN_PATHS = frozenset({"/healthz"})

#: RFC 6750 section 2.1: the characters a bearer token may hold.
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")


class Role(StrEnum):
    """What a token may do (see the module docstring for the routes of each)."""

    ADMIN = "admin"
    WORKER = "worker"
    EVENTS = "events"
    READ = "read"


def parse_tokens(text: str, *, one_per_line: bool) -> list[tuple[Role, SecretStr]]:
    """The ``role:token`` pairs of ``text``.

    Parameters
    ----------
    text : str
        Pairs separated by commas (``one_per_line=False``, the environment form) or
        by line breaks (the file form, where blank lines and lines starting with
        ``#`` are skipped).  Spaces around a pair are ignored.
    one_per_line : bool
        Which of the two forms ``text`` is in.

    Returns
    -------
    list of (Role, SecretStr)
        In the order given; empty if ``text`` holds no pair.

    Raises
    ------
    ValueError
        If a pair is not ``role:token``, names an unknown role, or its token is
        empty or holds characters outside RFC 6750's ``b64token``.  The message
        names the pair by its number and quotes nothing of it.
    """
    parts = text.splitlines() if one_per_line else text.split(",")
    unit = "line" if one_per_line else "pair"
    pairs: list[tuple[Role, SecretStr]] = []
    for number, raw in enumerate(parts, start=1):
        part = raw.strip()
        if not part or (one_per_line and part.startswith("#")):
            continue
        role_name, colon, token = part.partition(":")
        role_name, token = role_name.strip(), token.strip()
        if not colon:
            raise ValueError(f"{unit} {number}: expected role:token")
        try:
            role = Role(role_name)
        except ValueError:
            known = ", ".join(r.value for r in Role)
            # not quoted: a pair written token:role would put the token in a log
            raise ValueError(f"{unit} {number}: unknown role (known: {known})") from None
        if not _B64TOKEN.fullmatch(token):
            raise ValueError(
                f"{unit} {number}: the token is empty or holds characters other than "
                "letters, digits and -._~+/ (then =)"
            )
        pairs.append((role, SecretStr(token)))
    return pairs


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


class TokenTable:
    """The configured tokens and their roles, as SHA-256 digests.

    Parameters
    ----------
    pairs : iterable of (Role, SecretStr)
        From :func:`parse_tokens`; none means authentication is off.

    Raises
    ------
    ValueError
        If one token is given twice (its role would be ambiguous).
    """

    def __init__(self, pairs: Iterable[tuple[Role, SecretStr]] = ()) -> None:
        entries: list[tuple[bytes, Role]] = []
        for role, token in pairs:
            digest = _digest(token.get_secret_value())
            if any(hmac.compare_digest(digest, seen) for seen, _ in entries):
                raise ValueError(f"a token is listed twice (the second time as {role.value})")
            entries.append((digest, role))
        self._entries = tuple(entries)

    @property
    def enabled(self) -> bool:
        """Whether any token is configured (otherwise every caller is ``admin``)."""
        return bool(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def role_of(self, token: str) -> Role | None:
        """The role of ``token``, or None if it is not configured.

        Every configured digest is compared, in constant time each, whatever matches.
        """
        presented = _digest(token)
        found: Role | None = None
        for digest, role in self._entries:
            if hmac.compare_digest(presented, digest):
                found = role
        return found


def authenticate(tokens: TokenTable, scheme: str, credentials: str) -> Role:
    """The role of the caller who sent ``Authorization: <scheme> <credentials>``.

    Returns ``admin`` when no token is configured (authentication off).

    Raises
    ------
    Unauthenticated
        No bearer token, or one not configured.
    """
    if not tokens.enabled:
        return Role.ADMIN
    if scheme.lower() != "bearer" or not credentials:
        raise Unauthenticated("a bearer token is required (Authorization: Bearer <token>)")
    found = tokens.role_of(credentials)
    if found is None:
        raise Unauthenticated("unknown bearer token")
    return found


def unauthenticated_response(exc: Unauthenticated) -> JSONResponse:
    """The 401 answer, with the challenge RFC 6750 section 3 asks for."""
    headers = {"WWW-Authenticate": "Bearer"}
    return JSONResponse({"detail": str(exc)}, status_code=401, headers=headers)


class AuthenticationGate:
    """ASGI middleware: with tokens configured, a request without a known bearer
    token gets 401 before its body is read, except on ``open_paths``.

    Which role may do what is left to the routes' :func:`require` dependencies.
    """

    def __init__(self, app: ASGIApp, *, tokens: TokenTable, open_paths: Iterable[str]) -> None:
        self.app = app
        self.tokens = tokens
        self.open_paths = frozenset(open_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.tokens.enabled:
            path: str = scope["path"]
            root: str = scope.get("root_path", "")
            if root and path.startswith(root):
                path = path[len(root) :]
            if path not in self.open_paths:
                header = Headers(scope=scope).get("authorization")
                scheme, credentials = get_authorization_scheme_param(header)
                try:
                    authenticate(self.tokens, scheme, credentials)
                except Unauthenticated as exc:
                    await unauthenticated_response(exc)(scope, receive, send)
                    return
        await self.app(scope, receive, send)


def install(app: FastAPI, tokens: TokenTable) -> None:
    """Give ``app`` its token table and the :class:`AuthenticationGate` in front.

    Open: :data:`OPEN_PATHS` and the app's documentation and schema URLs.
    """
    app.state.tokens = tokens
    docs = (app.openapi_url, app.docs_url, app.redoc_url, app.swagger_ui_oauth2_redirect_url)
    open_paths = OPEN_PATHS | {path for path in docs if path}
    app.add_middleware(AuthenticationGate, tokens=tokens, open_paths=open_paths)


def get_tokens(request: Request) -> TokenTable:
    """The app's token table (set by :func:`install`)."""
    tokens: TokenTable = request.app.state.tokens
    return tokens


_bearer = HTTPBearer(
    auto_error=False,
    description="`Authorization: Bearer <token>`; the token's role must admit the route",
)


def admits(tokens: TokenTable, authorization: str | None, role: Role) -> bool:
    """Whether a request with this ``Authorization`` header passes ``require(role)``
    (the same reading of the header as :class:`~fastapi.security.HTTPBearer`)."""
    scheme, credentials = get_authorization_scheme_param(authorization)
    if not (authorization and scheme and credentials) or scheme.lower() != "bearer":
        scheme, credentials = "", ""
    try:
        found = authenticate(tokens, scheme, credentials)
    except Unauthenticated:
        return False
    return found in (role, Role.ADMIN)


def require(role: Role) -> Any:
    """A dependency that admits callers whose token has ``role`` or ``admin``.

    Use it in a route decorator, ``dependencies=[require(Role.WORKER)]``, or as a
    parameter, ``caller: Annotated[Role, require(Role.READ)]``, to learn the
    caller's role (``admin`` when authentication is off).

    Raises
    ------
    Unauthenticated
        No bearer token, or one not configured (401).
    Forbidden
        A configured token of another role (403).
    """
    admitted = frozenset({role, Role.ADMIN})

    async def caller_role(
        request: Request,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> Role:
        if credentials is None:
            found = authenticate(get_tokens(request), "", "")
        else:
            found = authenticate(get_tokens(request), credentials.scheme, credentials.credentials)
        if found not in admitted:
            needed = role.value if role is Role.ADMIN else f"{role.value} or admin"
            raise Forbidden(f"this call needs the role {needed}; the token has {found.value}")
        return found

    return Depends(caller_role)


ReadCaller = Annotated[Role, require(Role.READ)]
"""The role of a caller admitted to the read routes (``read`` or ``admin``)."""
