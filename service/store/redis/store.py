"""The production store: Redis (single or Cluster), one atomic Lua script per operation.

Data model (ARCHITECTURE.md, "Storage"; key names in :mod:`.keys`): per shard a hash
of host records, a zset of hosts by readiness, the leases (hash, zset by deadline,
history); per host a zset of its unleased URLs by due time, a hash of their packed
records, and a hash of their estimator state (prior, decayed click and signal counts,
last crawl outcomes: only what a URL has, ``records.EST_*``).  A batch touching several
shards sends one script call per shard, in one pipeline.  The service keeps no state of
its own, so API processes replicate freely; λ₀ lives in Redis and is folded in by a
script (no lost updates).
"""

from __future__ import annotations

import functools
import math
import secrets
import time
from collections import defaultdict
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar, cast

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import BusyLoadingError, ClusterDownError, RedisError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from scheduler_core.errors import ParameterError
from scheduler_core.multipliers import LogMean, TrackerConfig, host_multiplier
from service.errors import StoreUnavailable
from service.store.base import (
    ClickEvent,
    CrawlOutcome,
    DispatchObservation,
    EventStatus,
    HostState,
    LeaseGrant,
    LeaseStatus,
    ScoredParams,
    SignalEvent,
    StoreStats,
    UrlRecord,
    UrlState,
    shard_of,
)
from service.store.redis.keys import GlobalKeys, ShardKeys, expand_url, url_key
from service.store.redis.records import (
    PARAMS,
    SCORED,
    format_lease_id,
    host_log_mean,
    pack_group,
    pack_prior,
    parse_lease_id,
    unpack_group,
    unpack_host,
    unpack_url,
)
from service.store.redis.scripts import Call, Client, ScriptSet
from service.urls import host_of

__all__ = ["RedisStore", "open_client"]

P = ParamSpec("P")
T = TypeVar("T")

_DOWN = (RedisConnectionError, RedisTimeoutError, BusyLoadingError, ClusterDownError, TryAgainError)
_EVENT = {0: EventStatus.ACCEPTED, 1: EventStatus.UNKNOWN_URL, 2: EventStatus.STALE}
_RESULT = {0: EventStatus.ACCEPTED, 2: EventStatus.STALE, 3: EventStatus.DUPLICATE}
_LEASE = {1: LeaseStatus.ACTIVE, 2: LeaseStatus.EXPIRED, 3: LeaseStatus.SETTLED}
#: Not-yet-ready hosts a lease call scans per shard for an open politeness gate.
_SCAN = 4096
#: Dispatch observations are folded into λ₀/λ_h in batches: this many, or this old (s).
_FLUSH_OBSERVATIONS = 512
_FLUSH_AFTER_S = 0.05
#: λ₀ read for the thresholds reported with leases may be this old, wall s.
_LAMBDA0_MAX_AGE_S = 1.0


