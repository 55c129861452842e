"""The FastAPI app factory: wiring, error mapping, and the background work of the
embedded default (fold, rescorer, learner; with the Redis store ``crawlsched worker``
runs them, :mod:`service.worker`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from service import __version__, auth, observability
from service.body_limit import BodyLimit
from service.clock import AcceleratedClock, Clock, ManualClock, SystemClock
from service.error_bodies import request_validation_handler, validation_error_body
from service.errors import (
    Forbidden,
    InvalidInput,
    NotFound,
    NoWorker,
    Overloaded,
    StoreUnavailable,
    Unauthenticated,
)
from service.heap import run_heap_freezer
from service.methods import http_exception_handler_for
from service.metrics import Metrics
from service.openapi import install_openapi
from service.routes import dispatch, events, hosts, ops, urls
from service.scheduler.context import Context
from service.scheduler.fold import run_folder
from service.scheduler.learning import run_learner
from service.scheduler.rescoring import run_rescorer
from service.settings import Settings, get_settings
from service.store.base import ControlRules, Store
from service.store.memory import MemoryStore
from service.store.redis import RedisStore

__all__ = ["build_clock", "build_store", "create_app", "open_store", "shared_clock"]

log = logging.getLogger(__name__)


def build_clock(settings: Settings) -> Clock:
    """The clock the settings ask for."""
    if settings.clock == "accelerated":
        return AcceleratedClock(settings.clock_speed, settings.clock_start)
    if settings.clock == "manual":
        return ManualClock(settings.clock_start or 0.0)
    return SystemClock()


def _store_options(settings: Settings) -> dict[str, Any]:
    return {
        "shards": settings.shards,
        "default_crawl_delay_s": settings.default_crawl_delay_s,
        "max_revisit_s": settings.max_revisit_s,
        "lease_history": settings.lease_history,
        "initial_lambda0": settings.initial_lambda0,
        "controls": control_rules(settings),
    }


def control_rules(settings: Settings) -> ControlRules:
    """The frontier controls the settings ask for."""
    return ControlRules(
        min_revisit_s=settings.min_revisit_s,
        backoff_base_s=settings.backoff_base_s,
        max_block_s=settings.max_block_s,
        backoff_jitter=settings.backoff_jitter,
        gone_after=settings.gone_after,
        max_in_flight=settings.max_in_flight,
    )


def build_store(settings: Settings) -> Store:
    """The embedded store (``CRAWLSCHED_STORE=memory``).

    Raises
    ------
    ValueError
        If the settings name another store (open it with :func:`open_store`).
    """
    if settings.store != "memory":
        raise ValueError(f"store {settings.store!r} is opened with open_store")
    return MemoryStore(**_store_options(settings))


async def open_store(settings: Settings, *, wait_s: float = 30.0) -> Store:
    """The store the settings ask for; a Redis store is connected, waiting up to
    ``wait_s`` for Redis to come up.

    Raises
    ------
    StoreUnavailable
        If Redis does not answer within ``wait_s``.
    ValueError
        If the Redis data was written with another shard count.
    """
    if settings.store == "memory":
        return build_store(settings)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return await RedisStore.connect(
                settings.store, timeout_s=settings.redis_timeout_s, **_store_options(settings)
            )
        except StoreUnavailable:
            if time.monotonic() > deadline:
                raise
            log.warning("waiting for Redis at %s", settings.store)
            await asyncio.sleep(0.5)


async def shared_clock(settings: Settings, clock: Clock, store: Store) -> Clock:
    """``clock``, or, for an accelerated clock the settings built, one counting from the
    store's epoch: the replicas and workers on one store count simulated time alike."""
    if settings.clock != "accelerated" or not isinstance(clock, AcceleratedClock):
        return clock
    epoch = await store.clock_epoch(time.time())
    return AcceleratedClock(settings.clock_speed, settings.clock_start, epoch)


