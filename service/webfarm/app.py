"""The farm as an ASGI app: the hosts' pages, and ``/_farm/…`` for its score.

Any request whose path starts with ``/_farm/`` is the farm's own (whatever its
``Host``); every other request goes to :meth:`Farm.handle`.  Requests may name
their host by ``Host`` header or, as an HTTP proxy gets them, by an
absolute-form target: point a crawler's HTTP proxy at the farm and crawl
``http://host017.example/page/3`` as if it were on the web.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from service.webfarm.farm import Farm

__all__ = ["AbsoluteForm", "farm_app"]

Background = Callable[[], Coroutine[Any, Any, None]]


def _json(data: Any) -> Response:
    return JSONResponse(data)


class AbsoluteForm:
    """Rewrite an absolute-form request target (``GET http://host/path``, what an HTTP
    proxy receives) into its path and ``Host`` before routing; servers differ in
    whether they do it themselves."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope["path"].startswith("/"):
            parts = urlsplit(scope["path"])
            headers = [(k, v) for k, v in scope["headers"] if k != b"host"]
            headers.append((b"host", parts.netloc.encode("latin-1")))
            path = parts.path or "/"
            scope = {**scope, "path": path, "raw_path": path.encode(), "headers": headers}
        await self.app(scope, receive, send)


def farm_app(farm: Farm, *, background: Background | None = None) -> ASGIApp:
    """The ASGI app serving ``farm``.

    Parameters
    ----------
    farm : Farm
    background : callable, optional
        A coroutine function run while the app is up (e.g. the event feed of
        :mod:`service.webfarm.feed`); cancelled at shutdown.

    Notes
    -----
    ``GET /_farm/score``: :meth:`Farm.score` as JSON; ``GET /_farm/hosts``: each
    host's start URL, robots.txt, sitemap, crawl delay, URL count, strictness and
    outages (clock s); ``GET /_farm/world``: the clock's reading and rate, whether
    world time runs, the world's origin (clock time of world time 0), span, warm-up
    and crawl budget R (crawls per clock s).
    """

    async def score(_: Request) -> Response:
        return _json(farm.score().to_json())

    async def hosts(_: Request) -> Response:
        rows = []
        for j, host in enumerate(farm.world.hosts):
            rows.append(
                {
                    "host": host,
                    "index": f"http://{host}/",
                    "robots": f"http://{host}/robots.txt",
                    "sitemap": f"http://{host}/sitemap.xml",
                    "crawl_delay_s": float(farm.world.crawl_delay_s[j]),
                    "urls": int((farm.world.host_of == j).sum()),
                    "strict": bool(farm.plan.strict[j]),
                    "outages": [
                        [farm.origin + o.start_s, farm.origin + o.end_s]
                        for o in farm.plan.outages[j]
                    ],
                }
            )
        return _json(rows)

    async def world(_: Request) -> Response:
        now, w = farm.clock.now(), farm.world
        return _json(
            {
                "now": now,
                "rate": farm.clock.rate,
                "started": farm.started,
                "origin": farm.origin,
                "world_time_s": farm.world_time(),
                "duration_s": w.duration_s,
                "warmup_s": w.warmup_s,
                "budget_per_s": w.budget_per_s,
                "urls": len(w.urls),
                "hosts": len(w.hosts),
                "seed": w.seed,
            }
        )

    async def page(request: Request) -> Response:
        scope = request.scope
        target = scope["path"]
        if scope["query_string"]:
            target += "?" + scope["query_string"].decode("latin-1")
        headers = dict(request.headers.items())
        answer = farm.handle(request.method, request.headers.get("host", ""), target, headers)
        return Response(answer.body, status_code=answer.status, headers=dict(answer.headers))

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        task: asyncio.Task[None] | None = None
        if background is not None:
            task = asyncio.create_task(background(), name="farm-background")
        try:
            yield
        finally:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    methods = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]
    app = Starlette(
        routes=[
            Route("/_farm/score", score, methods=["GET"]),
            Route("/_farm/hosts", hosts, methods=["GET"]),
            Route("/_farm/world", world, methods=["GET"]),
            Route("/{path:path}", page, methods=methods),
        ],
        lifespan=lifespan,
    )
    return AbsoluteForm(app)
