"""Score a crawl schedule against a world: the freshness its users saw.

*Click-weighted freshness* (paper 004's accuracy, Han et al.'s click-weighted
freshness) is the share of clicks after the warm-up that found a fresh copy:
no change of the URL between its last crawl at or before the click and the
click.  Every URL counts as fetched at time 0.  The time-weighted variant is
Σ_i W_i·(time URL i was fresh) / (ΣW · measured span), computed exactly from
the change and crawl times.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from scheduler_core.errors import ParameterError
from scheduler_core.params import FloatArray
from scheduler_core.sim.world import CLICK, IntArray, World

__all__ = ["FreshnessReport", "round_robin_freshness", "round_robin_schedule", "schedule_freshness"]


@dataclass(frozen=True, slots=True)
class FreshnessReport:
    """How fresh a schedule kept a world.

    Attributes
    ----------
    click_weighted : float
        Share of clicks after the warm-up that saw a fresh copy (nan if none).
    clicks : int
        Number of those clicks.
    click_stderr : float
        Binomial standard error √(p(1−p)/n) of ``click_weighted``.
    time_weighted : float
        W-weighted share of time fresh over [warm-up, duration).
    crawls : int
        Crawls in the schedule.
    """

    click_weighted: float
    clicks: int
    click_stderr: float
    time_weighted: float
    crawls: int


def schedule_freshness(
    world: World, crawl_url: ArrayLike, crawl_time: ArrayLike
) -> FreshnessReport:
    """Score the crawls ``crawl_url`` (c,) int at ``crawl_time`` (c,) s against ``world``.

    Raises
    ------
    ParameterError
        If the arrays differ in length, name unknown URLs, or hold times outside
        [0, duration].

    References
    ----------
    Paper 004 §6 (accuracy); Han et al. §5 (click-weighted freshness).
    """
    url = np.asarray(crawl_url, dtype=np.int64)
    time = np.asarray(crawl_time, dtype=np.float64)
    m = len(world.urls)
    if url.shape != time.shape or url.ndim != 1:
        raise ParameterError("crawl_url and crawl_time must be (c,) arrays of one length")
    if url.size and (url.min() < 0 or url.max() >= m):
        raise ParameterError("crawl_url must index the world's URLs")
    if time.size and (
        not np.isfinite(time).all() or time.min() < 0 or time.max() > world.duration_s
    ):
        raise ParameterError("crawl_time must lie in [0, duration]")
    # Every URL is fetched at 0; crawls sorted by (URL, time).
    all_url = np.concatenate([np.arange(m, dtype=np.int64), url])
    all_time = np.concatenate([np.zeros(m), time])
    order = np.lexsort((all_time, all_url))
    all_url, all_time = all_url[order], all_time[order]
    scale = world.duration_s * (1.0 + 1e-9) + 1.0
    keys = all_url + all_time / scale

    log = world.events()
    clicks = (log.kind == CLICK) & (log.time >= world.warmup_s)
    c_url, c_time = log.url[clicks], log.time[clicks]
    last = np.searchsorted(keys, c_url + c_time / scale, side="right") - 1
    fresh = ~world.changed_between(c_url, all_time[last], c_time)
    n = int(fresh.size)
    p = float(fresh.mean()) if n else math.nan
    stderr = math.sqrt(p * (1 - p) / n) if n else math.nan
    return FreshnessReport(
        click_weighted=p,
        clicks=n,
        click_stderr=stderr,
        time_weighted=_time_weighted(world, all_url, all_time),
        crawls=int(url.size),
    )


def _time_weighted(world: World, url: IntArray, time: FloatArray) -> float:
    """Σ_i W_i·fresh time_i / (ΣW·span) over [warm-up, duration); crawls sorted by (url, time)."""
    t_end = world.duration_s
    nxt = np.empty_like(time)
    nxt[:-1] = time[1:]
    last_of_url = np.ones(url.size, dtype=bool)
    last_of_url[:-1] = url[1:] != url[:-1]
    nxt[last_of_url] = t_end
    first_change = world.first_change_after(url, time)
    stale_at = np.minimum(first_change, nxt)
    fresh = np.clip(stale_at, world.warmup_s, t_end) - np.clip(time, world.warmup_s, t_end)
    per_url = np.bincount(url, weights=np.maximum(fresh, 0.0), minlength=len(world.urls))
    w = world.params.weight
    span = t_end - world.warmup_s
    return float(w @ per_url / (w.sum() * span)) if w.sum() > 0 else math.nan


def round_robin_schedule(world: World) -> tuple[IntArray, FloatArray]:
    """Uniform round-robin at the world's budget: crawl k at (k+1)/R of URL k mod m.

    Returns ``(crawl_url, crawl_time)``, shapes (c,), c = ⌊R·duration⌋ (minus
    one if the last falls at the end).  Politeness is not modelled.
    """
    rate = world.budget_per_s
    count = int(math.floor(rate * world.duration_s))
    k = np.arange(count, dtype=np.int64)
    t = (k + 1) / rate
    keep = t < world.duration_s
    return (k % len(world.urls))[keep], t[keep]


def round_robin_freshness(world: World) -> FreshnessReport:
    """:func:`schedule_freshness` of :func:`round_robin_schedule`."""
    return schedule_freshness(world, *round_robin_schedule(world))
