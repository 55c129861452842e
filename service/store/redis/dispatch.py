"""The Redis store's dispatch: leases across shards, their status, and settling them."""

from __future__ import annotations

import math
import secrets
from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

from scheduler_core.multipliers import LogMean, host_multiplier
from service.clock import TimeSource
from service.store.base import (
    CrawlOutcome,
    EventStatus,
    IdempotencyKey,
    LeaseGrant,
    LeaseInfo,
    Leases,
    LeaseStatus,
)
from service.store.redis.base import clock_arg, once_ttl_arg
from service.store.redis.client import text, unavailable
from service.store.redis.keys import expand_url, url_key
from service.store.redis.multipliers import RedisMultipliers
from service.store.redis.records import format_lease_id, parse_lease_id, unpack_url
from service.urls import host_of

__all__ = ["RedisDispatch"]

_RESULT = {
    0: EventStatus.ACCEPTED, 2: EventStatus.STALE, 3: EventStatus.DUPLICATE,
    4: EventStatus.UNKNOWN_LEASE,
}  # fmt: skip
_LEASE = {1: LeaseStatus.ACTIVE, 2: LeaseStatus.EXPIRED, 3: LeaseStatus.SETTLED}
#: Not-yet-ready hosts a lease call scans per shard for an open politeness gate.
_SCAN = 4096


def _ready(answers: Sequence[Any], part: int) -> Iterator[tuple[float, bytes, int]]:
    """(readiness, host, shard) of the hosts ``ready.lua`` listed in ``part``."""
    for shard, answer in enumerate(answers):
        flat = answer[part]
        for i in range(0, len(flat), 2):
            yield float(flat[i + 1]), flat[i], shard


class RedisDispatch(RedisMultipliers):
    """Leasing the most valuable due URLs over all shards, and settling the leases."""

    @unavailable
    async def lease_next(
        self, now: TimeSource, n: int, lease_ttl_s: float, dispatch_ahead: bool
    ) -> Leases:
        """Share ``n`` over the shards as one sorted set of all hosts would (most overdue
        first; when fewer than ``n`` are due, then the open hosts due soonest), from the
        readiness each shard lists (reclaiming expired leases first), and lease per
        shard.  A shard that gives fewer than its share (other processes got there
        first) leaves the rest to another round, three at most.  Every script reads
        ``now`` itself (Redis ``TIME`` through the clock's map); the answer carries the
        latest reading."""
        clock, nonce = clock_arg(now), secrets.token_hex(4)
        grants: list[tuple[bool, float, str, LeaseGrant]] = []
        ttl = repr(lease_ttl_s)
        latest = -math.inf
        for _ in range(3):
            want = n - len(grants)
            plan, read_at = await self._plan(clock, want, dispatch_ahead)
            latest = max(latest, read_at)
            if not plan:
                break
            answers = await self._run(
                [
                    self._call("lease", s, (clock, kd, ka, ttl, nonce, self._history, _SCAN))
                    for s, kd, ka in plan
                ]
            )
            got = len(grants)
            lam0 = (await self._recent_lambda0()).value
            for (shard, _, _), (read, deadline, flat) in zip(plan, answers, strict=True):
                latest = max(latest, float(read))
                grants += self._grants(shard, flat, nonce, float(read), float(deadline), lam0)
            if len(grants) in (got, n):
                break
        grants.sort(key=lambda g: g[:3])
        return Leases(latest, [g[3] for g in grants])

    async def _plan(
        self, clock: str, want: int, ahead: bool
    ) -> tuple[list[tuple[int, int, int]], float]:
        """(shard, due hosts, not-yet-due hosts) to lease from, and the latest time the
        shards read.  Each shard lists about twice its fair share; when a list that was
        cut short is used up, ask again for full lists (the merge stays exact)."""
        scan = _SCAN if ahead else 0
        limit = min(want, math.ceil(2 * want / self.shards) + 8)
        while True:
            answers = await self._run(
                [
                    self._call("ready", s, (clock, self._history, want, scan, limit))
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
        read_at = max(float(a[2]) for a in answers)
        return [(s, due[s], later[s]) for s in range(self.shards) if due[s] + later[s]], read_at

    @staticmethod
    def _grants(
        shard: int, flat: list[Any], nonce: str, now: float, deadline: float, lam0: float | None
    ) -> list[tuple[bool, float, str, LeaseGrant]]:
        """Decode ``lease.lua``'s answer; each grant keyed for the merge (not due first,
        then readiness, then host: the order one sorted set of all hosts would give)."""
        out = []
        for i in range(0, len(flat), 7):
            host, ukey = text(flat[i]), text(flat[i + 1])
            seq, gated, ready = int(flat[i + 3]), bool(flat[i + 4]), float(flat[i + 5])
            lease_id = format_lease_id(shard, seq, nonce)
            state = unpack_url(flat[i + 2], host, ukey, shard, (lease_id, deadline))
            mean = LogMean(float(flat[i + 6]), 1.0) if flat[i + 6] else LogMean()
            threshold = (lam0 or 0.0) + host_multiplier(lam0, mean)
            grant = LeaseGrant(lease_id, deadline, state, gated, threshold)
            out.append((ready > now, ready, host, grant))
        return out

    @unavailable
    async def lease_status(self, lease_ids: Sequence[str]) -> list[LeaseInfo]:
        parsed = [parse_lease_id(x, self.shards) for x in lease_ids]
        groups: dict[int, list[tuple[int, int, str]]] = defaultdict(list)
        for i, p in enumerate(parsed):
            if p is not None:
                groups[p[0]].append((i, p[1], p[2]))
        calls = [
            self._call("lease_status", shard, [x for _, seq, nonce in items for x in (seq, nonce)])
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
        unknown."""
        head = [
            repr(retry_delay_s), repr(discard_within_s), self._cap, self._history,
            int(outcome_window),
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
            groups[p[0]].append((i, " ".join(map(str, (host, *fields, changed)))))
        ttl = once_ttl_arg(once)
        calls = [
            self._call("settle", shard, [*head, " ".join(x for _, x in items), ttl], once)
            for shard, items in groups.items()
        ]
        for items, codes in zip(groups.values(), await self._run(calls), strict=True):
            for (i, _), code in zip(items, codes, strict=True):
                out[i] = _RESULT[code]
        return out
