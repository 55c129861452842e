"""FastAPI dependencies as ``Annotated`` aliases."""

from __future__ import annotations

from typing import Annotated, cast

from fastapi import Depends, Request

from service.scheduler.context import Context

__all__ = ["CtxDep", "get_context"]


def get_context(request: Request) -> Context:
    """The app's use-case context."""
    return cast(Context, request.app.state.context)


CtxDep = Annotated[Context, Depends(get_context)]
