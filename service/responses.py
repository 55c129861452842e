"""The error answers of the HTTP API, as the OpenAPI schema documents them per route.

Every route may answer 408 and 413 (bounded request bodies, :mod:`service.body_limit`)
and 503 (the store did not answer); every route but ``/healthz`` 401 and 403 (bearer
tokens and roles); routes that take a body 400 (not UTF-8 text); routes that take
input 422; routes that name a URL or a host 404.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ErrorOut", "FieldError", "ValidationErrorsOut", "documented"]


class ErrorOut(BaseModel):
    """An error in words."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"detail": "host not known"}]})

    detail: str


class FieldError(BaseModel):
    """One refused field: where, why, and a quote of the input (at most 200 characters;
    NaN and ±Infinity as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``)."""

    type: str = Field(description="kind of error, e.g. `greater_than_equal`, `value_error`")
    loc: list[str | int] = Field(description="where: `body`/`query`/`path`, then field names")
    msg: str = Field(description="why, for a person")
    input: Any = Field(None, description="the refused value, quoted")
    ctx: dict[str, Any] | None = Field(None, description='the constraint, e.g. `{"ge": 0}`')


class ValidationErrorsOut(BaseModel):
    """The request is well-formed HTTP but not acceptable; nothing was changed.  The
    first 20 refused fields are listed."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "detail": [
                        {
                            "type": "finite_number",
                            "loc": ["body", "urls", 0, "weight"],
                            "msg": "Input should be a finite number",
                            "input": "NaN",
                        }
                    ]
                }
            ]
        }
    )

    detail: list[FieldError]


def _error(description: str, example: str, headers: dict[str, Any] | None = None) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "model": ErrorOut,
        "description": description,
        "content": {"application/json": {"example": {"detail": example}}},
    }
    if headers:
        answer["headers"] = headers
    return answer


_ANSWERS: dict[int, dict[str, Any]] = {
    400: _error(
        "The body could not be read as JSON text (not UTF-8); nothing changed.",
        "There was an error parsing the body",
    ),
    401: _error(
        "No bearer token, or one the service does not know.",
        "missing or unknown bearer token",
        {"WWW-Authenticate": {"description": "`Bearer`", "schema": {"type": "string"}}},
    ),
    403: _error("The token's role may not call this route.", "role `read` may not call this route"),
    404: _error("The URL or host is not registered.", "URL not registered: https://q.example/p"),
    408: _error(
        "The request body did not arrive in time (`CRAWLSCHED_BODY_TIMEOUT_S`).",
        "request body did not arrive within 30 s",
    ),
    413: _error(
        "The request body is larger than `CRAWLSCHED_MAX_BODY_BYTES`; it was not read.",
        "request body larger than 8388608 bytes",
    ),
    422: {
        "model": ValidationErrorsOut,
        "description": "A field is refused (named in `loc`, with the reason); nothing changed.",
    },
    503: _error(
        "The store did not answer; retry after the given delay.",
        "store does not answer",
        {"Retry-After": {"description": "seconds", "schema": {"type": "integer"}}},
    ),
}


def documented(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses`` argument of a route that may answer ``codes``.

    Raises
    ------
    KeyError
        If a code has no documented answer.
    """
    return {code: _ANSWERS[code] for code in sorted(codes)}
