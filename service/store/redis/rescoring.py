"""The Redis store's side of a rescoring pass, as columns: the hosts' URLs read as
packed rows (``rescore_read.lua``, one ``numpy.frombuffer`` a host) and their new
thresholds written back as packed doubles (``set_rescored.lua``, at most
``_RESCORED_SLICE`` URLs a call, one call per round trip); no object per URL
(ARCHITECTURE.md, "Flow" 4)."""

from __future__ import annotations

import struct
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from scheduler_core.params import FloatArray
from service.store.columns import RESCORE_FIELDS, RescoreColumns
from service.store.redis.base import RedisBase
from service.store.redis.client import text, unavailable
from service.store.redis.keys import expand_url, url_key

__all__ = ["RedisRescoring"]

#: URLs one ``set_rescored.lua`` call writes: ~1.3 ms of Redis.
_RESCORED_SLICE = 64
_LENGTH = struct.Struct("<H")  # a URL key's length (keys are at most MAX_URL_LENGTH bytes)


def _length_prefixed(keys: Sequence[bytes]) -> bytes:
    """``keys`` as one string, each its uint16 length then its bytes."""
    return b"".join(_LENGTH.pack(len(k)) + k for k in keys)


class RedisRescoring(RedisBase):
    """:meth:`rescore_columns` and :meth:`set_rescored` of the Redis store."""

    def _hosts_by_shard(self, hosts: Sequence[str]) -> dict[int, list[int]]:
        """Positions in ``hosts`` grouped by shard, in order."""
        groups: dict[int, list[int]] = defaultdict(list)
        for i, host in enumerate(hosts):
            groups[self._shard(host)].append(i)
        return groups

    @unavailable
    async def rescore_columns(self, stale: Sequence[tuple[str, float]]) -> RescoreColumns:
        hosts = [h for h, _ in stale]
        groups = self._hosts_by_shard(hosts)
        calls = [self._call("rescore_read", s, [hosts[i] for i in g]) for s, g in groups.items()]
        answers = await self._run(calls)
        rows: list[FloatArray] = [np.empty((0, len(RESCORE_FIELDS)))] * len(hosts)
        urls: list[list[str]] = [[] for _ in hosts]
        never = 0
        for idx, answer in zip(groups.values(), answers, strict=True):
            for i, (packed, left_out, *keys) in zip(idx, answer, strict=True):
                never += int(left_out)
                host = hosts[i]
                found = [expand_url(text(k), host) for k in keys]
                order = sorted(range(len(found)), key=found.__getitem__)  # URL order
                table = np.frombuffer(packed, dtype="<f8").reshape(len(found), len(RESCORE_FIELDS))
                rows[i] = table[order].astype(np.float64)
                urls[i] = [found[j] for j in order]
        return RescoreColumns(
            hosts=hosts,
            lambdas=np.array([lam for _, lam in stale], dtype=np.float64),
            counts=np.array([len(u) for u in urls], dtype=np.int64),
            urls=[u for us in urls for u in us],
            params=np.concatenate(rows) if rows else np.empty((0, len(RESCORE_FIELDS))),
            never_crawled=never,
        )

    @unavailable
    async def set_rescored(self, cols: RescoreColumns, thresholds_s: FloatArray) -> None:
        """Per shard, calls of ``set_rescored.lua`` of at most ``_RESCORED_SLICE`` URLs (a
        host's URLs may span two; each URL's update stands alone, and each call sets the
        host's scored Λ), one call per round trip: Redis serves ``/next`` between them."""
        starts = np.concatenate([[0], np.cumsum(cols.counts)]).tolist()
        for s, idx in self._hosts_by_shard(cols.hosts).items():
            args: list[str | bytes] = []
            packed: list[bytes] = []
            room = _RESCORED_SLICE
            for i in idx:
                host, lam = cols.hosts[i], repr(float(cols.lambdas[i]))
                a, b = starts[i], starts[i + 1]
                while True:  # a host without URLs still gets its scored Λ
                    stop = min(b, a + room)
                    keys = [url_key(u, host).encode() for u in cols.urls[a:stop]]
                    args += (host, lam, _length_prefixed(keys))
                    packed.append(np.asarray(thresholds_s[a:stop], dtype="<f8").tobytes())
                    room -= stop - a
                    a = stop
                    if room <= 0:
                        await self._set_rescored(s, packed, args)
                        args, packed, room = [], [], _RESCORED_SLICE
                    if a >= b:
                        break
            if args:
                await self._set_rescored(s, packed, args)

    async def _set_rescored(self, shard: int, packed: list[bytes], args: list[str | bytes]) -> None:
        await self._run([self._call("set_rescored", shard, [self._cap, b"".join(packed), *args])])
