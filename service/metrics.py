"""Prometheus metrics of one app (its own registry, so apps do not share state)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from service.store.base import StoreStats

__all__ = ["Metrics"]


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
        self.dispatched = Counter(
            "crawlsched_dispatched", "URLs handed out by /next", registry=self.registry
        )
        self.dispatch_shortfall = Counter(
            "crawlsched_dispatch_shortfall",
            "URLs asked for by /next but not given (nothing eligible)",
            registry=self.registry,
        )
        self.rescored = Counter(
            "crawlsched_rescored_urls", "URL thresholds recomputed", registry=self.registry
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
        self._store = _StoreCollector()
        self.registry.register(self._store)

    def render(self, stats: StoreStats) -> bytes:
        """Prometheus text exposition with ``stats`` as the store snapshot."""
        self._store.stats = stats
        return generate_latest(self.registry)
