"""(e) The raw rate of the API's Redis work, done by bare Redis on the same server.

Per dispatched URL: ZPOPMIN from a per-host zset + HGET its 124-byte record + HSET it
back + ZADD a lease zset (batches of ``--n``, ``--workers`` concurrent loops); per
event: HGET + HSET of a record (batches of ``--event-batch``).  Each through redis-py
asyncio pipelines, bare RESP pipelines (:class:`RespConnection`: pre-encoded commands,
hiredis parser) and one Lua script per batch (:data:`RAW_CLIENTS`); and
``redis-benchmark -t zadd,zpopmin,hset -P 100`` when the binary exists.  The keys live
in their own database, :data:`RAW_DB`.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import re
import shutil
import struct
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, TypeVar

import hiredis
import redis
import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline

from config import SHARDS, Config

#: Database of the raw-Redis comparison keys (the store uses db 0).
RAW_DB = 1
#: Size of the packed URL record the scripts keep (``lua/lib.lua``).
RECORD_BYTES = 124

RAW_DISPATCH_LUA = """
local out = 0
for i = 1, #ARGV - 2 do
  local h = ARGV[i]
  local m = redis.call('ZPOPMIN', 'raw:q:' .. h)[1]
  if m then
    local rec = redis.call('HGET', 'raw:u:' .. h, m)
    redis.call('HSET', 'raw:u:' .. h, m, string.sub(rec, 1, -5) .. ARGV[#ARGV])
    redis.call('ZADD', 'raw:leases', ARGV[#ARGV - 1], h .. m)
    out = out + 1
  end
end
return out
"""

#: The Redis commands ``lease.lua`` runs, with none of its logic: per shard (``fl:<s>:``
#: keys) a read of its deadlines (expiry), its due hosts from its ready set WITH SCORES
#: (its share of the batch), their host records (HMGET) and the lease counter; per host
#: ZPOPMIN of its queue, HGET and HSET of the URL's record and whether a URL of the queue
#: is due by the host's new gate (a member, no score: a backlog); per shard the host
#: records (HSET), the hosts' new readiness (ZADD), the lease records (HSET) and one
#: deadline (ZADD).  ARGV: the batch, S shards, the deadline, a nonce.  What the store's
#: layout costs before any of its code runs.
FLOOR_DISPATCH_LUA = """
local n, S, deadline, nonce = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], ARGV[4]
local per = math.ceil(1.1 * n / S)
local out = 0
for s = 0, S - 1 do
  local p = 'fl:' .. s .. ':'
  redis.call('ZRANGEBYSCORE', p .. 'deadlines', '-inf', '0')
  local got = redis.call('ZRANGEBYSCORE', p .. 'ready', '-inf', '+inf', 'WITHSCORES',
                         'LIMIT', 0, per)
  if #got > 0 then
    local hosts = {}
    for i = 1, #got, 2 do hosts[#hosts + 1] = got[i]; local _ = tonumber(got[i + 1]) end
    local recs = redis.call('HMGET', p .. 'hosts', unpack(hosts))
    local seq = redis.call('HINCRBY', p .. 'meta', 'lseq', #hosts) - #hosts
    local host_recs, ready, leases = {}, {}, {}
    for i, h in ipairs(hosts) do
      local m = redis.call('ZPOPMIN', 'raw:q:' .. h)[1]
      if m then
        local rec = redis.call('HGET', 'raw:u:' .. h, m)
        redis.call('HSET', 'raw:u:' .. h, m, string.sub(rec, 1, -5) .. nonce)
        redis.call('ZRANGEBYSCORE', 'raw:q:' .. h, '-inf', deadline, 'LIMIT', 0, 1)
        host_recs[#host_recs + 1] = h
        host_recs[#host_recs + 1] = recs[i]
        ready[#ready + 1] = deadline
        ready[#ready + 1] = h
        leases[#leases + 1] = seq + i
        leases[#leases + 1] = nonce .. string.rep(' ', 47) .. h .. ' ' .. m
        out = out + 1
      end
    end
    if #host_recs > 0 then  -- (this shard's: a queue run dry gives nothing)
      redis.call('HSET', p .. 'hosts', unpack(host_recs))
      redis.call('ZADD', p .. 'ready', unpack(ready))
      redis.call('HSET', p .. 'leases', unpack(leases))
      redis.call('ZADD', p .. 'deadlines', deadline, seq .. ':' .. #hosts)
    end
  end
end
return out
"""
#: Size of a host record as ``lease.lua`` writes it (``lua/lib.lua`` HOST_ALL).
HOST_RECORD_BYTES = 60


def floor_prepare(client: redis.Redis, hosts: int, shards: int, prefix: str = "fl") -> None:
    """The shard keys of :data:`FLOOR_DISPATCH_LUA` over the hosts of :func:`raw_prepare`:
    host ``h`` in shard ``h mod shards``, its record and its readiness (its queue's head);
    ``prefix`` ``fe`` for :data:`FLOOR_EVENTS_LUA`'s own.  ``client`` is on :data:`RAW_DB`."""
    pipe = client.pipeline(transaction=False)
    for h in range(hosts):
        p = f"{prefix}:{h % shards}:"
        pipe.hset(p + "hosts", str(h), bytes(HOST_RECORD_BYTES))
        pipe.zadd(p + "ready", {str(h): 0})
    pipe.execute()


#: The Redis commands an event of kind ARGV[1] costs the store's layout, with none of
#: its logic, in one script per shard's share of the batch as the store calls them, on
#: keys of its own laid out as raw Redis's and :data:`FLOOR_DISPATCH_LUA`'s
#: (``ev:q:<h>``, ``ev:u:<h>``, ``fe:<s>:``; host ``h`` in shard ``h mod S``), so that
#: it leaves theirs as they were.  A signal (``s``): the fold's read and write of the
#: URL's record and its queue's ZADD (``signals.lua``); a click (``c``): the record's
#: read and write (``clicks.lua``); a crawl result (``r``): the lease's read before the
#: settlement (``lease_status.lua``), then the shard's lease and host records (one
#: HMGET each), the URL's read, its queue's ZADD and its write, and the lease and host
#: records' writes and the finished set's ZADD (one each, ``settle.lua``).  Then, for
#: every event, the re-estimation's write (``set_params.lua``: the record's read, its
#: queue's ZADD, its write).  The hosts whose queues moved are re-keyed as
#: ``refresh_all`` does (one HMGET of their records, each queue's head WITH SCORES, one
#: ZADD of the ready set) after each step.  Kinds ``S`` and ``C`` are a signal and a
#: click under a fold that writes each URL once (a design the store does not have):
#: the worker's read of the record, then the one write.  Left out: the event stream
#: (one entry per batch and shard), the worker's reads of what it re-estimates, and the
#: lease history's trim.  ARGV[2] S shards, ARGV[3] a score; then the events, "host
#: member" pairs.  A lower bound of what the layout costs per event.
FLOOR_EVENTS_LUA = """
local kind, S, score = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local by = {}  -- shard -> its events' argument indices
for i = 4, #ARGV, 2 do
  local s = tonumber(ARGV[i]) % S
  by[s] = by[s] or {}
  table.insert(by[s], i)
end
local function rekey(p, hosts)
  local names, ready = {}, {}
  for h in pairs(hosts) do names[#names + 1] = h end
  if #names == 0 then return end
  redis.call('HMGET', p .. 'hosts', unpack(names))
  for _, h in ipairs(names) do
    local head = redis.call('ZRANGE', 'ev:q:' .. h, 0, 0, 'WITHSCORES')
    ready[#ready + 1] = head[2] or '0'
    ready[#ready + 1] = h
  end
  redis.call('ZADD', p .. 'ready', unpack(ready))
end
-- each event's record read and written back, with its queue's ZADD when `due` (the
-- due time moves), those hosts then re-keyed
local function write(p, idx, due)
  local hosts = {}
  for _, i in ipairs(idx) do
    local h, m = ARGV[i], ARGV[i + 1]
    local rec = redis.call('HGET', 'ev:u:' .. h, m)
    if due then
      redis.call('ZADD', 'ev:q:' .. h, score, m)
      hosts[h] = true
    end
    redis.call('HSET', 'ev:u:' .. h, m, rec)
  end
  rekey(p, hosts)
end
local seq = 0
for s, idx in pairs(by) do
  local p = 'fe:' .. s .. ':'
  if kind == 'S' or kind == 'C' then  -- the worker's read
    for _, i in ipairs(idx) do redis.call('HGET', 'ev:u:' .. ARGV[i], ARGV[i + 1]) end
  elseif kind == 'r' then
    local seqs, hosts, leases, recs, finished = {}, {}, {}, {}, {}
    for _, i in ipairs(idx) do
      seq = seq + 1
      seqs[#seqs + 1] = seq
      hosts[#hosts + 1] = ARGV[i]
      redis.call('HGET', p .. 'leases', seq)
      leases[#leases + 1] = seq
      leases[#leases + 1] = 'settled'
      recs[#recs + 1] = ARGV[i]
      recs[#recs + 1] = string.rep('h', 60)
      finished[#finished + 1] = seq
      finished[#finished + 1] = seq
    end
    redis.call('HMGET', p .. 'leases', unpack(seqs))
    redis.call('HMGET', p .. 'hosts', unpack(hosts))
    write(p, idx, true)
    redis.call('HSET', p .. 'leases', unpack(leases))
    redis.call('HSET', p .. 'hosts', unpack(recs))
    redis.call('ZADD', p .. 'finished', unpack(finished))
  else
    write(p, idx, kind == 's')
  end
  write(p, idx, true)  -- the re-estimation's (or the single fold's) write
end
return (#ARGV - 3) / 2
"""

RAW_EVENTS_LUA = """
for i = 1, #ARGV, 2 do
  local k = 'raw:u:' .. ARGV[i]
  local rec = redis.call('HGET', k, ARGV[i + 1])
  local n = struct.unpack('<I4', rec, 97) + 1
  redis.call('HSET', k, ARGV[i + 1], string.sub(rec, 1, 96) .. struct.pack('<I4', n)
             .. string.sub(rec, 101))
end
return #ARGV / 2
"""


def resp_args(*args: bytes | str | int | float) -> bytes:
    """Arguments as RESP bulk strings (the body of a command)."""
    out = []
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%b\r\n" % (len(b), b))
    return b"".join(out)


def resp(*args: bytes | str | int | float) -> bytes:
    """One command in RESP, the Redis wire format."""
    return b"*%d\r\n" % len(args) + resp_args(*args)


class RespConnection:
    """A bare Redis connection: pre-encoded commands out in one write, replies parsed by
    hiredis (the least client work a pipeline can cost in Python)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader, self._writer = reader, writer
        self._parser = hiredis.Reader()

    @classmethod
    async def open(cls, port: int, db: int) -> RespConnection:
        """Connect to 127.0.0.1:``port`` and select ``db``."""
        conn = cls(*await asyncio.open_connection("127.0.0.1", port))
        await conn.pipeline([resp("SELECT", db)])
        return conn

    async def pipeline(self, commands: Sequence[bytes]) -> list[Any]:
        """Send ``commands`` at once; their replies in order.

        Raises
        ------
        RuntimeError
            If Redis answers an error.
        """
        self._writer.write(b"".join(commands))
        replies: list[Any] = []
        while len(replies) < len(commands):
            reply = self._parser.gets()
            if reply is False:
                self._parser.feed(await self._reader.read(1 << 16))
            elif isinstance(reply, hiredis.ReplyError):
                raise RuntimeError(f"Redis answered {reply}")
            else:
                replies.append(reply)
        return replies

    async def close(self) -> None:
        """Close the socket."""
        self._writer.close()
        await self._writer.wait_closed()


async def raw_prepare(
    port: int, hosts: int, per_host: int, prefix: str = "raw", flush: bool = True
) -> None:
    """Per host a zset of its URL keys and a hash of 124-byte records, in db ``RAW_DB``
    (``<prefix>:q:<h>``, ``<prefix>:u:<h>``); the database emptied first with ``flush``."""
    conn = await RespConnection.open(port, RAW_DB)
    keys = [f"/p/{j}/index.html" for j in range(per_host)]
    # every host has the same members: encode them once
    zadd = resp_args(*(x for j, k in enumerate(keys) for x in (j, k)))
    hset = resp_args(*(x for k in keys for x in (k, bytes(RECORD_BYTES))))
    head = b"*%d\r\n" % (2 + 2 * len(keys))
    try:
        if flush:
            await conn.pipeline([resp("FLUSHDB")])
        for h0 in range(0, hosts, 100):
            commands = []
            for h in range(h0, min(hosts, h0 + 100)):
                commands.append(head + resp_args("ZADD", f"{prefix}:q:{h}") + zadd)
                commands.append(head + resp_args("HSET", f"{prefix}:u:{h}") + hset)
            await conn.pipeline(commands)
    finally:
        await conn.close()


#: How the raw loops talk to Redis: redis-py pipelines, bare RESP pipelines, one Lua
#: script per batch.
RAW_CLIENTS = ("redis-py", "resp", "lua")
#: The dispatch loop that runs :data:`FLOOR_DISPATCH_LUA` (one call per batch, on the
#: keys of :func:`floor_prepare` and the queues of :func:`raw_prepare`): what the store's
#: layout allows at best, measured as raw Redis is.
FLOOR = "floor"

Batch = TypeVar("Batch")
Key = TypeVar("Key", bytes, str)


async def timed_loops(
    port: int,
    workers: int,
    seconds: float,
    how: str,
    batches: Callable[[int], Iterator[Batch]],
    step: Callable[[RespConnection | None, Batch], Awaitable[int]],
) -> float:
    """Units/s of ``workers`` concurrent loops that run ``step`` on the batches of
    ``batches(i)`` (loop ``i``'s own, endless) back to back for ``seconds``; ``step`` gets
    a :class:`RespConnection` of the loop's own when ``how`` is ``"resp"`` (else
    ``None``) and returns the units it did."""
    done = 0

    async def worker(i: int) -> None:
        nonlocal done
        conn = await RespConnection.open(port, RAW_DB) if how == "resp" else None
        source = batches(i)
        try:
            while time.perf_counter() < stop_at:
                got = await step(conn, next(source))
                done += got  # not `done += await …`: that reads `done` before awaiting
        finally:
            if conn is not None:
                await conn.close()

    t0 = time.perf_counter()
    stop_at = t0 + seconds
    await asyncio.gather(*(worker(i) for i in range(workers)))
    return done / (time.perf_counter() - t0)


async def read_then_write(
    r: aioredis.Redis,
    items: Sequence[tuple[int, Key]],
    write: Callable[[Pipeline, int, Key, bytes], None],
) -> None:
    """The redis-py way of the raw loops: HGET the record of every ``(host, key)`` of
    ``items`` in one pipeline, then ``write(pipe, host, key, record)`` each into a second
    (two round trips)."""
    pipe = r.pipeline(transaction=False)
    for h, k in items:
        pipe.hget(f"raw:u:{h}", k)
    records = await pipe.execute()
    pipe = r.pipeline(transaction=False)
    for (h, k), rec in zip(items, records, strict=True):
        write(pipe, h, k, rec)
    await pipe.execute()


async def raw_dispatch(port: int, cfg: Config, seconds: float, how: str) -> float:
    """URLs/s of the minimal dispatch work (see the module docstring): ``workers``
    concurrent loops over batches of ``n`` hosts; ``how`` in :data:`RAW_CLIENTS`
    (the pipelined ones take three round trips per batch: pop, read, write), or
    :data:`FLOOR`: the store's layout, :data:`FLOOR_DISPATCH_LUA` over ``SHARDS``
    shards (its keys from :func:`floor_prepare`)."""
    r = aioredis.Redis(port=port, db=RAW_DB, max_connections=cfg.workers)
    sha = await r.script_load(FLOOR_DISPATCH_LUA if how == FLOOR else RAW_DISPATCH_LUA)
    hosts = itertools.cycle(range(cfg.hosts))
    seq = itertools.count(1)

    async def pipelined_redis_py(batch: list[int], deadline: float) -> int:
        pipe = r.pipeline(transaction=False)
        for h in batch:
            pipe.zpopmin(f"raw:q:{h}")
        popped = await pipe.execute()
        items = [(h, m[0][0]) for h, m in zip(batch, popped, strict=True) if m]

        def write_lease(pipe: Pipeline, h: int, m: bytes, rec: bytes) -> None:
            pipe.hset(f"raw:u:{h}", m, rec[:-4] + struct.pack("<I", next(seq)))
            pipe.zadd("raw:leases", {f"{h}{m.decode()}": deadline})

        await read_then_write(r, items, write_lease)
        return len(items)

    async def pipelined_resp(conn: RespConnection, batch: list[int], deadline: float) -> int:
        popped = await conn.pipeline([resp("ZPOPMIN", f"raw:q:{h}") for h in batch])
        items = [(h, m[0]) for h, m in zip(batch, popped, strict=True) if m]
        records = await conn.pipeline([resp("HGET", f"raw:u:{h}", m) for h, m in items])
        writes = []
        for (h, m), rec in zip(items, records, strict=True):
            writes.append(resp("HSET", f"raw:u:{h}", m, rec[:-4] + struct.pack("<I", next(seq))))
            writes.append(resp("ZADD", "raw:leases", deadline, b"%d%b" % (h, m)))
        await conn.pipeline(writes)
        return len(items)

    def host_batches(_: int) -> Iterator[list[int]]:
        while True:  # the loops share one cycle of the hosts
            yield [next(hosts) for _ in range(cfg.n)]

    async def step(conn: RespConnection | None, batch: list[int]) -> int:
        deadline = time.time() + 600
        if conn is not None:
            return await pipelined_resp(conn, batch, deadline)
        if how == FLOOR:  # (the script picks its hosts from the shards' ready sets)
            return int(await r.evalsha(sha, 0, cfg.n, SHARDS, int(deadline * 1e6), "abcd"))
        if how == "lua":
            tail = struct.pack("<I", next(seq))
            return int(await r.evalsha(sha, 0, *batch, deadline, tail))
        return await pipelined_redis_py(batch, deadline)

    try:
        return await timed_loops(port, cfg.workers, seconds, how, host_batches, step)
    finally:
        await r.aclose()


async def raw_events(port: int, cfg: Config, seconds: float, how: str) -> float:
    """Events/s of the minimal event work: HGET + HSET of a random URL's record, batches
    of ``event_batch``; ``how`` in :data:`RAW_CLIENTS` (two round trips per batch when
    pipelined)."""
    r = aioredis.Redis(port=port, db=RAW_DB, max_connections=cfg.workers)
    sha = await r.script_load(RAW_EVENTS_LUA)
    rng = random.Random(cfg.seed + 7)
    batches = [
        [
            (rng.randrange(cfg.hosts), f"/p/{rng.randrange(cfg.per_host)}/index.html")
            for _ in range(cfg.event_batch)
        ]
        for _ in range(64)
    ]

    def write_event(pipe: Pipeline, h: int, k: str, rec: bytes) -> None:
        pipe.hset(f"raw:u:{h}", k, rec[:-4] + b"\1\0\0\0")

    async def pipelined_resp(conn: RespConnection, batch: list[tuple[int, str]]) -> None:
        records = await conn.pipeline([resp("HGET", f"raw:u:{h}", k) for h, k in batch])
        await conn.pipeline(
            [
                resp("HSET", f"raw:u:{h}", k, rec[:-4] + b"\1\0\0\0")
                for (h, k), rec in zip(batch, records, strict=True)
            ]
        )

    def own_batches(offset: int) -> Iterator[list[tuple[int, str]]]:
        return itertools.islice(itertools.cycle(batches), offset, None)

    async def step(conn: RespConnection | None, batch: list[tuple[int, str]]) -> int:
        if conn is not None:
            await pipelined_resp(conn, batch)
        elif how == "lua":
            await r.evalsha(sha, 0, *(x for h, k in batch for x in (h, k)))
        else:
            await read_then_write(r, batch, write_event)
        return len(batch)

    try:
        return await timed_loops(port, cfg.workers, seconds, how, own_batches, step)
    finally:
        await r.aclose()


async def floor_events(port: int, cfg: Config, seconds: float, kinds: Sequence[str]) -> float:
    """Events/s of the store's layout alone (:data:`FLOOR_EVENTS_LUA`, ``SHARDS`` shards,
    on the keys of :func:`raw_prepare` and :func:`floor_prepare` with prefixes ``ev`` and
    ``fe``): ``workers`` concurrent loops, each call ``event_batch`` random events of one
    kind, the kinds taken in turn from ``kinds`` (``s`` signal, ``c`` click, ``r`` crawl
    result: a mix in their proportions), one script per batch as raw Redis's."""
    r = aioredis.Redis(port=port, db=RAW_DB, max_connections=cfg.workers)
    sha = await r.script_load(FLOOR_EVENTS_LUA)
    rng = random.Random(cfg.seed + 11)
    pairs = [
        [
            x
            for _ in range(cfg.event_batch)
            for x in (rng.randrange(cfg.hosts), f"/p/{rng.randrange(cfg.per_host)}/index.html")
        ]
        for _ in range(16)
    ]

    def own_batches(offset: int) -> Iterator[tuple[str, list[int | str]]]:
        return zip(itertools.cycle(kinds), itertools.islice(itertools.cycle(pairs), offset, None))

    async def step(_: RespConnection | None, batch: tuple[str, list[int | str]]) -> int:
        kind, args = batch
        score = int(time.time() * 1e6)  # a due time in whole µs, as the store's
        await r.evalsha(sha, 0, kind, SHARDS, score, *args)
        return cfg.event_batch

    try:
        return await timed_loops(port, cfg.workers, seconds, "lua", own_batches, step)
    finally:
        await r.aclose()


def redis_benchmark(port: int) -> dict[str, float]:
    """``redis-benchmark -t zadd,zpopmin,hset -P 100 -q`` (ops/s by test); empty when the
    binary is missing."""
    exe = shutil.which("redis-benchmark")
    if exe is None:
        return {}
    cmd = [
        exe, "-p", str(port), "--dbnum", "2", "-t", "zadd,zpopmin,hset", "-P", "100",
        "-n", "2000000", "-c", "16", "-q",
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    out: dict[str, float] = {}
    for line in done.stdout.replace("\r", "\n").splitlines():
        m = re.match(r"^\s*([A-Z]+)(?: [^:]*)?: ([\d.]+) requests per second", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out
