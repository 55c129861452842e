"""What the crawl value costs per call and per URL, and what it adds to a dispatch.

    python bench/value_cost.py [--repeat 5] [--seed 0] [--json out.json]

In process, on URLs drawn as in the default world (paper 004 §6.1: W, Δ ~ U(0.1, 1)
a day, recall ~ U(0, 1), ν ~ U(0, 1) a day; last fetched up to 5 days before, 0–2
signals since, each worth up to a day of age):

- V at ``now`` of batches of 1, 10, 100 and 1,000 URLs through
  :func:`service.scheduler.scoring.values_of_columns`, as ``GET /next`` evaluates
  its leases (best of ``--repeat`` rounds);
- ι = V⁻¹(Λ) of batches of 1, 100 and 20,000 URLs through
  :func:`scheduler_core.threshold.threshold_for_value`, Λ = V at three days (a
  URL's estimate after a crawl result; a rescoring pass);
- the dispatch use case on the embedded memory store (100,000 URLs on 1,000 hosts,
  crawled, no politeness binding): CPU per URL leased over 300 calls of
  ``GET /next?n=100`` without HTTP.

Each row gives the CPU the rest of the machine used meanwhile (share of one core,
from ``/proc``).  The machine is shared: to compare two versions of the code, run
this file alternately against each (a ``git worktree`` of the other on
``PYTHONPATH``), not against figures of another run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from rich.console import Console
from rich.table import Table

from sampling import machine_busy_seconds
from scheduler_core.params import UrlParams
from scheduler_core.threshold import threshold_for_value
from scheduler_core.value import crawl_value
from service.app import build_store
from service.clock import ManualClock
from service.metrics import Metrics
from service.scheduler.context import Context
from service.scheduler.dispatch import dispatch
from service.scheduler.registry import register
from service.scheduler.rescoring import rescore_once
from service.scheduler.scoring import values_of_columns
from service.schemas import UrlIn
from service.settings import Settings
from service.store.columns import URL_COLUMNS

DAY = 86_400.0
NOW = 1e9


def _state(rng: np.random.Generator, m: int) -> npt.NDArray[Any]:
    st = np.zeros(m, dtype=URL_COLUMNS)
    st["weight"] = rng.uniform(0.1, 1.0, m) / DAY
    st["change_rate"] = rng.uniform(0.1, 1.0, m) / DAY
    st["recall"] = rng.uniform(0.0, 1.0, m)
    st["false_signal_rate"] = rng.uniform(0.0, 1.0, m) / DAY
    st["last_crawl_at"] = NOW - rng.uniform(0.0, 5 * DAY, m)
    st["signals_since_crawl"] = rng.integers(0, 3, m)
    st["signal_time_equivalent_s"] = rng.uniform(0.0, DAY, m)
    st["threshold_s"] = DAY
    st["last_signal_at"] = np.nan
    return st


def _best(fn: Callable[[], object], calls: int, repeat: int) -> tuple[float, float]:
    """Best seconds per call over ``repeat`` rounds of ``calls``, and the other
    processes' share of a core over all rounds."""
    best = float("inf")
    t_all, busy0 = time.perf_counter(), machine_busy_seconds()
    cpu0 = time.process_time()
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls)
    wall = time.perf_counter() - t_all
    others = (machine_busy_seconds() - busy0 - (time.process_time() - cpu0)) / wall
    return best, max(others, 0.0)


async def _dispatch_cpu(rng: np.random.Generator, urls: int, hosts: int) -> tuple[float, float]:
    """CPU s per URL leased by the dispatch use case on the memory store, and the
    other processes' share of a core meanwhile."""
    s = Settings(store="memory", clock="manual", max_in_flight=65535, max_next=1000)
    clock = ManualClock(1e6)
    ctx = Context(build_store(s), clock, s, Metrics())
    items = [
        UrlIn(
            url=f"https://h{i % hosts}.example/p/{i}",
            weight=float(rng.uniform(0.1, 1.0)) / DAY,
            change_rate=float(rng.uniform(0.1, 1.0)) / DAY,
            recall=float(rng.uniform(0.0, 1.0)),
            false_signal_rate=float(rng.uniform(0.0, 1.0)) / DAY,
            crawl_delay_s=0.001,
            last_crawled_at=1e6 - float(rng.uniform(0.0, 10 * DAY)),
        )
        for i in range(urls)
    ]
    for k in range(0, urls, 10_000):
        await register(ctx, items[k : k + 10_000])
    await dispatch(ctx, 100)  # λ₀ known: every host is stale once
    while await rescore_once(ctx):
        pass
    leased = 0
    wall0, busy0, cpu0 = time.perf_counter(), machine_busy_seconds(), time.process_time()
    for _ in range(300):
        clock.set(clock.now() + 0.01)
        leased += len((await dispatch(ctx, 100)).leases)
    cpu = time.process_time() - cpu0
    others = (machine_busy_seconds() - busy0 - cpu) / (time.perf_counter() - wall0)
    return cpu / max(leased, 1), max(others, 0.0)


def main() -> None:
    """Time V, V⁻¹ and the dispatch use case; print the table, write the JSON."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, default=None)
    a = p.parse_args()
    rng = np.random.default_rng(a.seed)
    rows: list[dict[str, Any]] = []
    for m in (1, 10, 100, 1000):
        st = _state(rng, m)
        t, others = _best(lambda st=st: values_of_columns(st, NOW, None), 2000 // m + 20, a.repeat)
        rows.append({"what": "V at now", "urls": m, "per_call_us": 1e6 * t, "others": others})
    for m in (1, 100, 20_000):
        st = _state(rng, m)
        params = UrlParams.create(
            weight=st["weight"], change_rate=st["change_rate"], recall=st["recall"],
            false_signal_rate=st["false_signal_rate"],
        )  # fmt: skip
        lam = crawl_value(params, np.full(m, 3 * DAY))
        t, others = _best(
            lambda p=params, v=lam: threshold_for_value(p, v), max(1, 200 // m), a.repeat
        )
        rows.append({"what": "ι = V⁻¹(Λ)", "urls": m, "per_call_us": 1e6 * t, "others": others})
    cpu, others = asyncio.run(_dispatch_cpu(rng, 100_000, 1_000))
    rows.append(
        {"what": "dispatch, memory store, n=100", "urls": 100, "per_call_us": 1e8 * cpu,
         "others": others}
    )  # fmt: skip
    table = Table(title="The crawl value's cost, in process")
    for col in ("what", "URLs a call", "µs a call", "µs a URL", "other processes"):
        table.add_column(col, justify="left" if col == "what" else "right")
    for r in rows:
        table.add_row(
            r["what"], f"{r['urls']:,}", f"{r['per_call_us']:,.0f}",
            f"{r['per_call_us'] / r['urls']:,.1f}", f"{r['others']:.0%}",
        )  # fmt: skip
    Console().print(table)
    print("dispatch row: CPU of the use case (lease, values, multipliers) per call of 100")
    if a.json:
        a.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
