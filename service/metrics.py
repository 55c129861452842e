"""Prometheus metrics of one app (its own registry, so apps do not share state).

What each family means, and the PromQL that reads it, is listed in
``docs/operations.md`` ("Metrics"); the Grafana dashboard in ``deploy/grafana``
draws them.  Families fed elsewhere:

- request durations: :mod:`service.observability` (every request, by route template);
- dispatch and event counters: the use cases in :mod:`service.scheduler` (signals and
  clicks by status: the fold, :mod:`service.scheduler.fold`, in the process that folds);
- the store snapshot (backlog, leases, λ₀, λ_h, the fold's lag, a live worker): taken
  when ``/metrics`` is scraped;
- the learner's figures (freshness estimate, when its last pass and cycle ended):
  :mod:`service.scheduler.learning`, in the process that holds the learner role.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from service.store.base import StoreStats

__all__ = ["LearnerStatus", "Metrics", "REQUEST_BUCKETS_S"]

#: Upper bounds of the request-duration histogram, s (1 ms to 10 s).
REQUEST_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class _StoreCollector(Collector):
    """Exposes the last store snapshot taken by the /metrics route."""

    def __init__(self) -> None:
        self.stats: StoreStats | None = None

    def collect(self) -> Iterator[Metric]:
        s = self.stats
        if s is None:
            return
        yield GaugeMetricFamily("crawlsched_urls", "Registered URLs", value=s.urls)
        yield GaugeMetricFamily("crawlsched_hosts", "Known hosts", value=s.hosts)
        yield GaugeMetricFamily(
            "crawlsched_blocked_hosts",
            "Hosts blocked (back-off, operator) or paused",
            value=s.blocked_hosts,
        )
        yield GaugeMetricFamily(
            "crawlsched_retired_urls", "Retired URLs (404/410, redirect, done)", value=s.retired
        )
        yield GaugeMetricFamily(
            "crawlsched_due_backlog", "Unleased URLs whose due time has passed", value=s.due_backlog
        )
        yield GaugeMetricFamily("crawlsched_leases_active", "Leases out", value=s.leases_active)
        yield CounterMetricFamily(
            "crawlsched_leases_expired", "Leases that expired", value=s.leases_expired_total
        )
        lam0 = GaugeMetricFamily(
            "crawlsched_lambda0", "Budget multiplier λ₀ (value of one more crawl)"
        )
        if s.lambda0 is not None:
            lam0.add_metric([], s.lambda0)
        yield lam0
        lam_h = GaugeMetricFamily(
            "crawlsched_host_lambda", "Politeness multiplier λ_h of the top hosts", labels=["host"]
        )
        for h in s.top_hosts:
            lam_h.add_metric([h.host], h.lambda_h)
        yield lam_h


@dataclass
class LearnerStatus:
    """What the learner's background passes last reported (wall-clock Unix s)."""

    pass_completed_at: float | None = None
    cycle_completed_at: float | None = None
    cycle_duration_s: float | None = None
    freshness: float | None = None  # Σ W·P(fresh) / Σ W at the last completed cycle
    urls_seen: int = 0  # URLs the last completed cycle read
    #: the last cycle's log Bayes factor that each host's URLs share one signal source
    source_evidence: float | None = None


class _LearnerCollector(Collector):
    """The learner's figures; absent until the learner has reported them (a replica
    that does not hold the learner role exports none)."""

    def __init__(self, status: LearnerStatus) -> None:
        self.status = status

    def collect(self) -> Iterator[Metric]:
        s = self.status
        families = (
            (
                "crawlsched_learner_last_pass_timestamp_seconds",
                "Wall time the learner's last background pass ended, Unix s",
                s.pass_completed_at,
            ),
            (
                "crawlsched_learner_last_cycle_timestamp_seconds",
                "Wall time the learner last finished a cycle over every host, Unix s",
                s.cycle_completed_at,
            ),
            (
                "crawlsched_learner_cycle_duration_seconds",
                "Wall seconds the learner's last complete cycle over every host took",
                s.cycle_duration_s,
            ),
            (
                "crawlsched_freshness_estimate",
                "The model's estimate of current freshness, Σ W·P(fresh) / Σ W over "
                "registered URLs, P(fresh) = exp(−α τeff), at the learner's last cycle",
                s.freshness,
            ),
            (
                "crawlsched_signal_source_evidence",
                "Log Bayes factor (nats) at the learner's last cycle that each host's URLs "
                "share one signal source (its recall and precision); above ln 20 each URL's "
                "priors follow its host's source",
                s.source_evidence,
            ),
        )
        for name, text, value in families:
            if value is not None and not math.isnan(value):
                yield GaugeMetricFamily(name, text, value=value)
        if s.cycle_completed_at is not None:
            yield GaugeMetricFamily(
                "crawlsched_learner_cycle_urls",
                "URLs the learner's last complete cycle read",
                value=s.urls_seen,
            )


