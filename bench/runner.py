"""One run of the bench: start Redis and the API, run every phase, stop both.

:func:`run` loads the frontier (:mod:`registration`), runs (a), (c) and (b) through
the API (:mod:`phases`) with a :class:`~sampling.Meter` window around each, then (e)
on the same Redis once the API has stopped (:mod:`raw_redis`), and returns a
:class:`Report` of everything measured.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import math
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import redis
from rich.console import Console

from config import CRAWL_DELAY_S, LOAD_BATCH, MAX_IN_FLIGHT, SHARDS, Config
from phases import (
    ROUTES,
    DispatchResult,
    EventsResult,
    LatencyResult,
    dispatch_closed,
    dispatch_open,
    event_bodies,
    post_events,
    result_bodies,
    top_up,
)
from raw_redis import (
    FLOOR,
    RAW_CLIENTS,
    RAW_DB,
    floor_events,
    floor_prepare,
    raw_dispatch,
    raw_events,
    raw_prepare,
    redis_benchmark,
)
from registration import LoadResult, load_direct, load_via_api
from sampling import (
    Meter,
    child_pid,
    metric_sum,
    py_spy,
    rescored_urls,
    sample_key_memory,
    used_memory,
)
from service.loadgen.demo import served_app, served_worker
from service.store.redis.local import LocalRedis
from service.store.redis.tuning import LISTPACK_SETTINGS


@dataclass
class Report:
    """Everything measured, for the table and the JSON file."""

    cfg: Config
    load: LoadResult = field(default_factory=LoadResult)
    mem_empty: int = 0
    mem_loaded: int = 0
    mem_dispatched: int = 0
    #: Leases out when ``mem_dispatched`` was read (those of the warm-up and (a)).
    leases_out: int = 0
    mem_sample: dict[str, float | str] = field(default_factory=dict)
    dispatch: DispatchResult | None = None
    latency: LatencyResult | None = None
    events: dict[str, EventsResult] = field(default_factory=dict)
    raw: dict[str, float] = field(default_factory=dict)
    redis_benchmark: dict[str, float] = field(default_factory=dict)
    meters: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    api_exit_s: float = 0.0
    #: After each event phase (which starts with nothing left to fold): the fold lag
    #: /metrics showed when it ended (s: the age of the oldest event not folded or whose
    #: URL was not re-estimated yet) and the wall s until every effect was applied (the
    #: worker's or the API's fold), by phase.
    fold_after: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: Before (a): the URLs the load left for the rescorer to score once λ₀ was known
    #: (``crawlsched_rescore_backlog_urls`` after the warm-up), and the wall s until it
    #: had scored them all.
    scoring: tuple[float, float] = (math.nan, math.nan)
    #: The re-estimation part of the fold's lag when the mix ended.
    relearn_lag_end_s: float = math.nan
    topped_up: int = 0
    wall_s: float = 0.0

    @property
    def fold_lag_end_s(self) -> float:
        """The fold's lag when the mix ended, s (NaN before it ran)."""
        return self.fold_after.get("mix", (math.nan, math.nan))[0]

    @property
    def fold_drain_s(self) -> float:
        """Wall s after the mix until the fold had caught up (NaN before it ran)."""
        return self.fold_after.get("mix", (math.nan, math.nan))[1]

    def per_url(self, used: int) -> float:
        """Bytes of Redis memory per URL at ``used``."""
        return (used - self.mem_empty) / self.cfg.urls

    def keep(self, key: str, meter: Meter, units: float, unit: str) -> None:
        """Keep the figures of ``meter``'s last window under ``key``, with its note per
        ``unit`` (``units`` of them done in the window)."""
        self.meters[key] = meter.as_dict()
        self.notes[key] = meter.note(units, unit)


#: The event mix of (b): 40 % signals, 40 % clicks, 20 % crawl results.
MIX = ("signal", "click", "signal", "click", "result")


