"""Score a crawl schedule against a world: the freshness its users saw.

*Click-weighted freshness* (paper 004's accuracy, Han et al.'s click-weighted
freshness) is the share of clicks after the warm-up that found a fresh copy:
no change of the URL in (its last crawl at or before the click, the click].
Every URL counts as fetched at time 0.  The time-weighted variant is
Σ_i W_i·(time URL i was fresh) / (ΣW · measured span), computed exactly from
the change and crawl times.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scheduler_core.errors import ParameterError
from scheduler_core.params import FloatArray
from scheduler_core.sim.world import CLICK, IntArray, World

__all__ = [
    "FreshnessReport",
    "fresh_clicks_by_url",
    "freshness_over_time",
    "round_robin_freshness",
    "round_robin_schedule",
    "schedule_freshness",
    "subset_freshness",
]

# Tie order of the merged (url, time) sequence: a change at the time of a crawl
# is fetched by it, a crawl at the time of a click serves it.
_BY_CHANGE, _BY_CRAWL, _BY_CLICK = 0, 1, 2


@dataclass(frozen=True, slots=True)
class FreshnessReport:
    """How fresh a schedule kept a world.

    Attributes
    ----------
    click_weighted : float
        Share of clicks in [warm-up, duration) that saw a fresh copy (nan if none).
    clicks : int
        Number of those clicks.
    click_stderr : float
        Binomial standard error √(p(1−p)/n) of ``click_weighted`` (nan if no clicks).
    time_weighted : float
        W-weighted share of time fresh over [warm-up, duration) (nan if ΣW = 0).
    crawls : int
        Crawls in the schedule (not counting the fetch of every URL at time 0).
    """

    click_weighted: float
    clicks: int
    click_stderr: float
    time_weighted: float
    crawls: int


def schedule_freshness(
    world: World, crawl_url: ArrayLike, crawl_time: ArrayLike
) -> FreshnessReport:
    """Score the crawls ``crawl_url`` at ``crawl_time`` against ``world``.

    A click on URL i at time t is fresh iff i did not change in (last crawl of
    i at or before t, t]; every URL counts as crawled at time 0.  Exact (integer
    time ranks, no rounding) and vectorised: one sort of the changes, crawls and
    clicks, packed as integers.

    Parameters
    ----------
    world : World
    crawl_url : array_like of int, shape (c,)
        URL index of each crawl, in any order.
    crawl_time : array_like of float, shape (c,)
        Time of each crawl, s, in [0, duration].

    Returns
    -------
    FreshnessReport

    Raises
    ------
    ParameterError
        If the arrays differ in length, name unknown URLs, or hold times outside
        [0, duration].

    References
    ----------
    Paper 004 §6 (accuracy); Han et al. §5 (click-weighted freshness);
    ``MATH.md``, "Quantities" (objective).
    """
    url, time = _checked(world, crawl_url, crawl_time)
    all_url, all_time = _with_initial_fetches(world, url, time)
    fresh_by_url, clicks_by_url = _fresh_clicks_by_url(world, all_url, all_time)
    fresh, clicks = int(fresh_by_url.sum()), int(clicks_by_url.sum())
    p = fresh / clicks if clicks else math.nan
    stderr = math.sqrt(p * (1.0 - p) / clicks) if clicks else math.nan
    return FreshnessReport(
        click_weighted=p,
        clicks=clicks,
        click_stderr=stderr,
        time_weighted=_time_weighted(world, all_url, all_time),
        crawls=int(url.size),
    )


def _checked(
    world: World, crawl_url: ArrayLike, crawl_time: ArrayLike
) -> tuple[IntArray, FloatArray]:
    """The schedule as (c,) int64 and float64 arrays, validated."""
    url = np.asarray(crawl_url, dtype=np.int64)
    time = np.asarray(crawl_time, dtype=np.float64)
    m = len(world.urls)
    if url.shape != time.shape or url.ndim != 1:
        raise ParameterError("`crawl_url` and `crawl_time` must be (c,) arrays of one length")
    if url.size and (url.min() < 0 or url.max() >= m):
        raise ParameterError("`crawl_url` must index the world's URLs")
    if time.size and not (np.isfinite(time).all() and 0 <= time.min() <= time.max()):
        raise ParameterError("`crawl_time` must lie in [0, duration]")
    if time.size and time.max() > world.duration_s:
        raise ParameterError("`crawl_time` must lie in [0, duration]")
    return url, time


def _event_keys(
    world: World, crawl_url: IntArray, crawl_time: FloatArray
) -> tuple[IntArray, IntArray, int]:
    """Changes, crawls and clicks in [warm-up, duration) as integers
    ``((url·stride + rank)·4 + tie)``, in that order (unsorted); the clicks'
    positions in the event log; how many keys come before the clicks'."""
    log, index = world.events(), world.change_index
    start = int(np.searchsorted(log.time, world.warmup_s, side="left"))
    click_pos = start + np.flatnonzero(log.kind[start:] == CLICK)
    stride = index.stride
    keys = np.concatenate(
        [
            index.keys * 4 + _BY_CHANGE,
            (crawl_url * stride + world.time_rank(crawl_time)) * 4 + _BY_CRAWL,
            (log.url[click_pos] * stride + world.event_rank(click_pos)) * 4 + _BY_CLICK,
        ]
    )
    return keys, click_pos, int(index.keys.size + crawl_url.size)


