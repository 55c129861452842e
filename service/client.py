"""A small asynchronous Python client of the crawlsched HTTP API (for workers and tools)."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast
from urllib.parse import quote

import httpx

__all__ = ["ClientStats", "CrawlschedClient", "CrawlschedError", "with_idempotency_key"]

#: Transport errors worth a retry: the service may be restarting or its answer was lost.
_RETRYABLE = (httpx.NetworkError, httpx.TimeoutException, httpx.RemoteProtocolError)
#: Of those, the ones raised before the request reached the service (nothing applied).
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
#: First and longest pause between retries, s (the service's ``Retry-After`` is 1 s).
_FIRST_BACKOFF_S = 0.05
_MAX_BACKOFF_S = 1.0


def with_idempotency_key(kwargs: dict[str, Any]) -> None:
    """Add a new ``Idempotency-Key`` header to a request's keyword arguments (one per
    batch: a retry reuses the same arguments, and so the same key)."""
    kwargs["headers"] = {**kwargs.get("headers", {}), "Idempotency-Key": secrets.token_hex(16)}


class CrawlschedError(Exception):
    """The service answered with an error status; ``detail`` is its body."""

    def __init__(self, status_code: int, detail: Any) -> None:
        super().__init__(f"HTTP {status_code}: {detail}")
        self.status_code = status_code
        self.detail = detail


@dataclass
class ClientStats:
    """What a :class:`CrawlschedClient` did, cumulated over its life.

    Attributes
    ----------
    requests : int
        HTTP attempts made (retries included).
    retries : int
        Attempts repeated after a 503 or a transport error.
    unavailable : int
        ``503 Service Unavailable`` answers seen (the store was down).
    transport_errors : int
        Attempts that got no HTTP answer (connection refused or reset, timeout).
    unanswered : dict[str, Counter[str]]
        Per path (``/click``, ``/signal``, ``/crawl-result``), per URL: events sent
        in attempts that got a 503 or lost their answer, which the service may have
        applied, in part or whole, without acknowledging them (a retry of the batch,
        under the same idempotency key, then gets the first answer and applies only
        the rest).  Attempts refused before reaching the service are not counted.
    """

    requests: int = 0
    retries: int = 0
    unavailable: int = 0
    transport_errors: int = 0
    unanswered: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))


class CrawlschedClient:
    """Calls the service over HTTP, retrying while it is unavailable.

    A request that gets ``503`` (the service's store is down) or a transport
    error (connection refused or reset, timeout) is sent again after a short
    exponential backoff (0.05 s doubling up to 1 s), for up to ``retry_for_s``
    seconds from its first failure; then the last error is raised.

    Every POST batch carries an ``Idempotency-Key`` header, one per call and the
    same on each of its retries, so delivery is **exactly-once**: a POST whose
    answer was lost (or that got a 503 after the store applied part of the batch)
    is sent again and the service answers it as the first time, applying only what
    it had not (within the service's ``CRAWLSCHED_IDEMPOTENCY_S``).  A batch the
    client gives up on may have been applied in part.  A ``GET /next`` whose answer
    was lost leaves leases nobody holds, which expire and are dispatched again.
    :attr:`stats` counts the retries and, per URL, the events sent in attempts that
    got no answer.

    Parameters
    ----------
    base_url : str
        e.g. ``http://127.0.0.1:8000``.
    http : httpx.AsyncClient, optional
        A client to use (tests pass one bound to the ASGI app); otherwise one is
        created and closed by :meth:`aclose`.
    retry_for_s : float
        How long to keep retrying a failing request, wall s from its first
        failure; 0 disables retries.
    token : str, optional
        Bearer token sent as ``Authorization: Bearer <token>`` on every request
        (also set on a given ``http`` client); its role must admit the calls made.
    """

    def __init__(
        self,
        base_url: str = "",
        *,
        http: httpx.AsyncClient | None = None,
        retry_for_s: float = 30.0,
        token: str | None = None,
    ) -> None:
        if retry_for_s < 0:
            raise ValueError("retry_for_s must be >= 0")
        self._own = http is None
        self._http = http or httpx.AsyncClient(
            base_url=base_url, timeout=30.0, limits=httpx.Limits(max_connections=32)
        )
        if token is not None:
            self._http.headers["Authorization"] = f"Bearer {token}"
        self.retry_for_s = retry_for_s
        self.stats = ClientStats()

    async def aclose(self) -> None:
        """Close the HTTP client if this object created it."""
        if self._own:
            await self._http.aclose()

    async def __aenter__(self) -> CrawlschedClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _call(
        self,
        method: str,
        path: str,
        *,
        events: Sequence[Mapping[str, Any]] = (),
        idempotent: bool = False,
        **kwargs: Any,
    ) -> Any:
        """One request, retried on 503 and transport errors (see the class docstring);
        ``events`` (each with a ``url``) are what the body carries, for the stats;
        ``idempotent``: send a new ``Idempotency-Key``, the same on every retry.

        Raises
        ------
        CrawlschedError
            An error status other than 503, or 503 once retries are exhausted.
        httpx.TransportError
            A transport error once retries are exhausted, or one not worth a retry.
        """
        if idempotent:
            with_idempotency_key(kwargs)
        give_up_at: float | None = None
        attempt = 0
        while True:
            self.stats.requests += 1
            try:
                response = await self._http.request(method, path, **kwargs)
            except _RETRYABLE as exc:
                self.stats.transport_errors += 1
                if not isinstance(exc, _NOT_SENT):
                    self._unanswered(path, events)
                failure: Exception = exc
            else:
                if response.status_code != 503:
                    return self._decode(response)
                self.stats.unavailable += 1
                self._unanswered(path, events)
                failure = self._error(response)
            now = time.monotonic()
            give_up_at = now + self.retry_for_s if give_up_at is None else give_up_at
            if now >= give_up_at:
                raise failure
            self.stats.retries += 1
            pause = min(_FIRST_BACKOFF_S * 2.0**attempt, _MAX_BACKOFF_S, give_up_at - now)
            attempt += 1
            await asyncio.sleep(pause)

    def _unanswered(self, path: str, events: Sequence[Mapping[str, Any]]) -> None:
        if events:
            counts = self.stats.unanswered[path]
            for event in events:
                counts[str(event["url"])] += 1

    @staticmethod
    def _error(response: httpx.Response) -> CrawlschedError:
        try:
            detail = response.json().get("detail")
        except ValueError:
            detail = response.text
        return CrawlschedError(response.status_code, detail)

    @classmethod
    def _decode(cls, response: httpx.Response) -> Any:
        if response.status_code >= 400:
            raise cls._error(response)
        if response.headers.get("content-type", "").startswith("application/json"):
            return response.json()
        return response.text

    async def register(self, urls: Sequence[Mapping[str, Any]]) -> dict[str, int]:
        """``POST /urls``: register URLs with optional priors."""
        body = {"urls": list(urls)}
        return cast(dict[str, int], await self._call("POST", "/urls", idempotent=True, json=body))

    async def remove(self, urls: Sequence[str]) -> int:
        """``DELETE /urls``: drop URLs."""
        body = await self._call("DELETE", "/urls", json={"urls": list(urls)})
        return int(body["removed"])

    async def next(self, n: int = 1) -> dict[str, Any]:
        """``GET /next?n=``: lease up to n URLs."""
        return cast(dict[str, Any], await self._call("GET", "/next", params={"n": n}))

    async def results(self, results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """``POST /crawl-result``: settle leases."""
        body = {"results": list(results)}
        answer = await self._call(
            "POST", "/crawl-result", events=results, idempotent=True, json=body
        )
        return cast(dict[str, Any], answer)

    async def signals(self, signals: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """``POST /signal``: change-indicating signals."""
        body = {"signals": list(signals)}
        answer = await self._call("POST", "/signal", events=signals, idempotent=True, json=body)
        return cast(dict[str, Any], answer)

    async def clicks(self, clicks: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """``POST /click``: requests for cached copies."""
        body = {"clicks": list(clicks)}
        answer = await self._call("POST", "/click", events=clicks, idempotent=True, json=body)
        return cast(dict[str, Any], answer)

    async def explain(self, url: str) -> dict[str, Any]:
        """``GET /urls/{url}``: why the URL is (not) being crawled."""
        return cast(dict[str, Any], await self._call("GET", f"/urls/{quote(url, safe='')}"))

    async def host(self, host: str) -> dict[str, Any]:
        """``GET /hosts/{host}``."""
        return cast(dict[str, Any], await self._call("GET", f"/hosts/{quote(host, safe='')}"))

    async def healthz(self) -> dict[str, Any]:
        """``GET /healthz``: status, clock reading and rate."""
        return cast(dict[str, Any], await self._call("GET", "/healthz"))

    async def metrics(self) -> str:
        """``GET /metrics``: Prometheus text."""
        return str(await self._call("GET", "/metrics"))
