"""FastAPI dependencies as ``Annotated`` aliases."""

from __future__ import annotations

from typing import Annotated, cast

from fastapi import Depends, Header, Request

from service.scheduler.context import Context

__all__ = ["CtxDep", "IdempotencyKeyHeader", "get_context"]


async def get_context(request: Request) -> Context:
    """The app's use-case context (async: no thread hop)."""
    return cast(Context, request.app.state.context)


CtxDep = Annotated[Context, Depends(get_context)]

#: The ``Idempotency-Key`` header of an event batch: a batch repeated with its key gets
#: its first answer and changes nothing (:mod:`service.scheduler.idempotency`).
IdempotencyKeyHeader = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=255,
        description="one per logical batch, the same on every retry of it (e.g. a UUID): "
        "a batch repeated with its key within CRAWLSCHED_IDEMPOTENCY_S gets its first "
        "answer again and changes nothing",
    ),
]
