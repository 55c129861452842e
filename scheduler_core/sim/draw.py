"""Drawing a simulated web from its spec: host sizes, signal quality and events.

:meth:`scheduler_core.sim.world.World.generate` calls these in a fixed order on
one random generator, so a spec and its seed give one world.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from scheduler_core.params import FloatArray, UrlParams
from scheduler_core.sim.events import CHANGE, CLICK, SIGNAL, EventLog, IntArray
from scheduler_core.sim.spec import WorldSpec

__all__ = ["draw_events", "draw_signal_quality", "host_counts"]


def host_counts(shares: FloatArray, m: int) -> IntArray:
    """URLs per host, shape (H,): one each, the rest by largest remainder of ``shares``."""
    extra = shares * (m - shares.size)
    counts = np.floor(extra).astype(np.int64)
    short = (m - shares.size) - int(counts.sum())
    counts[np.argsort(-(extra - counts), kind="stable")[:short]] += 1
    return counts + 1


def draw_signal_quality(
    rng: np.random.Generator, spec: WorldSpec, change: FloatArray, host_of: IntArray
) -> tuple[FloatArray, FloatArray]:
    """Recall and false-signal rate of every URL, shapes (m,), (m,) (ν in 1/s).

    ``per_url``: each URL draws its source class (if several), recall r_i and
    false-signal draw f_i, and ν_i = f_i × mean(Δ).  ``per_host``: each host
    draws them once; its URLs get r_h and ν_i = f_h × Δ_i, so they share the
    precision r_h / (r_h + f_h).  Recall is clipped to [0, 1], ν to ≥ 0.

    Parameters
    ----------
    rng : numpy.random.Generator
    spec : WorldSpec
    change : ndarray, shape (m,)
        Δ of each URL, 1/s.
    host_of : ndarray of int64, shape (m,)

    References
    ----------
    Paper 004 §2 (precision and recall of sitemap signals), §6.1 and §6.7;
    ``MATH.md``, "Estimating parameters from the event streams" (signal quality
    belongs to the source); ``docs/worlds.md``.
    """
    per_host = spec.signal_quality == "per_host"
    n = int(host_of.max()) + 1 if per_host else change.shape[0]
    sources = spec.sources()
    if len(sources) == 1:
        recall = sources[0].recall.sample(rng, n)
        draw = sources[0].false_signal_rate.sample(rng, n)
    else:
        shares = np.array([s.share for s in sources])
        which = rng.choice(shares.size, size=n, p=shares / shares.sum())
        recall, draw = np.empty(n), np.empty(n)
        for j, source in enumerate(sources):
            at = np.flatnonzero(which == j)
            recall[at] = source.recall.sample(rng, at.size)
            draw[at] = source.false_signal_rate.sample(rng, at.size)
    recall, draw = np.clip(recall, 0.0, 1.0), np.maximum(draw, 0.0)
    if per_host:
        return recall[host_of], draw[host_of] * change
    return recall, draw * change.mean()


def draw_events(
    rng: np.random.Generator,
    params: UrlParams,
    duration: float,
    signals: WorldSpec | None,
    *,
    clicks: bool = True,
) -> EventLog:
    """The events of ``params`` on [0, duration), sorted by time.

    Clicks, changes and false signals are one marked Poisson process: the number
    of events of each (URL, kind) is Poisson(rate · duration); given the counts,
    the times are i.i.d. uniform, so sorted uniform times get a random
    permutation of the labels (no argsort of the whole log).  Announced changes
    then get a signal after a drawn delay, merged in linearly.
    """
    m = params.m
    rates = np.zeros((3, m))
    if clicks:
        rates[CLICK] = params.weight
    rates[CHANGE] = params.change_rate
    if signals is not None:
        rates[SIGNAL] = params.false_signal_rate
    counts = rng.poisson(rates * duration).ravel()
    # label = 4·url + kind; int32 halves the memory of the shuffle when it fits
    codes: NDArray[np.signedinteger[Any]] = np.add.outer(
        np.arange(3, dtype=np.int64), 4 * np.arange(m, dtype=np.int64)
    ).ravel()
    if 4 * m < 2**31:
        codes = codes.astype(np.int32)
    labels = np.repeat(codes, counts)
    del codes, counts
    rng.shuffle(labels)
    time = rng.uniform(0.0, duration, labels.size)
    time.sort()
    _clip_below(time, duration)
    kind = (labels & 3).astype(np.int8)
    url = (labels >> 2).astype(np.int64)
    del labels
    if signals is None:
        return EventLog(time, kind, url)
    changes = np.flatnonzero(kind == CHANGE)
    announced = changes[rng.random(changes.size) < params.recall[url[changes]]]
    delay = np.maximum(signals.signal_delay_s.sample(rng, announced.size), 0.0)
    sig_time = time[announced] + delay
    sig_url = url[announced]
    if (sig_time[1:] < sig_time[:-1]).any():
        order = np.argsort(sig_time, kind="stable")
        sig_time, sig_url = sig_time[order], sig_url[order]
    cut = int(np.searchsorted(sig_time, duration, side="left"))
    return _merge_sorted(EventLog(time, kind, url), sig_time[:cut], SIGNAL, sig_url[:cut])


def _clip_below(time: FloatArray, duration: float) -> None:
    """Move draws that rounded up to ``duration`` just below it (sorted ``time``, in place)."""
    start = int(np.searchsorted(time, duration, side="left"))
    time[start:] = np.nextafter(duration, 0.0)


def _merge_sorted(log: EventLog, time: FloatArray, kind: int, url: IntArray) -> EventLog:
    """Insert sorted events of one ``kind`` into ``log``, after its events of equal time."""
    n, k = len(log), time.size
    at = np.searchsorted(log.time, time, side="right") + np.arange(k, dtype=np.int64)
    keep = np.ones(n + k, dtype=bool)
    keep[at] = False
    out_time = np.empty(n + k)
    out_time[at], out_time[keep] = time, log.time
    out_kind = np.empty(n + k, dtype=np.int8)
    out_kind[at], out_kind[keep] = kind, log.kind
    out_url = np.empty(n + k, dtype=np.int64)
    out_url[at], out_url[keep] = url, log.url
    return EventLog(out_time, out_kind, out_url)
