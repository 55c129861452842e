"""The Redis store's dispatch: leases across shards, their status, and settling them."""

from __future__ import annotations

import math
import secrets
import struct
import time
import zlib
from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisClusterException
from scheduler_core.multipliers import LogMean
from service.clock import TimeSource
from service.store.base import (
    RETIRE_CODES,
    CrawlOutcome,
    DispatchObservation,
    EventStatus,
    IdempotencyKey,
    LeaseInfo,
    Leases,
    LeaseStatus,
)
from service.store.coalesce import Answered, LeaseCoalescer
from service.store.columns import LeaseColumns, grants_of
from service.store.redis.base import clock_arg, once_ttl_arg
from service.store.redis.client import text, unavailable
from service.store.redis.keys import expand_url, url_key
from service.store.redis.multipliers import RedisMultipliers
from service.store.redis.records import GRANT, format_lease_id, parse_lease_id
from service.store.redis.scripts import Call, Client
from service.urls import host_of

__all__ = ["RedisDispatch"]

_RESULT = {
    0: EventStatus.ACCEPTED, 2: EventStatus.STALE, 3: EventStatus.DUPLICATE,
    4: EventStatus.UNKNOWN_LEASE,
}  # fmt: skip
_LEASE = {1: LeaseStatus.ACTIVE, 2: LeaseStatus.EXPIRED, 3: LeaseStatus.SETTLED}
#: Not-yet-ready hosts a lease call scans per shard for an open politeness gate.
_SCAN = 4096


def _opt_arg(x: float | None) -> str:
    """An optional number as settle.lua reads it ("-": none)."""
    return "-" if x is None else repr(float(x))


_NONE = np.empty(0)

#: One dispatch observation as lease.lua reads it (its OBS): shard index in the call
#: (1-based), gated (0/1), ln V of a gated one (0 for an ungated one), host length; the
#: host's bytes follow.
_OBS = struct.Struct("<HBdH")


def _pack_observations(
    observations: Sequence[DispatchObservation], shards: Sequence[int], total: int
) -> bytes:
    """The observations lease.lua folds into λ_h, packed (:data:`_OBS`, then the host), in
    their order; a gated one of no finite value (V = 0) is left out.  ``shards``: the
    call's shards; ``total``: the store's shard count."""
    index = {s: i + 1 for i, s in enumerate(shards)}
    pack = _OBS.pack
    parts: list[bytes] = []
    for o in observations:
        if o.host_observed or (o.gated and not math.isfinite(o.log_value)):
            continue
        host = o.host.encode()
        x = o.log_value if o.gated else 0.0
        parts += (pack(index[zlib.crc32(host) % total], o.gated, x, len(host)), host)
    return b"".join(parts)


def _listed(plans: Sequence[Any], part: int) -> Iterator[tuple[float, bytes, int]]:
    """(readiness, host, node) of the hosts the nodes' plans listed in ``part``."""
    for node, plan in enumerate(plans):
        flat = plan[part]
        for i in range(0, len(flat), 3):
            yield float(flat[i]), flat[i + 1], node


def _split_names(
    blob: bytes, host_len: Sequence[int], key_len: Sequence[int]
) -> tuple[list[str], list[str]]:
    """The hosts and URL keys of a lease answer's names (each grant's host, then its URL
    key, concatenated; lengths in bytes).  ASCII names (the usual) are sliced from one
    decoded string."""
    hosts: list[str] = []
    keys: list[str] = []
    pos = 0
    if blob.isascii():
        text = blob.decode("ascii")
        for h, k in zip(host_len, key_len, strict=True):
            hosts.append(text[pos : pos + h])
            keys.append(text[pos + h : pos + h + k])
            pos += h + k
    else:
        for h, k in zip(host_len, key_len, strict=True):
            hosts.append(blob[pos : pos + h].decode())
            keys.append(blob[pos + h : pos + h + k].decode())
            pos += h + k
    return hosts, keys


class _Answer(NamedTuple):
    """One node's lease answer, decoded."""

    now: float
    deadline: float
    lam0: LogMean | None  # λ₀ as the node read it (None: not read there)
    rec: npt.NDArray[Any]  # GRANT records
    names: bytes  # hosts and URL keys, concatenated
    shards: Sequence[int]  # shard of each shard index (1-based) of the call
    nonce: str


