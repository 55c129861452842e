"""Running a farm: its clock (its own, or a crawl scheduler's), and uvicorn in a thread
or in a ``crawlsched webfarm`` subprocess."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType

import httpx
import uvicorn
from starlette.types import ASGIApp

from scheduler_core.sim import World
from service.client import CrawlschedClient
from service.clock import AcceleratedClock, Clock
from service.ports import free_port
from service.subprocesses import served_process
from service.webfarm.app import Background, farm_app
from service.webfarm.farm import Farm
from service.webfarm.feed import FeedStats, feed_events
from service.webfarm.plan import FarmOptions

__all__ = ["FarmRun", "ThreadedServer", "run_farm", "service_clock", "served_farm"]


def service_clock(service_url: str, *, token: str | None = None) -> AcceleratedClock:
    """A clock that reads what the crawl scheduler at ``service_url`` reads.

    From one ``GET /healthz`` (its ``now`` and ``clock_rate``), taken at the
    middle of the round trip: the error is half the round trip times the rate.

    Raises
    ------
    httpx.HTTPError
        If the service does not answer ``/healthz`` with 200.
    """
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    before = time.monotonic()
    answer = httpx.get(f"{service_url.rstrip('/')}/healthz", headers=headers, timeout=10.0)
    after = time.monotonic()
    answer.raise_for_status()
    health = answer.json()
    rate = float(health["clock_rate"])
    return AcceleratedClock(
        rate, float(health["now"]) + (time.monotonic() - (before + after) / 2) * rate
    )


class ThreadedServer:
    """Serve an ASGI app with uvicorn in a background thread, on 127.0.0.1.

    Use as a context manager; ``url`` is its base URL once entered.

    Raises
    ------
    RuntimeError
        On entering, if the server does not start within ``startup_timeout_s``.
    """

    def __init__(
        self, app: ASGIApp, *, port: int | None = None, startup_timeout_s: float = 20.0
    ) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="warning", access_log=False
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="farm", daemon=True)
        self._timeout_s = startup_timeout_s

    def __enter__(self) -> ThreadedServer:
        self._thread.start()
        deadline = time.monotonic() + self._timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self._stop()
                raise RuntimeError("the server did not start")
            time.sleep(0.02)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop()

    def _stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10.0)


@contextlib.contextmanager
def served_farm(
    args: Sequence[str], *, port: int | None = None, startup_timeout_s: float = 60.0
) -> Iterator[str]:
    """Run ``crawlsched webfarm <args> --port P`` in a subprocess; yield its base URL.

    Raises
    ------
    RuntimeError
        If the farm does not answer ``/_farm/world`` within ``startup_timeout_s``.
    """
    port = port or free_port()
    base_url = f"http://127.0.0.1:{port}"
    script = Path(sys.executable).with_name("crawlsched")
    cmd = [str(script), "webfarm", *args, "--port", str(port)]
    environment = {**os.environ, "NO_COLOR": "1"}
    with served_process(
        cmd, environment, f"{base_url}/_farm/world", name="the farm",
        startup_timeout_s=startup_timeout_s,
    ):  # fmt: skip
        yield base_url


class FarmRun:
    """A farm ready to serve: the farm, its app, and the feed's stats (if it feeds).

    Parameters
    ----------
    world : World
    clock : Clock
        The farm's clock (:func:`service_clock` to share a service's).
    options : FarmOptions, optional
    feed_url : str, optional
        Post the world's clicks and signals to the crawl scheduler there while
        serving (:func:`service.webfarm.feed.feed_events`); its clock must be ``clock``.
    token : str, optional
        Bearer token for the feed's requests.
    start_on_request : bool
        World time starts at the first page request (:class:`Farm`).
    """

    def __init__(
        self,
        world: World,
        clock: Clock,
        *,
        options: FarmOptions | None = None,
        feed_url: str | None = None,
        token: str | None = None,
        start_on_request: bool = False,
    ) -> None:
        self.farm = Farm(world, clock, options=options, start_on_request=start_on_request)
        self.feed: FeedStats | None = None
        background: Background | None = None
        if feed_url is not None:
            stats = self.feed = FeedStats()
            headers = {} if token is None else {"Authorization": f"Bearer {token}"}

            async def feed() -> None:
                async with httpx.AsyncClient(
                    base_url=feed_url, headers=headers, timeout=30.0
                ) as http:
                    await feed_events(self.farm, CrawlschedClient(http=http), stats=stats)

            background = feed
        self.app = farm_app(self.farm, background=background)


class _StoppableServer(uvicorn.Server):
    """uvicorn's server, but SIGINT and SIGTERM only stop it: the caller goes on (to
    report the score) instead of having the signal raised again on exit."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        handled = (signal.SIGINT, signal.SIGTERM)
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def run_farm(run: FarmRun, *, host: str = "127.0.0.1", port: int = 8080) -> None:
    """Serve ``run`` with uvicorn until SIGINT or SIGTERM, then return."""
    config = uvicorn.Config(run.app, host=host, port=port, log_level="warning", access_log=False)
    _StoppableServer(config).run()
