"""Throughput, latency and memory of the API on each store, side by side with raw Redis.

What it measures, in one run on one machine (``python bench/dispatch.py --help``), once
with the Redis store and once with the embedded memory store (``--store both``, the
default; then a last table gives the memory store's figures ÷ the Redis store's, with
the other processes' load in each run's phase):

(a) URLs dispatched per second through ``GET /next?n=100`` by ONE API process
    (uvicorn subprocess, system clock, crawl delay 1 ms so politeness does not bind),
    closed loop over ``--workers`` concurrent keep-alive connections, in steady state
    (after the warm-up, once the rescorer has scored what the load left unscored), for
    ``--seconds`` or until half the URLs not yet leased are, so that (c) has URLs to
    lease; the leases are kept for (b).
(c) p50/p99 latency of ``GET /next?n=100`` at HALF the request rate of (a), open loop
    (requests start on a fixed schedule; latency counts from the scheduled start, so a
    slow answer delays nothing and hides nothing).  Its p99 meets the target only if
    the answers leased at least 95% of the URLs asked: an empty answer is fast.
(b) events ingested per second through batched ``POST /signal``, ``/click`` and
    ``/crawl-result`` (``--event-batch`` events per request, bodies serialised before
    the clock starts): each route alone, then a fixed mix of the three.  The crawl
    results settle the leases of (a) and (c), each once (topped up, untimed, when
    those are too few); half go to the mix, half to ``/crawl-result`` alone.  A batch
    the API refuses (``503`` while its fold lags more than ``CRAWLSCHED_FOLD_LAG_S``:
    backpressure) goes again after its ``Retry-After`` and is counted as refused: the
    rates are what the fold sustains.
(d) Redis memory per URL: (``used_memory`` after loading the URLs − ``used_memory`` of
    the empty store) / URLs, from ``INFO memory``; again after dispatching.
(e) the raw rate of equivalent Redis work on the same server: per dispatched URL
    ZPOPMIN from a per-host zset + HGET its 124-byte record + HSET it back + ZADD a
    lease zset (batches of ``--n``, same concurrency), per event HGET + HSET of a
    record (batches of ``--event-batch``), each through redis-py asyncio pipelines,
    bare RESP pipelines and one Lua script per batch; the store's layout alone, run
    as raw Redis's script is (``raw_redis.FLOOR_DISPATCH_LUA``: the commands
    ``lease.lua`` issues for a batch over the same shards, none of its logic;
    ``FLOOR_EVENTS_LUA``: the commands each event of the mix brings about); Redis's
    CPU per URL or event in each; and ``redis-benchmark -t zadd,zpopmin,hset -P 100``
    when the binary exists.  Our figures are given as ratios of the raw ones.

The timed HTTP loops use a lean HTTP/1.1 client (:mod:`lean_http`): on two
cores the client shares the machine with the API and Redis, and httpx cost 5-8 ms of
client CPU per ``GET /next`` here (~0.6 ms of it httpcore retrying a failing ``import
sniffio`` 4-5 times per request: sniffio is not installed), the lean client ~1.5 ms.

The URLs are ``https://h{h}.example/p/{j}/index.html`` (``--urls`` over ``--hosts``,
host by host, as sitemaps would register them).  They are registered through
``POST /urls`` (batches of 10,000, httpx); when that would take longer than
``--load-budget`` seconds, the rest goes through the same use case in the bench
process (``registry.register`` → ``RedisStore.upsert_urls``: the API's code minus
HTTP); the table says which, with both rates.

A private ``redis-server`` (:class:`LocalRedis`, no persistence) and the API
(:func:`served_app`) are started here and stopped at the end.  For each phase the
table notes the CPU the API process, Redis, this client and the rest of the machine
used (share of one core, from ``/proc``), Redis's own time per ``EVALSHA`` (``INFO
commandstats``), the API CPU and Redis script time per URL or event, and the URLs the
API's background rescorer recomputed meanwhile (``/metrics``, read between phases).
``--profile DIR`` records the API process with ``py-spy`` (raw collapsed stacks)
during the dispatch phase and the event mix.

This file is the command line; the parts are its sibling modules, each importing only
those above it: :mod:`config` (the options, the synthetic URLs), :mod:`lean_http`,
:mod:`sampling` (CPU, Redis memory, py-spy), :mod:`registration`, :mod:`phases` ((a),
(c), (b)), :mod:`raw_redis` ((e)), :mod:`runner` (one run, its :class:`~runner.Report`)
and :mod:`report` (the table and the JSON).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from config import Config
from report import build_table, footer, ratio_table, report_json, store_ratios
from runner import Report, run

#: The sizes one run measures by default: the default frontier, then a third of it.
DEFAULT_SIZES = "1000000/10000,300000/3000"


def parse_sizes(text: str) -> list[tuple[int, int]]:
    """``"URLS/HOSTS,..."`` as (urls, hosts) pairs.

    Raises
    ------
    argparse.ArgumentTypeError
        A pair is malformed or not positive.

    Examples
    --------
    >>> parse_sizes("1000/10, 300/3")
    [(1000, 10), (300, 3)]
    """
    out = []
    for part in text.split(","):
        try:
            urls, hosts = (int(x) for x in part.strip().split("/"))
        except ValueError:
            raise argparse.ArgumentTypeError(f"--sizes: {part!r} is not URLS/HOSTS") from None
        if urls < 1 or hosts < 1:
            raise argparse.ArgumentTypeError(f"--sizes: {part!r} must be positive")
        out.append((urls, min(hosts, urls)))
    return out


def parse_args(argv: Sequence[str] | None = None) -> list[Config]:
    """The command line as one :class:`Config` per size."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--urls",
        type=int,
        default=None,
        help="URLs registered (one size; default: the sizes of --sizes)",
    )
    p.add_argument("--hosts", type=int, default=None, help="hosts they are spread over")
    p.add_argument(
        "--sizes",
        default=DEFAULT_SIZES,
        help="URLS/HOSTS pairs, comma-separated, each run in turn (ignored with --urls)",
    )
    p.add_argument("--seconds", type=float, default=10.0, help="length of each timed phase")
    p.add_argument("--workers", type=int, default=12, help="concurrent client connections")
    p.add_argument("--n", type=int, default=100, help="URLs asked per GET /next")
    p.add_argument("--event-batch", type=int, default=1000, help="events per POST")
    p.add_argument(
        "--load-budget",
        type=float,
        default=45.0,
        help="seconds of POST /urls before the rest is registered in-process",
    )
    p.add_argument("--load-workers", type=int, default=3, help="connections posting /urls")
    p.add_argument("--warmup", type=float, default=1.0, help="untimed dispatch before (a), s")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, default=None, help="write the figures here")
    p.add_argument(
        "--profile", type=Path, default=None, help="py-spy the API into this folder (raw stacks)"
    )
    p.add_argument(
        "--store",
        choices=("both", "redis", "memory"),
        default="both",
        help="the API's store (memory: the embedded one; both: the Redis store, then the "
        "embedded one, and their ratios; raw Redis is measured in every run)",
    )
    p.add_argument(
        "--redis-defaults",
        action="store_true",
        help="run the private redis-server with Redis's default listpack settings, not "
        "those of docs/operations.md (the memory of a deployment without them)",
    )
    a = p.parse_args(argv)
    if a.urls is not None:
        sizes = [(a.urls, min(a.hosts or 10_000, a.urls))]
    else:
        try:
            sizes = parse_sizes(a.sizes)
        except argparse.ArgumentTypeError as e:
            p.error(str(e))
    return [
        Config(
            urls=urls, hosts=hosts, seconds=a.seconds, workers=a.workers, n=a.n,
            event_batch=a.event_batch, load_budget=a.load_budget, load_workers=a.load_workers,
            warmup=a.warmup, seed=a.seed, json_out=a.json, profile=a.profile, store=a.store,
            redis_defaults=a.redis_defaults,
        )
        for urls, hosts in sizes
    ]  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    """Run the bench (once per size and store), print the tables, write the JSON."""
    cfgs = parse_args(argv)
    console = Console(width=max(160, Console().width))
    sized: dict[str, Any] = {}
    for cfg in cfgs:
        sized[f"{cfg.urls}/{cfg.hosts}"] = run_size(cfg, console, len(cfgs) > 1)
    if cfgs[0].json_out is not None:
        single = sized if len(sized) > 1 else next(iter(sized.values()))
        cfgs[0].json_out.write_text(json.dumps(single, indent=2))
    return 0


def run_size(cfg: Config, console: Console, several: bool) -> dict[str, Any]:
    """One size: the run of each store, its tables, and its figures as plain data."""
    stores = ("redis", "memory") if cfg.store == "both" else (cfg.store,)
    reps: dict[str, Report] = {}
    for store in stores:
        prof = cfg.profile
        if prof is not None:
            prof = prof / f"{cfg.urls}" if several else prof
            prof = prof / store if len(stores) > 1 else prof
        one = dataclasses.replace(cfg, store=store, profile=prof)
        rep = reps[store] = asyncio.run(run(one, console))
        console.print(build_table(rep))
        console.print(footer(rep))
    out: dict[str, Any] = {store: report_json(rep) for store, rep in reps.items()}
    if len(reps) == 2:
        rows = store_ratios(reps["memory"], reps["redis"])
        console.print(ratio_table(rows))
        out["memory_over_redis"] = rows
    return out if len(reps) == 2 else out[cfg.store]


if __name__ == "__main__":
    sys.exit(main())
