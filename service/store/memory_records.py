"""The in-memory store's records: a URL, a host queue, a shard, a lease, and the
answers of batches under an idempotency key."""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from sortedcontainers import SortedList

from scheduler_core.multipliers import LogMean
from service.store.base import (
    BlockReason,
    IdempotencyKey,
    LeaseStatus,
    Outcome,
    RetireReason,
    UrlPrior,
)

__all__ = ["Answers", "Host", "Lease", "Shard", "Url"]

T = TypeVar("T")


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
    retired_at: float | None = None
    retire_reason: RetireReason | None = None
    gone_count: int = 0
    refetch_after: float | None = None
    stale_signals: int = 0  # signals the fold found stale


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
    max_in_flight: int | None = None  # None: the store's default
    in_flight: int = 0  # active leases
    paused: bool = False
    blocked_until: float | None = None  # end of the latest block, s
    block_reason: BlockReason | None = None
    failures: int = 0  # consecutive back-off answers
    retired: set[str] = field(default_factory=set)


@dataclass(slots=True)
class Shard:
    ready: SortedList = field(default_factory=SortedList)  # (readiness, host)
    #: (deadline, call nonce): the leases one call gave from this shard share a deadline
    #: and expire together; ``lease_groups`` lists them (settled ones stay until then,
    #: and the reclaim skips them)
    leases: SortedList = field(default_factory=SortedList)
    lease_groups: dict[str, list[str]] = field(default_factory=dict)


@dataclass(slots=True)
class Lease:
    url: str
    issued_at: float
    status: LeaseStatus = LeaseStatus.ACTIVE


class Answers(Generic[T]):
    """The answers of batches under an idempotency key, each until its TTL (wall s,
    monotonic clock) runs out; expired ones are dropped as new ones come."""

    def __init__(self) -> None:
        self._by_digest: OrderedDict[str, tuple[float, list[T]]] = OrderedDict()

    def replay(self, once: IdempotencyKey | None) -> list[T] | None:
        """The answer the batch ``once`` names got the first time, or None."""
        if once is None:
            return None
        wall = time.monotonic()
        entry = self._by_digest.get(once.digest)
        return None if entry is None or entry[0] <= wall else list(entry[1])

    def remember(self, once: IdempotencyKey | None, answer: Sequence[T]) -> None:
        """Keep ``answer`` of the batch ``once`` names (nothing without a key)."""
        if once is None:
            return
        wall = time.monotonic()
        while self._by_digest:  # oldest first (one TTL per service: expiry order)
            digest, (expires, _) = next(iter(self._by_digest.items()))
            if expires > wall:
                break
            del self._by_digest[digest]
        self._by_digest[once.digest] = (wall + once.ttl_s, list(answer))
        self._by_digest.move_to_end(once.digest)
