"""In process: the CPU re-estimation costs per URL, memory store and Redis store side by
side, with full outcome windows.

Registers ``--urls`` URLs, one a host (so that every URL is due at once), then runs
``--rounds`` rounds: the clock ten years on, every URL leased and its crawl result
settled (two in three "changed"), the fold (the results' URLs queued for
re-estimation), then :func:`~service.scheduler.learning.flush_relearn` timed: the
CPU this process used (``time.process_time``, its threads included; with the Redis
store Redis's own time is not in it), per URL queued.  The last round's figure is
printed per store, each URL then holding ``--rounds`` outcomes (the window is 64),
with what the rest of the machine used meanwhile (share of one core,
``/proc/stat``).  Redis is a private ``redis-server`` (:class:`LocalRedis`).

``python bench/relearn.py [--urls 20000] [--rounds 16] [--json out.json]`` (~1 min).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
from pathlib import Path
from typing import Any

from rich.table import Table

from sampling import machine_busy_seconds, show_and_save
from service.app import open_store
from service.clock import ManualClock
from service.metrics import Metrics
from service.scheduler.context import Context
from service.scheduler.dispatch import dispatch
from service.scheduler.events import ingest_results
from service.scheduler.fold import fold_now
from service.scheduler.learning import flush_relearn
from service.scheduler.registry import register
from service.schemas import CrawlResultIn, UrlIn
from service.settings import Settings
from service.store.redis.local import LocalRedis

BATCH = 10_000
YEARS_S = 3_650 * 86_400.0


async def one_store(store: str, urls: int, rounds: int) -> dict[str, Any]:
    """The rounds on one store; the last round's figures."""
    s = Settings(
        store=store, clock="manual", max_batch=BATCH, max_next=max(urls, 1),
        default_crawl_delay_s=1e-6, relearn_batch=1_000_000,
    )  # fmt: skip
    clock = ManualClock(0.0)
    ctx = Context(await open_store(s), clock, s, Metrics())
    names = [f"https://h{i}.example/p/{i}" for i in range(urls)]
    for k in range(0, urls, BATCH):
        await register(ctx, [UrlIn(url=u, last_crawled_at=0.0) for u in names[k : k + BATCH]])
    out: dict[str, Any] = {}
    for r in range(rounds):
        clock.advance(YEARS_S)
        got = (await dispatch(ctx, urls)).leases
        now = clock.now()
        results = [
            CrawlResultIn(
                url=u, lease_id=lease, fetched_at=now, status=200, changed=(i + r) % 3 != 0
            )
            for i, (u, lease) in enumerate(zip(got.urls, got.lease_ids, strict=True))
        ]
        for k in range(0, len(results), BATCH):
            await ingest_results(ctx, results[k : k + BATCH])
        await fold_now(ctx, relearn=False)
        queued = len(ctx.relearn_queue)
        gc.collect()
        t0, cpu0, all0 = time.perf_counter(), time.process_time(), machine_busy_seconds()
        rescored = await flush_relearn(ctx)
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        others = (machine_busy_seconds() - all0 - cpu) / wall
        out = {
            "queued": queued, "leased": len(got), "rescored": rescored, "cpu_s": cpu,
            "wall_s": wall, "cpu_us_per_url": cpu / max(queued, 1) * 1e6, "others": others,
        }  # fmt: skip
    await ctx.store.close()
    return out


def main() -> None:
    """Both stores, one table, the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--urls", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=16)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    rows = {"memory": asyncio.run(one_store("memory", a.urls, a.rounds))}
    with LocalRedis() as server:
        rows["redis"] = asyncio.run(one_store(server.url, a.urls, a.rounds))
    table = Table(
        title=f"re-estimation after crawl results: {a.urls:,} URLs, round {a.rounds} "
        f"({a.rounds} outcomes a URL)"
    )
    for col in ("store", "URLs queued", "re-scored", "CPU", "CPU per URL", "other processes"):
        table.add_column(col, justify="left" if col == "store" else "right")
    for name, r in rows.items():
        table.add_row(
            name, f"{r['queued']:,}", f"{r['rescored']:,}", f"{r['cpu_s']:.2f} s",
            f"{r['cpu_us_per_url']:.1f} µs", f"{r['others']:.0%}",
        )  # fmt: skip
    show_and_save(table, rows, a.json)


if __name__ == "__main__":
    main()
