"""The in-memory store's records: a URL, a host queue, a shard, a lease."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from sortedcontainers import SortedList

from scheduler_core.multipliers import LogMean
from service.store.base import LeaseStatus, Outcome, UrlPrior

__all__ = ["Host", "Lease", "Shard", "Url"]


@dataclass(slots=True)
class Url:
    url: str
    host: str
    weight: float
    change_rate: float
    recall: float
    false_signal_rate: float
    signal_time_equivalent_s: float
    threshold_s: float
    scored_lambda: float
    registered_at: float
    last_crawl_at: float | None = None
    signals_since_crawl: int = 0
    last_signal_at: float | None = None
    due_at: float = 0.0
    lease_id: str | None = None
    lease_deadline: float | None = None
    clicks: int = 0
    signals: int = 0
    crawls: int = 0
    changes: int = 0
    fetch_errors: int = 0
    last_click_at: float | None = None
    prior: UrlPrior = UrlPrior()
    click_mass: float = 0.0
    click_ref: float | None = None
    signal_mass: float = 0.0
    signal_ref: float | None = None
    outcomes: list[Outcome] = field(default_factory=list)  # the last `outcome_window`


@dataclass(slots=True)
class Host:
    name: str
    shard: int
    crawl_delay_s: float
    gate_at: float = -math.inf
    queue: SortedList = field(default_factory=SortedList)  # (due_at, url), unleased
    urls: set[str] = field(default_factory=set)
    ready_key: tuple[float, str] | None = None
    estimate: LogMean = field(default_factory=LogMean)
    scored_lambda: float | None = None


@dataclass(slots=True)
class Shard:
    ready: SortedList = field(default_factory=SortedList)  # (readiness, host)
    leases: SortedList = field(default_factory=SortedList)  # (deadline, lease_id)


@dataclass(slots=True)
class Lease:
    url: str
    shard: int
    deadline: float
    status: LeaseStatus = LeaseStatus.ACTIVE
