"""The service's own scheduling, run by the simulator: no HTTP, nothing mocked.

:class:`ServicePolicy` is a :class:`~scheduler_core.policies.base.Policy` whose
decisions come from the service's use cases (``register``, ``dispatch``,
``ingest_signals``, ``ingest_results``, ``rescore_once``) over the embedded
memory store and a manual clock that the simulator moves.  What
``crawlsched simulate --policy crawlsched`` measures is therefore what the
service does: thresholds, due times, politeness gates, dispatch-ahead, the
online λ₀ / λ_h estimates and background rescoring (run every
``rescore_every_s`` simulated seconds instead of on a wall-clock timer).
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

import numpy as np

from scheduler_core.errors import ParameterError
from scheduler_core.params import FloatArray, UrlParams
from scheduler_core.policies.base import BoolArray, IntArray, Policy, Problem
from service.app import build_store
from service.clock import ManualClock
from service.metrics import Metrics
from service.scheduler.context import Context
from service.scheduler.dispatch import dispatch
from service.scheduler.events import ingest_clicks, ingest_results, ingest_signals
from service.scheduler.fold import fold_now
from service.scheduler.learning import flush_relearn, learn_pass
from service.scheduler.registry import register
from service.scheduler.rescoring import rescore_once
from service.scheduler.scoring import params_of
from service.schemas import MAX_CRAWL_DELAY_S, ClickIn, CrawlResultIn, SignalIn, UrlIn
from service.settings import Settings
from service.store.memory import MemoryStore
from service.urls import canonical_url

__all__ = ["PARAM_MODES", "ParamMode", "ServicePolicy", "step_delays"]


class ParamMode(enum.StrEnum):
    """Where the service's parameters come from in a simulated run: ``learned``, URLs
    registered bare, the service estimates everything from clicks, signals and crawl
    outcomes; ``oracle``, the world's true parameters registered as fixed."""

    learned = "learned"
    oracle = "oracle"


#: The modes' names.
PARAM_MODES = tuple(m.value for m in ParamMode)

T = TypeVar("T")

#: Crawl delay given to hosts whose limit cannot bind a step, s (the API takes none
#: shorter than > 0), and how far the clock moves between two leases of a step: a
#: thousand such delays, so that a URL of such a host is never taken as held back by
#: politeness (``scheduler_core.multipliers.dispatch_gated``: within 0.5 crawl delays
#: of its gate opening).  Both stay far above a float's resolution at any run's time.
_NO_LIMIT_DELAY_S = 1e-6
_GATE_WAIT_S = 1e-3
#: What the other hosts' crawl delays are shortened by (at most half of one), s: the
#: leases of a step go out up to k × ``_GATE_WAIT_S`` after its time, and a host's gate
#: opens one crawl delay after its lease, so that without it a host leased a few ms
#: into a step would find its gate shut at the step one crawl delay later and lose a
#: whole step; the simulator's token bucket has no such phase.  Covers steps of up to
#: a thousand crawls.
_GATE_SLACK_S = 1.0
#: Concurrent leases a host may have out (the API's largest cap): a step's leases stay
#: out until its results come back, while the simulator's fetches take no time.
_MAX_IN_FLIGHT = 65_535
#: The online λ₀ is taken as settled over the second half of a run, sampled this many
#: times there.
_SETTLED_SAMPLES = 200
#: Events per use-case call.
_BATCH = 10_000


