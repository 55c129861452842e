"""The Redis store's Lagrange multipliers: λ₀ (global, one hash) and λ_h (per host,
in the host records), folded in by script from buffered dispatch observations."""

from __future__ import annotations

import asyncio
import math
import struct
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from redis.exceptions import RedisError
from scheduler_core.multipliers import (
    LogMean,
    TrackerConfig,
    host_multiplier,
    host_observation,
)
from service.errors import StoreUnavailable
from service.store.base import DispatchObservation, StaleHosts
from service.store.redis.base import RedisBase
from service.store.redis.client import text, unavailable
from service.store.redis.records import host_log_mean
from service.store.redis.scripts import Call

__all__ = ["RedisMultipliers"]

#: Dispatch observations wait for the next lease call (which folds them in on a single
#: Redis) or this long (s), whichever comes first; more than this many pending are
#: folded at once.
_FLUSH_AFTER_S = 0.05
_FLUSH_OBSERVATIONS = 8192
#: λ₀ read for the thresholds reported with leases may be this old, wall s.
_LAMBDA0_MAX_AGE_S = 1.0
#: Hosts one ``stale_hosts.lua`` call reads (HSCAN COUNT): ~0.5 ms of Redis per call.
_STALE_SLICE = 256


class RedisMultipliers(RedisBase):
    """λ₀ and λ_h: reading them, the hosts whose thresholds drifted, and the fold."""

    async def _lambda0(self) -> LogMean:
        """The current λ₀ estimate, pending observations folded in first."""
        await self._flush()
        return await self._read_lambda0()

    async def _read_lambda0(self) -> LogMean:
        """λ₀'s estimate as stored."""
        fields = await self.client.hmget(self._global.multiplier, ["mean", "count", "var"])
        return self._keep_lambda0(*fields)

    def _keep_lambda0(self, mean: Any, count: Any, var: Any) -> LogMean:
        """λ₀'s estimate from the hash's fields (or ``lambda0.lua``'s answer: '' or
        None for no mean), kept as the latest read."""
        self._lam0 = LogMean(
            None if not mean else float(mean), float(count or 0.0), float(var or 0.0)
        )
        self._lam0_read_at = time.monotonic()
        return self._lam0

    async def _recent_lambda0(self) -> LogMean:
        """λ₀ read at most ``_LAMBDA0_MAX_AGE_S`` ago (for reporting, not for decisions)."""
        if time.monotonic() - self._lam0_read_at > _LAMBDA0_MAX_AGE_S:
            return await self._lambda0()
        return self._lam0

    @unavailable
    async def lambda0_tracker(self) -> LogMean:
        return await self._lambda0()

    @unavailable
    async def host_thresholds(self, hosts: Sequence[str]) -> dict[str, float]:
        groups: dict[int, list[str]] = defaultdict(list)
        for h in hosts:
            groups[self._shard(h)].append(h)
        await self._flush()
        pipe = self.client.pipeline(transaction=False)
        pipe.hmget(self._global.multiplier, ["mean"])
        for shard, names in groups.items():
            pipe.hmget(self._keys[shard].hosts, names)
        answers = await pipe.execute()
        (mean,) = answers[0]
        lam0 = None if mean is None else math.exp(float(mean))
        out: dict[str, float] = {}
        for names, blobs in zip(groups.values(), answers[1:], strict=True):
            for name, blob in zip(names, blobs, strict=True):
                h_mean = None if blob is None else host_log_mean(blob)
                out[name] = (lam0 or 0.0) + host_multiplier(lam0, LogMean(h_mean, 1.0))
        return out

    @unavailable
    async def hosts_needing_rescore(self, tolerance: float, max_urls: int) -> StaleHosts:
        """The stale hosts of every shard, read in slices of about ``_STALE_SLICE`` hosts
        (``stale_hosts.lua`` from an ``HSCAN`` cursor), one call per round trip: no call
        holds Redis for longer than a slice takes, however many hosts a shard has (one
        pipeline of whole shards held it ~30 ms at 10,000 hosts, a request's latency
        budget).  A host the scan gives twice counts once."""
        lam0 = await self._lambda0()
        head = ("" if lam0.log_mean is None else repr(lam0.log_mean), repr(math.log1p(tolerance)))
        found: dict[str, tuple[float, str, float, int]] = {}
        for n in range(self.shards):
            cursor: bytes | str = "0"
            while True:
                ((cursor, flat),) = await self._run(
                    [self._call("stale_hosts", n, (*head, cursor, _STALE_SLICE))]
                )
                for i in range(0, len(flat), 4):
                    name = text(flat[i])
                    found.setdefault(
                        name, (float(flat[i + 1]), name, float(flat[i + 2]), int(flat[i + 3]))
                    )
                if cursor in (b"0", "0"):
                    break
        stale = sorted(found.values(), key=lambda x: (x[0], x[1], x[2]), reverse=True)
        chosen: list[tuple[str, float]] = []
        total = 0
        for _, name, target, urls in stale:
            if chosen and total + urls > max_urls:
                break
            chosen.append((name, target))
            total += urls
        return StaleHosts(chosen, sum(x[3] for x in stale))

    @unavailable
    async def observe_dispatch(
        self, observations: Sequence[DispatchObservation], config: TrackerConfig
    ) -> None:
        """Buffer the observations: the next lease call folds them in (on a single Redis,
        by the lease script itself: no round trip of their own), or a timer
        ``_FLUSH_AFTER_S`` after the oldest (a Redis Cluster; no lease call came), or
        now when ``_FLUSH_OBSERVATIONS`` are pending; any read of the estimates folds
        them in first.  A crash loses at most that buffer of estimator input, never an
        event."""
        if not self._pending:
            self._pending_since = time.monotonic()
        self._pending.extend(observations)
        self._pending_config = config
        if len(self._pending) >= _FLUSH_OBSERVATIONS:
            await self._flush()
        elif self._pending and (self._flush_timer is None or self._flush_timer.done()):
            self._flush_timer = asyncio.create_task(self._flush_later())

    async def _flush_later(self) -> None:
        """Fold in the observations still pending ``_FLUSH_AFTER_S`` after they came."""
        while self._pending:
            wait = self._pending_since + _FLUSH_AFTER_S - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            try:
                await self._flush()
            except (RedisError, StoreUnavailable):
                return  # kept for the next lease call or read

    async def _flush(self) -> None:
        """Fold the pending observations into λ₀ (global script), then λ_h (per shard);
        on failure they stay pending."""
        observations, self._pending = self._pending, []
        if not observations:
            return
        try:
            await self._fold(observations)
        except BaseException:
            self._pending[:0] = observations
            raise

    async def _fold(self, observations: Sequence[DispatchObservation]) -> None:
        config = self._pending_config
        window, clip = repr(float(config.window)), repr(float(config.clip))
        free = [o.log_value for o in observations if not o.gated and math.isfinite(o.log_value)]
        if free:
            packed = struct.pack(f"<{len(free)}d", *free)
            call = Call("lambda0", (self._global.multiplier,), (window, clip, packed))
            ((mean_s, count_s, var_s),) = await self._run([call])
            log_lam0 = self._keep_lambda0(mean_s, count_s, var_s).log_mean
        else:
            log_lam0 = (await self._read_lambda0()).log_mean
        groups: dict[int, list[str]] = defaultdict(list)
        for o in observations:
            x = host_observation(o.log_value, o.gated, log_lam0)
            if x is not None and not o.host_observed:
                groups[self._shard(o.host)] += (o.host, repr(x))
        await self._run(
            [self._call("observe", s, (window, clip, *args)) for s, args in groups.items()]
        )