def _clicks_fresh(tie: IntArray) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """Which sorted events are clicks, shape (n,), and whether each click found its copy
    fresh, shape (clicks,): the last change-or-crawl before it is a crawl.  ``tie``:
    the low two bits of the sorted keys of :func:`_event_keys`."""
    resets = tie != _BY_CLICK
    last_reset = np.maximum.accumulate(np.where(resets, np.arange(tie.size), 0))
    return ~resets, tie[last_reset[~resets]] == _BY_CRAWL


def _with_initial_fetches(
    world: World, url: IntArray, time: FloatArray
) -> tuple[IntArray, FloatArray]:
    """The crawls (checked) with every URL's fetch at time 0 in front, (m + c,) each."""
    m = len(world.urls)
    return np.concatenate([np.arange(m, dtype=np.int64), url]), np.concatenate([np.zeros(m), time])


def _fresh_clicks_by_url(
    world: World, crawl_url: IntArray, crawl_time: FloatArray
) -> tuple[IntArray, IntArray]:
    """:func:`fresh_clicks_by_url` of checked crawls that include the fetches at 0.

    After one sort of :func:`_event_keys`, a click is fresh iff the last
    change-or-crawl before it is a crawl (the fetch at 0 opens every URL's run).
    """
    m = len(world.urls)
    keys, click_pos, _ = _event_keys(world, crawl_url, crawl_time)
    if not click_pos.size:
        return np.zeros(m, dtype=np.int64), np.zeros(m, dtype=np.int64)
    keys.sort()
    clicked, fresh = _clicks_fresh(keys & 3)
    click_url = (keys[clicked] >> 2) // world.change_index.stride
    del keys
    return (
        np.bincount(click_url[fresh], minlength=m).astype(np.int64),
        np.bincount(click_url, minlength=m).astype(np.int64),
    )


def fresh_clicks_by_url(
    world: World, crawl_url: ArrayLike, crawl_time: ArrayLike
) -> tuple[IntArray, IntArray]:
    """Clicks after the warm-up that found a fresh copy, and all of them, URL by URL.

    The rule of :func:`schedule_freshness`, click by click, counted per URL (every
    URL counts as fetched at time 0).

    Parameters
    ----------
    world : World
    crawl_url : array_like of int, shape (c,)
    crawl_time : array_like of float, shape (c,)
        As for :func:`schedule_freshness`, s.

    Returns
    -------
    fresh : ndarray of int64, shape (m,)
        Clicks in [warm-up, duration) on each URL that found its copy fresh.
    clicks : ndarray of int64, shape (m,)
        Clicks in [warm-up, duration) on each URL.

    Raises
    ------
    ParameterError
        As :func:`schedule_freshness`.

    References
    ----------
    Paper 004 §6 (accuracy); Han et al. §5 (click-weighted freshness).
    """
    url, time = _checked(world, crawl_url, crawl_time)
    return _fresh_clicks_by_url(world, *_with_initial_fetches(world, url, time))


def subset_freshness(
    world: World, crawl_url: ArrayLike, crawl_time: ArrayLike, url_mask: ArrayLike
) -> tuple[float, int, float]:
    """Click-weighted freshness of a schedule over the clicks of some URLs only.

    The rule of :func:`schedule_freshness`, counting the clicks on the URLs where
    ``url_mask`` is true (e.g. those of the hosts that never went down).

    Parameters
    ----------
    world : World
    crawl_url : array_like of int, shape (c,)
    crawl_time : array_like of float, shape (c,)
        As for :func:`schedule_freshness`, s.
    url_mask : array_like of bool, shape (m,)
        The URLs whose clicks count.

    Returns
    -------
    tuple of (float, int, float)
        The share of those clicks that found a fresh copy (nan if none), their number,
        and its binomial standard error √(p(1−p)/n).

    Raises
    ------
    ParameterError
        As :func:`schedule_freshness`, or if ``url_mask`` is not of shape (m,).
    """
    mask = np.asarray(url_mask, dtype=np.bool_)
    if mask.shape != (len(world.urls),):
        raise ParameterError("`url_mask` must be a (m,) array of booleans")
    fresh_by_url, clicks_by_url = fresh_clicks_by_url(world, crawl_url, crawl_time)
    fresh, n = int(fresh_by_url[mask].sum()), int(clicks_by_url[mask].sum())
    if not n:
        return math.nan, 0, math.nan
    p = fresh / n
    return p, n, math.sqrt(p * (1.0 - p) / n)


