"""In process: how long the event loop stalls while the memory store's rescorer runs.

Builds a :class:`~service.store.memory.MemoryStore` of ``--urls`` URLs on ``--hosts``
hosts (seeded parameters, half of them with signals) whose thresholds were computed
at a Λ far from the one a few dispatches then give, so that every pass re-thresholds
``rescore_batch`` (20,000) URLs, and runs ``--passes`` passes of
:func:`~service.scheduler.rescoring.rescore_once` (a dispatch of 50 between them moves
λ₀ again) beside a task that sleeps 0.5 ms in a loop and records the gaps between its
wake-ups: a request on the API's event loop waits as long.  It does so with the
default ``rescore_slice`` and with one slice per pass (``rescore_slice`` =
``rescore_batch``: the whole pass read and written back at once), alternately,
``--rounds`` times, and prints per setting the pass's wall time, the gaps' p50 / p99
/ max, and what the other processes of the machine used meanwhile (share of one core,
``/proc/stat``; repeat a run where it is large).

``python bench/rescore_stall.py [--json out.json]`` (~20 s on 2 quiet cores).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from sampling import machine_busy_seconds
from service.clock import ManualClock
from service.metrics import Metrics
from service.scheduler.context import Context
from service.scheduler.dispatch import dispatch
from service.scheduler.rescoring import rescore_once
from service.settings import Settings
from service.store.base import UrlRecord
from service.store.memory import MemoryStore

T0 = 1_700_000_000.0
DAY = 86_400.0


def records(urls: int, hosts: int, seed: int) -> list[UrlRecord]:
    """``urls`` URLs spread evenly over ``hosts``, thresholds at Λ = 1e-6."""
    rng = np.random.default_rng(seed)
    per = -(-urls // hosts)
    w, d = rng.uniform(0.01, 2.0, urls) / DAY, rng.uniform(0.01, 1.0, urls) / DAY
    rec, nu = rng.choice([0.0, 0.6], urls), rng.uniform(0.0, 0.5, urls) / DAY
    thr, last = rng.uniform(1e4, 1e5, urls), T0 - rng.uniform(0, 1e5, urls)
    return [
        UrlRecord(
            url=f"https://r{i // per}.example/{i % per}",
            host=f"r{i // per}.example",
            weight=float(w[i]),
            change_rate=float(d[i]),
            recall=float(rec[i]),
            false_signal_rate=float(nu[i]),
            signal_time_equivalent_s=0.0,
            threshold_s=float(thr[i]),
            scored_lambda=1e-6,
            crawl_delay_s=0.5,
            last_crawled_at=float(last[i]),
        )  # fmt: skip
        for i in range(urls)
    ]


async def measure(recs: list[UrlRecord], settings: Settings, passes: int) -> dict[str, Any]:
    """Loop gaps (ms) and pass times (s) of ``passes`` rescoring passes."""
    store = MemoryStore(shards=16)
    for k in range(0, len(recs), 20_000):
        await store.upsert_urls(recs[k : k + 20_000], T0)
    clock = ManualClock(T0)
    ctx = Context(store, clock, settings, Metrics())
    for _ in range(10):
        clock.advance(1.0)
        await dispatch(ctx, 50)
    gaps: list[float] = []
    running = True

    async def ticker() -> None:
        last = time.perf_counter()
        while running:
            await asyncio.sleep(0.0005)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)
    walls, rescored = [], 0
    t0, busy0, own0 = time.perf_counter(), machine_busy_seconds(), time.process_time()
    for _ in range(passes):
        start = time.perf_counter()
        rescored += await rescore_once(ctx)
        walls.append(time.perf_counter() - start)
        clock.advance(1.0)
        await dispatch(ctx, 50)
    wall = time.perf_counter() - t0
    others = (machine_busy_seconds() - busy0 - (time.process_time() - own0)) / wall
    running = False
    await task
    g = np.array(gaps) * 1e3
    return {
        "rescore_slice": settings.rescore_slice,
        "urls_rescored": rescored,
        "pass_s": float(np.mean(walls)),
        "gap_ms": {q: float(np.percentile(g, p)) for q, p in (("p50", 50), ("p99", 99))}
        | {"max": float(g.max())},
        "other_processes": max(0.0, others),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--urls", type=int, default=300_000)
    ap.add_argument("--hosts", type=int, default=3_000)
    ap.add_argument("--passes", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    recs = records(args.urls, args.hosts, args.seed)
    base = Settings()
    rows = []
    for _ in range(args.rounds):
        for slice_urls in (base.rescore_batch, base.rescore_slice):
            settings = Settings(rescore_slice=slice_urls)
            row = asyncio.run(measure(recs, settings, args.passes))
            rows.append(row)
            g = row["gap_ms"]
            print(
                f"rescore_slice {slice_urls:>6,}: {row['urls_rescored']:,} URLs in "
                f"{args.passes} passes of {row['pass_s'] * 1e3:.0f} ms; loop gaps p50 "
                f"{g['p50']:.1f} ms, p99 {g['p99']:.1f} ms, max {g['max']:.1f} ms; "
                f"other processes {row['other_processes']:.0%}"
            )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