class ServicePolicy(Policy):
    """crawlsched itself, in process, as a policy of the simulator.

    Parameters
    ----------
    seed : int
        Unused (the service is deterministic given its inputs).
    rescore_every_s : float
        Simulated seconds between two rescoring passes; 0 (default): before
        every step.  The service runs a pass every ``rescore_interval_s`` =
        0.25 wall seconds, which at the day scale of web changes is continuous.
        Coarser passes leave thresholds stale: on the default world without
        signals (1,000 URLs, seed 0, one crawl a step) one pass per step gave
        0.994 × BASELINE, one per 6 simulated hours 0.984 and one a day 0.981
        (the load-generator demo's accelerated clock stretches 0.25 wall s to
        ~0.8 simulated days).
    params : {"learned", "oracle"}
        ``oracle`` registers the world's true parameters as fixed; ``learned``
        (default) registers bare URLs, sends the clicks too, and lets the service
        estimate everything.
    learn_every_s : float
        Simulated seconds between two background learning passes (the service
        runs one every ``learn_interval_s`` = 5 wall seconds).
    settings : dict, optional
        Overrides of the service :class:`~service.settings.Settings` (e.g.
        ``{"signal_discard_s": 3600}``); the store is always ``memory`` and the
        clock ``manual``.  The revisit cap defaults to twice the run's length
        (none, as BASELINE), and leases never expire within a run.

    Notes
    -----
    A step of k crawls happens at one instant; the service, a continuous-time
    system, is run so that its politeness is the simulator's:

    - the step's URLs are leased one a call (as by a crawler asking ``/next``
      for one URL whenever a fetch slot frees), the clock 1 ms further at each
      call: every lease goes to the URL most due among the hosts open then,
      and a due URL of a host that has just given one is not passed over for
      another host's URL leased ahead of time;
    - a host whose limit cannot bind a step (none, or at least one crawl per
      crawl of the whole budget: its token bucket always holds k) gets a 1 µs
      crawl delay: 1 ms later its gate has been open for a thousand crawl
      delays, so the service does not count its second and later URLs of a
      step as held back by politeness, and its λ_h stays at 0 as the solver's;
    - the other hosts' crawl delays are shortened by ``_GATE_SLACK_S`` (1 s,
      at most half a delay), the 1 ms steps' phase within a step;
    - a host may have any number of leases out (``max_in_flight``): a step's
      fetches take no time in the simulator, while its leases stay out until
      its results come back.

    Without these, on the ``web`` preset at 200 URLs (20 hosts, 5 crawls a
    step) the one-a-second hosts gave one URL a step (a gate of 1 s and one
    lease in flight at an instant), their due URLs queued for days behind them
    while other hosts' URLs went out ahead of time, and λ₀ settled 20% low on
    one seed (``docs/freshness.md``).

    Attributes
    ----------
    lambda0 : float or None
        λ₀ the service tracked online, read when the run finishes.
    lambda0_settled : float or None
        The geometric mean of the online λ₀ over the second half of the run
        (sampled ``_SETTLED_SAMPLES`` times): what compares with the offline
        solver's λ₀ once the estimate has settled.
    host_lambdas : ndarray, shape (H,)
        λ_h the service tracked online per host, read when the run finishes.
    final_params : UrlParams or None
        The parameters the service held for each URL (in the problem's order) when
        the run finished: learned ones, or the registered truth with ``oracle``.
    """

    name = "crawlsched"
    own_politeness = True

    def __init__(
        self,
        *,
        seed: int = 0,
        rescore_every_s: float = 0.0,
        settings: dict[str, Any] | None = None,
        params: str = "learned",
        learn_every_s: float = 86_400.0,
    ) -> None:
        super().__init__(seed=seed)
        if not rescore_every_s >= 0:
            raise ValueError("`rescore_every_s` must be >= 0")
        if params not in PARAM_MODES:
            raise ValueError(f"`params` must be one of {', '.join(PARAM_MODES)}")
        if not learn_every_s > 0:
            raise ValueError("`learn_every_s` must be > 0")
        self.params = params
        self.wants_clicks = params == "learned"
        self.learn_every_s = float(learn_every_s)
        self._next_learn = 0.0
        self.rescore_every_s = float(rescore_every_s)
        self._overrides = dict(settings or {})
        self.lambda0: float | None = None
        self.lambda0_settled: float | None = None
        self._log_lambda0: list[float] = []
        self._next_sample = 0.0
        self.host_lambdas = np.empty(0)
        self.final_params: UrlParams | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._clock = ManualClock(0.0)
        self._ctx: Context | None = None
        self._store: MemoryStore | None = None
        self._names: list[str] = []
        self._index: dict[str, int] = {}
        self._leases: dict[int, str] = {}
        self._next_rescore = 0.0

    # -- plumbing ---------------------------------------------------------------------------
    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        assert self._loop is not None
        return self._loop.run_until_complete(coro)

    @property
    def context(self) -> Context:
        """The use cases' context (store, clock, settings, metrics).

        Raises
        ------
        RuntimeError
            Before :meth:`start`.
        """
        if self._ctx is None:
            raise RuntimeError("crawlsched: start() was not called")
        return self._ctx

    def _memory(self) -> MemoryStore:
        if self._store is None:
            raise RuntimeError("crawlsched: start() was not called")
        return self._store

    def _tick(self, t: float) -> None:
        if t > self._clock.now():
            self._clock.set(t)

    # -- Policy -----------------------------------------------------------------------------
    def start(self, problem: Problem) -> None:
        """Register the problem's URLs with the service (bare, or the truth, fixed).

        Raises
        ------
        ValueError
            Without URL and host names.
        ParameterError
            If a host allows fewer fetches than one per ``MAX_CRAWL_DELAY_S`` (the
            API's longest crawl delay): the service takes what its API takes.
        """
        super().start(problem)
        if not problem.urls or not problem.hosts:
            raise ValueError("the service path needs the problem's URL and host names")
        with np.errstate(divide="ignore"):
            true_delays = 1.0 / problem.host_limit_per_s  # 0 for hosts without a limit
        # The service takes what its API takes: a world whose hosts are stricter than
        # the longest crawl delay accepted cannot be registered (over HTTP neither).
        if (true_delays > MAX_CRAWL_DELAY_S).any():
            raise ParameterError(
                f"`crawl_delay_s`: a host of the world allows fewer fetches than one per "
                f"{MAX_CRAWL_DELAY_S:g} s, the API's longest crawl delay"
            )
        delays = step_delays(true_delays, problem.budget_per_s)
        options: dict[str, Any] = {
            "max_revisit_s": 2.0 * problem.duration_s,
            "lease_ttl_s": 10.0 * problem.duration_s,
            "max_next": 1_000_000,
            "max_batch": _BATCH,
            "max_in_flight": _MAX_IN_FLIGHT,
            # the simulator folds every step itself; a refusal read off the wall clock
            # would make a run depend on the machine
            "ingest_backpressure": False,
            **self._overrides,
            "store": "memory",
            "clock": "manual",
        }
        settings = Settings(**options)
        self._loop = asyncio.new_event_loop()
        self._clock = ManualClock(0.0)
        store = build_store(settings)
        assert isinstance(store, MemoryStore)
        self._store = store
        self._ctx = Context(store, self._clock, settings, Metrics())
        self._names = [canonical_url(u) for u in problem.urls]
        self._index = {u: i for i, u in enumerate(self._names)}
        p = problem.params
        oracle = self.params == "oracle"
        items = [
            UrlIn(
                url=self._names[i],
                weight=float(p.weight[i]) if oracle else None,
                change_rate=float(p.change_rate[i]) if oracle else None,
                recall=float(p.recall[i]) if oracle else None,
                false_signal_rate=float(p.false_signal_rate[i]) if oracle else None,
                fixed=oracle,
                crawl_delay_s=float(delays[problem.host_of[i]]),
                last_crawled_at=0.0,
            )
            for i in range(problem.m)
        ]
        for chunk in _chunks(items):
            self._run(register(self.context, chunk))
        self._leases = {}
        self._next_rescore = 0.0
        self._next_learn = self.learn_every_s
        self._log_lambda0 = []
        self._next_sample = 0.5 * problem.duration_s

    def observe_clicks(self, url: IntArray, time: FloatArray) -> None:
        self._tick(float(time.max()))
        names = self._names
        items = [
            ClickIn(url=names[u], time=t) for u, t in zip(url.tolist(), time.tolist(), strict=True)
        ]
        for chunk in _chunks(items):
            self._run(ingest_clicks(self.context, chunk))
            self._run(fold_now(self.context, relearn=False))  # applied at once, as served

    def observe_signals(self, url: IntArray, time: FloatArray) -> None:
        self._tick(float(time.max()))
        names = self._names
        items = [
            SignalIn(url=names[u], time=t) for u, t in zip(url.tolist(), time.tolist(), strict=True)
        ]
        for chunk in _chunks(items):
            self._run(ingest_signals(self.context, chunk))
            self._run(fold_now(self.context, relearn=False))

    def select(self, now: float, k: int, host_room: IntArray) -> IntArray:
        self._tick(now)
        if self.params == "learned":
            self._run(flush_relearn(self.context))
            if now >= self._next_learn:
                self._run(learn_pass(self.context))
                self._next_learn = now + self.learn_every_s
        if now >= self._next_rescore:
            self._run(rescore_once(self.context))
            self._next_rescore = now + self.rescore_every_s
        chosen: list[int] = []
        empty = 0  # calls in a row that leased nothing
        while len(chosen) < k and empty < 2:
            if chosen or empty:  # the gates the step's leases closed open in between
                self._clock.advance(_GATE_WAIT_S)
            cols = self._run(dispatch(self.context, 1)).leases
            empty = 0 if len(cols) else empty + 1
            for url, lease_id in zip(cols.urls, cols.lease_ids, strict=True):
                i = self._index[url]
                self._leases[i] = lease_id
                chosen.append(i)
        if now >= self._next_sample:
            self._sample_lambda0(now)
        return np.asarray(chosen, dtype=np.int64)

    def _sample_lambda0(self, now: float) -> None:
        """Keep ln λ₀ for :attr:`lambda0_settled` (second half of the run)."""
        lam0 = self._memory().lambda0_estimate()
        if lam0 is not None and lam0 > 0:
            self._log_lambda0.append(float(np.log(lam0)))
        self._next_sample = now + 0.5 * self.problem.duration_s / _SETTLED_SAMPLES

    def observe_crawls(self, url: IntArray, now: float, changed: BoolArray) -> None:
        super().observe_crawls(url, now, changed)
        fetched_at = min(now, self._clock.now())
        items = [
            CrawlResultIn(
                url=self._names[i],
                lease_id=self._leases.pop(i),
                fetched_at=fetched_at,
                status=200,
                changed=c,
            )
            for i, c in zip(url.tolist(), changed.tolist(), strict=True)
        ]
        for chunk in _chunks(items):
            self._run(ingest_results(self.context, chunk))
            self._run(fold_now(self.context, relearn=False))  # queued for re-estimation

    def observe_failed_crawls(self, url: IntArray, now: float) -> None:
        """Settle the leases of fetches that failed (host down) as network errors
        (status 0): the service keeps the old copy and retries after its
        `retry_delay_s`."""
        fetched_at = min(now, self._clock.now())
        items = [
            CrawlResultIn(
                url=self._names[i], lease_id=self._leases.pop(i), fetched_at=fetched_at, status=0
            )
            for i in url.tolist()
        ]
        for chunk in _chunks(items):
            self._run(ingest_results(self.context, chunk))
            self._run(fold_now(self.context, relearn=False))  # queued for re-estimation

    def current_lambda0(self) -> tuple[float, float | None]:
        """During a run: the simulated time (s) and the λ₀ the service tracks then."""
        now = self._clock.now()
        return now, self._memory().lambda0_estimate()

    def finish(self) -> None:
        """Read the online λ₀ and λ_h, then close the event loop."""
        ctx, now = self.context, self._clock.now()
        self.lambda0 = self._memory().lambda0_estimate()
        samples = self._log_lambda0
        self.lambda0_settled = float(np.exp(np.mean(samples))) if samples else self.lambda0
        hosts = self.problem.hosts
        states = [self._run(ctx.store.get_host(h, now)) for h in hosts]
        self.host_lambdas = np.array([s.lambda_h if s else 0.0 for s in states])
        urls = self._run(ctx.store.get_urls(self._names))
        if all(u is not None for u in urls):
            self.final_params = params_of([u for u in urls if u is not None])
        self._run(ctx.store.close())
        assert self._loop is not None
        self._loop.close()
        self._loop = None


