"""The ``Store`` contract: per-URL crawl state, host queues, leases, multipliers.

Every implementation (``memory``; ``redis`` later) passes one contract test
suite.  Each method is atomic with respect to the others.  Times are Unix
seconds (clock time), rates per second.  Data model (ARCHITECTURE.md,
"Storage"): a queue per host of its unleased URLs ordered by due time; per
shard, the hosts ordered by readiness = max(earliest due, politeness gate);
leases ordered by deadline.

Time: the methods that decide with time (lease deadlines, lease reclaiming,
politeness gates) take a :data:`~service.clock.TimeSource` and read it at the moment
of the decision; the Redis store through its own ``TIME``.

Exactly once: the event methods take an optional :class:`IdempotencyKey`.  A call
repeated with the same key within its TTL answers as the first call did and changes
nothing; a store that applies a batch in parts (the Redis store, one script per
shard) remembers the key with each part, atomically with it, so a repeat after a
failure half-way applies just the parts that were not.
"""

from __future__ import annotations

import enum
import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, Protocol

from scheduler_core.multipliers import LogMean, TrackerConfig
from scheduler_core.params import FloatArray
from service.clock import TimeSource
from service.store.controls import (
    BLOCK_CODES,
    NO_LIMITS,
    RETIRE_CODES,
    BlockReason,
    ControlRules,
    HostChange,
    HostOrder,
    RetireReason,
    back_off_s,
    is_back_off,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from service.store.columns import LeaseColumns, RescoreColumns
    from service.store.estimate_columns import EstimateColumns

__all__ = [
    "BLOCK_CODES",
    "RETIRE_CODES",
    "BlockReason",
    "ClickEvent",
    "ControlRules",
    "CrawlOutcome",
    "DispatchObservation",
    "EventBatch",
    "EventKind",
    "EventStatus",
    "NO_LIMITS",
    "HostChange",
    "HostOrder",
    "HostPage",
    "Folded",
    "HostState",
    "IdempotencyKey",
    "LeaseGrant",
    "LeaseInfo",
    "LeaseStatus",
    "Leases",
    "Observations",
    "Outcome",
    "RetireReason",
    "ScoredParams",
    "SignalEvent",
    "StaleHosts",
    "Store",
    "StoreStats",
    "UrlPrior",
    "UrlRecord",
    "UrlState",
    "back_off_s",
    "is_back_off",
    "ready_score",
    "score_now",
    "shard_of",
]


def shard_of(host: str, shards: int) -> int:
    """Stable shard of a host (CRC-32 of its name), the same in every process."""
    return zlib.crc32(host.encode()) % shards


def ready_score(t: float) -> float:
    """A host's readiness or a lease's deadline ``t`` (Unix s) as its key in a ready set or
    a deadline set: whole µs, rounded up (never early); ±∞ stay.  The Redis store scores
    its ready sets, queues and deadline sets so (lib.lua ``qscore``: a listpack keeps
    whole numbers as integers, which it compares without parsing), and the embedded
    store does the same, so that both order hosts, find them due and leases expired
    alike.  A time is reached at ``now`` when its score is at most :func:`score_now`.
    Source: docs/operations.md, "Redis memory"."""
    return float(math.ceil(t * 1e6)) if math.isfinite(t) else t


def score_now(now: float) -> float:
    """The highest :func:`ready_score` reached at ``now`` (Unix s): a host is due, a lease
    expired, when its score is at most this (lib.lua ``qscore_now``)."""
    return now * 1e6


class EventStatus(enum.StrEnum):
    """What became of one event of a batch."""

    ACCEPTED = "accepted"
    UNKNOWN_URL = "unknown_url"  # the URL is not registered: ignored
    STALE = "stale"  # a signal that carries no news, or a result for a superseded lease
    DUPLICATE = "duplicate"  # a crawl result for a lease already settled
    UNKNOWN_LEASE = "unknown_lease"  # a crawl result for a lease the store has no record of


class EventKind(enum.StrEnum):
    """The appended event streams: signals and clicks (:meth:`Store.append_events`),
    and the settled crawl results whose URLs the fold re-estimates (:meth:`Store.settle`
    appends them)."""

    SIGNAL = "signal"
    CLICK = "click"
    RESULT = "crawl_result"


class LeaseStatus(enum.StrEnum):
    """State of a lease id."""

    ACTIVE = "active"
    EXPIRED = "expired"
    SETTLED = "settled"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class UrlPrior:
    """What registration said of a URL: its label and the parameter values given
    (None = not given).  Unless ``fixed``, the values are priors the estimators
    start from; ``fixed`` makes them the URL's parameters for good."""

    label: str | None = None
    weight: float | None = None  # W, requests/s
    change_rate: float | None = None  # Δ, 1/s
    recall: float | None = None
    false_signal_rate: float | None = None  # ν, 1/s
    fixed: bool = False


#: One crawl outcome: (τ s since the previous fetch, signals with news counted in it,
#: changed).  Stores keep τ as a 32-bit float (``struct`` format ``<f``).
Outcome = tuple[float, int, bool]


@dataclass(frozen=True, slots=True)
class Observations:
    """The event history the estimators read, bounded per URL (MATH.md, "Estimating
    parameters"): exponentially decayed click and signal counts, and the last
    ``outcome_window`` crawl outcomes, oldest first.

    A decayed count holds Σ exp(−(ref − t_k)/decay_s) over the events t_k, at ``ref``
    (the latest event time); see :func:`scheduler_core.estimate.rates.add_event`.
    """

    click_mass: float = 0.0
    click_ref: float | None = None  # Unix s
    signal_mass: float = 0.0
    signal_ref: float | None = None  # Unix s
    outcomes: tuple[Outcome, ...] = ()


@dataclass(frozen=True, slots=True)
class ScoredParams:
    """Parameters of one URL and its threshold, as ``set_params`` writes them."""

    weight: float  # W, requests/s
    change_rate: float  # Δ, 1/s
    recall: float
    false_signal_rate: float  # ν, 1/s
    signal_time_equivalent_s: float  # β, s (0 or inf allowed)
    threshold_s: float  # ι at the scored Λ, s (inf allowed)


@dataclass(frozen=True, slots=True)
class UrlRecord:
    """A URL as registration writes it (parameters already validated and scored)."""

    url: str
    host: str
    weight: float  # W, requests/s
    change_rate: float  # Δ, 1/s
    recall: float
    false_signal_rate: float  # ν, 1/s
    signal_time_equivalent_s: float  # β, s (0 or inf allowed)
    threshold_s: float  # ι at scored_lambda, s (inf allowed)
    scored_lambda: float  # Λ the threshold was computed for
    last_crawled_at: float | None = None  # known last fetch, s
    crawl_delay_s: float | None = None  # politeness of the URL's host, s
    prior: UrlPrior = UrlPrior()  # replaces the stored one; observations are kept


@dataclass(frozen=True, slots=True)
class UrlState:
    """Everything the store knows of one URL (a snapshot)."""

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
    last_crawl_at: float | None
    signals_since_crawl: int
    last_signal_at: float | None
    due_at: float
    lease_id: str | None
    lease_deadline: float | None
    clicks: int
    signals: int
    crawls: int
    changes: int
    fetch_errors: int
    last_click_at: float | None
    prior: UrlPrior = UrlPrior()
    observations: Observations = Observations()
    retired_at: float | None = None  # when it was retired (the result's fetch time), s
    retire_reason: RetireReason | None = None
    gone_count: int = 0  # consecutive 404 (1 each) and 410 (2 each) answers
    refetch_after: float | None = None  # the crawler's lower bound on its next lease, s


@dataclass(frozen=True, slots=True)
class HostState:
    """A host's politeness gate and multiplier (a snapshot)."""

    host: str
    crawl_delay_s: float
    gate_at: float  # the host may give out its next URL at this time, s
    urls: int
    queued: int  # unleased URLs
    due: int  # unleased URLs whose due time has passed (at the snapshot's `now`)
    next_due_at: float | None
    lambda_h: float
    threshold: float  # Λ_h = λ₀ + λ_h
    scored_lambda: float | None  # Λ the host's thresholds were last computed for
    max_in_flight: int = 1  # concurrent leases allowed
    in_flight: int = 0  # active leases
    paused: bool = False
    blocked_until: float | None = None  # end of the latest block, s (may be past)
    block_reason: BlockReason | None = None
    consecutive_failures: int = 0  # 429/5xx/0 answers in a row
    retired: int = 0  # retired URLs (not in `urls`)


class HostPage(NamedTuple):
    """A page of :meth:`Store.list_hosts`."""

    hosts: list[HostState]
    cursor: str | None  # for the next page (None: the last page)


@dataclass(frozen=True, slots=True)
class LeaseGrant:
    """A URL handed to a worker."""

    lease_id: str
    deadline: float
    state: UrlState  # as it was when leased
    gated: bool  # it was due before its host's politeness gate opened
    threshold: float  # Λ_h = λ₀ + λ_h of its host when leased


class LeaseInfo(NamedTuple):
    """What the store knows of a lease id."""

    status: LeaseStatus
    url: str | None  # the URL it was issued for (None: unknown)
    issued_at: float | None  # when, the store's clock, Unix s (None: unknown)


class Leases(NamedTuple):
    """The answer of :meth:`Store.lease_next`."""

    now: float  # the time the store decided at (its clock), Unix s
    grants: list[LeaseGrant]


@dataclass(frozen=True, slots=True)
class IdempotencyKey:
    """Makes an event batch apply at most once.

    Attributes
    ----------
    digest : str
        Names the batch: a digest of the client's key, the route and the batch
        (hexadecimal; no white space).
    ttl_s : float
        How long the batch's answer is remembered, wall s (> 0).
    """

    digest: str
    ttl_s: float


@dataclass(frozen=True, slots=True)
class SignalEvent:
    url: str
    time: float


@dataclass(frozen=True, slots=True)
class ClickEvent:
    url: str
    time: float


@dataclass(frozen=True, slots=True)
class EventBatch:
    """A batch of signals or clicks as columns, as :meth:`Store.append_events` appends it.

    Attributes
    ----------
    kind : EventKind
    urls : sequence of str, (m,)
        Each event's URL (registered or not: the fold classifies).
    times : ndarray, shape (m,), float64
        Each event's time, Unix s (clock time).
    """

    kind: EventKind
    urls: Sequence[str]
    times: FloatArray


@dataclass(frozen=True, slots=True)
class Folded:
    """What one :meth:`Store.fold_events` call applied.

    Attributes
    ----------
    parts : int
        Appended parts folded (one per batch and shard).
    counts : mapping of (EventKind, EventStatus) to int
        Events folded by kind and status (``accepted``, ``unknown_url``, ``stale``).
    touched : list of str
        URLs whose history the folded signals and clicks added to (accepted and stale
        ones), each once: the URLs to re-estimate (W and γ).
    outcomes : list of str
        URLs of the folded crawl results (settled by :meth:`Store.settle`, which
        appended them), each once: the URLs to re-estimate with their crawl outcomes.
    oldest_at : float or None
        When the oldest part folded was appended, s on the store's own clock (the one
        :meth:`Store.backlog_lag` reads); None when nothing was folded.
    """

    parts: int
    counts: Mapping[tuple[EventKind, EventStatus], int]
    touched: list[str]
    outcomes: list[str] = field(default_factory=list)
    oldest_at: float | None = None


@dataclass(frozen=True, slots=True)
class CrawlOutcome:
    url: str
    lease_id: str
    fetched_at: float
    ok: bool  # the copy was refreshed (2xx/3xx); False: the fetch failed
    changed: bool | None
    status: int = 200  # HTTP status, 0 for a network error
    retry_after_s: float | None = None  # the answer's Retry-After, s
    refetch_after: float | None = None  # not leased again before this, Unix s
    retire: RetireReason | None = None  # retire the URL after applying the result


class DispatchObservation(NamedTuple):
    """A dispatched URL's host, ln V at dispatch, whether politeness held it back, and
    whether the store folded it into its host's λ_h already as it leased it
    (:attr:`~service.store.columns.LeaseColumns.host_observed`: then it counts for λ₀
    alone here).  A named tuple: ~100 a ``/next``, built cheaply."""

    host: str
    log_value: float  # ln V at dispatch
    gated: bool
    host_observed: bool = False


@dataclass(frozen=True, slots=True)
class StaleHosts:
    """What :meth:`Store.hosts_needing_rescore` finds.

    Attributes
    ----------
    hosts : the hosts of one rescoring pass, (host, Λ_h) each, most drifted first.
    urls : URLs of every stale host, those of ``hosts`` included: a pass capped at
        ``max_urls`` leaves the rest for the next ones.
    """

    hosts: list[tuple[str, float]]
    urls: int


@dataclass(frozen=True, slots=True)
class StoreStats:
    urls: int
    hosts: int
    due_backlog: int
    leases_active: int
    leases_expired_total: int
    lambda0: float | None
    lambda0_observations: float
    top_hosts: tuple[HostState, ...]
    retired: int = 0  # retired URLs (not in `urls`)
    blocked_hosts: int = 0  # hosts blocked (back-off or operator) or paused now


class Store(Protocol):
    """Storage of the URL frontier; see the module docstring."""

    async def upsert_urls(
        self,
        records: Sequence[UrlRecord],
        now: float,
        once: IdempotencyKey | None = None,
        *,
        keep_known: bool = False,
    ) -> list[bool]:
        """Register or update URLs; True for each URL that is new (``once``: see the
        module docstring).

        With ``keep_known`` a URL already registered is left as it is (False); a
        ``crawl_delay_s`` in its record still sets its host's politeness.
        """
        ...

    async def remove_urls(self, urls: Sequence[str]) -> int:
        """Drop URLs (and their leases); returns how many existed."""
        ...

    async def swap_signatures(self, signatures: Sequence[tuple[str, str]]) -> list[str | None]:
        """Keep the content signature (an ETag or a digest of the body) of each
        (URL, signature) pair and answer the one it replaces (None: none kept).  A
        URL's signature is kept until the URL is removed; URLs need not be
        registered.  Lets a crawl result say "changed" by comparing signatures.
        Removing a URL (:meth:`remove_urls`, :meth:`delete_host`) drops its signature."""
        ...

    async def get_urls(self, urls: Sequence[str]) -> list[UrlState | None]:
        """Snapshots of the named URLs (None where unknown)."""
        ...

    async def estimate_columns(self, urls: Sequence[str]) -> EstimateColumns:
        """What re-estimation reads of the named URLs, as columns
        (:class:`~service.store.estimate_columns.EstimateColumns`: their parameters,
        threshold, decayed counts and outcome windows, without a snapshot per URL); the
        known ones, in the order asked."""
        ...

    async def get_host(self, host: str, now: float) -> HostState | None:
        """Snapshot of one host, or None."""
        ...

    async def host_urls(self, host: str) -> list[UrlState]:
        """Snapshots of every URL of a host."""
        ...

    async def host_thresholds(self, hosts: Sequence[str]) -> dict[str, float]:
        """Current Λ_h = λ₀ + λ_h of each named host (new hosts: λ₀)."""
        ...

    async def lambda0_tracker(self) -> LogMean:
        """λ₀'s running estimate: ln λ₀, the dispatches behind it and their spread
        (:func:`scheduler_core.multipliers.update_log_mean`), observations sent to
        :meth:`observe_dispatch` folded in."""
        ...

    async def set_params(
        self, host: str, params: Mapping[str, ScoredParams], scored_lambda: float
    ) -> None:
        """Store new parameters and ι (computed for ``scored_lambda``) of URLs of
        ``host``; re-derive their due times.  Unknown URLs are skipped.  The host's
        own scored Λ is left as it is."""
        ...

    async def set_params_many(
        self, updates: Sequence[tuple[str, Mapping[str, ScoredParams], float]]
    ) -> None:
        """:meth:`set_params` for many hosts at once: (host, params, scored Λ) each."""
        ...

    async def set_thresholds(
        self, host: str, thresholds_s: Mapping[str, float], scored_lambda: float
    ) -> None:
        """Store ι per URL of ``host`` computed for ``scored_lambda``; re-derive due times."""
        ...

    async def hosts_needing_rescore(self, tolerance: float, max_urls: int) -> StaleHosts:
        """Hosts whose Λ_h drifted by more than ``tolerance`` (relative) from the Λ their
        thresholds were computed for, with the current Λ_h; at most about ``max_urls`` URLs
        (at least one host), and the URLs of all of them."""
        ...

    async def rescore_columns(self, stale: Sequence[tuple[str, float]]) -> RescoreColumns:
        """The parameters and stored ι of every URL ever crawled of the hosts ``stale``
        ((host, Λ_h) pairs, as :meth:`hosts_needing_rescore` gives them in ``hosts``), as
        columns (:class:`~service.store.columns.RescoreColumns`: what :meth:`host_urls`
        gives, without a snapshot per URL), and how many were left out as never
        crawled (due at their registration whatever their threshold)."""
        ...

    async def set_rescored(
        self, cols: RescoreColumns, thresholds_s: npt.NDArray[np.float64]
    ) -> None:
        """:meth:`set_thresholds` for every host of ``cols``: row i's URL gets ι =
        ``thresholds_s[i]`` (s, shape (m,)) computed for its host's Λ_h, which becomes the
        host's scored Λ; URLs gone or moved since are skipped."""
        ...

    async def record_signals(
        self,
        events: Sequence[SignalEvent],
        discard_within_s: float,
        decay_s: float,
        once: IdempotencyKey | None = None,
    ) -> list[EventStatus]:
        """Count change-indicating signals; a signal at or before last crawl + T_DELAY is
        stale (it still counts in the decayed signal count, time constant ``decay_s``)."""
        ...

    async def record_clicks(
        self, events: Sequence[ClickEvent], decay_s: float, once: IdempotencyKey | None = None
    ) -> list[EventStatus]:
        """Count clicks (requests), also in the decayed click count (``decay_s``)."""
        ...

    async def append_events(self, batch: EventBatch, once: IdempotencyKey | None = None) -> None:
        """Append signals or clicks durably, to be applied by :meth:`fold_events` (the
        Redis store: one stream entry per shard, the events as packed columns).  A batch
        appended under ``once`` appends once, whatever the retries."""
        ...

    async def fold_events(
        self,
        consumer: str,
        max_parts: int,
        discard_within_s: float,
        decay_s: float,
        claim_idle_s: float,
    ) -> Folded:
        """Apply up to ``max_parts`` appended parts per shard as :meth:`record_signals`
        and :meth:`record_clicks` would (``discard_within_s``, ``decay_s`` as there), each
        part exactly once however many folders run or die.  ``consumer`` names the
        caller; parts another consumer took and left unfolded for ``claim_idle_s`` wall
        seconds are taken over.  Parts :meth:`settle` appended apply nothing: their URLs
        are named in :attr:`Folded.outcomes`."""
        ...

    async def stale_signals(self, urls: Sequence[str]) -> list[int]:
        """How many signals of each URL the fold found stale (within
        ``discard_within_s`` of a crawl: counted, no due-time move); 0 for a URL with
        none or not registered.  Removing a URL drops its count."""
        ...

    async def fold_lag(self) -> float:
        """Age of the oldest appended event not yet folded, wall s (0 when none waits;
        the largest over the shards)."""
        ...

    async def report_backlog(self, owner: str, oldest_at: float | None, ttl_s: float) -> None:
        """Say that the folder ``owner`` holds folded events whose effects (the touched
        URLs' re-estimation) are not applied yet, the oldest appended at ``oldest_at``
        (s on the store's clock, as :attr:`Folded.oldest_at`; None: nothing waits).
        The report holds for ``ttl_s`` wall seconds (a folder that stops reporting is
        forgotten)."""
        ...

    async def backlog_lag(self) -> float:
        """Age of the oldest event folded but whose effects are not yet applied, wall s,
        over the folders' live :meth:`report_backlog` reports (0 when none waits)."""
        ...

    async def heartbeat(self, owner: str, ttl_s: float) -> None:
        """Say that the worker ``owner`` runs, for the next ``ttl_s`` wall seconds."""
        ...

    async def worker_alive(self) -> bool:
        """True while some worker's last :meth:`heartbeat` holds."""
        ...

    async def lease_next(
        self, now: TimeSource, n: int, lease_ttl_s: float, dispatch_ahead: bool
    ) -> Leases:
        """Lease up to ``n`` URLs: due ones first (earliest due first), then, with
        ``dispatch_ahead``, not-yet-due ones by due time; never a URL already leased;
        never a host before its politeness gate, while it is blocked or paused, or with
        ``max_in_flight`` leases out; never a URL within ``min_revisit_s`` of its last
        fetch or before its ``refetch_after``; never a retired URL; expired leases are
        reclaimed first.
        ``now`` is read when the store decides; the answer says what it read (the
        latest reading, when the store decides in parts)."""
        ...

    async def lease_columns(
        self, now: TimeSource, n: int, lease_ttl_s: float, dispatch_ahead: bool
    ) -> LeaseColumns:
        """:meth:`lease_next` with the leases as columns
        (:class:`~service.store.columns.LeaseColumns`), the path ``GET /next`` takes."""
        ...

    async def lease_host(
        self, now: TimeSource, host: str, lease_ttl_s: float, dispatch_ahead: bool
    ) -> LeaseColumns:
        """:meth:`lease_columns` from one host alone: at most one URL (a host gives one
        per call), none if the host is unknown, not ready, blocked, paused or full."""
        ...

    async def lease_status(self, lease_ids: Sequence[str]) -> list[LeaseInfo]:
        """Status, URL and issue time of each lease id."""
        ...

    async def settle(
        self,
        outcomes: Sequence[CrawlOutcome],
        retry_delay_s: float,
        discard_within_s: float,
        outcome_window: int,
        once: IdempotencyKey | None = None,
    ) -> list[EventStatus]:
        """Apply crawl results: each lease is settled at most once; a lease id the
        store has no record of is ``UNKNOWN_LEASE``, a lease of another URL ``STALE``.
        A refreshed copy whose ``changed`` is known and whose previous fetch time is
        known (and earlier) appends (τ, n, changed) to the URL's outcomes, which keep
        the last ``outcome_window``.

        The store's :class:`ControlRules` apply (docs/operations.md, "Frontier
        controls"): a back-off status (:func:`is_back_off`) blocks the host for
        :func:`back_off_s`, any other status resets its failure count; 404 adds 1 and 410
        adds 2 to the URL's gone count (any other status resets it), which retires the
        URL at ``gone_after``; ``retire`` retires it; ``refetch_after`` holds it back.

        The accepted results' URLs are appended, in the same atomic step, for
        :meth:`fold_events` (:attr:`Folded.outcomes`): their parameters are re-estimated
        by the fold, off the request path; the due time follows the stored parameters
        at once."""
        ...

    async def get_groups(self, keys: Sequence[str]) -> list[tuple[float, ...] | None]:
        """Statistics of URL groups (host, label, global) the estimators' priors come
        from, as ``put_groups`` left them (None where never put)."""
        ...

    async def put_groups(self, groups: Mapping[str, Sequence[float]]) -> None:
        """Replace the statistics of the named groups (each a short tuple of floats)."""
        ...

    async def observe_dispatch(
        self, observations: Sequence[DispatchObservation], config: TrackerConfig
    ) -> None:
        """Fold crawl values at dispatch into the λ₀ and λ_h estimates (a store may
        buffer them briefly; every read of the estimates sees them)."""
        ...

    async def change_host(self, host: str, change: HostChange, now: float) -> HostState | None:
        """Apply an operator's change to a known host (None: unknown host); it takes
        effect on the next lease call.  ``blocked_until`` 0 unblocks (and forgets the
        back-off's failure count); a block always holds at least until its given time."""
        ...

    async def delete_host(self, host: str) -> int:
        """Drop a host, its URLs (retired ones too) and their leases; how many URLs."""
        ...

    async def list_hosts(
        self, now: float, order: HostOrder, limit: int, cursor: str | None
    ) -> HostPage:
        """A page of up to ``limit`` hosts in ``order``, from ``cursor`` (an earlier
        page's; None: the first page).

        Raises
        ------
        ValueError
            If ``cursor`` is not one this store gave out.
        """
        ...

    async def purge_retired(self, retired_before: float) -> int:
        """Drop the URLs retired before ``retired_before`` (Unix s); how many."""
        ...

    async def stats(self, now: TimeSource, top_hosts: int) -> StoreStats:
        """Counts for /metrics (expired leases are reclaimed first, at ``now``)."""
        ...

    async def clock_epoch(self, proposal: float) -> float:
        """The wall time (Unix s) accelerated clocks of all API processes count from:
        the first proposal the store kept."""
        ...

    async def try_lead(self, role: str, owner: str, ttl_s: float) -> bool:
        """Claim (or renew) ``role`` for ``owner`` for ``ttl_s`` wall seconds; False while
        another owner holds it.  Lets one of several API processes run background work."""
        ...

    async def ping(self) -> bool:
        """True when the store answers."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...
