"""The Redis store's append/fold side: signals and clicks go to a stream per shard, a
fold applies them later, and the worker's heartbeat.  ``settle.lua`` appends the
settled crawl results' URLs to the same streams (kind ``r``): the fold names them for
re-estimation and applies nothing else.

Append (``append.lua``): one ``XADD`` per batch and shard, the events as packed
columns (times as little-endian doubles, hosts and URL keys as space-separated
words), and, under an idempotency key, the batch's record in the shard, in the same
atomic step: a retried batch appends once.  The stream is made durable by the
server's AOF like every other key.

Fold (``fold.lua``): a folder reads entries with ``XREADGROUP`` in the consumer group
:data:`~service.store.redis.keys.FOLD_GROUP` (and takes over, with ``XAUTOCLAIM``,
entries another folder read and left pending for ``claim_idle_s``), applies them with
one script call per shard, then ``XACK``s them.  The script deletes each entry as it
applies it, atomically, so an entry is applied exactly once even when its folder dies
between the script and the ``XACK``; the oldest entry left in a stream is the oldest
unfolded one (:meth:`RedisEvents.fold_lag`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from redis.exceptions import ResponseError
from service.store.base import EventBatch, EventKind, EventStatus, Folded, IdempotencyKey
from service.store.redis.base import once_ttl_arg
from service.store.redis.client import text, unavailable
from service.store.redis.dispatch import RedisDispatch
from service.store.redis.keys import FOLD_GROUP, expand_url, url_key
from service.store.redis.scripts import Call
from service.urls import host_of

__all__ = ["RedisEvents"]

_KIND = {EventKind.SIGNAL: b"s", EventKind.CLICK: b"c"}
#: fold.lua's counts, in its answer's order.
_COUNTED = (
    (EventKind.SIGNAL, EventStatus.ACCEPTED),
    (EventKind.SIGNAL, EventStatus.UNKNOWN_URL),
    (EventKind.SIGNAL, EventStatus.STALE),
    (EventKind.CLICK, EventStatus.ACCEPTED),
    (EventKind.CLICK, EventStatus.UNKNOWN_URL),
)


#: Events one fold.lua call applies at most (about; an entry is never split, and one
#: whose size is not known goes alone): Redis serves other clients between calls.
_EVENTS_PER_CALL = 512


def _entry_ms(entry_id: bytes | str) -> int:
    """The append time of a stream entry, Redis-clock ms (the first part of its id)."""
    return int(text(entry_id).split("-")[0])


def _chunks(entries: list[tuple[bytes, int]]) -> list[list[bytes]]:
    """The entry ids of one shard in groups of about :data:`_EVENTS_PER_CALL` events."""
    out: list[list[bytes]] = []
    size = _EVENTS_PER_CALL
    for entry_id, events in entries:
        if events == 0 or size + events > _EVENTS_PER_CALL:
            out.append([])
            size = _EVENTS_PER_CALL if events == 0 else 0
        out[-1].append(entry_id)
        size += events
    return out


def _urls(pairs: list[bytes]) -> list[str]:
    """The URLs of fold.lua's flat (host, URL key, ...) answer."""
    return [expand_url(text(pairs[i + 1]), text(pairs[i])) for i in range(0, len(pairs), 2)]


def _decay_arg(decay_s: float) -> str:
    """``decay_s`` as a script argument.

    Raises
    ------
    ValueError
        If it is not positive.
    """
    if not decay_s > 0:
        raise ValueError("`decay_s` must be positive")
    return repr(float(decay_s))