async def run(cfg: Config, console: Console) -> Report:
    """Start Redis and the API, run every phase, stop both."""
    rep = Report(cfg)
    t_start = time.perf_counter()
    env = {
        "CRAWLSCHED_DEFAULT_CRAWL_DELAY_S": str(CRAWL_DELAY_S),
        "CRAWLSCHED_MAX_BATCH": str(max(LOAD_BATCH, cfg.event_batch)),
        "CRAWLSCHED_MAX_NEXT": str(max(1000, cfg.n)),
        "CRAWLSCHED_MAX_IN_FLIGHT": str(MAX_IN_FLIGHT),
    }
    on_redis = cfg.store == "redis"
    with LocalRedis(settings={} if cfg.redis_defaults else LISTPACK_SETTINGS) as server:
        assert server.process is not None
        admin = redis.Redis(port=server.port)
        if on_redis:
            env["CRAWLSCHED_STORE"] = server.url
        else:  # the embedded store: everything through the API, however long it takes
            cfg = dataclasses.replace(cfg, load_budget=math.inf)
        with contextlib.ExitStack() as stack:
            # the worker beside a Redis-backed API as a deployment runs it, metered apart
            base = stack.enter_context(served_app(env, worker=False))
            worker_base = stack.enter_context(served_worker(env)) if on_redis else None
            api_pid = child_pid("-m service serve")  # served_app runs `python -m service serve`
            worker_pid = child_pid("-m service worker") if on_redis else None
            meter = Meter(api_pid, server.process.pid, admin, base, worker_pid, worker_base)
            console.log(
                f"redis pid {server.process.pid} port {server.port}; API pid {api_pid}"
                f"{f', worker pid {worker_pid}' if worker_pid else ''} ({cfg.store} store)"
            )
            rep.mem_empty = used_memory(admin)

            console.log(f"loading {cfg.urls:,} URLs on {cfg.hosts:,} hosts")
            with meter.window():
                await load_via_api(base, cfg, rep.load)
            rep.keep("load_api", meter, rep.load.api_urls, "URL")
            if rep.load.api_urls < cfg.urls:
                console.log(f"budget spent: the last {cfg.urls - rep.load.api_urls:,} in-process")
                with meter.window():
                    await load_direct(server.url, cfg, rep.load)
                rep.keep("load_direct", meter, rep.load.direct_urls, "URL")
            if on_redis:
                rep.mem_loaded = used_memory(admin)
                rep.mem_sample = sample_key_memory(admin, cfg)

            pool: list[tuple[str, str]] = []
            console.log("dispatch (a)")
            await dispatch_closed(base, cfg, cfg.warmup, pool)
            # the warm-up gave λ₀: every host's thresholds are stale until scored once
            rep.scoring = await scoring_drain(worker_base or base)
            console.log(
                f"rescorer: {rep.scoring[0]:,.0f} URLs to score after the warm-up, "
                f"scored {rep.scoring[1]:.1f} s later"
            )
            with py_spy(api_pid, cfg.profile, "dispatch", cfg.seconds), meter.window():
                # at most half of what is left, so that (c) has URLs to lease
                most = (cfg.urls - len(pool)) // 2
                rep.dispatch = await dispatch_closed(base, cfg, cfg.seconds, pool, most)
            rep.keep("dispatch", meter, rep.dispatch.urls, "URL")
            if on_redis:
                rep.mem_dispatched = used_memory(admin)
                rep.leases_out = len(pool)

            half = rep.dispatch.request_rate / 2
            console.log(f"latency at half load (c): {half:.1f} requests/s")
            with meter.window():
                rep.latency = await dispatch_open(base, cfg, half, cfg.seconds, pool)
            rep.keep("latency", meter, rep.latency.urls, "URL")

            rep.topped_up = await top_up(base, cfg, pool)
            console.log(f"events (b): {len(pool):,} leases to settle")
            await run_events(base, cfg, rep, pool, meter, api_pid)
            console.log(
                f"fold: lag {rep.fold_lag_end_s:.2f} s when the mix ended (re-estimation "
                f"{rep.relearn_lag_end_s:.2f} s), drained {rep.fold_drain_s:.2f} s later"
            )
            t_stop = time.perf_counter()
        rep.api_exit_s = time.perf_counter() - t_stop

        console.log("raw Redis (e)")
        raw_s = max(2.0, cfg.seconds / 2)
        raw_meter = Meter(None, server.process.pid, admin)
        raw_db = redis.Redis(port=server.port, db=RAW_DB)
        for how in (*RAW_CLIENTS, FLOOR):  # each from full queues
            await raw_prepare(server.port, cfg.hosts, cfg.per_host)
            if how == FLOOR:
                floor_prepare(raw_db, cfg.hosts, SHARDS)
            with raw_meter.window():
                rate = await raw_dispatch(server.port, cfg, raw_s, how)
            rep.raw[f"dispatch {how}"] = rate
            rep.keep(f"raw dispatch {how}", raw_meter, rate * raw_meter.wall, "URL")
        for how in RAW_CLIENTS:
            with raw_meter.window():
                rate = await raw_events(server.port, cfg, raw_s, how)
            rep.raw[f"events {how}"] = rate
            rep.keep(f"raw events {how}", raw_meter, rate * raw_meter.wall, "event")
        # the event floor on keys of its own (it leaves raw Redis's as they were)
        await raw_prepare(server.port, cfg.hosts, cfg.per_host, "ev", flush=False)
        floor_prepare(raw_db, cfg.hosts, SHARDS, "fe")
        with raw_meter.window():
            rate = await floor_events(server.port, cfg, raw_s, [k[0] for k in MIX])
        rep.raw[f"events {FLOOR}"] = rate
        rep.keep(f"raw events {FLOOR}", raw_meter, rate * raw_meter.wall, "event")
        raw_db.close()
        rep.redis_benchmark = redis_benchmark(server.port)
        admin.close()
    rep.wall_s = time.perf_counter() - t_start
    return rep


