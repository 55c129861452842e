"""The embedded store's state and the helpers every part of it shares.

Per host a ``SortedList`` of ``(due_at, url)`` for its unleased URLs; per shard
a ``SortedList`` of ``(readiness, host)`` and one of ``(deadline, lease_id)``.
Every method runs without awaiting, so each is atomic on the event loop, and reads
its clock when it starts: the moment of its decision.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from scheduler_core.due import due_time
from scheduler_core.multipliers import LogMean, host_multiplier
from scheduler_core.params import FloatArray
from service.store.base import (
    NO_LIMITS,
    ControlRules,
    EventStatus,
    LeaseStatus,
    Observations,
    RetireReason,
    UrlState,
    ready_score,
    shard_of,
)
from service.store.memory_events import EventLog
from service.store.memory_records import Answers, Host, Lease, Shard, Url

__all__ = ["MemoryBase"]

#: A host's queue is rebuilt at once when more of its URLs than this move together.
_FEW = 8


class MemoryBase:
    """The state of :class:`~service.store.memory.MemoryStore` and its shared helpers.

    Parameters
    ----------
    shards : int
        Number of host shards.
    default_crawl_delay_s : float
        Politeness of a host registered without one, s.
    max_revisit_s : float
        Cap on any revisit interval, s.
    lease_history : int
        Finished leases remembered (to answer duplicates).
    initial_lambda0 : float, optional
        λ₀ before the first dispatch.
    controls : ControlRules, optional
        Back-off, retirement, minimum revisit and in-flight cap (default
        :data:`~service.store.base.NO_LIMITS`).
    """

    def __init__(
        self,
        *,
        shards: int = 16,
        default_crawl_delay_s: float = 1.0,
        max_revisit_s: float = 30 * 86_400.0,
        lease_history: int = 200_000,
        initial_lambda0: float | None = None,
        controls: ControlRules | None = None,
    ) -> None:
        self._controls = NO_LIMITS if controls is None else controls
        self._shards = [Shard() for _ in range(shards)]
        self._default_delay = default_crawl_delay_s
        self._max_revisit_s = max_revisit_s
        self._history_size = lease_history
        self._urls: dict[str, Url] = {}
        self._hosts: dict[str, Host] = {}
        self._active: dict[str, Lease] = {}
        self._finished: OrderedDict[str, Lease] = OrderedDict()
        self._expired_total = 0
        self._reclaim_at = math.inf  # no lease deadline scores lower (a lower bound)
        self._lease_seq = 0  # leases issued by this store: lease ids never repeat
        self._lease_nonce = ""  # random per lease call
        self._groups: dict[str, tuple[float, ...]] = {}
        self._signatures: dict[str, str] = {}  # URL -> content signature of its last fetch
        self._lambda0 = LogMean(None if initial_lambda0 is None else math.log(initial_lambda0))
        # answers of batches under an idempotency key: registrations, events
        self._registered: Answers[bool] = Answers()
        self._answers: Answers[EventStatus] = Answers()
        self._log = EventLog()  # signals and clicks appended, not yet folded
        self._worker_until = -math.inf  # monotonic s: the end of a worker's last heartbeat
        # folder -> (append time of its oldest event not yet re-estimated, report's end),
        # monotonic s
        self._backlogs: dict[str, tuple[float | None, float]] = {}

    # -- helpers ---------------------------------------------------------------------------
    def _host(self, name: str, crawl_delay_s: float | None) -> Host:
        host = self._hosts.get(name)
        if host is None:
            delay = self._default_delay if crawl_delay_s is None else crawl_delay_s
            host = self._hosts[name] = Host(name, shard_of(name, len(self._shards)), delay)
        elif crawl_delay_s is not None:
            host.crawl_delay_s = crawl_delay_s
        return host

    def _cap(self, host: Host) -> int:
        return self._controls.max_in_flight if host.max_in_flight is None else host.max_in_flight

    def _refresh(self, host: Host) -> None:
        """Re-key the host in its shard's ready set: the latest of its earliest due, its
        gate and its block; out while its queue is empty, it is paused or it has
        ``max_in_flight`` leases out."""
        key = None
        if host.queue and not host.paused and host.in_flight < self._cap(host):
            block = -math.inf if host.blocked_until is None else host.blocked_until
            key = (ready_score(max(host.queue[0][0], host.gate_at, block)), host.name)
        if key == host.ready_key:
            return  # in place already (a signal or result that left its head alone)
        ready = self._shards[host.shard].ready
        if host.ready_key is not None:
            if ready[0] == host.ready_key:  # the head, as a host just leased from is
                ready.pop(0)
            else:
                ready.remove(host.ready_key)
        host.ready_key = key
        if key is not None:
            ready.add(key)

    def _floor(self, u: Url) -> float:
        """Earliest time u may be leased: min revisit after its last fetch, refetch_after."""
        floor = -math.inf if u.refetch_after is None else u.refetch_after
        if u.last_crawl_at is not None and self._controls.min_revisit_s > 0:
            floor = max(floor, u.last_crawl_at + self._controls.min_revisit_s)
        return floor

    def _rescore(self, u: Url, refresh: bool = True) -> None:
        """Re-derive u.due_at and move u in its host queue (if unleased); without
        ``refresh`` the caller re-keys the host in its ready set (once for many URLs)."""
        self._move(u, self._due_of(u), refresh)

    def _due_of(self, u: Url) -> float:
        """u's due time from its record (:func:`~scheduler_core.due.due_time`, then
        :meth:`_floor`), Unix s."""
        new_due = due_time(
            last_crawl_at=u.last_crawl_at,
            registered_at=u.registered_at,
            threshold_s=u.threshold_s,
            signal_time_equivalent_s=u.signal_time_equivalent_s,
            signals_since_crawl=u.signals_since_crawl,
            last_signal_at=u.last_signal_at,
            max_revisit_s=self._max_revisit_s,
        )
        return max(new_due, self._floor(u))

    def _dues(self, us: Sequence[Url]) -> FloatArray:
        """The due times :meth:`_rescore` derives, of many URLs at once, shape (m,): the
        same arithmetic as :func:`~scheduler_core.due.due_time` and :meth:`_floor`, on
        arrays."""
        nan = math.nan
        rows = np.array(
            [
                (
                    nan if u.last_crawl_at is None else u.last_crawl_at,
                    u.registered_at,
                    u.threshold_s,
                    u.signal_time_equivalent_s,
                    u.signals_since_crawl,
                    nan if u.last_signal_at is None else u.last_signal_at,
                    -math.inf if u.refetch_after is None else u.refetch_after,
                )
                for u in us
            ],
            dtype=np.float64,
        ).reshape(len(us), 7)
        last, registered, thr, beta, n, lsig, floor = rows.T
        never = np.isnan(last)
        with np.errstate(invalid="ignore"):
            shift = np.where(n > 0, beta * n, 0.0)
            value = last + thr - shift
            proven = (n > 0) & np.isinf(beta)
            value = np.where(proven, np.where(np.isnan(lsig), last, lsig), value)
            value = np.where(np.isinf(thr), np.inf, value)
            cap = last + self._max_revisit_s
            due = np.where(never, registered, np.where(value <= cap, value, cap))
            if self._controls.min_revisit_s > 0:
                floor = np.where(
                    never, floor, np.maximum(floor, last + self._controls.min_revisit_s)
                )
        return np.asarray(np.maximum(due, floor), dtype=np.float64)

    def _requeue(self, host: Host, us: Sequence[Url], dues: Sequence[float]) -> bool:
        """Set the due times of ``host``'s URLs ``us`` to ``dues``, as :meth:`_move`
        does, with its queue rebuilt once when many of them move (the caller re-keys the
        host in its ready set); whether any queued URL moved."""
        moved: dict[str, float] = {}
        for u, due in zip(us, dues, strict=True):
            if u.retired_at is None and u.lease_id is None and due != u.due_at:
                moved[u.url] = due
                if len(moved) <= _FEW:
                    host.queue.discard((u.due_at, u.url))
                    host.queue.add((due, u.url))
            u.due_at = due
        if len(moved) > _FEW:  # those moved one by one are in place; the rest follow
            entries = [(moved.get(url, due), url) for due, url in host.queue]
            host.queue.clear()
            host.queue.update(entries)
        return bool(moved)

    def _requeue_batches(self, batches: Sequence[tuple[Host, Sequence[Url]]]) -> None:
        """Each host's URLs of ``batches`` to the due times :meth:`_rescore` would give
        them, all derived in one vectorised pass (:meth:`_dues`); each host whose queue
        moved re-keyed once (its ready key depends on nothing else these change)."""
        dues = self._dues([u for _, us in batches for u in us]).tolist()
        k = 0
        for h, us in batches:
            if self._requeue(h, us, dues[k : k + len(us)]):
                self._refresh(h)
            k += len(us)

    def _move(self, u: Url, new_due: float, refresh: bool = True) -> None:
        if u.retired_at is not None:
            u.due_at = new_due  # retired: in no queue
        elif u.lease_id is None:
            host = self._hosts[u.host]
            if new_due != u.due_at:  # else in place already
                host.queue.discard((u.due_at, u.url))
                host.queue.add((new_due, u.url))
                u.due_at = new_due
            if refresh:
                self._refresh(host)
        else:
            u.due_at = new_due

    def _retire(self, u: Url, reason: RetireReason, at: float) -> None:
        """Take u out of scheduling (it must be unleased)."""
        host = self._hosts[u.host]
        host.queue.discard((u.due_at, u.url))
        u.retired_at, u.retire_reason = at, reason
        host.retired.add(u.url)
        self._refresh(host)

    def _unretire(self, u: Url) -> None:
        """Bring a retired URL back, with its history."""
        if u.retired_at is None:
            return
        u.retired_at = u.retire_reason = None
        u.gone_count = 0
        self._hosts[u.host].retired.discard(u.url)
        if u.lease_id is None:
            self._hosts[u.host].queue.add((u.due_at, u.url))
        self._rescore(u)

    def _finish(self, lease_id: str, lease: Lease, status: LeaseStatus) -> None:
        lease.status = status
        self._active.pop(lease_id, None)
        self._finished[lease_id] = lease
        self._finished.move_to_end(lease_id)
        while len(self._finished) > self._history_size:
            self._finished.popitem(last=False)

    def _lambda_of(self, host: Host) -> float:
        lam0 = self._lambda0.value
        return (lam0 or 0.0) + host_multiplier(lam0, host.estimate)

    @staticmethod
    def _snapshot(u: Url) -> UrlState:
        # A shallow copy field by field, positionally (UrlState's order; a test holds
        # every field): dataclasses.asdict deep-copies, ~10× slower.
        obs = Observations(
            u.click_mass, u.click_ref, u.signal_mass, u.signal_ref, tuple(u.outcomes)
        )
        return UrlState(
            u.url, u.host, u.weight, u.change_rate, u.recall, u.false_signal_rate,
            u.signal_time_equivalent_s, u.threshold_s, u.scored_lambda, u.registered_at,
            u.last_crawl_at, u.signals_since_crawl, u.last_signal_at, u.due_at, u.lease_id,
            u.lease_deadline, u.clicks, u.signals, u.crawls, u.changes, u.fetch_errors,
            u.last_click_at, u.prior, obs, u.retired_at, u.retire_reason, u.gone_count,
            u.refetch_after,
        )  # fmt: skip
