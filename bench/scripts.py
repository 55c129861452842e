"""Redis's own time per unit of the hot-path scripts, beside raw Redis's, in one run.

On a shared two-core machine the rates of ``dispatch.py`` swing by a third from one
run to the next; Redis's own script time per unit does not (much).  This bench
registers ``--urls`` URLs on ``--hosts`` hosts in a Redis store (a private
``redis-server`` pinned to one core, this process to the other), then alternates, for
``--repeats`` rounds:

- **lease**: ``--calls`` dispatches of ``--n`` URLs through the dispatch use case
  (``lease.lua``, with the dispatch observations the use case buffers), per URL leased;
- **signal** / **click**: ``--calls`` batches of 1,000 signals / clicks of random URLs
  applied at once (``signals.lua`` / ``clicks.lua``: the same code the fold runs), per
  event;
- **result**: a tenth as many batches of 1,000 crawl results, each settling the leases
  of a lease call made just before it (whose time is left out), half of them changed
  (``settle.lua``), per result;
- **raw dispatch** / **raw event**: the work ``dispatch.py`` calls raw Redis (per URL
  ZPOPMIN + HGET + HSET + ZADD, per event HGET + HSET), one Lua script per batch of the
  same size, on the same server (its own database), per unit;
- **design floor**: the commands ``lease.lua`` runs for a batch of ``--n`` URLs over
  the store's shards, with none of its logic (``raw_redis.FLOOR_DISPATCH_LUA``, on raw
  Redis's keys), per URL: what the store's layout costs before any of its code runs;
- **event floor**: the same for events (``raw_redis.FLOOR_EVENTS_LUA``): per signal,
  click and crawl result the commands of the fold or the settlement and of the
  re-estimation's write, and their 40/40/20 mix (``MIX``, weighted per round); and
  the same for a signal and a click under a fold that writes each URL once (a design
  the store does not have), with the crawl result's floor in its mix.

Each figure is Redis's ``EVALSHA`` time (``INFO commandstats``) over the round ÷ the
units; the table gives the minimum and the median over the rounds, ours ÷ raw, and
the machine's other load (share of one core, ``/proc/stat`` minus this process and
Redis) during the run.  With ``--meter instructions`` Redis runs under valgrind's
callgrind (:mod:`callgrind`) and each figure is the instructions Redis executed in
scripts per unit instead: a count that does not move with the machine's load, for
judging a change to a script (Redis then runs some 40 × slower: use a small store).

``python bench/scripts.py [--urls 300000] [--hosts 3000] [--repeats 8] [--json out.json]``
(~2 min); ``python bench/scripts.py --meter instructions --urls 20000 --hosts 200
--calls 10 --repeats 2`` (~3 min).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import redis
from rich.progress import track
from rich.table import Table

import callgrind
from config import CRAWL_DELAY_S, MAX_IN_FLIGHT, spec_of, url_of
from raw_redis import (
    FLOOR_DISPATCH_LUA,
    FLOOR_EVENTS_LUA,
    RAW_DB,
    RAW_DISPATCH_LUA,
    RAW_EVENTS_LUA,
    floor_prepare,
    raw_prepare,
)
from runner import MIX as EVENT_MIX
from sampling import machine_busy_seconds, own_and_redis_cpu_s, rounds_summary, show_and_save
from service.app import open_store
from service.clock import SystemClock
from service.metrics import Metrics
from service.scheduler.context import Context
from service.scheduler.dispatch import dispatch
from service.scheduler.registry import register
from service.schemas import UrlIn
from service.settings import Settings
from service.store.base import ClickEvent, CrawlOutcome, SignalEvent
from service.store.redis.local import LocalRedis

BATCH = 10_000
EVENTS = 1_000
DAY_S = 86_400.0
OUTCOME_WINDOW = 16  # crawl outcomes kept per URL
#: The events mix of ``dispatch.py`` (:data:`runner.MIX`), as each kind's share.
MIX = {kind: EVENT_MIX.count(kind) / len(EVENT_MIX) for kind in dict.fromkeys(EVENT_MIX)}


def evalsha_usec(client: redis.Redis) -> float:
    """Redis's total ``EVALSHA`` time so far, µs."""
    return float(client.info("commandstats").get("cmdstat_evalsha", {}).get("usec", 0))


