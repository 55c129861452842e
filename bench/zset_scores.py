"""Why host queues are scored in whole µs: a ``ZADD`` into a listpack-encoded zset, with
due times in seconds (fractional) and in whole microseconds, side by side in one run.

A host queue of up to ``zset-max-listpack-entries`` URLs is a listpack.  Placing a
member walks the scores before its place; a whole-number score is kept as an integer,
a fractional one as text that is parsed at each comparison.  This bench starts a
private ``redis-server`` (``LocalRedis``, the settings of docs/operations.md, pinned to
one core), fills a zset of ``--members`` members with due times a second apart, then
moves one member at a time to the end (a crawled URL's next due time is the latest of
its host's), ``--moves`` times in one Lua script, scored in seconds
(``1795601218.299665 + k``) or in µs (the same × 10⁶, a whole number: lib.lua
``qscore``).  The two alternate for ``--repeats`` rounds; the table gives Redis's
``EVAL`` time per ``ZADD`` (``INFO commandstats``), min and median over the rounds, the
ratio, the zset's encoding, and the machine's other load (share of one core).

``python bench/zset_scores.py [--members 100] [--moves 20000] [--repeats 6]`` (~30 s).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import redis
from rich.table import Table

from sampling import machine_busy_seconds, own_and_redis_cpu_s, rounds_summary, show_and_save
from service.store.redis.local import LocalRedis

# KEYS[1] the zset; ARGV: members, moves, scale (1: seconds, 1e6: whole µs)
MOVES_LUA = """
local key, members, moves, scale = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]),
  tonumber(ARGV[3])
local base = 1795601218.299665
local function score(t) return math.ceil(t * scale) end
if scale == 1 then score = function(t) return t end end
redis.call('DEL', key)
for i = 1, members do redis.call('ZADD', key, score(base + i), 'm' .. i) end
for j = 1, moves do
  redis.call('ZADD', key, score(base + members + j), 'm' .. (j % members + 1))
end
return redis.call('OBJECT', 'ENCODING', key)
"""


def eval_usec(client: redis.Redis) -> float:
    """Redis's total ``EVAL`` and ``EVALSHA`` time so far, µs."""
    stats = client.info("commandstats")
    return float(sum(stats.get(k, {}).get("usec", 0) for k in ("cmdstat_eval", "cmdstat_evalsha")))


def run(args: argparse.Namespace) -> dict[str, Any]:
    with LocalRedis() as server:
        assert server.process is not None
        cores = sorted(os.sched_getaffinity(0))
        if len(cores) > 1:
            os.sched_setaffinity(server.process.pid, {cores[-1]})
            os.sched_setaffinity(0, {cores[0]})
        client = redis.Redis(port=server.port)
        moves = client.register_script(MOVES_LUA)
        per_zadd: dict[str, list[float]] = {"seconds": [], "whole µs": []}
        encoding: dict[str, str] = {}
        busy0, t0 = machine_busy_seconds(), time.perf_counter()
        pid = server.process.pid
        own0 = own_and_redis_cpu_s(pid)
        for r in range(args.repeats):
            order = [("seconds", 1.0), ("whole µs", 1e6)]
            for name, scale in order if r % 2 == 0 else order[::-1]:
                before = eval_usec(client)
                got = moves(keys=["z"], args=[args.members, args.moves, repr(scale)])
                encoding[name] = got.decode()
                zadds = args.members + args.moves
                per_zadd[name].append((eval_usec(client) - before) / zadds)
        wall = time.perf_counter() - t0
        others = (machine_busy_seconds() - busy0 - (own_and_redis_cpu_s(pid) - own0)) / wall
    return {
        "members": args.members, "moves": args.moves, "repeats": args.repeats,
        "others_cpu_share": others, "encoding": encoding,
        "per_zadd_us": rounds_summary(per_zadd),
    }  # fmt: skip


def table(out: dict[str, Any]) -> Table:
    t = Table(
        title=f"ZADD into a zset of {out['members']} members, {out['repeats']} rounds "
        f"(other processes {out['others_cpu_share']:.0%} of a core)"
    )
    for col in ("scores", "encoding", "min µs per ZADD", "median µs", "÷ whole µs (min)"):
        t.add_column(col)
    pu = out["per_zadd_us"]
    for name in ("seconds", "whole µs"):
        ratio = pu[name]["min"] / pu["whole µs"]["min"]
        t.add_row(
            name, out["encoding"][name], f"{pu[name]['min']:.2f}", f"{pu[name]['median']:.2f}",
            f"{ratio:.2f}",
        )  # fmt: skip
    return t


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--members", type=int, default=100, help="zset size (a host's queue)")
    p.add_argument("--moves", type=int, default=20_000, help="ZADDs per round")
    p.add_argument("--repeats", type=int, default=6, help="rounds (alternating)")
    p.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = p.parse_args()
    out = run(args)
    show_and_save(table(out), out, args.json)


if __name__ == "__main__":
    main()
