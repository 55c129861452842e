"""The Redis server settings the store's memory figures assume, and the check at start.

A host's URL entries (``urls:<host>``) and queue (``queue:<host>``) take about a fifth
less memory per URL when Redis keeps them as listpacks, which it does while a hash
has at most 512 entries and a sorted set at most 128 (the defaults of
``hash-max-listpack-entries`` and ``zset-max-listpack-entries``), with no value longer
than ``*-max-listpack-value`` bytes.
The default, 64 bytes, is shorter than a URL entry (90 bytes for a URL registered with
W and Δ), so the store runs best with the values of :data:`LISTPACK_SETTINGS`
(docs/operations.md, "Redis memory"; the deployment's docker-compose.yml and the private
servers of :mod:`service.store.redis.local` set them).  The store does not change a
server's configuration: on a server with lower values it logs one warning at start and
works as before, with more memory per URL.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ResponseError
from service.store.redis.scripts import Client

__all__ = ["LISTPACK_SETTINGS", "low_settings", "warn_if_low"]

log = logging.getLogger(__name__)

#: Longest value (bytes) a listpack-encoded hash or sorted set may hold, as the store
#: would have it: a URL entry with its record's counts and tail, a prior and a dozen
#: crawl outcomes fits; a URL key (the path) up to this length too.
LISTPACK_SETTINGS: Mapping[str, int] = {
    "hash-max-listpack-value": 256,
    "zset-max-listpack-value": 256,
}


def low_settings(config: Mapping[str, str]) -> dict[str, int]:
    """The settings of :data:`LISTPACK_SETTINGS` that ``config`` (a ``CONFIG GET``
    answer: name -> value) sets lower, with their values there; a setting the answer
    does not list is not judged.

    Examples
    --------
    >>> low_settings({"hash-max-listpack-value": "64", "zset-max-listpack-value": "300"})
    {'hash-max-listpack-value': 64}
    """
    return {
        name: int(config[name])
        for name, want in LISTPACK_SETTINGS.items()
        if name in config and int(config[name]) < want
    }


async def warn_if_low(client: Client) -> dict[str, int]:
    """Read the listpack settings of the server (each primary of a Cluster) and log one
    warning naming those set lower than :data:`LISTPACK_SETTINGS`; returns them (the
    lowest value of each over the nodes).  A server that refuses ``CONFIG GET`` (some
    managed services rename it) is not judged: an info line says so."""
    config: dict[str, str] = {}
    try:
        if isinstance(client, RedisCluster):
            answers = [
                await client.config_get("*-max-listpack-value", target_nodes=node)
                for node in client.get_primaries()
            ]
        else:
            answers = [await client.config_get("*-max-listpack-value")]
    except ResponseError as exc:
        log.info("could not read the Redis listpack settings (%s): not checked", exc)
        return {}
    for answer in answers:
        for name, value in answer.items():
            key = name.decode() if isinstance(name, bytes) else str(name)
            text = value.decode() if isinstance(value, bytes) else str(value)
            if key not in config or int(text) < int(config[key]):
                config[key] = text
    low = low_settings(config)
    if low:
        have = ", ".join(f"{name} {value}" for name, value in low.items())
        want = ", ".join(f"{name} {LISTPACK_SETTINGS[name]}" for name in low)
        log.warning(
            "Redis has %s: set %s (redis.conf or CONFIG SET) for about a fifth less "
            "memory per URL (docs/operations.md, Redis memory)",
            have,
            want,
        )
    return low
