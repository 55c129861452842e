"""Clients of the crawlsched HTTP API: :class:`AsyncClient` (asyncio) and :class:`Client`.

Both have the same methods, one per API call (README, "API"), the same retries
(a request that gets ``503`` or no answer is sent again, backing off from 0.05 s
to 1 s, for up to ``retry_for_s`` seconds; delivery is therefore at least once)
and the same :class:`~service.client.ClientStats`.  Errors::

    CrawlschedError          the service answered 4xx (or 503 once retries ran out)
    httpx.TransportError     no answer, once retries ran out
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, cast
from urllib.parse import quote

import httpx

from service.client import (
    _FIRST_BACKOFF_S,
    _MAX_BACKOFF_S,
    _NOT_SENT,
    _RETRYABLE,
    ClientStats,
    CrawlschedClient,
    CrawlschedError,
    with_idempotency_key,
)

__all__ = ["AsyncClient", "Client", "ClientStats", "CrawlschedError"]

#: Most connections one client keeps open to the service.
_MAX_CONNECTIONS = 32


def _headers(token: str | None) -> dict[str, str]:
    return {} if token is None else {"Authorization": f"Bearer {token}"}


def _discovered(urls: Sequence[Mapping[str, Any] | str]) -> dict[str, Any]:
    items = [{"url": u} if isinstance(u, str) else dict(u) for u in urls]
    return {"urls": items, "keep_known": True}


class AsyncClient(CrawlschedClient):
    """The asyncio client (:class:`service.client.CrawlschedClient`), with a bearer token
    and :meth:`discover`.

    Parameters
    ----------
    base_url : str
        The service, e.g. ``http://127.0.0.1:8000``.
    token : str, optional
        Sent as ``Authorization: Bearer <token>`` with every request.
    http : httpx.AsyncClient, optional
        A client to use instead of one made here (then ``token`` is not applied:
        give that client its headers); it is not closed by :meth:`aclose`.
    retry_for_s : float
        How long to retry a failing request, wall s from its first failure; 0: never.
    timeout_s : float
        Timeout of each HTTP attempt, s.

    Raises
    ------
    ValueError
        If ``retry_for_s`` is negative.

    Examples
    --------
    ``async with AsyncClient("http://127.0.0.1:8000") as cs: leases = await cs.next(10)``
    """

    def __init__(
        self,
        base_url: str = "",
        *,
        token: str | None = None,
        http: httpx.AsyncClient | None = None,
        retry_for_s: float = 30.0,
        timeout_s: float = 30.0,
    ) -> None:
        made = None
        if http is None:
            made = httpx.AsyncClient(
                base_url=base_url,
                headers=_headers(token),
                timeout=timeout_s,
                limits=httpx.Limits(max_connections=_MAX_CONNECTIONS),
            )
        super().__init__(base_url, http=made or http, retry_for_s=retry_for_s)
        self._made = made

    async def aclose(self) -> None:
        """Close the HTTP client if this object made it."""
        await super().aclose()
        if self._made is not None:
            await self._made.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def discover(self, urls: Sequence[Mapping[str, Any] | str]) -> dict[str, int]:
        """``POST /urls`` with ``keep_known``: register links found while crawling.

        URLs the service already knows are left as they are (a ``crawl_delay_s``
        still sets their host's politeness); the answer counts ``created`` and ``kept``.
        Each item is a URL or a registration (``{"url", "crawl_delay_s"?, ...}``).
        """
        answer = await self._call("POST", "/urls", idempotent=True, json=_discovered(urls))
        return cast(dict[str, int], answer)


class Client:
    """The synchronous client: the methods of :class:`AsyncClient`, blocking.

    Parameters
    ----------
    base_url : str
        The service, e.g. ``http://127.0.0.1:8000``.
    token : str, optional
        Sent as ``Authorization: Bearer <token>`` with every request.
    http : httpx.Client, optional
        A client to use instead of one made here (then ``token`` is not applied);
        it is not closed by :meth:`close`.
    retry_for_s : float
        How long to retry a failing request, wall s from its first failure; 0: never.
    timeout_s : float
        Timeout of each HTTP attempt, s.

    Raises
    ------
    ValueError
        If ``retry_for_s`` is negative.

    Examples
    --------
    ``with Client("http://127.0.0.1:8000") as cs: leases = cs.next(10)["leases"]``
    """

    def __init__(
        self,
        base_url: str = "",
        *,
        token: str | None = None,
        http: httpx.Client | None = None,
        retry_for_s: float = 30.0,
        timeout_s: float = 30.0,
    ) -> None:
        if retry_for_s < 0:
            raise ValueError("retry_for_s must be >= 0")
        self._own = http is None
        self._http = http or httpx.Client(
            base_url=base_url,
            headers=_headers(token),
            timeout=timeout_s,
            limits=httpx.Limits(max_connections=_MAX_CONNECTIONS),
        )
        self.retry_for_s = retry_for_s
        self.stats = ClientStats()

    def close(self) -> None:
        """Close the HTTP client if this object made it."""
        if self._own:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _call(
        self,
        method: str,
        path: str,
        *,
        events: Sequence[Mapping[str, Any]] = (),
        idempotent: bool = False,
        **kwargs: Any,
    ) -> Any:
        """One request, retried as :meth:`AsyncClient._call` does (``events``, each with
        a ``url``, are what the body carries, for :attr:`stats`; ``idempotent``: send a
        new ``Idempotency-Key``, the same on every retry, so a retried batch counts once).

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
                response = self._http.request(method, path, **kwargs)
            except _RETRYABLE as exc:
                self.stats.transport_errors += 1
                if not isinstance(exc, _NOT_SENT):
                    self._unanswered(path, events)
                failure: Exception = exc
            else:
                if response.status_code != 503:
                    return CrawlschedClient._decode(response)
                self.stats.unavailable += 1
                self._unanswered(path, events)
                failure = CrawlschedClient._error(response)
            now = time.monotonic()
            give_up_at = now + self.retry_for_s if give_up_at is None else give_up_at
            if now >= give_up_at:
                raise failure
            self.stats.retries += 1
            time.sleep(min(_FIRST_BACKOFF_S * 2.0**attempt, _MAX_BACKOFF_S, give_up_at - now))
            attempt += 1

    def _unanswered(self, path: str, events: Sequence[Mapping[str, Any]]) -> None:
        counts = self.stats.unanswered[path]
        for event in events:
            counts[str(event["url"])] += 1

    def register(self, urls: Sequence[Mapping[str, Any]]) -> dict[str, int]:
        """``POST /urls``: register URLs with optional priors (or update them)."""
        return cast(
            dict[str, int], self._call("POST", "/urls", idempotent=True, json={"urls": list(urls)})
        )

    def discover(self, urls: Sequence[Mapping[str, Any] | str]) -> dict[str, int]:
        """``POST /urls`` with ``keep_known``: register links found while crawling,
        leaving known URLs alone (see :meth:`AsyncClient.discover`)."""
        return cast(
            dict[str, int], self._call("POST", "/urls", idempotent=True, json=_discovered(urls))
        )

    def remove(self, urls: Sequence[str]) -> int:
        """``DELETE /urls``: drop URLs; returns how many were registered."""
        return int(self._call("DELETE", "/urls", json={"urls": list(urls)})["removed"])

    def next(self, n: int = 1) -> dict[str, Any]:
        """``GET /next?n=``: lease up to n URLs (``{"now", "leases": [...]}``)."""
        return cast(dict[str, Any], self._call("GET", "/next", params={"n": n}))

    def results(self, results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """``POST /crawl-result``: settle leases with fetch outcomes."""
        body = {"results": list(results)}
        return cast(
            dict[str, Any],
            self._call("POST", "/crawl-result", events=results, idempotent=True, json=body),
        )

    def signals(self, signals: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """``POST /signal``: change-indicating signals."""
        body = {"signals": list(signals)}
        return cast(
            dict[str, Any],
            self._call("POST", "/signal", events=signals, idempotent=True, json=body),
        )

    def clicks(self, clicks: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """``POST /click``: requests for cached copies (the importance signal)."""
        body = {"clicks": list(clicks)}
        return cast(
            dict[str, Any], self._call("POST", "/click", events=clicks, idempotent=True, json=body)
        )

    def explain(self, url: str) -> dict[str, Any]:
        """``GET /urls/{url}``: why the URL is (not) being crawled."""
        return cast(dict[str, Any], self._call("GET", f"/urls/{quote(url, safe='')}"))

    def host(self, host: str) -> dict[str, Any]:
        """``GET /hosts/{host}``: a host's crawl delay, gate, queue and multiplier."""
        return cast(dict[str, Any], self._call("GET", f"/hosts/{quote(host, safe='')}"))

    def healthz(self) -> dict[str, Any]:
        """``GET /healthz``: status, clock reading and rate."""
        return cast(dict[str, Any], self._call("GET", "/healthz"))

    def metrics(self) -> str:
        """``GET /metrics``: Prometheus text."""
        return str(self._call("GET", "/metrics"))