def step_delays(delays_s: FloatArray, budget_per_s: float) -> FloatArray:
    """The crawl delays the simulated service is given for hosts of ``delays_s``, s.

    A host of delay 0 (no limit) or of at most one budget interval (1/R: its token
    bucket in the simulator holds at least a step's k crawls at every step) gets
    ``_NO_LIMIT_DELAY_S``; any other its delay less ``_GATE_SLACK_S``, at most half
    of it (:class:`ServicePolicy`, Notes).

    Parameters
    ----------
    delays_s : ndarray, shape (H,)
        Each host's crawl delay, s (0: no limit).
    budget_per_s : float
        R, crawls per second (> 0).

    Returns
    -------
    ndarray, shape (H,)
        Crawl delays, s, each > 0.

    Examples
    --------
    >>> step_delays(np.array([0.0, 1.0, 86_400.0, 1.5]), 1.0).tolist()
    [1e-06, 1e-06, 86399.0, 0.75]
    """
    d = np.asarray(delays_s, dtype=np.float64)
    free = d * budget_per_s <= 1.0
    out: FloatArray = np.where(free, _NO_LIMIT_DELAY_S, d - np.minimum(_GATE_SLACK_S, 0.5 * d))
    return out


def _chunks(items: Sequence[T]) -> list[Sequence[T]]:
    return [items[i : i + _BATCH] for i in range(0, len(items), _BATCH)]