class RedisEvents(RedisDispatch):
    """Append, fold and heartbeat of :class:`~service.store.redis.RedisStore` (see the
    module docstring)."""

    async def prepare(self) -> None:
        """As :meth:`RedisBase.prepare`, and the folders' consumer group on every
        shard's stream."""
        await super().prepare()
        await self._create_groups()

    @unavailable
    async def _create_groups(self) -> None:
        for keys in self._keys:
            try:
                await self.client.xgroup_create(keys.events, FOLD_GROUP, id="0", mkstream=True)
            except ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise

    @unavailable
    async def append_events(self, batch: EventBatch, once: IdempotencyKey | None = None) -> None:
        times = np.ascontiguousarray(batch.times, dtype="<f8")
        kind, ttl = _KIND[batch.kind], once_ttl_arg(once)
        calls = []
        for shard, items in self._by_shard(batch.urls).items():
            keys = self._keys[shard]
            names: tuple[str | bytes, ...] = (keys.events,)
            if once is not None:
                names = (keys.events, keys.once(once.digest))
            index = [i for i, _, _ in items]
            hosts = " ".join(h for _, h, _ in items)
            ukeys = " ".join(k for _, _, k in items)
            calls.append(Call("append", names, (ttl, kind, times[index].tobytes(), hosts, ukeys)))
        await self._run(calls)

    def fold_keys(self, shard: int) -> tuple[str | bytes, ...]:
        """KEYS of ``fold.lua`` in ``shard``: the shard keys, its event stream, the
        prefix of its hosts' stale counts."""
        keys = self._keys[shard]
        return (*self._script_keys[shard], keys.events, keys.stale(""))

    @unavailable
    async def stale_signals(self, urls: Sequence[str]) -> list[int]:
        pipe = self.client.pipeline(transaction=False)
        for url in urls:
            host = host_of(url)
            pipe.hget(self._keys[self._shard(host)].stale(host), url_key(url, host))
        return [int(x or 0) for x in await pipe.execute()]

    @unavailable
    async def fold_events(
        self,
        consumer: str,
        max_parts: int,
        discard_within_s: float,
        decay_s: float,
        claim_idle_s: float,
    ) -> Folded:
        taken = await self._take(consumer, max_parts, claim_idle_s)
        head = (repr(float(discard_within_s)), self._cap, _decay_arg(decay_s))
        calls = [
            Call("fold", self.fold_keys(n), (*head, *chunk))
            for n, entries in enumerate(taken)
            for chunk in _chunks(entries)
        ]
        answers = await self._run(calls)
        pipe = self.client.pipeline(transaction=False)
        for n, entries in enumerate(taken):
            if entries:
                pipe.xack(self._keys[n].events, FOLD_GROUP, *(i for i, _ in entries))
        if calls:
            await pipe.execute()
        counts: Counter[tuple[EventKind, EventStatus]] = Counter()
        touched: list[str] = []
        settled: list[str] = []
        parts = 0
        for answer in answers:
            parts += int(answer[0])
            for name, value in zip(_COUNTED, answer[1:6], strict=True):
                if value:
                    counts[name] += int(value)
            touched += _urls(answer[6])
            settled += _urls(answer[7])
        ids = [_entry_ms(i) for entries in taken for i, _ in entries]
        return Folded(
            parts, dict(counts), list(dict.fromkeys(touched)), list(dict.fromkeys(settled)),
            min(ids) / 1000.0 if ids else None,
        )  # fmt: skip

    async def _take(
        self, consumer: str, max_parts: int, claim_idle_s: float
    ) -> list[list[tuple[bytes, int]]]:
        """Entries to fold per shard, (id, events in it; 0: not known): those idle in
        other folders' hands for ``claim_idle_s`` (taken over) and up to ``max_parts``
        never delivered."""
        idle_ms = max(0, int(claim_idle_s * 1000.0))
        for attempt in (0, 1):
            pipe = self.client.pipeline(transaction=False)
            for keys in self._keys:
                pipe.xautoclaim(
                    keys.events, FOLD_GROUP, consumer, idle_ms, count=max_parts, justid=True
                )
                pipe.xreadgroup(FOLD_GROUP, consumer, {keys.events: ">"}, count=max_parts)
            try:
                answers = await pipe.execute()
                break
            except ResponseError as exc:
                if "NOGROUP" not in str(exc) or attempt:
                    raise
                await self._create_groups()  # the data was flushed or restored without
        out: list[list[tuple[bytes, int]]] = []
        for claimed, read in zip(answers[::2], answers[1::2], strict=True):
            got = [(entry_id, 0) for entry_id in claimed]
            for _, entries in read or ():
                got += ((i, len(f.get(b"t", b"")) // 8) for i, f in entries if f)
            out.append(got)
        return out

    @unavailable
    async def fold_lag(self) -> float:
        pipe = self.client.pipeline(transaction=False)
        for keys in self._keys:
            pipe.xrange(keys.events, count=1)
        heads = await pipe.execute()
        oldest = [_entry_ms(h[0][0]) for h in heads if h]
        if not oldest:
            return 0.0
        seconds, micros = await self.client.time()
        return max(0.0, seconds + micros / 1e6 - min(oldest) / 1000.0)

    async def _reports(self) -> tuple[float, dict[bytes | str, tuple[float, float]]]:
        """Redis's clock now, s, and the folders' backlog reports (oldest, until)."""
        seconds, micros = await self.client.time()  # not pipelined: Cluster refuses it
        fields = await self.client.hgetall(self._global.backlog)
        reports = {}
        for owner, value in fields.items():
            oldest, until = value.split()
            reports[owner] = (float(oldest), float(until))
        return seconds + micros / 1e6, reports

    @unavailable
    async def report_backlog(self, owner: str, oldest_at: float | None, ttl_s: float) -> None:
        now, reports = await self._reports()
        gone = [name for name, (_, until) in reports.items() if until <= now]
        pipe = self.client.pipeline(transaction=False)
        if gone:
            pipe.hdel(self._global.backlog, *gone)
        if oldest_at is None:
            pipe.hdel(self._global.backlog, owner)
        else:
            pipe.hset(self._global.backlog, owner, f"{oldest_at!r} {now + ttl_s!r}")
        await pipe.execute()

    @unavailable
    async def backlog_lag(self) -> float:
        now, reports = await self._reports()
        live = [oldest for oldest, until in reports.values() if until > now]
        return max(0.0, now - min(live)) if live else 0.0

    @unavailable
    async def heartbeat(self, owner: str, ttl_s: float) -> None:
        await self.client.set(self._global.worker, owner, px=max(1, int(ttl_s * 1000.0)))

    @unavailable
    async def worker_alive(self) -> bool:
        return bool(await self.client.exists(self._global.worker))