def _unavailable(
    fn: Callable[P, Coroutine[Any, Any, T]],
) -> Callable[P, Coroutine[Any, Any, T]]:
    """Turn "Redis is down" into :class:`StoreUnavailable` (the app answers 503)."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await fn(*args, **kwargs)
        except _DOWN as exc:
            raise StoreUnavailable(f"Redis unavailable: {exc}") from exc

    return wrapper


def _ready(answers: Sequence[Any], part: int) -> Iterator[tuple[float, bytes, int]]:
    """(readiness, host, shard) of the hosts ``ready.lua`` listed in ``part``."""
    for shard, answer in enumerate(answers):
        flat = answer[part]
        for i in range(0, len(flat), 2):
            yield float(flat[i + 1]), flat[i], shard


def _s(x: bytes | str) -> str:
    return x.decode() if isinstance(x, bytes) else x


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


async def open_client(url: str, *, timeout_s: float = 5.0) -> Client:
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
    except _DOWN as exc:
        await single.aclose()
        raise StoreUnavailable(f"Redis unavailable at {url}: {exc}") from exc
    if not info.get("cluster_enabled"):
        return single
    await single.aclose()
    cluster = RedisCluster.from_url(url, **options)
    await cluster.initialize()
    return cluster


class RedisStore:
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

    def __init__(
        self,
        client: Client,
        *,
        shards: int = 16,
        default_crawl_delay_s: float = 1.0,
        max_revisit_s: float = 30 * 86_400.0,
        lease_history: int = 200_000,
        initial_lambda0: float | None = None,
        prefix: str = "cs",
    ) -> None:
        self.client = client
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
        self._lam0 = LogMean()
        self._lam0_read_at = -math.inf

    @classmethod
    async def connect(cls, url: str, **options: Any) -> RedisStore:
        """Open a client for ``url`` and :meth:`prepare` the store.

        Raises
        ------
        StoreUnavailable
            If Redis cannot be reached.
        ValueError
            If the data was written with another shard count.
        """
        store = cls(await open_client(url), **options)
        try:
            await store.prepare()
        except BaseException:
            await store.close()
            raise
        return store

    @_unavailable
    async def prepare(self) -> None:
        """Register the scripts, record the shard count, seed λ₀.

        Raises
        ------
        ValueError
            If the data was written with another shard count.
        """
        await self._scripts.register(self.client)
        meta = self._global.meta
        await self.client.hsetnx(meta, "shards", str(self.shards))
        stored = int(await self.client.hget(meta, "shards") or 0)
        if stored != self.shards:
            raise ValueError(
                f"the data in Redis was written with {stored} shards, not {self.shards}: "
                "set CRAWLSCHED_SHARDS to match"
            )
        if self._initial is not None:
            await self.client.hsetnx(self._global.multiplier, "mean", repr(self._initial))

    # -- helpers ---------------------------------------------------------------------------
    def _shard(self, host: str) -> int:
        return shard_of(host, self.shards)

    def _call(self, script: str, shard: int, args: Sequence[Any]) -> Call:
        return Call(script, self._script_keys[shard], args)

    async def _run(self, calls: Sequence[Call]) -> list[Any]:
        return await self._scripts.run(self.client, calls) if calls else []

    async def _lambda0(self) -> LogMean:
        """The current λ₀ estimate, pending observations folded in first."""
        await self._flush()
        mean, count = await self.client.hmget(self._global.multiplier, ["mean", "count"])
        self._lam0 = LogMean(None if mean is None else float(mean), float(count or 0.0))
        self._lam0_read_at = time.monotonic()
        return self._lam0

    async def _recent_lambda0(self) -> LogMean:
        """λ₀ read at most ``_LAMBDA0_MAX_AGE_S`` ago (for reporting, not for decisions)."""
        if time.monotonic() - self._lam0_read_at > _LAMBDA0_MAX_AGE_S:
            return await self._lambda0()
        return self._lam0

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
    ) -> list[Any]:
        """Run ``script`` per shard over ``urls``: host, url key and ``extra[i]`` (if
        any) of each as arguments after ``head``, or, ``joined``, all of them in one
        space-separated argument (cheaper to send); the answers back in the order of
        ``urls``, each with its shard."""
        groups = self._by_shard(urls)
        calls = []
        for shard, items in groups.items():
            args: list[Any] = list(head)
            if joined:
                args.append(" ".join(f"{host} {ukey} {extra[i]}" for i, host, ukey in items))
            else:
                for i, host, ukey in items:
                    args += (host, ukey, extra[i]) if extra else (host, ukey)
            calls.append(self._call(script, shard, args))
        answers = await self._run(calls)
        out: list[Any] = [None] * len(urls)
        for (shard, items), answer in zip(groups.items(), answers, strict=True):
            for (i, _, _), a in zip(items, answer, strict=True):
                out[i] = (shard, a)
        return out

    # -- registration ------------------------------------------------------------------------
    @_unavailable
    async def upsert_urls(self, records: Sequence[UrlRecord], now: float) -> list[bool]:
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
        head = (repr(now), self._cap, repr(self._default_delay))
        answers = await self._per_url("upsert", [r.url for r in records], head, packed)
        return [bool(a) for _, a in answers]

    @_unavailable
    async def remove_urls(self, urls: Sequence[str]) -> int:
        groups = self._by_shard(urls)
        calls = [
            self._call("remove", shard, [self._history, *(x for _, h, k in items for x in (h, k))])
            for shard, items in groups.items()
        ]
        return sum(int(a) for a in await self._run(calls))

    # -- reads ---------------------------------------------------------------------------------
    @_unavailable
    async def get_urls(self, urls: Sequence[str]) -> list[UrlState | None]:
        groups = self._by_shard(urls)
        calls = [
            self._call("get", shard, [" ".join(f"{host} {ukey}" for _, host, ukey in items)])
            for shard, items in groups.items()
        ]
        out: list[UrlState | None] = [None] * len(urls)
        for (shard, items), flat in zip(groups.items(), await self._run(calls), strict=True):
            for k, (i, host, ukey) in enumerate(items):
                blob = flat[2 * k]
                if blob is not None:
                    out[i] = unpack_url(blob, host, ukey, shard, est=flat[2 * k + 1])
        return out

    @_unavailable
    async def get_host(self, host: str, now: float) -> HostState | None:
        await self._flush()
        (answer,) = await self._run([self._call("host", self._shard(host), (host, repr(now)))])
        if answer is None:
            return None
        blob, urls, queued, due, head = answer
        lam0 = (await self._lambda0()).value
        return unpack_host(
            blob, host, urls=urls, queued=queued, due=due, next_due=head, lambda0=lam0
        )

    @_unavailable
    async def host_urls(self, host: str) -> list[UrlState]:
        shard = self._shard(host)
        ((flat, est_flat),) = await self._run([self._call("host_urls", shard, (host,))])
        est = dict(zip(est_flat[::2], est_flat[1::2], strict=True))
        states = [
            unpack_url(flat[i + 1], host, _s(flat[i]), shard, est=est.get(flat[i]))
            for i in range(0, len(flat), 2)
        ]
        return sorted(states, key=lambda s: s.url)

    @_unavailable
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

    # -- rescoring -------------------------------------------------------------------------------
    async def set_params(
        self, host: str, params: Mapping[str, ScoredParams], scored_lambda: float
    ) -> None:
        await self.set_params_many([(host, params, scored_lambda)])

    @_unavailable
    async def set_params_many(
        self, updates: Sequence[tuple[str, Mapping[str, ScoredParams], float]]
    ) -> None:
        words: dict[int, list[str]] = defaultdict(list)
        packed: dict[int, list[bytes]] = defaultdict(list)
        for host, params, scored_lambda in updates:
            keys = [url_key(url, host) for url in params if host_of(url) == host]
            if not keys:
                continue
            shard = self._shard(host)
            words[shard] += (host, repr(scored_lambda), str(len(keys)), *keys)
            packed[shard] += (
                SCORED.pack(
                    p.weight, p.change_rate, p.recall, p.false_signal_rate,
                    p.signal_time_equivalent_s, p.threshold_s,
                )
                for url, p in params.items()
                if host_of(url) == host
            )  # fmt: skip
        calls = [
            self._call("set_params", shard, (self._cap, " ".join(w), b"".join(packed[shard])))
            for shard, w in words.items()
        ]
        if calls:
            await self._run(calls)  # one call per shard, one pipeline (per node)

    @_unavailable
    async def set_thresholds(
        self, host: str, thresholds_s: Mapping[str, float], scored_lambda: float
    ) -> None:
        args: list[Any] = [host, repr(scored_lambda), self._cap]
        for url, threshold in thresholds_s.items():
            if host_of(url) == host:
                args += (url_key(url, host), repr(threshold))
        await self._run([self._call("set_thresholds", self._shard(host), args)])

    @_unavailable
    async def hosts_needing_rescore(
        self, tolerance: float, max_urls: int
    ) -> list[tuple[str, float]]:
        lam0 = await self._lambda0()
        head = ("" if lam0.log_mean is None else repr(lam0.log_mean), repr(math.log1p(tolerance)))
        answers = await self._run([self._call("stale_hosts", n, head) for n in range(self.shards)])
        stale = [
            (float(flat[i + 1]), _s(flat[i]), float(flat[i + 2]), int(flat[i + 3]))
            for flat in answers
            for i in range(0, len(flat), 4)
        ]
        stale.sort(key=lambda x: (x[0], x[1], x[2]), reverse=True)
        chosen: list[tuple[str, float]] = []
        total = 0
        for _, name, target, urls in stale:
            if chosen and total + urls > max_urls:
                break
            chosen.append((name, target))
            total += urls
        return chosen

    # -- events ------------------------------------------------------------------------------------
    @_unavailable
    async def record_signals(
        self, events: Sequence[SignalEvent], discard_within_s: float, decay_s: float
    ) -> list[EventStatus]:
        head = (repr(discard_within_s), self._cap, _decay(decay_s))
        times = [repr(e.time) for e in events]
        answers = await self._per_url("signals", [e.url for e in events], head, times, joined=True)
        return [_EVENT[a] for _, a in answers]

    @_unavailable
    async def record_clicks(
        self, events: Sequence[ClickEvent], decay_s: float
    ) -> list[EventStatus]:
        head = (_decay(decay_s),)
        times = [repr(e.time) for e in events]
        answers = await self._per_url("clicks", [e.url for e in events], head, times, joined=True)
        return [_EVENT[a] for _, a in answers]

    # -- leases ----------------------------------------------------------------------------------
    @_unavailable
    async def lease_next(
        self, now: float, n: int, lease_ttl_s: float, dispatch_ahead: bool
    ) -> list[LeaseGrant]:
        """Share ``n`` over the shards as one sorted set of all hosts would (most overdue
        first; when fewer than ``n`` are due, then the open hosts due soonest), from the
        readiness each shard lists (reclaiming expired leases first), and lease per
        shard.  A shard that gives fewer than its share (other processes got there
        first) leaves the rest to another round, three at most."""
        now_arg, nonce = repr(now), secrets.token_hex(4)
        grants: list[tuple[bool, float, str, LeaseGrant]] = []
        ttl = repr(lease_ttl_s)
        for _ in range(3):
            want = n - len(grants)
            plan = await self._plan(now_arg, want, dispatch_ahead)
            if not plan:
                break
            answers = await self._run(
                [
                    self._call("lease", s, (now_arg, kd, ka, ttl, nonce, self._history, _SCAN))
                    for s, kd, ka in plan
                ]
            )
            got = len(grants)
            lam0 = (await self._recent_lambda0()).value
            for (shard, _, _), flat in zip(plan, answers, strict=True):
                grants += self._grants(shard, flat, nonce, now, now + lease_ttl_s, lam0)
            if len(grants) in (got, n):
                break
        grants.sort(key=lambda g: g[:3])
        return [g[3] for g in grants]

    async def _plan(self, now_arg: str, want: int, ahead: bool) -> list[tuple[int, int, int]]:
        """(shard, due hosts, not-yet-due hosts) to lease from.  Each shard lists about
        twice its fair share; when a list that was cut short is used up, ask again
        for full lists (the merge stays exact)."""
        scan = _SCAN if ahead else 0
        limit = min(want, math.ceil(2 * want / self.shards) + 8)
        while True:
            answers = await self._run(
                [
                    self._call("ready", s, (now_arg, self._history, want, scan, limit))
                    for s in range(self.shards)
                ]
            )
            due = [0] * self.shards
            for *_, s in sorted(_ready(answers, 0))[:want]:
                due[s] += 1
            later = [0] * self.shards
            if ahead:
                for *_, s in sorted(_ready(answers, 1))[: want - sum(due)]:
                    later[s] += 1
            cut = any(
                (due[s] == limit and len(a[0]) == 2 * limit)
                or (later[s] == limit and len(a[1]) == 2 * limit)
                for s, a in enumerate(answers)
            )
            if limit >= want or not cut:
                break
            limit = want
        return [(s, due[s], later[s]) for s in range(self.shards) if due[s] + later[s]]

    @staticmethod
    def _grants(
        shard: int, flat: list[Any], nonce: str, now: float, deadline: float, lam0: float | None
    ) -> list[tuple[bool, float, str, LeaseGrant]]:
        """Decode ``lease.lua``'s answer; each grant keyed for the merge (not due first,
        then readiness, then host: the order one sorted set of all hosts would give)."""
        out = []
        for i in range(0, len(flat), 7):
            host, ukey = _s(flat[i]), _s(flat[i + 1])
            seq, gated, ready = int(flat[i + 3]), bool(flat[i + 4]), float(flat[i + 5])
            lease_id = format_lease_id(shard, seq, nonce)
            state = unpack_url(flat[i + 2], host, ukey, shard, (lease_id, deadline))
            mean = LogMean(float(flat[i + 6]), 1.0) if flat[i + 6] else LogMean()
            threshold = (lam0 or 0.0) + host_multiplier(lam0, mean)
            grant = LeaseGrant(lease_id, deadline, state, gated, threshold)
            out.append((ready > now, ready, host, grant))
        return out

    @_unavailable
    async def lease_status(self, lease_ids: Sequence[str]) -> list[tuple[LeaseStatus, str | None]]:
        parsed = [parse_lease_id(x, self.shards) for x in lease_ids]
        groups: dict[int, list[tuple[int, int, str]]] = defaultdict(list)
        for i, p in enumerate(parsed):
            if p is not None:
                groups[p[0]].append((i, p[1], p[2]))
        calls = [
            self._call("lease_status", shard, [x for _, seq, nonce in items for x in (seq, nonce)])
            for shard, items in groups.items()
        ]
        out: list[tuple[LeaseStatus, str | None]] = [(LeaseStatus.UNKNOWN, None)] * len(lease_ids)
        for items, flat in zip(groups.values(), await self._run(calls), strict=True):
            for j, (i, _, _) in enumerate(items):
                status = int(flat[3 * j])
                if status in _LEASE:
                    host, ukey = _s(flat[3 * j + 1]), _s(flat[3 * j + 2])
                    out[i] = (_LEASE[status], expand_url(ukey, host))
        return out

    @_unavailable
    async def settle(
        self,
        outcomes: Sequence[CrawlOutcome],
        retry_delay_s: float,
        discard_within_s: float,
        outcome_window: int,
    ) -> list[EventStatus]:
        head = [
            repr(retry_delay_s), repr(discard_within_s), self._cap, self._history,
            int(outcome_window),
        ]  # fmt: skip
        groups: dict[int, list[tuple[int, str]]] = defaultdict(list)
        out = [EventStatus.STALE] * len(outcomes)
        for i, o in enumerate(outcomes):
            p = parse_lease_id(o.lease_id, self.shards)
            host = host_of(o.url)
            if p is None or p[0] != self._shard(host):
                continue  # not a lease of this URL's shard: stale
            fields = (url_key(o.url, host), p[1], p[2], repr(o.fetched_at), int(o.ok))
            changed = 2 if o.changed is None else int(o.changed)  # 2: unknown
            groups[p[0]].append((i, " ".join(map(str, (host, *fields, changed)))))
        calls = [
            self._call("settle", shard, [*head, " ".join(line for _, line in items)])
            for shard, items in groups.items()
        ]
        for items, codes in zip(groups.values(), await self._run(calls), strict=True):
            for (i, _), code in zip(items, codes, strict=True):
                out[i] = _RESULT[code]
        return out

    # -- estimator groups ----------------------------------------------------------------------
    @_unavailable
    async def get_groups(self, keys: Sequence[str]) -> list[tuple[float, ...] | None]:
        if not keys:
            return []
        blobs = await self.client.hmget(self._global.groups, list(keys))
        return [unpack_group(cast(bytes | None, b)) for b in blobs]

    @_unavailable
    async def put_groups(self, groups: Mapping[str, Sequence[float]]) -> None:
        if groups:
            packed = {key: pack_group(values) for key, values in groups.items()}
            await self.client.hset(self._global.groups, mapping=packed)  # type: ignore[arg-type]

    # -- multipliers -----------------------------------------------------------------------------
    @_unavailable
    async def observe_dispatch(
        self, observations: Sequence[DispatchObservation], config: TrackerConfig
    ) -> None:
        """Buffer the observations; fold them in (atomically, by script) once
        ``_FLUSH_OBSERVATIONS`` are pending or the oldest is ``_FLUSH_AFTER_S`` old, and
        before any read of the estimates.  A crash loses at most that buffer of
        estimator input, never an event."""
        if not self._pending:
            self._pending_since = time.monotonic()
        self._pending.extend(observations)
        self._pending_config = config
        if (
            len(self._pending) >= _FLUSH_OBSERVATIONS
            or time.monotonic() - self._pending_since >= _FLUSH_AFTER_S
        ):
            await self._flush()

    async def _flush(self) -> None:
        """Fold the pending observations into λ₀ (global script), then λ_h (per shard)."""
        observations, self._pending = self._pending, []
        if not observations:
            return
        config = self._pending_config
        window, clip = repr(float(config.window)), repr(float(config.clip))
        free = [
            repr(o.log_value) for o in observations if not o.gated and math.isfinite(o.log_value)
        ]
        if free:
            call = Call("lambda0", (self._global.multiplier,), (window, clip, *free))
            ((mean_s, count_s),) = await self._run([call])
            self._lam0 = LogMean(float(mean_s) if mean_s else None, float(count_s))
            self._lam0_read_at = time.monotonic()
            log_lam0 = self._lam0.log_mean
        else:
            mean, _ = await self.client.hmget(self._global.multiplier, ["mean", "count"])
            log_lam0 = None if mean is None else float(mean)
        groups: dict[int, list[str]] = defaultdict(list)
        for o in observations:
            x = o.log_value if o.gated else log_lam0
            if x is not None and math.isfinite(x):
                groups[self._shard(o.host)] += (o.host, repr(x))
        await self._run(
            [self._call("observe", s, (window, clip, *args)) for s, args in groups.items()]
        )

    # -- operations --------------------------------------------------------------------------------
    @_unavailable
    async def stats(self, now: float, top_hosts: int) -> StoreStats:
        await self._flush()
        head = (repr(now), self._history, top_hosts)
        answers = await self._run([self._call("stats", n, head) for n in range(self.shards)])
        lam0 = await self._lambda0()
        top: list[HostState] = []
        for *_, flat in answers:
            for i in range(0, len(flat), 6):
                host, blob, urls, queued, due, head_due = flat[i : i + 6]
                top.append(
                    unpack_host(
                        blob,
                        _s(host),
                        urls=urls,
                        queued=queued,
                        due=due,
                        next_due=head_due,
                        lambda0=lam0.value,
                    )  # fmt: skip
                )
        top.sort(key=lambda s: s.lambda_h, reverse=True)
        return StoreStats(
            urls=sum(int(a[0]) for a in answers),
            hosts=sum(int(a[1]) for a in answers),
            due_backlog=sum(int(a[2]) for a in answers),
            leases_active=sum(int(a[3]) for a in answers),
            leases_expired_total=sum(int(a[4]) for a in answers),
            lambda0=lam0.value,
            lambda0_observations=lam0.count,
            top_hosts=tuple(top[:top_hosts]),
        )

    @_unavailable
    async def clock_epoch(self, proposal: float) -> float:
        key = self._global.clock_epoch
        await self.client.set(key, repr(proposal), nx=True)
        return float(await self.client.get(key) or proposal)

    @_unavailable
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
        try:
            await self._flush()
        except (RedisError, StoreUnavailable):
            pass  # Redis is gone: the buffered estimator input goes with it
        await self.client.aclose()