def freshness_over_time(
    world: World, crawl_url: ArrayLike, crawl_time: ArrayLike, bins: int
) -> tuple[FloatArray, FloatArray, IntArray]:
    """Click-weighted freshness of a schedule in ``bins`` equal spans of [warm-up, duration).

    The rule of :func:`schedule_freshness`, click by click: the share of the clicks
    in each span that found a fresh copy (every URL counts as fetched at time 0).

    Parameters
    ----------
    world : World
    crawl_url : array_like of int, shape (c,)
        URL index of each crawl.
    crawl_time : array_like of float, shape (c,)
        Time of each crawl, s, in [0, duration].
    bins : int
        Number of spans, ≥ 1.

    Returns
    -------
    edges : ndarray of float64, shape (bins + 1,)
        Span boundaries, s.
    freshness : ndarray of float64, shape (bins,)
        Share of the span's clicks that saw a fresh copy (NaN for a span without clicks).
    clicks : ndarray of int64, shape (bins,)
        Clicks in each span.

    Raises
    ------
    ParameterError
        As :func:`schedule_freshness`, or if ``bins < 1``.

    References
    ----------
    Paper 004 §6 (accuracy); Han et al. §5 (click-weighted freshness).
    """
    if bins < 1:
        raise ParameterError("`bins` must be >= 1")
    url, time = _checked(world, crawl_url, crawl_time)
    keys, click_pos, offset = _event_keys(world, *_with_initial_fetches(world, url, time))
    edges = np.linspace(world.warmup_s, world.duration_s, bins + 1)
    fresh = np.zeros(click_pos.size, dtype=bool)
    if click_pos.size:
        order = np.argsort(keys, kind="stable")
        clicked, fresh_sorted = _clicks_fresh(keys[order] & 3)
        fresh[order[clicked] - offset] = fresh_sorted
    where = np.clip(
        np.searchsorted(edges, world.events().time[click_pos], "right") - 1, 0, bins - 1
    )
    clicks = np.bincount(where, minlength=bins).astype(np.int64)
    fresh_count = np.bincount(where, weights=fresh, minlength=bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(clicks > 0, fresh_count / clicks, np.nan)
    return edges, share, clicks


def _time_weighted(world: World, url: IntArray, time: FloatArray) -> float:
    """Σ_i W_i·fresh time_i / (ΣW·span) over [warm-up, duration).

    A copy fetched at t is fresh until the URL's first change after t or its next
    crawl, whichever comes first.
    """
    order = np.lexsort((time, url))
    url, time = url[order], time[order]
    t_end = world.duration_s
    nxt = np.empty_like(time)
    nxt[:-1] = time[1:]
    last_of_url = np.ones(url.size, dtype=bool)
    last_of_url[:-1] = url[1:] != url[:-1]
    nxt[last_of_url] = t_end
    stale_at = np.minimum(world.first_change_after(url, time), nxt)
    fresh = np.clip(stale_at, world.warmup_s, t_end) - np.clip(time, world.warmup_s, t_end)
    per_url = np.bincount(url, weights=np.maximum(fresh, 0.0), minlength=len(world.urls))
    w = world.params.weight
    total = float(w.sum())
    span = t_end - world.warmup_s
    return float(w @ per_url) / (total * span) if total > 0 else math.nan


def round_robin_schedule(world: World) -> tuple[IntArray, FloatArray]:
    """Uniform round-robin at the world's budget R: crawl k at (k+1)/R of URL k mod m.

    Returns
    -------
    crawl_url : ndarray of int64, shape (c,)
    crawl_time : ndarray of float64, shape (c,)
        Times in (0, duration), s; c = ⌈R·duration⌉ − 1 (crawls before the end).

    Notes
    -----
    Politeness is not modelled: the uniform policy of paper 004 §6 and Azar et
    al.'s baseline.
    """
    rate = world.budget_per_s
    count = int(math.ceil(rate * world.duration_s))
    k = np.arange(count, dtype=np.int64)
    t = (k + 1) / rate
    keep = t < world.duration_s
    return (k % len(world.urls))[keep], t[keep]


def round_robin_freshness(world: World) -> FreshnessReport:
    """:func:`schedule_freshness` of :func:`round_robin_schedule` on ``world``."""
    return schedule_freshness(world, *round_robin_schedule(world))