class Metrics:
    """Counters the use cases increment, and the store snapshot /metrics exposes."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.events = Counter(
            "crawlsched_events",
            "Events received, by kind and outcome",
            ["kind", "status"],
            registry=self.registry,
        )
        self.appended = Counter(
            "crawlsched_events_appended",
            "Signals and clicks accepted and appended, by kind (classified by the fold)",
            ["kind"],
            registry=self.registry,
        )
        self.refused = Counter(
            "crawlsched_events_refused",
            "Signals and clicks refused whole (503, nothing appended) while the fold lagged "
            "more than ingest_max_lag_s behind, by kind",
            ["kind"],
            registry=self.registry,
        )
        for kind in ("signal", "click"):  # exported from the start, at 0
            self.refused.labels(kind)
        self.fold_lag = Gauge(
            "crawlsched_fold_lag_seconds",
            "Age of the oldest appended event (signal, click, crawl result) whose effects "
            "are not all applied yet: not folded, or its URL not yet re-estimated, wall s "
            "(0 when none waits)",
            registry=self.registry,
        )
        self.relearn_lag = Gauge(
            "crawlsched_relearn_lag_seconds",
            "Age of the oldest folded event whose URL waits for re-estimation, wall s, "
            "over the live folders (0 when none waits); part of crawlsched_fold_lag_seconds",
            registry=self.registry,
        )
        self.worker_up = Gauge(
            "crawlsched_worker_up",
            "1 when the background work runs: a live crawlsched worker (Redis store) or "
            "this process (memory store)",
            registry=self.registry,
        )
        self.dispatched = Counter(
            "crawlsched_dispatched", "URLs handed out by /next", registry=self.registry
        )
        self.dispatch_requested = Counter(
            "crawlsched_dispatch_requested",
            "URLs asked for by /next (the sum of n): the capacity workers offer",
            registry=self.registry,
        )
        self.dispatched_ahead = Counter(
            "crawlsched_dispatched_ahead",
            "URLs handed out by /next before they were due (dispatch_ahead: capacity left "
            "once every due URL was out); their crawl values lie below the threshold",
            registry=self.registry,
        )
        self.dispatch_shortfall = Counter(
            "crawlsched_dispatch_shortfall",
            "URLs asked for by /next but not given (nothing eligible)",
            registry=self.registry,
        )
        self.back_offs = Counter(
            "crawlsched_back_offs",
            "Crawl results that backed their host off (429, 5xx, network error)",
            registry=self.registry,
        )
        self.rescored = Counter(
            "crawlsched_rescored_urls", "URL thresholds recomputed", registry=self.registry
        )
        self.rescore_tolerance = Gauge(
            "crawlsched_rescore_tolerance",
            "Relative drift of a host's threshold before the rescorer recomputes its URLs: "
            "CRAWLSCHED_RESCORE_TOLERANCE, or λ₀'s own noise (2 standard errors) when larger",
            registry=self.registry,
        )
        self.rescore_backlog = Gauge(
            "crawlsched_rescore_backlog_urls",
            "URLs of hosts whose threshold drifted past the tolerance that the rescorer's "
            "last pass left for later ones (after a bulk load, until every host is scored)",
            registry=self.registry,
        )
        self.relearned = Counter(
            "crawlsched_relearned_urls",
            "URLs re-scored because their estimated parameters moved",
            registry=self.registry,
        )
        self.learn_passes = Counter(
            "crawlsched_learn_passes",
            "background passes over the hosts' estimates",
            registry=self.registry,
        )
        self.requests = Histogram(
            "crawlsched_http_request_duration_seconds",
            "Wall time from request to the end of the response, by route template, "
            "method and status class",
            ["route", "method", "status"],
            buckets=REQUEST_BUCKETS_S,
            registry=self.registry,
        )
        self.relearn_queue = Gauge(
            "crawlsched_relearn_queue_urls",
            "URLs whose events wait for re-estimation in this process",
            registry=self.registry,
        )
        self.learner = LearnerStatus()
        self._store = _StoreCollector()
        self.registry.register(self._store)
        self.registry.register(_LearnerCollector(self.learner))

    def watch_relearn_queue(self, length: Callable[[], float]) -> None:
        """Report ``length()`` as the relearn queue's length at every scrape."""
        self.relearn_queue.set_function(length)

    def learner_pass_done(self) -> None:
        """Record the end of a learner pass (now, wall clock)."""
        self.learner.pass_completed_at = time.time()

    def learner_cycle_done(
        self, freshness: float, duration_s: float, urls: int, source_evidence: float = math.nan
    ) -> None:
        """Record the end of a learner cycle over every host.

        Parameters
        ----------
        freshness : float
            Σ W·P(fresh) / Σ W over the URLs the cycle read (NaN: no weight).
        duration_s : float
            Wall seconds the cycle took.
        urls : int
            URLs it read.
        source_evidence : float
            The log Bayes factor of one signal source per host (NaN: none yet;
            :func:`scheduler_core.estimate.source.source_evidence`).
        """
        self.learner.cycle_completed_at = time.time()
        self.learner.cycle_duration_s = duration_s
        self.learner.freshness = None if math.isnan(freshness) else freshness
        self.learner.urls_seen = urls
        self.learner.source_evidence = None if math.isnan(source_evidence) else source_evidence

    def render(self, stats: StoreStats) -> bytes:
        """Prometheus text exposition with ``stats`` as the store snapshot."""
        self._store.stats = stats
        return generate_latest(self.registry)
