"""What every use case works with: the store, the clock, the settings, the metrics."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from scheduler_core.estimate.hierarchy import GammaPrior, GroupStats
from scheduler_core.estimate.source import SourceCycle, SourcePopulation
from scheduler_core.multipliers import TrackerConfig
from scheduler_core.params import FloatArray
from service.clock import Clock
from service.errors import InvalidInput
from service.metrics import Metrics
from service.scheduler.admission import IngestGate
from service.settings import Settings
from service.store.base import Store

__all__ = ["Context", "LearnCycle", "RelearnQueue"]


class LearnCycle:
    """Where the learner's background cycle over the hosts stands (the leader's own;
    a new leader starts a cycle afresh), the label and global sums so far, the hosts'
    signal sources (:class:`~scheduler_core.estimate.source.SourceCycle`), and the
    sums of the freshness estimate Σ W·P(fresh) / Σ W over the URLs read."""

    def __init__(self) -> None:
        self.hosts: list[str] = []
        self.position = 0
        self.total = GroupStats()
        self.labels: dict[str, GroupStats] = {}
        self.theta_prior: GammaPrior | None = None
        self.source = SourceCycle(None)
        self.started_at = time.monotonic()  # wall clock
        self.weight = 0.0  # Σ W of the URLs read, requests/s
        self.fresh_weight = 0.0  # Σ W·P(fresh) of the URLs read, requests/s
        self.urls = 0

    @property
    def done(self) -> bool:
        return self.position >= len(self.hosts)

    def start(
        self,
        hosts: list[str],
        theta_prior: GammaPrior,
        population: SourcePopulation | None,
        shared: bool,
    ) -> None:
        """A new cycle over ``hosts``: θ_h's prior, the hosts' population of signal
        sources the last cycle fitted (None: none yet) and whether it took hosts as
        sources."""
        self.hosts, self.position, self.theta_prior = hosts, 0, theta_prior
        self.source = SourceCycle(population, shared)
        self.total, self.labels = GroupStats(), {}
        self.started_at, self.weight, self.fresh_weight, self.urls = time.monotonic(), 0.0, 0.0, 0

    def add_freshness(self, weight: FloatArray, fresh: FloatArray) -> None:
        """Add URLs read by the cycle: their W, (m,) requests/s, and P(fresh), (m,)."""
        self.weight += float(weight.sum())
        self.fresh_weight += float(weight @ fresh)
        self.urls += int(weight.shape[0])

    @property
    def freshness(self) -> float:
        """Σ W·P(fresh) / Σ W over the URLs read so far (NaN before any weight)."""
        return self.fresh_weight / self.weight if self.weight > 0 else math.nan

    def next_host(self) -> str:
        host = self.hosts[self.position]
        self.position += 1
        return host


class RelearnQueue:
    """URLs whose history grew since their estimates were last refreshed, waiting
    for the next batch (one process's own; the store holds the history itself), each
    with the append time of the oldest event that queued it (s on the store's clock,
    :attr:`~service.store.base.Folded.oldest_at`; +inf when not known)."""

    def __init__(self) -> None:
        # URL -> (a crawl outcome came in: refit α, θ; append time of its oldest event)
        self._urls: dict[str, tuple[bool, float]] = {}

    def __len__(self) -> int:
        return len(self._urls)

    def add(self, urls: Iterable[str], outcomes: bool, since: float = math.inf) -> None:
        """Queue ``urls``; ``outcomes``: their new history includes crawl outcomes;
        ``since``: when the oldest of the events behind them was appended."""
        got = self._urls
        for url in urls:
            old = got.get(url)
            got[url] = (
                (outcomes, since) if old is None else (outcomes or old[0], min(since, old[1]))
            )

    def take(self) -> tuple[list[str], list[str], dict[str, float]]:
        """Empty the queue: (URLs with new outcomes, URLs with new clicks/signals only,
        each URL's ``since``)."""
        items, self._urls = self._urls, {}
        since = {u: s for u, (_, s) in items.items()}
        return (
            [u for u, (o, _) in items.items() if o],
            [u for u, (o, _) in items.items() if not o],
            since,
        )

    def put_back(self, urls: Sequence[str], outcomes: bool, since: Mapping[str, float]) -> None:
        """Queue again URLs :meth:`take` gave out, with their ``since``."""
        for url in urls:
            self.add((url,), outcomes, since.get(url, math.inf))

    def oldest(self) -> float | None:
        """The earliest ``since`` queued (None: the queue is empty or holds no time)."""
        first = min((s for _, s in self._urls.values()), default=math.inf)
        return None if math.isinf(first) else first


@dataclass(frozen=True)
class Context:
    """Dependencies of the use cases (one per app)."""

    store: Store
    clock: Clock
    settings: Settings
    metrics: Metrics
    relearn_queue: RelearnQueue = field(default_factory=RelearnQueue)
    learn_cycle: LearnCycle = field(default_factory=LearnCycle)
    ingest_gate: IngestGate = field(default_factory=IngestGate)

    def __post_init__(self) -> None:
        # the app's latest context is the one serving: its queue is the one reported
        self.metrics.watch_relearn_queue(lambda: len(self.relearn_queue))

    @property
    def tracker(self) -> TrackerConfig:
        """How fast λ₀ and λ_h move."""
        return TrackerConfig(self.settings.lambda_window, self.settings.lambda_clip)

    def check_batch(self, field: str, size: int) -> None:
        """Raise InvalidInput when a batch exceeds ``max_batch``."""
        if size > self.settings.max_batch:
            raise InvalidInput((field,), f"at most {self.settings.max_batch} items per batch")

    def check_times(self, field: str, name: str, times: Iterable[float | None], now: float) -> None:
        """Raise InvalidInput for the first time that leads the clock by more than the
        tolerance (``future_tolerance_s`` wall seconds, scaled by the clock rate)."""
        limit = now + self.settings.future_tolerance_s * self.clock.rate
        for i, t in enumerate(times):
            if t is not None and t > limit:
                raise InvalidInput(
                    (field, i, name), f"time {t:.3f} is in the future (clock reads {now:.3f})"
                )
