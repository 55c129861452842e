"""The Redis store's plumbing: shards, keys, scripts, and per-shard calls over URLs."""

from __future__ import annotations

import asyncio
import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from scheduler_core.multipliers import LogMean, TrackerConfig
from service.clock import TimeSource, wall_map_of
from service.store.base import (
    NO_LIMITS,
    ControlRules,
    DispatchObservation,
    IdempotencyKey,
    shard_of,
)
from service.store.redis.client import unavailable
from service.store.redis.keys import GlobalKeys, ShardKeys, url_key
from service.store.redis.records import LAYOUT, READS_AS_LAYOUT
from service.store.redis.scripts import Call, Client, ScriptSet
from service.store.redis.tuning import warn_if_low
from service.urls import host_of

__all__ = ["RedisBase", "clock_arg", "once_ttl_arg"]


def clock_arg(now: TimeSource) -> str:
    """``now`` as the scripts read it (``lib.lua`` clock_now): "start speed epoch", the
    clock as a map of the server's wall time (a fixed reading: speed 0)."""
    m = wall_map_of(now)
    return f"{m.start!r} {m.speed!r} {m.epoch!r}"


def once_ttl_arg(once: IdempotencyKey | None) -> int:
    """How long a script remembers a batch's answer, wall ms (at least 1; 0 unused)."""
    return 0 if once is None else max(1, math.ceil(once.ttl_s * 1000.0))


