"""A small asynchronous Python client of the crawlsched HTTP API (for workers and tools)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast
from urllib.parse import quote

import httpx

__all__ = ["CrawlschedClient", "CrawlschedError"]


class CrawlschedError(Exception):
    """The service answered with an error status; ``detail`` is its body."""

    def __init__(self, status_code: int, detail: Any) -> None:
        super().__init__(f"HTTP {status_code}: {detail}")
        self.status_code = status_code
        self.detail = detail


class CrawlschedClient:
    """Calls the service over HTTP.

    Parameters
    ----------
    base_url : str
        e.g. ``http://127.0.0.1:8000``.
    http : httpx.AsyncClient, optional
        A client to use (tests pass one bound to the ASGI app); otherwise one is
        created and closed by :meth:`aclose`.
    """

    def __init__(self, base_url: str = "", *, http: httpx.AsyncClient | None = None) -> None:
        self._own = http is None
        self._http = http or httpx.AsyncClient(
            base_url=base_url, timeout=30.0, limits=httpx.Limits(max_connections=32)
        )

    async def aclose(self) -> None:
        """Close the HTTP client if this object created it."""
        if self._own:
            await self._http.aclose()

    async def __aenter__(self) -> CrawlschedClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = await self._http.request(method, path, **kwargs)
        if response.status_code >= 400:
            try:
                detail = response.json().get("detail")
            except ValueError:
                detail = response.text
            raise CrawlschedError(response.status_code, detail)
        if response.headers.get("content-type", "").startswith("application/json"):
            return response.json()
        return response.text

    async def register(self, urls: Sequence[Mapping[str, Any]]) -> dict[str, int]:
        """``POST /urls``: register URLs with optional priors."""
        return cast(dict[str, int], await self._call("POST", "/urls", json={"urls": list(urls)}))

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
        return cast(dict[str, Any], await self._call("POST", "/crawl-result", json=body))

    async def signals(self, signals: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """``POST /signal``: change-indicating signals."""
        body = {"signals": list(signals)}
        return cast(dict[str, Any], await self._call("POST", "/signal", json=body))

    async def clicks(self, clicks: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """``POST /click``: requests for cached copies."""
        body = {"clicks": list(clicks)}
        return cast(dict[str, Any], await self._call("POST", "/click", json=body))

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