async def run(args: argparse.Namespace) -> dict[str, Any]:
    counting = args.meter == "instructions"
    prof = Path(tempfile.mkdtemp(prefix="crawlsched-callgrind-")) if counting else None
    with LocalRedis(wrapper=callgrind.wrapper(prof) if prof else ()) as server:
        assert server.process is not None
        cores = sorted(os.sched_getaffinity(0))
        if len(cores) > 1:  # Redis on one core, this process on another
            os.sched_setaffinity(server.process.pid, {cores[-1]})
            os.sched_setaffinity(0, {cores[0]})
        settings = Settings(
            store=server.url, default_crawl_delay_s=CRAWL_DELAY_S, max_in_flight=MAX_IN_FLIGHT,
            redis_timeout_s=600.0 if counting else 5.0,  # (a server under valgrind is slow)
        )  # fmt: skip
        ctx = Context(await open_store(settings), SystemClock(), settings, Metrics())
        per_host = -(-args.urls // args.hosts)
        rng = random.Random(args.seed)
        for k in track(range(0, args.urls, BATCH), description="registering"):
            items = [
                UrlIn(**spec_of(i, per_host, rng)) for i in range(k, min(args.urls, k + BATCH))
            ]
            await register(ctx, items)
        ours = redis.Redis(port=server.port)
        pid = server.process.pid

        def meter() -> float:
            """Redis's script cost so far: µs of EVALSHA, or instructions."""
            return callgrind.instructions(pid) if counting else evalsha_usec(ours)

        raw = redis.Redis(port=server.port, db=RAW_DB)
        await raw_prepare(server.port, args.hosts, per_host)
        floor_prepare(raw, args.hosts, settings.shards)
        # the event floors' own
        await raw_prepare(server.port, args.hosts, per_host, "ev", flush=False)
        floor_prepare(raw, args.hosts, settings.shards, "fe")
        raw_dispatch, raw_events, floor_dispatch, floor_events = (
            raw.register_script(RAW_DISPATCH_LUA),
            raw.register_script(RAW_EVENTS_LUA),
            raw.register_script(FLOOR_DISPATCH_LUA),
            raw.register_script(FLOOR_EVENTS_LUA),
        )
        clock = t_event = time.time()
        host_cursor = 0

        async def lease() -> tuple[int, float]:
            return len((await dispatch(ctx, args.n, lease_ttl_s=3_600.0)).leases), 0.0

        def event_batch() -> tuple[list[str], float]:
            """``EVENTS`` random URLs, and a time a second after the last batch's."""
            nonlocal t_event
            t_event += 1.0
            return [url_of(rng.randrange(args.urls), per_host) for _ in range(EVENTS)], t_event

        async def signals() -> tuple[int, float]:
            urls, t = event_batch()
            await ctx.store.record_signals([SignalEvent(u, t) for u in urls], 0.0, DAY_S)
            return EVENTS, 0.0

        async def clicks() -> tuple[int, float]:
            urls, t = event_batch()
            await ctx.store.record_clicks([ClickEvent(u, t) for u in urls], DAY_S)
            return EVENTS, 0.0

        async def results() -> tuple[int, float]:
            before = meter()
            cols = await ctx.store.lease_columns(ctx.clock, EVENTS, 3_600.0, False)
            leasing = meter() - before
            fetched = time.time()
            outcomes = [
                CrawlOutcome(url, lease_id, fetched, True, rng.random() < 0.5)
                for url, lease_id in zip(cols.urls, cols.lease_ids, strict=True)
            ]
            await ctx.store.settle(outcomes, 3_600.0, 0.0, OUTCOME_WINDOW)
            return len(outcomes), leasing

        async def raw_lease() -> tuple[int, float]:
            nonlocal host_cursor
            hosts = [str((host_cursor + i) % args.hosts) for i in range(args.n)]
            host_cursor += args.n
            return int(raw_dispatch(args=[*hosts, repr(clock + 3_600.0), "abcd"])), 0.0

        async def floor_lease() -> tuple[int, float]:
            deadline = str(int((clock + 3_600.0) * 1e6))
            return int(floor_dispatch(args=[args.n, settings.shards, deadline, "abcd"])), 0.0

        def raw_pairs() -> list[int | str]:
            return [
                x
                for _ in range(EVENTS)
                for x in (rng.randrange(args.hosts), f"/p/{rng.randrange(per_host)}/index.html")
            ]

        async def raw_event() -> tuple[int, float]:
            return int(raw_events(args=raw_pairs())), 0.0

        def floor_event(kind: str) -> Callable[[], Awaitable[tuple[int, float]]]:
            async def step() -> tuple[int, float]:
                score = str(int(time.time() * 1e6))  # a due time in whole µs, as the store's
                args_ = [kind, settings.shards, score, *raw_pairs()]
                return int(floor_events(args=args_)), 0.0

            return step

        # each step: (units done, Redis µs of its own preparation, not counted)
        result_calls = max(1, args.calls // 10)
        work: dict[str, tuple[Callable[[], Awaitable[tuple[int, float]]], int]] = {
            "lease": (lease, args.calls), "raw dispatch": (raw_lease, args.calls),
            "design floor": (floor_lease, args.calls),
            "signal": (signals, args.calls), "click": (clicks, args.calls),
            "result": (results, result_calls), "raw event": (raw_event, args.calls),
            "event floor: signal": (floor_event("s"), args.calls),
            "event floor: click": (floor_event("c"), args.calls),
            "event floor: result": (floor_event("r"), result_calls),
            "single-write fold: signal": (floor_event("S"), args.calls),
            "single-write fold: click": (floor_event("C"), args.calls),
        }  # fmt: skip
        per_unit: dict[str, list[float]] = {name: [] for name in work}
        await lease()  # λ₀'s first estimate: later leases fold their own observations
        busy0, own0, t0 = machine_busy_seconds(), own_and_redis_cpu_s(pid), time.perf_counter()
        for _ in track(range(args.repeats), description="rounds"):
            for name, (step, calls) in work.items():
                before, units, left_out = meter(), 0, 0.0
                for _ in range(calls):
                    done, prep = await step()
                    units, left_out = units + done, left_out + prep
                per_unit[name].append((meter() - before - left_out) / max(units, 1))
        wall = time.perf_counter() - t0
        others = (machine_busy_seconds() - busy0 - (own_and_redis_cpu_s(pid) - own0)) / wall
        await ctx.store.close()
    if prof is not None:
        shutil.rmtree(prof, ignore_errors=True)
    for design in ("event floor", "single-write fold"):  # a crawl result's is the same
        per_unit[f"{design}: mix"] = [
            sum(w * per_unit["event floor: result" if k == "result" else f"{design}: {k}"][i]
                for k, w in MIX.items())
            for i in range(args.repeats)
        ]  # fmt: skip
    return {
        "urls": args.urls, "hosts": args.hosts, "n": args.n, "calls": args.calls,
        "repeats": args.repeats, "meter": args.meter, "others_cpu_share": others,
        "per_unit_us": rounds_summary(per_unit),
    }  # fmt: skip


def table(out: dict[str, Any]) -> Table:
    counting = out["meter"] == "instructions"
    what, unit = ("instructions", "k instr.") if counting else ("time", "µs")
    t = Table(
        title=f"Redis's {what} per unit, {out['urls']:,} URLs on {out['hosts']:,} hosts, "
        f"{out['repeats']} rounds (other processes {out['others_cpu_share']:.0%} of a core)"
    )
    for col in ("script", "unit", f"min {unit}", f"median {unit}", "ours ÷ raw (min)"):
        t.add_column(col)
    scale = 1e-3 if counting else 1.0
    pu = out["per_unit_us"]
    rows = [("lease", "URL leased", "raw dispatch"), ("raw dispatch", "URL", None),
            ("design floor", "URL", "raw dispatch"),
            ("signal", "signal", "raw event"), ("click", "click", "raw event"),
            ("result", "crawl result", "raw event"), ("raw event", "event", None),
            ("event floor: signal", "signal", "raw event"),
            ("event floor: click", "click", "raw event"),
            ("event floor: result", "crawl result", "raw event"),
            ("event floor: mix", "event of the 40/40/20 mix", "raw event"),
            ("single-write fold: signal", "signal", "raw event"),
            ("single-write fold: click", "click", "raw event"),
            ("single-write fold: mix", "event of the 40/40/20 mix", "raw event")]  # fmt: skip
    for name, unit, raw in rows:
        ratio = f"{pu[name]['min'] / pu[raw]['min']:.2f}" if raw else ""
        low, mid = pu[name]["min"] * scale, pu[name]["median"] * scale
        t.add_row(name, unit, f"{low:.1f}", f"{mid:.1f}", ratio)
    return t


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--urls", type=int, default=300_000)
    p.add_argument("--hosts", type=int, default=3_000)
    p.add_argument("--n", type=int, default=100, help="URLs asked per dispatch")
    p.add_argument("--calls", type=int, default=40, help="calls of each kind per round")
    p.add_argument("--repeats", type=int, default=8, help="rounds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, default=None, help="write the figures here")
    p.add_argument(
        "--meter", choices=("usec", "instructions"), default="usec",
        help="EVALSHA µs (INFO commandstats), or instructions under callgrind",
    )  # fmt: skip
    args = p.parse_args()
    out = asyncio.run(run(args))
    show_and_save(table(out), out, args.json)


if __name__ == "__main__":
    main()
