"""Run a crawl policy against a simulated world, in process and fast.

The discrete setting of paper 004 §4 (Algorithm 1): the crawler fetches at a
total rate R(t) (:class:`~scheduler_core.sim.bandwidth.Bandwidth`), grouped in
steps of ``crawls_per_step`` fetches; at each step time the policy sees the
signals (and, if it asks, the clicks) that arrived since the previous step,
picks its URLs, and learns for each whether it had changed since its previous
crawl.  With ``crawls_per_step = 1`` this is Algorithm 1 exactly; larger steps
make every decision up to ``crawls_per_step / R`` seconds late (the §6.7 setup
crawls 5,000 URLs per step by design).

Per-host limits (politeness, k_h = 1 / crawl delay) are a token bucket per host:
host h earns k_h crawls per second, holds at most max(1, k_h · step length),
and may take ⌊tokens⌋ crawls in a step.

Signals are the world's events at their arrival time (a delayed signal arrives
after the change it announces, ``WorldSpec.signal_delay_s``); a policy may
discard those that arrive within T_DELAY after its last crawl of the URL
(GREEDY-NCIS-D, paper 004 App. C).

A crawl of a URL whose host is down (``World.host_down``) fails: it spends its
share of the budget and of the host's politeness, fetches no copy (the URL's
last crawl stays where it was, and the crawl is not in the schedule that is
scored), and the policy hears of it through ``observe_failed_crawls``.

References
----------
Paper 004 §4 (Algorithm 1), §6 (experiments), App. C (delayed signals) and D
(changing bandwidth); ``MATH.md``, "From values to decisions".
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from scheduler_core.errors import ParameterError
from scheduler_core.params import FloatArray, UrlParams
from scheduler_core.policies.base import IntArray, Policy, Problem, check_selection
from scheduler_core.sim.bandwidth import Bandwidth
from scheduler_core.sim.evaluate import FreshnessReport, schedule_freshness
from scheduler_core.sim.world import CLICK, SIGNAL, World

__all__ = ["SimResult", "problem_of", "simulate"]


@dataclass(frozen=True, slots=True)
class SimResult:
    """What one simulated run did and how fresh it kept the world.

    Attributes
    ----------
    policy : str
        The policy's name.
    crawl_url : ndarray of int64, shape (c,)
        URL of each crawl, in crawl order.
    crawl_time : ndarray of float64, shape (c,)
        Time of each crawl, s.
    report : FreshnessReport
        Click- and time-weighted freshness after the warm-up.
    steps : int
        Steps simulated.
    wall_s : float
        Wall-clock seconds the run took (policy and world together).
    failed_crawls : int
        Crawls that failed because their host was down (not in ``crawl_url``).
    """

    policy: str
    crawl_url: IntArray
    crawl_time: FloatArray
    report: FreshnessReport
    steps: int
    wall_s: float
    failed_crawls: int = 0

    @property
    def accuracy(self) -> float:
        """Click-weighted freshness, or the time-weighted one for a world without clicks."""
        cw = self.report.click_weighted
        return self.report.time_weighted if math.isnan(cw) else cw

    def crawl_rates(self, m: int, span_s: tuple[float, float]) -> FloatArray:
        """Empirical crawl rate of each URL over ``span_s`` = (t0, t1), 1/s, shape (m,)."""
        t0, t1 = span_s
        keep = (self.crawl_time >= t0) & (self.crawl_time < t1)
        return np.bincount(self.crawl_url[keep], minlength=m) / (t1 - t0)


def problem_of(
    world: World, *, host_limits: bool = False, params_seen: UrlParams | None = None
) -> Problem:
    """The :class:`Problem` a policy is given for ``world``.

    Parameters
    ----------
    world : World
    host_limits : bool
        True: k_h = 1 / crawl delay of each host; False: no per-host limit.
    params_seen : UrlParams, optional
        The parameters the policy believes (default: the world's true ones).
    """
    params = world.params if params_seen is None else params_seen
    if params.m != len(world.urls):
        raise ParameterError("`params_seen` must describe the world's URLs")
    with np.errstate(divide="ignore"):
        limits = 1.0 / world.crawl_delay_s if host_limits else np.full(len(world.hosts), np.inf)
    return Problem(
        params=params,
        host_of=world.host_of,
        host_limit_per_s=np.asarray(limits, dtype=np.float64),
        budget_per_s=world.budget_per_s,
        duration_s=world.duration_s,
        urls=tuple(world.urls),
        hosts=tuple(world.hosts),
    )


def simulate(
    world: World,
    policy: Policy,
    *,
    crawls_per_step: int = 1,
    bandwidth: Bandwidth | None = None,
    host_limits: bool = False,
    problem: Problem | None = None,
    progress: Callable[[float], None] | None = None,
) -> SimResult:
    """Run ``policy`` on ``world`` from time 0 to the world's end.

    Parameters
    ----------
    world : World
        Its events drive the run; its budget is R unless ``bandwidth`` is given.
    policy : Policy
        Started here with ``problem`` (or :func:`problem_of` ``world``).
    crawls_per_step : int
        Fetches per decision step (≥ 1); steps happen where the cumulative
        budget crosses multiples of it, strictly before the world's end (a
        world exactly N steps long gets N − 1: the N-th would come at its end,
        where no click is left to serve).
    bandwidth : Bandwidth, optional
        R(t); default: constant at ``world.budget_per_s``.
    host_limits : bool
        Enforce k_h = 1 / crawl delay per host (token buckets).
    problem : Problem, optional
        What the policy is told (e.g. corrupted parameters); default
        :func:`problem_of` ``(world, host_limits=host_limits)``.
    progress : callable, optional
        Called now and then with the share of the run done, in [0, 1].

    Returns
    -------
    SimResult

    Raises
    ------
    ParameterError
        If ``crawls_per_step < 1``, or the policy returns an invalid selection
        (more than k URLs, a repeated URL, a host over its room).
    """
    if crawls_per_step < 1:
        raise ParameterError("`crawls_per_step` must be >= 1")
    band = bandwidth or Bandwidth.constant(world.budget_per_s)
    problem = problem or problem_of(world, host_limits=host_limits)
    policy.start(problem)
    started = time.perf_counter()

    k = int(crawls_per_step)
    total = band.crawls_before(world.duration_s)
    n_steps = max(int(math.floor(total / k - 1e-9)), 0)
    step_times = band.time_of_crawls(k * np.arange(1, n_steps + 1, dtype=np.float64))
    step_times = step_times[step_times < world.duration_s]

    m, n_hosts = len(world.urls), len(world.hosts)
    limits = problem.host_limit_per_s
    limited = np.isfinite(limits)
    tokens = np.ones(n_hosts)
    unlimited_room = np.full(n_hosts, k, dtype=np.int64)
    last_crawl = np.zeros(m)
    log = world.events()
    cut = np.searchsorted(log.time, step_times, side="right")
    out_url = np.empty(step_times.size * k, dtype=np.int64)
    out_time = np.empty(step_times.size * k)
    filled, begin, previous, failed = 0, 0, 0.0, 0
    report_every = max(step_times.size // 50, 1)

    for j, now in enumerate(step_times.tolist()):
        end = int(cut[j])
        if end > begin:
            kinds = log.kind[begin:end]
            sig = np.flatnonzero(kinds == SIGNAL) + begin
            if sig.size:
                policy.observe_signals(log.url[sig], log.time[sig])
            if policy.wants_clicks:
                clk = np.flatnonzero(kinds == CLICK) + begin
                if clk.size:
                    policy.observe_clicks(log.url[clk], log.time[clk])
        begin = end
        if limited.any():
            dt = now - previous
            cap = np.maximum(1.0, limits * dt)
            tokens = np.where(limited, np.minimum(tokens + limits * dt, cap), k)
            room = np.minimum(np.floor(tokens + 1e-9), k).astype(np.int64)
        else:
            room = unlimited_room
        chosen = np.asarray(policy.select(now, k, room), dtype=np.int64)
        check_selection(
            chosen, k, problem.host_of, unlimited_room if policy.own_politeness else room, m
        )
        if chosen.size:
            if limited.any():
                np.subtract.at(tokens, problem.host_of[chosen], 1.0)
            down = world.host_down(chosen, now)
            if down.any():
                failed += int(down.sum())
                policy.observe_failed_crawls(chosen[down], now)
                chosen = chosen[~down]
        if chosen.size:
            changed = world.changed_between(chosen, last_crawl[chosen], now)
            last_crawl[chosen] = now
            out_url[filled : filled + chosen.size] = chosen
            out_time[filled : filled + chosen.size] = now
            filled += chosen.size
            policy.observe_crawls(chosen, now, changed)
        previous = now
        if progress is not None and j % report_every == 0:
            progress(j / max(step_times.size, 1))

    policy.finish()
    crawl_url, crawl_time = out_url[:filled].copy(), out_time[:filled].copy()
    report = schedule_freshness(world, crawl_url, crawl_time)
    if progress is not None:
        progress(1.0)
    return SimResult(
        policy=policy.name,
        crawl_url=crawl_url,
        crawl_time=crawl_time,
        report=report,
        steps=int(step_times.size),
        wall_s=time.perf_counter() - started,
        failed_crawls=failed,
    )