class RedisDispatch(RedisMultipliers):
    """Leasing the most valuable due URLs over all shards, and settling the leases."""

    def __init__(self, client: Client, **options: Any) -> None:
        super().__init__(client, **options)
        self._coalescer = LeaseCoalescer(self._lease_columns)
        self._joined_keys: dict[tuple[int, ...], bytes] = {}

    def _nodes(self) -> list[tuple[Any, list[int]]]:
        """The shards grouped by the node that holds them: (node, shards); a single
        Redis is one group (node None)."""
        if not isinstance(self.client, RedisCluster):
            return [(None, list(range(self.shards)))]
        groups: dict[str, tuple[Any, list[int]]] = {}
        for s in range(self.shards):
            node = self.client.get_node_from_key(self._keys[s].hosts)
            if node is None:  # pragma: no cover - the slot table lists every slot
                raise RedisClusterException(f"no node holds shard {s}")
            groups.setdefault(node.name, (node, []))[1].append(s)
        return list(groups.values())

    def _lease_call(
        self,
        node: Any,
        shards: Sequence[int],
        head: tuple[str, str, int, int, str, str],
        observations: Sequence[DispatchObservation] | None = None,
        only: str = "",
    ) -> Call:
        """``lease.lua`` over ``shards`` of ``node``; with ``observations`` (a single
        node), the multiplier key too, and the buffered dispatch observations; with
        ``only``, from that host alone (``shards`` is its shard)."""
        clock, mode, cap, ahead, ttl, nonce = head
        # the first shard's keys declared (a cluster routes by them), the others' tags in
        # one argument: one argument per key would cost redis-py ~1 µs each to encode
        keys: list[bytes | str] = list(self._script_keys[shards[0]])
        args: list[bytes | str | int] = [
            clock, mode, cap, ahead, ttl, nonce, self._history, _SCAN, len(shards),
            len(shards) - 1, only, self._shard_tags(shards),
        ]  # fmt: skip
        if observations is not None:
            keys.append(self._global.multiplier)
            config = self._pending_config
            free = [o.log_value for o in observations if not o.gated and math.isfinite(o.log_value)]
            args += [
                repr(float(config.window)), repr(float(config.clip)),
                np.array(free, dtype="<f8").tobytes(),
                _pack_observations(observations, shards, self.shards), self._cap,
            ]  # fmt: skip
        return Call("lease", keys, args, node)

    def _shard_tags(self, shards: Sequence[int]) -> bytes:
        """The key tags of ``shards``, one line each (no key name holds a line break:
        keys.py); lease.lua builds the undeclared shards' keys from them.  Cached per
        shard list."""
        key = tuple(shards)
        got = self._joined_keys.get(key)
        if got is None:
            got = "\n".join(self._keys[s].tag for s in shards).encode()
            self._joined_keys[key] = got
        return got

    @unavailable
    async def lease_next(
        self, now: TimeSource, n: int, lease_ttl_s: float, dispatch_ahead: bool
    ) -> Leases:
        cols = await self.lease_columns(now, n, lease_ttl_s, dispatch_ahead)
        return Leases(cols.now, grants_of(cols))

    @unavailable
    async def lease_columns(
        self, now: TimeSource, n: int, lease_ttl_s: float, dispatch_ahead: bool
    ) -> LeaseColumns:
        """:meth:`_lease_columns`; calls that arrive while one is in flight go out
        together as the next (:class:`~service.store.coalesce.LeaseCoalescer`)."""
        return await self._coalescer(now, n, lease_ttl_s, dispatch_ahead)

    @unavailable
    async def lease_host(
        self, now: TimeSource, host: str, lease_ttl_s: float, dispatch_ahead: bool
    ) -> LeaseColumns:
        """One ``lease.lua`` call on the host's shard alone, from that host alone."""
        clock, nonce = clock_arg(now), secrets.token_hex(4)
        shard = self._shard(host)
        node = None
        if isinstance(self.client, RedisCluster):
            node = self.client.get_node_from_key(self._keys[shard].hosts)
        head = (clock, "lease", 1, 1 if dispatch_ahead else 0, repr(lease_ttl_s), nonce)
        (raw,) = await self._run([self._lease_call(node, [shard], head, only=host)])
        answer = self._decode(raw, [shard], nonce)
        lam0 = (await self._recent_lambda0()).value
        return self._columns([answer], answer.now, lam0)

    async def _lease_columns(
        self, now: TimeSource, n: int, lease_ttl_s: float, dispatch_ahead: bool
    ) -> Answered:
        """One ``lease.lua`` call per node, each over all the shards the node holds,
        merging their ready sets itself as one sorted set of all hosts would (most
        overdue first; when fewer than ``n`` are due, then the open hosts due soonest).
        A single Redis decides in that one call, which also folds in the buffered
        dispatch observations.  Several nodes (Redis Cluster) first list what each would
        give (mode ``plan``), share ``n`` by the same merge, then lease; a node that
        gives fewer than its share (other processes got there first) leaves the rest to
        another round, three at most.  Every script reads ``now`` itself (Redis ``TIME``
        through the clock's map); the answer carries the latest reading.  A single node's
        answer is decoded when the caller asks (:class:`~service.store.coalesce.Answered`)."""
        clock, nonce = clock_arg(now), secrets.token_hex(4)
        ttl = repr(lease_ttl_s)
        nodes = self._nodes()
        if len(nodes) == 1:
            node, shards = nodes[0]
            pending, self._pending = self._pending, []
            head = (clock, "lease", n, n if dispatch_ahead else 0, ttl, nonce)
            try:
                (raw,) = await self._run([self._lease_call(node, shards, head, pending)])
            except BaseException:
                self._pending[:0] = pending
                raise
            answer = self._decode(raw, shards, nonce)
            if answer.lam0 is not None:
                self._lam0, self._lam0_read_at = answer.lam0, time.monotonic()
            lam0 = None if answer.lam0 is None else answer.lam0.value
            return Answered(len(answer.rec), lambda: self._columns([answer], answer.now, lam0))
        cols = await self._lease_nodes(nodes, clock, nonce, n, ttl, dispatch_ahead)
        return Answered(len(cols.urls), lambda: cols)

    async def _lease_nodes(
        self,
        nodes: list[tuple[Any, list[int]]],
        clock: str,
        nonce: str,
        n: int,
        ttl: str,
        ahead: bool,
    ) -> LeaseColumns:
        """Plan over the nodes, then lease from each its share (up to three rounds)."""
        answers: list[_Answer] = []
        got, latest = 0, -math.inf
        for _ in range(3):
            want = n - got
            plans = await self._run(
                [
                    self._lease_call(node, shards, (clock, "plan", want, want if ahead else 0,
                                                     ttl, nonce))
                    for node, shards in nodes
                ]
            )  # fmt: skip
            latest = max([latest, *(float(p[0]) for p in plans)])
            due = sorted(_listed(plans, 1))[:want]
            later = sorted(_listed(plans, 2))[: want - len(due)] if ahead else []
            k_due, k_ahead = [0] * len(nodes), [0] * len(nodes)
            for *_, i in due:
                k_due[i] += 1
            for *_, i in later:
                k_ahead[i] += 1
            todo = [i for i in range(len(nodes)) if k_due[i] + k_ahead[i]]
            if not todo:
                break
            raw = await self._run(
                [
                    self._lease_call(
                        nodes[i][0],
                        nodes[i][1],
                        (clock, "lease", k_due[i] + k_ahead[i], k_ahead[i], ttl, nonce),
                    )  # fmt: skip
                    for i in todo
                ]
            )
            before = got
            for i, r in zip(todo, raw, strict=True):
                a = self._decode(r, nodes[i][1], nonce)
                latest = max(latest, a.now)
                answers.append(a)
                got += len(a.rec)
            if got in (before, n):
                break
        lam0 = (await self._recent_lambda0()).value
        return self._columns(answers, latest, lam0)

    @staticmethod
    def _decode(raw: Sequence[Any], shards: Sequence[int], nonce: str) -> _Answer:
        """``lease.lua``'s answer (mode lease) as arrays."""
        now_s, deadline_s, mean_s, count_s, blob, names = raw
        rec = np.frombuffer(blob, dtype=GRANT) if blob else np.empty(0, dtype=GRANT)
        lam0 = None
        if count_s:
            lam0 = LogMean(float(mean_s) if mean_s else None, float(count_s))
        return _Answer(float(now_s), float(deadline_s), lam0, rec, bytes(names), shards, nonce)

    def _columns(self, answers: Sequence[_Answer], now: float, lam0: float | None) -> LeaseColumns:
        """The grants of ``answers`` as columns, in the order one sorted set of all hosts
        would give (not due first, then readiness, then host); one answer is in that
        order already."""
        lease_ids: list[str] = []
        urls: list[str] = []
        hosts: list[str] = []
        for a in answers:
            shards, nonce = a.shards, a.nonce
            a_hosts, a_keys = _split_names(
                a.names, a.rec["host_len"].tolist(), a.rec["key_len"].tolist()
            )
            hosts += a_hosts
            urls += map(expand_url, a_keys, a_hosts)
            index, seqs = a.rec["shard_index"].tolist(), a.rec["seq"].tolist()
            lease_ids += [
                format_lease_id(shards[i - 1], q, nonce) for i, q in zip(index, seqs, strict=True)
            ]
        rec = (
            answers[0].rec
            if len(answers) == 1
            else np.concatenate([a.rec for a in answers])
            if answers
            else np.empty(0, GRANT)
        )
        deadline = np.concatenate([np.full(len(a.rec), a.deadline) for a in answers] or [_NONE])
        # λ₀ + λ_h, λ_h = λ₀ · max(0, exp(host log mean) − 1) (0 without either estimate)
        mean = rec["host_mean"].astype(np.float64)
        if lam0 is None:
            threshold = np.zeros(len(rec))
        else:
            with np.errstate(invalid="ignore"):
                lam_h = lam0 * np.maximum(0.0, np.expm1(mean))
            threshold = lam0 + np.where(np.isnan(mean), 0.0, lam_h)
        # lease.lua's gated: 0 no, 1 yes, 2 no and folded into its host as leased
        gated, host_observed = rec["gated"] == 1, rec["gated"] == 2
        cols = LeaseColumns(
            now, lease_ids, urls, hosts, deadline, gated, threshold, rec, host_observed
        )
        if len(answers) <= 1:
            return cols
        nows = np.concatenate([np.full(len(a.rec), a.now) for a in answers])
        ready = rec["ready"].tolist()
        keys = list(zip((rec["ready"] > nows).tolist(), ready, hosts, strict=True))
        order = sorted(range(len(keys)), key=keys.__getitem__)
        return LeaseColumns(
            now, [lease_ids[i] for i in order], [urls[i] for i in order],
            [hosts[i] for i in order], cols.deadline[order], cols.gated[order],
            cols.threshold[order], rec[order], host_observed[order],
        )  # fmt: skip

    @unavailable
    async def lease_status(self, lease_ids: Sequence[str]) -> list[LeaseInfo]:
        parsed = [parse_lease_id(x, self.shards) for x in lease_ids]
        groups: dict[int, list[tuple[int, int, str]]] = defaultdict(list)
        for i, p in enumerate(parsed):
            if p is not None:
                groups[p[0]].append((i, p[1], p[2]))
        calls = [
            self._call("lease_status", shard, [" ".join(f"{q} {nonce}" for _, q, nonce in items)])
            for shard, items in groups.items()
        ]
        out = [LeaseInfo(LeaseStatus.UNKNOWN, None, None)] * len(lease_ids)
        for items, flat in zip(groups.values(), await self._run(calls), strict=True):
            for j, (i, _, _) in enumerate(items):
                status, host, ukey, issued = flat[4 * j : 4 * j + 4]
                if int(status) in _LEASE:
                    url = expand_url(text(ukey), text(host))
                    out[i] = LeaseInfo(_LEASE[int(status)], url, float(issued) if issued else None)
        return out

    def settle_keys(self, shard: int, once: IdempotencyKey | None) -> tuple[str | bytes, ...]:
        """KEYS of ``settle.lua`` in ``shard``: the shard keys, its event stream, and
        with ``once`` the batch's record."""
        keys = self._keys[shard]
        names: tuple[str | bytes, ...] = (*self._script_keys[shard], keys.events)
        return names if once is None else (*names, keys.once(once.digest))

    @unavailable
    async def settle(
        self,
        outcomes: Sequence[CrawlOutcome],
        retry_delay_s: float,
        discard_within_s: float,
        outcome_window: int,
        once: IdempotencyKey | None = None,
    ) -> list[EventStatus]:
        """Settle each result in the shard of its lease (which finds a lease of another
        URL, in its own shard or not, stale); a lease id this store never spelled is
        unknown.  ``settle.lua`` appends the accepted results' URLs to the shard's event
        stream in the same step (for the fold to re-estimate)."""
        c = self._controls
        head: list[str | int] = [
            repr(retry_delay_s), repr(discard_within_s), self._cap, self._history,
            int(outcome_window),
        ]  # fmt: skip
        tail: list[str | int] = [
            repr(float(c.backoff_base_s)), repr(float(c.max_block_s)),
            repr(float(c.backoff_jitter)), int(c.gone_after),
        ]  # fmt: skip
        groups: dict[int, list[tuple[int, str]]] = defaultdict(list)
        out = [EventStatus.UNKNOWN_LEASE] * len(outcomes)
        for i, o in enumerate(outcomes):
            p = parse_lease_id(o.lease_id, self.shards)
            if p is None:
                continue
            host = host_of(o.url)
            fields = (url_key(o.url, host), p[1], p[2], repr(o.fetched_at), int(o.ok))
            changed = 2 if o.changed is None else int(o.changed)  # 2: unknown
            controls = (
                int(o.status), _opt_arg(o.retry_after_s), _opt_arg(o.refetch_after),
                0 if o.retire is None else RETIRE_CODES[o.retire],
            )  # fmt: skip
            groups[p[0]].append((i, " ".join(map(str, (host, *fields, changed, *controls)))))
        ttl = once_ttl_arg(once)
        calls = [
            Call(
                "settle",
                self.settle_keys(shard, once),
                [*head, " ".join(x for _, x in items), ttl, *tail],
            )
            for shard, items in groups.items()
        ]
        for items, codes in zip(groups.values(), await self._run(calls), strict=True):
            for (i, _), code in zip(items, codes, strict=True):
                out[i] = _RESULT[code]
        return out
