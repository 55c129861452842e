"""In process: what a full garbage collection costs the embedded store, with and
without the heap freezer (:mod:`service.heap`), and whether the frozen heap grows.

1. Registers ``--urls`` URLs (100 a host) in a memory store through the registration
   use case, then times one full ``gc.collect()`` (the pause CPython's own full
   collections make the API's requests wait).  Again in a fresh store, with a
   :func:`~service.heap.freeze_pass` after every 50,000 URLs (about a second of
   registration through the API, the freezer's default interval): the longest pass,
   then a full collection.
2. ``--rounds`` rounds on ``--churn-urls`` URLs (one a host): lease every URL, settle
   the results, 5,000 signals and 5,000 clicks, fold and re-estimate, a rescoring pass,
   a learner pass every 5 rounds, then a freeze pass; prints the frozen objects
   (``gc.get_freeze_count()``) every 5 rounds: they stop growing once the lease
   history is full unless something leaks.

Each phase also gives the CPU the rest of the machine used meanwhile (share of one
core, ``/proc/stat``): the pause is CPU work, so repeat a run where that is large.

``python bench/heap.py [--urls 1000000] [--json out.json]`` (~2 min on 2 cores).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from sampling import cpu_and_others
from service.app import build_store
from service.clock import ManualClock
from service.heap import freeze_pass
from service.metrics import Metrics
from service.scheduler.context import Context
from service.scheduler.dispatch import dispatch
from service.scheduler.events import ingest_clicks, ingest_results, ingest_signals
from service.scheduler.fold import fold_now
from service.scheduler.learning import learn_pass
from service.scheduler.registry import register
from service.scheduler.rescoring import rescore_once
from service.schemas import ClickIn, CrawlResultIn, SignalIn, UrlIn
from service.settings import Settings

DAY_S = 86_400.0
BATCH = 10_000
FREEZE_EVERY = 50_000  # about a second of registration through the API


def _context() -> tuple[Context, ManualClock]:
    s = Settings(
        store="memory", clock="manual", max_batch=BATCH, max_next=1_000_000,
        default_crawl_delay_s=1e-6,
    )  # fmt: skip
    clock = ManualClock(0.0)
    return Context(build_store(s), clock, s, Metrics()), clock


async def _load(ctx: Context, urls: int, per_host: int, freeze: bool) -> list[float]:
    """Register the URLs; with ``freeze``, a pass after every ``FREEZE_EVERY``, timed."""
    passes = []
    for k in range(0, urls, BATCH):
        items = [
            UrlIn(url=f"https://h{i // per_host}.example/p/{i}", last_crawled_at=0.0)
            for i in range(k, min(k + BATCH, urls))
        ]
        await register(ctx, items)
        if freeze and (k + BATCH) % FREEZE_EVERY == 0:
            t = time.perf_counter()
            freeze_pass()
            passes.append(time.perf_counter() - t)
    return passes


async def pauses(urls: int) -> dict[str, Any]:
    """Phase 1: a full collection's pause without and with the freezer."""
    out: dict[str, Any] = {"urls": urls}
    ctx, _ = _context()
    await _load(ctx, urls, 100, freeze=False)
    out["tracked"] = len(gc.get_objects())
    t = time.perf_counter()
    gc.collect()
    out["full_collection_s"] = time.perf_counter() - t
    del ctx
    gc.collect()
    ctx, _ = _context()
    passes = await _load(ctx, urls, 100, freeze=True)
    out["longest_pass_s"] = max(passes, default=0.0)
    t = time.perf_counter()
    gc.collect()
    out["full_collection_frozen_s"] = time.perf_counter() - t
    gc.unfreeze()
    return out


async def churn(urls: int, rounds: int, log: Console) -> list[int]:
    """Phase 2: the frozen objects after every 5 rounds of the service's whole cycle."""
    ctx, clock = _context()
    names = [f"https://h{i}.example/p/{i}" for i in range(urls)]
    await _load(ctx, urls, 1, freeze=False)
    freeze_pass()
    counts = []
    for r in range(rounds):
        clock.advance(3_650 * DAY_S)
        got = (await dispatch(ctx, urls)).leases
        now = clock.now()
        results = [
            CrawlResultIn(url=u, lease_id=lease, fetched_at=now, status=200, changed=True)
            for u, lease in zip(got.urls, got.lease_ids, strict=True)
        ]
        for k in range(0, len(results), BATCH):
            await ingest_results(ctx, results[k : k + BATCH])
        await ingest_signals(ctx, [SignalIn(url=u, time=now) for u in names[:5_000]])
        await ingest_clicks(ctx, [ClickIn(url=u, time=now) for u in names[:5_000]])
        await fold_now(ctx)
        await rescore_once(ctx)
        if r % 5 == 0:
            await learn_pass(ctx)
        freeze_pass()
        if r % 5 == 4:
            counts.append(gc.get_freeze_count())
            log.print(f"round {r + 1}: {counts[-1]:,} frozen objects ({len(got):,} leased)")
    gc.unfreeze()
    return counts


def main() -> None:
    """Run both phases, print the figures, write the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--urls", type=int, default=1_000_000)
    ap.add_argument("--churn-urls", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    console = Console()
    p, _, p_others = cpu_and_others(lambda: asyncio.run(pauses(a.urls)))
    console.print(
        f"{p['urls']:,} URLs, {p['tracked']:,} tracked objects: a full collection "
        f"{p['full_collection_s']:.3f} s; with freeze passes every {FREEZE_EVERY:,} URLs, "
        f"the longest pass {p['longest_pass_s']:.3f} s, then a full collection "
        f"{p['full_collection_frozen_s'] * 1e3:.2f} ms (other processes: {p_others:.0%} of a core)"
    )
    counts, _, c_others = cpu_and_others(
        lambda: asyncio.run(churn(a.churn_urls, a.rounds, console))
    )
    console.print(f"(other processes meanwhile: {c_others:.0%} of a core)")
    if a.json is not None:
        figures = {"pauses": p, "frozen_every_5_rounds": counts, "others": [p_others, c_others]}
        a.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
