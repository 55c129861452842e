"""The FastAPI app factory: wiring, error mapping and the background rescorer."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from service import __version__
from service.clock import AcceleratedClock, Clock, ManualClock, SystemClock
from service.errors import InvalidInput, NotFound, StoreUnavailable
from service.metrics import Metrics
from service.routes import dispatch, events, ops, urls
from service.scheduler.context import Context
from service.scheduler.rescoring import run_rescorer
from service.settings import Settings, get_settings
from service.store.base import Store
from service.store.memory import MemoryStore

__all__ = ["build_clock", "build_store", "create_app"]


def build_clock(settings: Settings) -> Clock:
    """The clock the settings ask for."""
    if settings.clock == "accelerated":
        return AcceleratedClock(settings.clock_speed, settings.clock_start)
    if settings.clock == "manual":
        return ManualClock(settings.clock_start or 0.0)
    return SystemClock()


def build_store(settings: Settings) -> Store:
    """The store the settings ask for.

    Raises
    ------
    ValueError
        For a store URL this build cannot serve.
    """
    if settings.store == "memory":
        return MemoryStore(
            shards=settings.shards,
            default_crawl_delay_s=settings.default_crawl_delay_s,
            max_revisit_s=settings.max_revisit_s,
            lease_history=settings.lease_history,
            initial_lambda0=settings.initial_lambda0,
        )
    raise ValueError(f"store {settings.store!r} is not available in this version")


def create_app(
    settings: Settings | None = None, *, clock: Clock | None = None, store: Store | None = None
) -> FastAPI:
    """Build the service.

    Parameters
    ----------
    settings : Settings, optional
        Defaults to :func:`service.settings.get_settings` (environment).
    clock, store : optional
        Override what the settings would build (tests).
    """
    settings = settings or get_settings()
    context = Context(
        store=store or build_store(settings),
        clock=clock or build_clock(settings),
        settings=settings,
        metrics=Metrics(),
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        task = asyncio.create_task(run_rescorer(context), name="rescorer")
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await context.store.close()

    app = FastAPI(title="crawlsched", version=__version__, lifespan=lifespan)
    app.state.context = context
    for module in (urls, events, dispatch, ops):
        app.include_router(module.router)

    @app.exception_handler(InvalidInput)
    async def _invalid(_: Request, exc: InvalidInput) -> JSONResponse:
        detail = [{"loc": ["body", *exc.loc], "msg": exc.reason, "type": "value_error"}]
        return JSONResponse({"detail": detail}, status_code=422)

    @app.exception_handler(NotFound)
    async def _not_found(_: Request, exc: NotFound) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=404)

    @app.exception_handler(StoreUnavailable)
    async def _unavailable(_: Request, exc: StoreUnavailable) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=503)

    return app
