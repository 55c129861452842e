"""Connecting to Redis (single or Cluster), and "Redis is down" as :class:`StoreUnavailable`."""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import BusyLoadingError, ClusterDownError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from service.errors import StoreUnavailable
from service.store.redis.scripts import Client

__all__ = ["DOWN", "TIMEOUT_S", "open_client", "text", "unavailable"]

P = ParamSpec("P")
T = TypeVar("T")

#: The errors that mean Redis cannot answer now.
DOWN = (RedisConnectionError, RedisTimeoutError, BusyLoadingError, ClusterDownError, TryAgainError)


def unavailable(
    fn: Callable[P, Coroutine[Any, Any, T]],
) -> Callable[P, Coroutine[Any, Any, T]]:
    """Turn "Redis is down" into :class:`StoreUnavailable` (the app answers 503)."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await fn(*args, **kwargs)
        except DOWN as exc:
            raise StoreUnavailable(f"Redis unavailable: {exc}") from exc

    return wrapper


def text(x: bytes | str) -> str:
    """A Redis answer as text."""
    return x.decode() if isinstance(x, bytes) else x


#: How long a Redis answer may take by default, wall s (the service's own default is
#: ``Settings.redis_timeout_s``).
TIMEOUT_S = 5.0


async def open_client(url: str, *, timeout_s: float = TIMEOUT_S) -> Client:
    """A client for ``url``: a :class:`RedisCluster` when the server runs in cluster mode.

    Raises
    ------
    StoreUnavailable
        If the server cannot be reached.
    """
    options: dict[str, Any] = {
        # no automatic resend: a script that ran but whose answer was lost must not run
        # twice (an event counted twice, a URL leased twice); the caller gets a 503
        "retry": Retry(NoBackoff(), 0),
        "socket_timeout": timeout_s,
        "socket_connect_timeout": min(timeout_s, 2.0),
        "health_check_interval": 5,
    }
    single = Redis.from_url(url, **options)
    try:
        info = await single.info("cluster")
    except DOWN as exc:
        await single.aclose()
        raise StoreUnavailable(f"Redis unavailable at {url}: {exc}") from exc
    if not info.get("cluster_enabled"):
        return single
    await single.aclose()
    cluster = RedisCluster.from_url(url, **options)
    await cluster.initialize()
    return cluster
