"""Error bodies that always serialise and never echo more than a short quote of the input.

A validation error names the field (``loc``), the reason (``msg``) and quotes the
offending ``input``.  The input may be anything a client sent: NaN or ±Infinity
(which strict JSON cannot carry), a 10 MB string, a whole batch, a lone surrogate.
:func:`validation_error_body` turns the errors into plain JSON whose every string is
valid Unicode and whose quotes of the input are at most :data:`QUOTE_CHARS`
characters long.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

__all__ = [
    "MAX_ERRORS",
    "QUOTE_CHARS",
    "quote",
    "request_validation_handler",
    "validation_error_body",
]

#: Most characters of a client's input an error body quotes.
QUOTE_CHARS = 200
#: Most errors one body lists (the first ones): a batch of a million bad items is
#: answered with a short body.
MAX_ERRORS = 20
#: Longest reason (``msg``) kept: reasons are the service's own words, but some quote
#: a constraint (a pattern) or a parser's message.
_MSG_CHARS = 500
_ELLIPSIS = "…"


def quote(value: object, limit: int = QUOTE_CHARS) -> str:
    """A short, valid-Unicode rendering of ``value`` for an error message.

    Strings are quoted as they are; anything else as compact JSON (NaN and
    ±Infinity spelt as JavaScript does).  Longer renderings are cut to ``limit``
    characters, the last of which is ``…``.

    Examples
    --------
    >>> quote("x" * 300)[-3:], len(quote("x" * 300))
    ('xx…', 200)
    >>> quote(float("nan")), quote([1.0, float("-inf")])
    ('NaN', '[1.0,-Infinity]')
    """
    if isinstance(value, str):
        text = value[: limit + 1]
    else:
        text = json.dumps(
            _pruned(value, limit), ensure_ascii=False, allow_nan=True, separators=(",", ":"),
            default=str,
        )  # fmt: skip
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= limit else text[: limit - 1] + _ELLIPSIS


def _pruned(value: object, budget: int) -> object:
    """``value`` cut so that its rendering stays near ``budget`` characters (a batch
    of a million items is not walked)."""
    if isinstance(value, str):
        return value[:budget]
    if isinstance(value, Mapping):
        items = list(value.items())[: max(1, budget // 4)]
        return {str(k)[:budget]: _pruned(v, budget // 2) for k, v in items}
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        return [_pruned(v, budget // 2) for v in value[: max(1, budget // 4)]]
    if isinstance(value, bytes | bytearray):
        return value[:budget].decode("utf-8", "replace")
    return value


def _plain(value: object, limit: int) -> Any:
    """A JSON-safe copy of a field of an error: finite numbers and short text."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else quote(value)
    if isinstance(value, BaseException):  # pydantic's ctx.error: its message
        return quote(str(value), limit)
    return quote(value, limit)


def validation_error_body(errors: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The 422 body of validation ``errors`` (pydantic's or the service's own).

    Keeps ``type``, ``loc``, ``msg``, ``input`` and ``ctx`` (the shape FastAPI
    documents as ``HTTPValidationError``) of the first :data:`MAX_ERRORS` errors,
    each made serialisable: the input is quoted with :func:`quote` unless it is a
    finite number, a boolean or null.
    """
    detail = []
    for error in errors[:MAX_ERRORS]:
        out: dict[str, Any] = {
            "type": quote(error.get("type", "value_error"), 100),
            "loc": [
                part if isinstance(part, int) else quote(part, 100) for part in error.get("loc", ())
            ],
            "msg": quote(error.get("msg", ""), _MSG_CHARS),
        }
        if "input" in error:
            out["input"] = _plain(error["input"], QUOTE_CHARS)
        ctx = error.get("ctx")
        if isinstance(ctx, Mapping):
            out["ctx"] = {quote(k, 100): _plain(v, QUOTE_CHARS) for k, v in ctx.items()}
        detail.append(out)
    return {"detail": detail}


async def request_validation_handler(_: Request, exc: Exception) -> JSONResponse:
    """422 for a request the schemas refuse, with a body that always serialises."""
    assert isinstance(exc, RequestValidationError)
    return JSONResponse(validation_error_body(exc.errors()), status_code=422)