class RedisBase:
    """What every part of :class:`~service.store.redis.RedisStore` shares: the client,
    the shard keys, the scripts, and how a call over URLs is split by shard
    (parameters as for the store)."""

    def __init__(
        self,
        client: Client,
        *,
        shards: int = 16,
        default_crawl_delay_s: float = 1.0,
        max_revisit_s: float = 30 * 86_400.0,
        lease_history: int = 200_000,
        initial_lambda0: float | None = None,
        controls: ControlRules | None = None,
        prefix: str = "cs",
    ) -> None:
        self.client = client
        self._controls = NO_LIMITS if controls is None else controls
        self._controls_given = controls is not None
        self.shards = shards
        self._keys = [ShardKeys(n, prefix) for n in range(shards)]
        self._script_keys = [k.all for k in self._keys]
        self._global = GlobalKeys(prefix)
        self._default_delay = default_crawl_delay_s
        self._cap = repr(float(max_revisit_s))
        self._history = max(1, math.ceil(lease_history / shards))
        self._initial = None if initial_lambda0 is None else math.log(initial_lambda0)
        self._scripts = ScriptSet()
        self._pending: list[DispatchObservation] = []
        self._pending_config = TrackerConfig()
        self._pending_since = 0.0
        self._flush_timer: asyncio.Task[None] | None = None
        self._lam0 = LogMean()
        self._lam0_read_at = -math.inf

    @unavailable
    async def prepare(self) -> None:
        """Register the scripts, check the server's listpack settings (a warning when
        they are low: :mod:`~service.store.redis.tuning`), record the shard count and
        the records' layout, seed λ₀.

        Raises
        ------
        ValueError
            If the data was written with another shard count, or in another layout of
            the records (``records.LAYOUT``; data from before the layout was recorded
            counts as layout 1) that this version does not read
            (``records.READS_AS_LAYOUT``).
        """
        await self._scripts.register(self.client)
        await warn_if_low(self.client)
        meta = self._global.meta
        fresh = await self.client.hsetnx(meta, "shards", str(self.shards))
        if fresh:
            await self.client.hsetnx(meta, "layout", str(LAYOUT))
        stored = int(await self.client.hget(meta, "shards") or 0)
        if stored != self.shards:
            raise ValueError(
                f"the data in Redis was written with {stored} shards, not {self.shards}: "
                "set CRAWLSCHED_SHARDS to match"
            )
        layout = int(await self.client.hget(meta, "layout") or 1)
        if layout in READS_AS_LAYOUT:
            await self.client.hset(meta, "layout", str(LAYOUT))
        elif layout != LAYOUT:
            raise ValueError(
                f"the data in Redis was written in record layout {layout}, and this version "
                f"reads layout {LAYOUT}: run the version that wrote it, or register the "
                "URLs again into an empty Redis (docs/operations.md, Redis memory)"
            )
        if self._initial is not None:
            await self.client.hsetnx(self._global.multiplier, "mean", repr(self._initial))
        # the controls every script reads (lib.lua ctl), in each shard's meta hash: the
        # store's, shared by every process; written only by a store given them (the
        # service always is), so that a tool connecting bare changes nothing
        c = self._controls
        for keys in self._keys if self._controls_given else ():
            await self.client.hset(
                keys.meta,
                mapping={
                    "min_revisit": repr(float(c.min_revisit_s)),
                    "max_in_flight": str(c.max_in_flight),
                },
            )

    # -- helpers ---------------------------------------------------------------------------
    def _shard(self, host: str) -> int:
        return shard_of(host, self.shards)

    def _call(
        self, script: str, shard: int, args: Sequence[Any], once: IdempotencyKey | None = None
    ) -> Call:
        """A call of a shard script; with ``once``, its record in the shard is KEYS[10]."""
        keys = self._script_keys[shard]
        if once is not None:
            keys = (*keys, self._keys[shard].once(once.digest))
        return Call(script, keys, args)

    async def _run(self, calls: Sequence[Call]) -> list[Any]:
        return await self._scripts.run(self.client, calls) if calls else []

    def _signature_call(
        self,
        shard: int,
        mode: str,
        items: Sequence[tuple[int, str, str]],
        values: Sequence[str],
        *,
        stale: bool = False,
    ) -> Call:
        """``signatures.lua`` over ``items`` (position, host, URL key) of one shard; with
        ``values`` (by position), the new signatures.  With ``stale`` (mode ``drop``
        only) the URLs' stale-signal counts (``ShardKeys.stale``) instead."""
        hosts = list(dict.fromkeys(host for _, host, _ in items))
        index = {host: k + 1 for k, host in enumerate(hosts)}
        args: list[str | int] = [mode]
        for i, host, ukey in items:
            args += (index[host], ukey, values[i]) if values else (index[host], ukey)
        keys = self._keys[shard]
        hashes = [keys.stale(h) if stale else keys.signatures(h) for h in hosts]
        return Call("signatures", hashes, args)

    def _drop_calls(self, shard: int, items: Sequence[tuple[int, str, str]]) -> list[Call]:
        """What goes with removed URLs (position, host, URL key) of one shard: their
        content signatures and stale-signal counts."""
        return [
            self._signature_call(shard, "drop", items, (), stale=stale) for stale in (False, True)
        ]

    def _by_shard(self, urls: Sequence[str]) -> dict[int, list[tuple[int, str, str]]]:
        """(position, host, url key) of each URL, grouped by shard."""
        groups: dict[int, list[tuple[int, str, str]]] = defaultdict(list)
        for i, url in enumerate(urls):
            host = host_of(url)
            groups[self._shard(host)].append((i, host, url_key(url, host)))
        return groups

    async def _per_url(
        self,
        script: str,
        urls: Sequence[str],
        head: Sequence[Any],
        extra: Sequence[Any],
        *,
        joined: bool = False,
        once: IdempotencyKey | None = None,
    ) -> list[Any]:
        """Run ``script`` per shard over ``urls``: host, url key and ``extra[i]`` (if
        any) of each as arguments after ``head``, or, ``joined``, all of them in one
        space-separated argument (cheaper to send) followed by the TTL of ``once``;
        the answers back in the order of ``urls``, each with its shard."""
        groups = self._by_shard(urls)
        calls = []
        for shard, items in groups.items():
            args: list[Any] = list(head)
            if joined:
                args.append(" ".join(f"{host} {ukey} {extra[i]}" for i, host, ukey in items))
                args.append(once_ttl_arg(once))
            else:
                for i, host, ukey in items:
                    args += (host, ukey, extra[i]) if extra else (host, ukey)
            calls.append(self._call(script, shard, args, once))
        answers = await self._run(calls)
        out: list[Any] = [None] * len(urls)
        for (shard, items), answer in zip(groups.items(), answers, strict=True):
            for (i, _, _), a in zip(items, answer, strict=True):
                out[i] = (shard, a)
        return out