async def scoring_drain(base: str, timeout_s: float = 600.0) -> tuple[float, float]:
    """The rescorer's backlog (``crawlsched_rescore_backlog_urls`` of the process at
    ``base``, the highest seen) and the wall s until it was 0 with no URL rescored for
    a second (its passes had nothing left); NaN after ``timeout_s``."""
    t0 = time.perf_counter()
    most, quiet_since, last = 0.0, math.inf, math.nan
    while time.perf_counter() - t0 < timeout_s:
        backlog = await asyncio.to_thread(metric_sum, "crawlsched_rescore_backlog_urls", base)
        done = await asyncio.to_thread(rescored_urls, base)
        most = max(most, backlog)
        now = time.perf_counter()
        if backlog > 0 or done != last:
            quiet_since, last = now, done
        elif now - quiet_since >= 1.0:
            return most, quiet_since - t0
        await asyncio.sleep(0.1)
    return most, math.nan


def _lags(base: str) -> tuple[float, float]:
    """``crawlsched_fold_lag_seconds`` (every effect, re-estimation included) and
    ``crawlsched_relearn_lag_seconds`` (re-estimation only) as the API's /metrics
    shows them, s."""
    found: dict[str, float] = {}
    for line in httpx.get(f"{base}/metrics", timeout=30.0).text.splitlines():
        name, _, value = line.partition(" ")
        if name in ("crawlsched_fold_lag_seconds", "crawlsched_relearn_lag_seconds"):
            found[name] = float(value)
    if len(found) < 2:
        raise RuntimeError("the API exports no crawlsched_fold_lag_seconds or relearn lag")
    return found["crawlsched_fold_lag_seconds"], found["crawlsched_relearn_lag_seconds"]


def _fold_lag(base: str) -> float:
    return _lags(base)[0]


async def fold_drain(base: str, timeout_s: float = 300.0) -> tuple[float, float]:
    """The fold lag now (re-estimation included), and the wall s until it is 0 (0 if it
    is already; NaN after ``timeout_s``)."""
    first = lag = await asyncio.to_thread(_fold_lag, base)
    t0 = time.perf_counter()
    if lag == 0:
        return first, 0.0
    while lag > 0:
        if time.perf_counter() - t0 > timeout_s:
            return first, math.nan
        await asyncio.sleep(0.05)
        lag = await asyncio.to_thread(_fold_lag, base)
    return first, time.perf_counter() - t0


async def run_events(
    base: str,
    cfg: Config,
    rep: Report,
    pool: list[tuple[str, str]],
    meter: Meter,
    api_pid: int | None,
) -> None:
    """(b): each route alone, then the mix (crawl results drawn from ``pool``); after
    each, the fold's lag and the wall s until it has caught up (the next phase starts
    with nothing left to fold)."""
    rng = random.Random(cfg.seed + 1)
    prebuilt = {k: event_bodies(cfg, k, 64, rng) for k in ROUTES}
    settle = result_bodies(cfg, pool, rng)
    # half the leases for the mix, half for /crawl-result alone: each settles once
    results = {"mix": iter(settle[: len(settle) // 2]), "alone": iter(settle[len(settle) // 2 :])}

    def bodies(run: str = "alone") -> dict[str, Iterator[bytes]]:
        return {**{k: itertools.cycle(v) for k, v in prebuilt.items()}, "result": results[run]}

    alone_s = max(2.0, 0.4 * cfg.seconds)
    await fold_drain(base)  # the phases before left nothing to fold
    for kind in ("signal", "click"):
        with meter.window():
            rep.events[kind] = await post_events(base, cfg, alone_s, (kind,), bodies())
        rep.keep(f"events_{kind}", meter, rep.events[kind].total, "event")
        rep.fold_after[kind] = await fold_drain(base)
    with py_spy(api_pid, cfg.profile, "events", cfg.seconds), meter.window():
        rep.events["mix"] = await post_events(base, cfg, cfg.seconds, MIX, bodies("mix"))
    rep.keep("events_mix", meter, rep.events["mix"].total, "event")
    rep.relearn_lag_end_s = (await asyncio.to_thread(_lags, base))[1]
    rep.fold_after["mix"] = await fold_drain(base)
    with meter.window():
        rep.events["result"] = await post_events(base, cfg, alone_s, ("result",), bodies())
    rep.keep("events_result", meter, rep.events["result"].total, "event")
    rep.fold_after["result"] = await fold_drain(base)
