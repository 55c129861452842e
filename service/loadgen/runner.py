"""Drive a running service with a world's traffic over HTTP, on the service's clock.

The service must run an accelerated clock (``CRAWLSCHED_CLOCK=accelerated``):
the load generator reads its reading and rate from ``/healthz`` and maps world
time t (s from the start of the world) to clock time ``T0 + t``.  While it runs:

- the world's clicks and signals are posted, batched, as their time passes;
- worker tasks, with a total capacity of the world's budget R crawls per
  simulated second, poll ``/next``, fetch each URL against the world (changed
  since this worker fleet's previous fetch, or not) and post the result.

The client retries requests while the service is unavailable (503, e.g. its
store restarting); the run goes on through such an outage, and an
:class:`~service.loadgen.ledger.EventLedger`, if given, records per URL every
event the service acknowledged (for durability checks against the store).

At the end the achieved schedule is scored against the world
(:func:`scheduler_core.sim.schedule_freshness`) next to the BASELINE optimum (and the
optimum with signals), under the crawl delays the service enforces when any of them
binds (:mod:`service.loadgen.yardstick`), and uniform round-robin on the same world.

On a loaded machine the service may answer more slowly than the replayed clock
runs: events then reach it late and workers poll it late, in simulated time.  The
run measures by how much (the rounds' lag, and the crawls the workers still owed
at the end), and the report says so rather than quietly show a lower freshness.
A :class:`RunRecord`, if given, keeps the schedule and λ₀ over time for the HTML
report.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from prometheus_client.parser import text_string_to_metric_families
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from scheduler_core.host_optimum import HostOptimum
from scheduler_core.sim import CLICK, SIGNAL, World, round_robin_freshness, schedule_freshness
from service.client import CrawlschedClient
from service.loadgen.ledger import EventKind, EventLedger
from service.loadgen.report import LoadgenReport
from service.loadgen.yardstick import yardstick
from service.urls import canonical_url

__all__ = ["LoadgenOptions", "RunRecord", "run_loadgen"]


@dataclass(frozen=True)
class LoadgenOptions:
    """How the load generator drives the service.

    Attributes
    ----------
    workers : int
        Concurrent worker tasks sharing the crawl budget.
    tick_s : float
        Wall seconds between polls of each worker and event posts.
    max_batch : int
        Largest batch posted or asked for at once.
    progress : bool
        Show a rich progress bar.
    signal_optimum : bool
        Also compute the continuous optimum with signals (slower on big worlds).
    params : {"learned", "oracle"}
        ``learned``: URLs registered with their host's crawl delay only, the service
        estimates W, Δ, recall and ν from the clicks, signals and crawl outcomes;
        ``oracle``: the world's true parameters registered as fixed.
    """

    workers: int = 4
    tick_s: float = 0.01
    max_batch: int = 2000
    progress: bool = True
    signal_optimum: bool = True
    params: str = "learned"


@dataclass
class RunRecord:
    """What a run leaves for the HTML report (world times, s from the world's start).

    Attributes
    ----------
    crawl_url, crawl_time : list
        The schedule the service gave: URL index and fetch time of each crawl.
    lambda0 : list of (float, float)
        λ₀ as /metrics reported it, sampled about once a wall second.
    baseline, optimum : HostOptimum or None
        The continuous optimum without signals, and with them (None without signals),
        under the hosts' crawl delays (:mod:`service.loadgen.yardstick`).
    """

    crawl_url: list[int] = field(default_factory=list)
    crawl_time: list[float] = field(default_factory=list)
    lambda0: list[tuple[float, float]] = field(default_factory=list)
    baseline: HostOptimum | None = None
    optimum: HostOptimum | None = None


class _Timeline:
    """World time ↔ service clock time, from one ``/healthz`` reading."""

    def __init__(self, clock_now: float, rate: float, wall: float) -> None:
        self.rate = rate
        self._clock0, self._wall0 = clock_now, wall
        self.origin = self.clock()  # clock time of world time 0

    def clock(self) -> float:
        return self._clock0 + (time.perf_counter() - self._wall0) * self.rate

    def world(self) -> float:
        return self.clock() - self.origin


@dataclass
class _Run:
    world: World
    client: CrawlschedClient
    timeline: _Timeline
    options: LoadgenOptions
    index: dict[str, int]
    last_fetch: np.ndarray
    ledger: EventLedger
    record: RunRecord
    events_posted: int = 0
    live_fresh: int = 0
    live_clicks: int = 0
    # lag behind the replayed clock, simulated s: the oldest event a post could carry
    # waited this long; a worker's round (/next, fetch, result) took this long
    event_lag: list[float] = field(default_factory=list)
    round_lag: list[float] = field(default_factory=list)
    owed: float = 0.0  # crawls the workers were due to ask for but had not at the end

    def done(self) -> bool:
        return self.timeline.world() >= self.world.duration_s


async def _register(run: _Run) -> None:
    w = run.world
    p = w.params
    origin = run.timeline.origin
    oracle = run.options.params == "oracle"
    items: list[dict[str, Any]] = [
        {
            "url": url,
            "crawl_delay_s": float(w.crawl_delay_s[w.host_of[i]]),
            "last_crawled_at": origin,
        }
        for i, url in enumerate(w.urls)
    ]
    if oracle:
        for i, item in enumerate(items):
            item.update(
                weight=float(p.weight[i]), change_rate=float(p.change_rate[i]),
                recall=float(p.recall[i]), false_signal_rate=float(p.false_signal_rate[i]),
                fixed=True,
            )  # fmt: skip
    step = run.options.max_batch
    for k in range(0, len(items), step):
        await run.client.register(items[k : k + step])


_Post = Callable[[Sequence[Mapping[str, Any]]], Awaitable[dict[str, Any]]]


async def _post_events(run: _Run) -> None:
    log = run.world.events()
    origin, step = run.timeline.origin, run.options.max_batch
    t_prev = 0.0
    while True:
        finished = run.done()
        t = min(run.timeline.world(), run.world.duration_s)
        batch = log.window(t_prev, t)
        t_prev = t
        urls = [run.world.urls[i] for i in batch.url]
        clicks = batch.kind == CLICK
        click_idx = batch.url[clicks]
        if click_idx.size:
            stale = run.world.changed_between(
                click_idx, run.last_fetch[click_idx], batch.time[clicks]
            )
            run.live_clicks += int(click_idx.size)
            run.live_fresh += int((~stale).sum())
        posts: tuple[tuple[int, EventKind, _Post], ...] = (
            (CLICK, "click", run.client.clicks),
            (SIGNAL, "signal", run.client.signals),
        )
        for kind, name, call in posts:
            rows = [
                {"url": urls[j], "time": origin + float(batch.time[j])}
                for j in np.flatnonzero(batch.kind == kind)
            ]
            for k in range(0, len(rows), step):
                chunk = rows[k : k + step]
                run.ledger.record(name, chunk, await call(chunk))
            run.events_posted += len(rows)
        if len(batch):
            run.event_lag.append(run.timeline.world() - float(batch.time.min()))
        if finished:
            return
        await asyncio.sleep(run.options.tick_s)


async def _worker(run: _Run, capacity_per_s: float) -> None:
    credit, t_prev = 0.0, run.timeline.world()
    while not run.done():
        await asyncio.sleep(run.options.tick_s)
        t = run.timeline.world()
        credit += (t - t_prev) * capacity_per_s
        t_prev = t
        n = min(int(credit), run.options.max_batch)
        if n < 1:
            continue
        asked = run.timeline.world()
        leases = (await run.client.next(n))["leases"]
        credit -= len(leases)
        if len(leases) < n:
            credit = min(credit, 1.0)  # idle capacity is lost, not banked
        if not leases:
            continue
        fetched = min(run.timeline.world(), run.world.duration_s)
        idx = np.array([run.index[lease["url"]] for lease in leases], dtype=np.int64)
        changed = run.world.changed_between(idx, run.last_fetch[idx], np.full(idx.size, fetched))
        run.last_fetch[idx] = fetched
        run.record.crawl_url.extend(idx.tolist())
        run.record.crawl_time.extend([fetched] * idx.size)
        results = [
            {
                "url": lease["url"],
                "lease_id": lease["lease_id"],
                "fetched_at": run.timeline.origin + fetched,
                "status": 200,
                "changed": bool(c),
            }
            for lease, c in zip(leases, changed, strict=True)
        ]
        run.ledger.record("crawl_result", results, await run.client.results(results))
        run.round_lag.append(run.timeline.world() - asked)
    run.owed += max(credit - 1.0, 0.0)  # up to one crawl of credit is rounding, not lag


async def _progress(run: _Run, show: bool) -> None:
    days = run.world.duration_s / 86_400.0
    with Progress(
        TextColumn("[bold]loadgen"),
        BarColumn(),
        TextColumn("{task.completed:.0f}/{task.total:.0f} simulated days"),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        disable=not show,
    ) as bar:
        task = bar.add_task("run", total=days, status="")
        sampled = -math.inf
        while not run.done():
            fresh = run.live_fresh / run.live_clicks if run.live_clicks else float("nan")
            bar.update(
                task,
                completed=min(run.timeline.world() / 86_400.0, days),
                status=f"crawls {len(run.record.crawl_url)}  live freshness {fresh:.3f}",
            )
            if time.perf_counter() - sampled >= 1.0:  # λ₀ over time, once a wall second
                sampled = time.perf_counter()
                lambda0 = await _online_lambda0(run.client)
                if lambda0 is not None:
                    run.record.lambda0.append((run.timeline.world(), lambda0))
            await asyncio.sleep(0.2)
        bar.update(task, completed=days)


async def _online_lambda0(client: CrawlschedClient) -> float | None:
    for family in text_string_to_metric_families(await client.metrics()):
        if family.name == "crawlsched_lambda0" and family.samples:
            return float(family.samples[0].value)
    return None


def _weighted_change_rate(world: World) -> float:
    """Σ W·Δ / Σ W: the change rate of the pages clicks ask for, 1/s."""
    w, delta = world.params.weight, world.params.change_rate
    total = float(w.sum())
    return float(w @ delta) / total if total > 0 else float(np.mean(delta)) if delta.size else 0.0


async def run_loadgen(
    world: World,
    client: CrawlschedClient,
    options: LoadgenOptions | None = None,
    *,
    log: Callable[[str], None] = lambda _: None,
    ledger: EventLedger | None = None,
    record: RunRecord | None = None,
) -> LoadgenReport:
    """Replay ``world`` against the service behind ``client`` and score the result.

    Parameters
    ----------
    world : World
        The simulated web to replay.
    client : CrawlschedClient
        The service; its retries carry the run through outages (``retry_for_s``).
    options : LoadgenOptions, optional
        Workers, tick, batch size, progress bar.
    log : callable, optional
        Receives progress messages.
    ledger : EventLedger, optional
        Filled with every event the service acknowledged, per URL and status.
    record : RunRecord, optional
        Filled with the schedule, λ₀ over time and the optima (for the HTML report).

    Raises
    ------
    RuntimeError
        If the service's clock runs at wall speed (a world of months would take months).
    """
    options = options or LoadgenOptions()
    before = time.perf_counter()
    health = await client.healthz()
    after = time.perf_counter()
    if health["clock_rate"] <= 1.0:
        raise RuntimeError("the service must run an accelerated clock (CRAWLSCHED_CLOCK)")
    timeline = _Timeline(health["now"], health["clock_rate"], (before + after) / 2)
    stats0 = replace(client.stats)
    run = _Run(
        world=world,
        client=client,
        timeline=timeline,
        options=options,
        index={canonical_url(u): i for i, u in enumerate(world.urls)},
        last_fetch=np.zeros(len(world.urls)),
        ledger=ledger if ledger is not None else EventLedger(),
        record=record if record is not None else RunRecord(),
    )
    log(f"registering {len(world.urls)} URLs")
    await _register(run)
    wall0 = time.perf_counter()
    capacity = world.budget_per_s / options.workers
    await asyncio.gather(
        _post_events(run),
        _progress(run, options.progress),
        *(_worker(run, capacity) for _ in range(options.workers)),
    )
    wall = time.perf_counter() - wall0
    lambda0_online = await _online_lambda0(client)
    log("scoring the schedule")
    crawl_url = np.asarray(run.record.crawl_url, dtype=np.int64)
    achieved = schedule_freshness(world, crawl_url, np.asarray(run.record.crawl_time))
    has_signals = bool(np.any(world.params.signal_rate > 0))
    yard = yardstick(world, signal_optimum=options.signal_optimum)
    run.record.baseline, run.record.optimum = yard.baseline_solution, yard.optimum_solution
    crawls = len(crawl_url)
    lags = np.array(run.event_lag + run.round_lag)
    return LoadgenReport(
        freshness=achieved.click_weighted,
        freshness_stderr=achieved.click_stderr,
        clicks=achieved.clicks,
        freshness_time_weighted=achieved.time_weighted,
        baseline_accuracy=yard.baseline,
        round_robin_freshness=round_robin_freshness(world).click_weighted,
        signal_optimum_accuracy=yard.optimum,
        dispatch_per_s=crawls / wall,
        events_per_s=run.events_posted / wall,
        urls=len(world.urls),
        hosts=len(world.hosts),
        simulated_seconds=world.duration_s,
        wall_seconds=wall,
        crawls=crawls,
        budget_per_s=world.budget_per_s,
        crawl_rate_per_s=crawls / world.duration_s,
        lambda0_online=lambda0_online,
        lambda0_baseline=yard.baseline_lambda0,
        host_limited=yard.host_limited,
        binding_hosts=yard.binding_hosts,
        signals=has_signals,
        seed=world.seed,
        params=options.params,
        client_retries=client.stats.retries - stats0.retries,
        client_unavailable=client.stats.unavailable - stats0.unavailable,
        client_transport_errors=client.stats.transport_errors - stats0.transport_errors,
        lag_max_s=float(lags.max()) if lags.size else 0.0,
        lag_mean_s=float(lags.mean()) if lags.size else 0.0,
        crawls_behind=run.owed,
        clock_rate=timeline.rate,
        change_rate_per_s=_weighted_change_rate(world),
    )