def create_app(
    settings: Settings | None = None,
    *,
    clock: Clock | None = None,
    store: Store | None = None,
    grpc_port: int | None = None,
    grpc_host: str = "127.0.0.1",
    grpc_tls: tuple[Path, Path] | None = None,
) -> FastAPI:
    """Build the service.

    Parameters
    ----------
    settings : Settings, optional
        Defaults to :func:`service.settings.get_settings` (environment).
    clock, store : optional
        Override what the settings would build (tests).
    grpc_port : int, optional
        Also serve URLFrontier's gRPC protocol on ``grpc_host:grpc_port`` (0: a free
        port; ``app.state.grpc_port`` tells which) while the app runs, on the same
        event loop, store and tokens; ``grpc_tls``: (private key, certificate chain),
        PEM files, for TLS (the HTTP API's).
    """
    settings = settings or get_settings()
    given = store or (build_store(settings) if settings.store == "memory" else None)
    fixed_clock = clock
    clock = clock or build_clock(settings)
    metrics = Metrics()
    tokens = auth.TokenTable(settings.auth_pairs())  # no token: authentication off

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if settings.store == "memory":
            log.warning(
                "the memory store keeps nothing across restarts: URLs, leases and estimates "
                "are lost when this process stops (CRAWLSCHED_STORE=redis://… keeps them)"
            )
        opened = given or await open_store(settings)
        clock_used = (
            clock if fixed_clock is not None else await shared_clock(settings, clock, opened)
        )
        context = app.state.context = Context(opened, clock_used, settings, metrics)
        grpc_server = None
        if grpc_port is not None:
            from service.grpc.server import start_grpc  # grpcio loads only when asked for

            grpc_server, app.state.grpc_port = await start_grpc(
                context, tokens, grpc_host, grpc_port, grpc_tls
            )
            log.info("URLFrontier gRPC on %s:%d", grpc_host, app.state.grpc_port)
        stop = asyncio.Event()
        tasks: set[asyncio.Task[None]] = set()
        if settings.store == "memory":  # the embedded default does the worker's work
            tasks |= {
                asyncio.create_task(run_folder(context, stop), name="fold"),
                asyncio.create_task(run_rescorer(context, stop), name="rescorer"),
                asyncio.create_task(run_learner(context, stop), name="learner"),
            }
            if settings.heap_freeze_interval_s > 0:  # the records live in this process
                freezer = run_heap_freezer(settings.heap_freeze_interval_s, stop)
                tasks.add(asyncio.create_task(freezer, name="heap freezer"))
        try:
            yield
        finally:
            # a flag and a bounded wait: a cancellation swallowed inside a Redis call
            # must not hang the shutdown
            stop.set()
            if grpc_server is not None:
                from service.grpc.server import GRACE_S

                await grpc_server.stop(GRACE_S)
            for task in tasks:
                task.cancel()
            _, pending = await asyncio.wait(tasks, timeout=5.0) if tasks else (set(), set())
            if pending:
                log.warning("background tasks did not stop within 5 s; shutting down anyway")
            await context.store.close()

    app = FastAPI(title="crawlsched", version=__version__, lifespan=lifespan)
    auth.install(app, tokens)
    observability.install(app, metrics)  # outermost: request ids, durations, access log
    if given is not None:  # usable before startup too (ASGI transports in tests)
        app.state.context = Context(given, clock, settings, metrics)
    routers = [module.router for module in (hosts, urls, events, dispatch, ops)]
    for router in routers:  # the routes themselves: no per-request router indirection
        app.router.routes.extend(router.routes)
    install_openapi(app, settings)
    app.add_middleware(
        BodyLimit, max_bytes=settings.max_body_bytes, timeout_s=settings.body_timeout_s
    )
    app.add_exception_handler(RequestValidationError, request_validation_handler)
    endpoints = [route for router in routers for route in router.routes]
    app.add_exception_handler(HTTPException, http_exception_handler_for(endpoints))

    @app.exception_handler(InvalidInput)
    async def _invalid(_: Request, exc: InvalidInput) -> JSONResponse:
        detail = [{"loc": ["body", *exc.loc], "msg": exc.reason, "type": "value_error"}]
        return JSONResponse(validation_error_body(detail), status_code=422)

    @app.exception_handler(NotFound)
    async def _not_found(_: Request, exc: NotFound) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=404)

    @app.exception_handler(Unauthenticated)
    async def _unauthenticated(_: Request, exc: Unauthenticated) -> JSONResponse:
        return auth.unauthenticated_response(exc)

    @app.exception_handler(Forbidden)
    async def _forbidden(_: Request, exc: Forbidden) -> JSONResponse:
        headers = {"WWW-Authenticate": 'Bearer error="insufficient_scope"'}
        return JSONResponse({"detail": str(exc)}, status_code=403, headers=headers)

    @app.exception_handler(NoWorker)
    async def _no_worker(_: Request, exc: NoWorker) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=503, headers={"Retry-After": "5"})

    @app.exception_handler(Overloaded)
    async def _overloaded(_: Request, exc: Overloaded) -> JSONResponse:
        headers = {"Retry-After": str(exc.retry_after_s)}
        return JSONResponse({"detail": str(exc)}, status_code=503, headers=headers)

    @app.exception_handler(StoreUnavailable)
    async def _unavailable(_: Request, exc: StoreUnavailable) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=503, headers={"Retry-After": "1"})

    return app
