"""The production store: Redis (single or Cluster), one atomic Lua script per operation.

Data model (ARCHITECTURE.md, "Storage"; key names in :mod:`.keys`): per shard a hash
of host records, a zset of hosts by readiness, the leases (hash, zset by deadline,
history); per host a zset of its unleased URLs by due time, a hash of their packed
records, and a hash of their estimator state (prior, decayed click and signal counts,
last crawl outcomes: only what a URL has, ``records.EST_*``).  A batch touching several
shards sends one script call per shard, in one pipeline; dispatch sends one per Redis
node, over all the shards the node holds (:mod:`.dispatch`).  The service keeps no state of
its own, so API processes replicate freely; λ₀ lives in Redis and is folded in by a
script (no lost updates).

:class:`RedisStore` is built in layers, one file each: :mod:`.base` (client, shard
keys, scripts, per-shard calls), :mod:`.multipliers` (λ₀ and λ_h), :mod:`.dispatch`
(leases), :mod:`.hosts` (host control), :mod:`.events` (signals and clicks appended
to streams, folded later; the worker's heartbeat) and this module (registration, reads,
parameters, events, estimator groups, operations); :mod:`.client` connects and maps outages to
:class:`~service.errors.StoreUnavailable`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, cast

from redis.exceptions import RedisError
from scheduler_core.errors import ParameterError
from service.errors import StoreUnavailable
from service.store.base import (
    ClickEvent,
    EventStatus,
    HostState,
    IdempotencyKey,
    ScoredParams,
    SignalEvent,
    UrlRecord,
    UrlState,
)
from service.store.estimate_columns import EstimateColumns
from service.store.redis.base import once_ttl_arg
from service.store.redis.client import TIMEOUT_S, open_client, text, unavailable
from service.store.redis.estimate_decode import decode_estimates
from service.store.redis.events import RedisEvents
from service.store.redis.hosts import RedisHosts
from service.store.redis.keys import url_key
from service.store.redis.records import (
    PARAMS,
    SCORED,
    pack_group,
    pack_prior,
    unpack_group,
    unpack_host,
    unpack_url,
)
from service.store.redis.rescoring import RedisRescoring
from service.urls import host_of

__all__ = ["RedisStore", "open_client"]

#: URLs one ``set_params.lua`` call writes: ~1-3 ms of Redis.
_PARAMS_SLICE = 64
_EVENT = {0: EventStatus.ACCEPTED, 1: EventStatus.UNKNOWN_URL, 2: EventStatus.STALE}


def _decay(decay_s: float) -> str:
    """``decay_s`` as a script argument.

    Raises
    ------
    ParameterError
        If it is not positive (as :func:`scheduler_core.estimate.rates.add_event`).
    """
    if not decay_s > 0:
        raise ParameterError("`decay_s` must be positive")
    return repr(float(decay_s))


class RedisStore(RedisEvents, RedisHosts, RedisRescoring):
    """Redis implementation of :class:`service.store.base.Store`.

    Parameters
    ----------
    client : Redis or RedisCluster
        From :func:`open_client`.
    shards : int
        Number of host shards (fixed for the life of the data: checked at
        :meth:`prepare`).
    default_crawl_delay_s, max_revisit_s, lease_history, initial_lambda0
        As for :class:`service.store.memory.MemoryStore`.
    prefix : str
        Key prefix (several deployments may share one Redis).

    Notes
    -----
    The states in :class:`LeaseGrant` carry no prior and observations (dispatch does
    not read them; ``get_urls`` and ``host_urls`` do).
    """

    @classmethod
    async def connect(cls, url: str, *, timeout_s: float = TIMEOUT_S, **options: Any) -> RedisStore:
        """Open a client for ``url`` (an answer may take ``timeout_s`` wall s) and
        :meth:`prepare` the store.

        Raises
        ------
        StoreUnavailable
            If Redis cannot be reached.
        ValueError
            If the data was written with another shard count.
        """
        store = cls(await open_client(url, timeout_s=timeout_s), **options)
        try:
            await store.prepare()
        except BaseException:
            await store.close()
            raise
        return store

    # -- registration ------------------------------------------------------------------------
    @unavailable
    async def upsert_urls(
        self,
        records: Sequence[UrlRecord],
        now: float,
        once: IdempotencyKey | None = None,
        *,
        keep_known: bool = False,
    ) -> list[bool]:
        nan = math.nan
        packed = [
            PARAMS.pack(
                r.weight,
                r.change_rate,
                r.recall,
                r.false_signal_rate,
                r.signal_time_equivalent_s,
                r.threshold_s,
                r.scored_lambda,
                nan if r.last_crawled_at is None else r.last_crawled_at,
                nan if r.crawl_delay_s is None else r.crawl_delay_s,
            )  # fmt: skip
            + pack_prior(r.prior)
            for r in records
        ]
        keep = "1" if keep_known else "0"
        head = (repr(now), self._cap, repr(self._default_delay), once_ttl_arg(once), keep)
        urls = [r.url for r in records]
        answers = await self._per_url("upsert", urls, head, packed, once=once)
        return [bool(a) for _, a in answers]

    @unavailable
    async def remove_urls(self, urls: Sequence[str]) -> int:
        groups = self._by_shard(urls)
        calls = [
            self._call("remove", shard, [self._history, *(x for _, h, k in items for x in (h, k))])
            for shard, items in groups.items()
        ]
        drops = [c for shard, items in groups.items() for c in self._drop_calls(shard, items)]
        answers = await self._run([*calls, *drops])
        return sum(int(a) for a in answers[: len(calls)])

    @unavailable
    async def swap_signatures(self, signatures: Sequence[tuple[str, str]]) -> list[str | None]:
        groups = self._by_shard([url for url, _ in signatures])
        values = [sig for _, sig in signatures]
        calls = [self._signature_call(s, "swap", items, values) for s, items in groups.items()]
        out: list[str | None] = [None] * len(signatures)
        for items, answer in zip(groups.values(), await self._run(calls), strict=True):
            for (i, _, _), previous in zip(items, answer, strict=True):
                out[i] = None if previous is None else text(previous)
        return out

    # -- reads ---------------------------------------------------------------------------------
    async def _entries(
        self, urls: Sequence[str]
    ) -> list[tuple[int, int, str, str, bytes, bytes | None]]:
        """The stored entries of the named URLs that exist, in the order asked: (index in
        ``urls``, shard, host, URL key, record, estimator state) each (``get.lua``)."""
        groups = self._by_shard(urls)
        calls = [
            self._call("get", shard, [" ".join(f"{host} {ukey}" for _, host, ukey in items)])
            for shard, items in groups.items()
        ]
        found = []
        for (shard, items), flat in zip(groups.items(), await self._run(calls), strict=True):
            for k, (i, host, ukey) in enumerate(items):
                blob = flat[2 * k]
                if blob is not None:
                    found.append((i, shard, host, ukey, blob, flat[2 * k + 1]))
        found.sort(key=lambda e: e[0])
        return found

    @unavailable
    async def get_urls(self, urls: Sequence[str]) -> list[UrlState | None]:
        out: list[UrlState | None] = [None] * len(urls)
        for i, shard, host, ukey, blob, est in await self._entries(urls):
            out[i] = unpack_url(blob, host, ukey, shard, est=est)
        return out

    @unavailable
    async def estimate_columns(self, urls: Sequence[str]) -> EstimateColumns:
        entries = await self._entries(urls)
        return decode_estimates(
            [(host, ukey, blob, est) for _, _, host, ukey, blob, est in entries]
        )

    @unavailable
    async def get_host(self, host: str, now: float) -> HostState | None:
        await self._flush()
        (answer,) = await self._run([self._call("host", self._shard(host), (host, repr(now)))])
        if answer is None:
            return None
        blob, urls, queued, due, head = answer
        lam0 = (await self._lambda0()).value
        return unpack_host(
            blob, host, urls=urls, queued=queued, due=due, next_due=head, lambda0=lam0,
            default_in_flight=self._controls.max_in_flight,
        )  # fmt: skip

    @unavailable
    async def host_urls(self, host: str) -> list[UrlState]:
        shard = self._shard(host)
        ((flat, est_flat),) = await self._run([self._call("host_urls", shard, (host,))])
        est = dict(zip(est_flat[::2], est_flat[1::2], strict=True))
        states = [
            unpack_url(flat[i + 1], host, text(flat[i]), shard, est=est.get(flat[i]))
            for i in range(0, len(flat), 2)
        ]
        return sorted(states, key=lambda s: s.url)

    # -- rescoring -------------------------------------------------------------------------------
    async def set_params(
        self, host: str, params: Mapping[str, ScoredParams], scored_lambda: float
    ) -> None:
        await self.set_params_many([(host, params, scored_lambda)])

    @unavailable
    async def set_params_many(
        self, updates: Sequence[tuple[str, Mapping[str, ScoredParams], float]]
    ) -> None:
        """Per shard, calls of ``set_params.lua`` of at most ``_PARAMS_SLICE`` URLs (a
        host's URLs may span two; each URL's update stands alone), one call per round
        trip: no call holds Redis long (one pipeline of a shard call each held it a few
        ms per call, ~100 URLs a call, at a relearn batch of 2,000 URLs)."""
        # per shard, its slices: the words ("host Λ k key ...") and packed parameters
        slices: dict[int, list[tuple[list[str], list[bytes]]]] = defaultdict(list)
        room: dict[int, int] = defaultdict(int)
        for host, params, scored_lambda in updates:
            rows = [
                (url_key(url, host), SCORED.pack(
                    p.weight, p.change_rate, p.recall, p.false_signal_rate,
                    p.signal_time_equivalent_s, p.threshold_s,
                ))
                for url, p in params.items()
                if host_of(url) == host
            ]  # fmt: skip
            shard = self._shard(host)
            while rows:
                if room[shard] == 0:
                    slices[shard].append(([], []))
                    room[shard] = _PARAMS_SLICE
                part, rows = rows[: room[shard]], rows[room[shard] :]
                room[shard] -= len(part)
                words, packed = slices[shard][-1]
                words += (host, repr(scored_lambda), str(len(part)), *(k for k, _ in part))
                packed += (b for _, b in part)
        for shard, parts in slices.items():
            for words, packed in parts:
                args = (self._cap, " ".join(words), b"".join(packed))
                await self._run([self._call("set_params", shard, args)])

    @unavailable
    async def set_thresholds(
        self, host: str, thresholds_s: Mapping[str, float], scored_lambda: float
    ) -> None:
        args: list[Any] = [host, repr(scored_lambda), self._cap]
        for url, threshold in thresholds_s.items():
            if host_of(url) == host:
                args += (url_key(url, host), repr(threshold))
        await self._run([self._call("set_thresholds", self._shard(host), args)])

    # -- events ------------------------------------------------------------------------------------
    @unavailable
    async def record_signals(
        self,
        events: Sequence[SignalEvent],
        discard_within_s: float,
        decay_s: float,
        once: IdempotencyKey | None = None,
    ) -> list[EventStatus]:
        head = (repr(discard_within_s), self._cap, _decay(decay_s))
        times = [repr(e.time) for e in events]
        urls = [e.url for e in events]
        answers = await self._per_url("signals", urls, head, times, joined=True, once=once)
        return [_EVENT[a] for _, a in answers]

    @unavailable
    async def record_clicks(
        self, events: Sequence[ClickEvent], decay_s: float, once: IdempotencyKey | None = None
    ) -> list[EventStatus]:
        head = (_decay(decay_s),)
        times = [repr(e.time) for e in events]
        urls = [e.url for e in events]
        answers = await self._per_url("clicks", urls, head, times, joined=True, once=once)
        return [_EVENT[a] for _, a in answers]

    # -- estimator groups ----------------------------------------------------------------------
    @unavailable
    async def get_groups(self, keys: Sequence[str]) -> list[tuple[float, ...] | None]:
        if not keys:
            return []
        blobs = await self.client.hmget(self._global.groups, list(keys))
        return [unpack_group(cast(bytes | None, b)) for b in blobs]

    @unavailable
    async def put_groups(self, groups: Mapping[str, Sequence[float]]) -> None:
        if groups:
            packed = {key: pack_group(values) for key, values in groups.items()}
            await self.client.hset(self._global.groups, mapping=packed)  # type: ignore[arg-type]

    # -- operations --------------------------------------------------------------------------------
    @unavailable
    async def clock_epoch(self, proposal: float) -> float:
        key = self._global.clock_epoch
        await self.client.set(key, repr(proposal), nx=True)
        return float(await self.client.get(key) or proposal)

    @unavailable
    async def try_lead(self, role: str, owner: str, ttl_s: float) -> bool:
        key, ttl_ms = self._global.leader(role), max(1, int(ttl_s * 1000))
        if await self.client.set(key, owner, nx=True, px=ttl_ms):
            return True
        if await self.client.get(key) == owner.encode():
            await self.client.pexpire(key, ttl_ms)
            return True
        return False

    async def ping(self) -> bool:
        """True when Redis answers and the scripts are loaded (a restart empties the
        script cache: they are registered again here)."""
        try:
            if not await self._scripts.loaded(self.client):
                await self._scripts.register(self.client)
            return True
        except RedisError:
            return False

    async def close(self) -> None:
        if self._flush_timer is not None:
            self._flush_timer.cancel()
        try:
            await self._flush()
        except (RedisError, StoreUnavailable):
            pass  # Redis is gone: the buffered estimator input goes with it
        await self.client.aclose()
