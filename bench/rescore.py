"""In process: what a rescoring pass costs per URL, memory store and Redis store side by
side.

Registers ``--urls`` URLs on ``--hosts`` hosts with their weight and change rate given
(no signals: GREEDY's closed-form threshold, so that the figure is the store's and the
pass's own work, not the inverse of V), leases ``--n`` of them once (the dispatch gives
λ₀ its first estimate, so every host's threshold has drifted), then runs
:func:`~service.scheduler.rescoring.rescore_once` until no host is left to rescore,
timed: the CPU this process used (``time.process_time``, its threads included) and,
with the Redis store, Redis's own script time (``INFO commandstats``, ``EVALSHA``), per
URL rescored, with what the rest of the machine used meanwhile (share of one core,
``/proc/stat``).  Redis is a private ``redis-server`` (:class:`LocalRedis`).

``python bench/rescore.py [--urls 100000] [--hosts 1000] [--json out.json]`` (~1 min).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import time
from pathlib import Path
from typing import Any

import redis
from rich.table import Table

from config import spec_of
from sampling import machine_busy_seconds, show_and_save
from service.app import open_store
from service.clock import ManualClock
from service.metrics import Metrics
from service.scheduler.context import Context
from service.scheduler.dispatch import dispatch
from service.scheduler.registry import register
from service.scheduler.rescoring import rescore_once
from service.schemas import UrlIn
from service.settings import Settings
from service.store.redis.local import LocalRedis

BATCH = 10_000


def evalsha_usec(port: int | None) -> float:
    """Redis's total ``EVALSHA`` time so far, µs (0 without a server)."""
    if port is None:
        return 0.0
    with redis.Redis(port=port) as client:
        return float(client.info("commandstats").get("cmdstat_evalsha", {}).get("usec", 0))


async def one_store(store: str, port: int | None, urls: int, hosts: int, n: int) -> dict[str, Any]:
    """Load, lease ``n``, rescore until nothing has drifted; the figures."""
    s = Settings(store=store, clock="manual", max_batch=BATCH, default_crawl_delay_s=1e-6)
    ctx = Context(await open_store(s), ManualClock(1e9), s, Metrics())
    per_host = -(-urls // hosts)
    for k in range(0, urls, BATCH):
        rng = random.Random(k)
        batch = [UrlIn(**spec_of(i, per_host, rng)) for i in range(k, min(urls, k + BATCH))]
        await register(ctx, batch)
    await dispatch(ctx, n)
    gc.collect()
    redis0 = evalsha_usec(port)
    t0, cpu0, all0 = time.perf_counter(), time.process_time(), machine_busy_seconds()
    rescored, passes = 0, 0
    while done := await rescore_once(ctx):
        rescored, passes = rescored + done, passes + 1
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    redis_s = (evalsha_usec(port) - redis0) / 1e6
    others = (machine_busy_seconds() - all0 - cpu) / wall - (redis_s / wall if port else 0.0)
    await ctx.store.close()
    per = max(rescored, 1)
    return {
        "rescored": rescored, "passes": passes, "wall_s": wall, "cpu_s": cpu,
        "cpu_us_per_url": cpu / per * 1e6, "redis_us_per_url": redis_s / per * 1e6,
        "others": max(0.0, others),
    }  # fmt: skip


def main() -> None:
    """Both stores, one table, the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--urls", type=int, default=100_000)
    ap.add_argument("--hosts", type=int, default=1_000)
    ap.add_argument("--n", type=int, default=100, help="URLs leased before the passes")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    rows = {"memory": asyncio.run(one_store("memory", None, a.urls, a.hosts, a.n))}
    with LocalRedis() as server:
        rows["redis"] = asyncio.run(one_store(server.url, server.port, a.urls, a.hosts, a.n))
    table = Table(title=f"rescoring after λ₀'s first estimate: {a.urls:,} URLs, {a.hosts:,} hosts")
    cols = ("store", "rescored", "passes", "wall", "CPU per URL", "Redis per URL", "other")
    for col in cols:
        table.add_column(col, justify="left" if col == "store" else "right")
    for name, r in rows.items():
        table.add_row(
            name, f"{r['rescored']:,}", f"{r['passes']:,}", f"{r['wall_s']:.2f} s",
            f"{r['cpu_us_per_url']:.1f} µs",
            f"{r['redis_us_per_url']:.1f} µs" if name == "redis" else "",
            f"{r['others']:.0%}",
        )  # fmt: skip
    show_and_save(table, rows, a.json)


if __name__ == "__main__":
    main()
