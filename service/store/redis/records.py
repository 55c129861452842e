"""The packed records the scripts keep (layouts as in ``lua/lib.lua``) and lease ids."""

from __future__ import annotations

import math
import struct

from scheduler_core.multipliers import LogMean, host_multiplier
from service.store.base import HostState, UrlState
from service.store.redis.keys import expand_url

__all__ = [
    "HOST",
    "PARAMS",
    "URL",
    "format_lease_id",
    "host_log_mean",
    "parse_lease_id",
    "unpack_host",
    "unpack_url",
]

#: URL record: 12 doubles (NaN = none) and 7 uint32; 124 bytes.
URL = struct.Struct("<12d7I")
#: Host record: crawl delay s, gate Unix s, log-mean estimate, its count, Λ scored.
HOST = struct.Struct("<5d")
_DEADLINE = struct.Struct("<d")
#: Parameters of one URL as ``upsert.lua`` takes them.
PARAMS = struct.Struct("<9d")


def _opt(x: float) -> float | None:
    return None if math.isnan(x) else x


def format_lease_id(shard: int, seq: int, nonce: str) -> str:
    """``<shard>.<seq>.<nonce>``: the shard routes the lease, the nonce guards reuse."""
    return f"{shard}.{seq}.{nonce}"


def parse_lease_id(lease_id: str, shards: int) -> tuple[int, int, str] | None:
    """(shard, seq, nonce) of a lease id this store issued, or None.

    Examples
    --------
    >>> parse_lease_id("3.17.ab12cd34", 16)
    (3, 17, 'ab12cd34')
    >>> parse_lease_id("zz", 16) is None
    True
    """
    parts = lease_id.split(".")
    if len(parts) != 3 or not (parts[0].isdigit() and parts[1].isdigit() and parts[2].isalnum()):
        return None
    shard, seq = int(parts[0]), int(parts[1])
    return (shard, seq, parts[2]) if shard < shards and seq > 0 else None


def unpack_url(
    blob: bytes, host: str, ukey: str, shard: int, lease: tuple[str, float] | None = None
) -> UrlState:
    """A URL record as a snapshot; its lease from the suffix ``get.lua`` appends, or
    ``lease`` (id, deadline) when the caller knows it."""
    (w, delta, recall, nu, beta, thr, slam, reg, last, lsig, lclick, due,
     n, clicks, signals, crawls, changes, errors, seq) = URL.unpack_from(blob)  # fmt: skip
    lease_id, deadline = lease or (None, None)
    if seq and len(blob) > URL.size:
        (deadline,) = _DEADLINE.unpack_from(blob, URL.size)
        nonce = blob[URL.size + _DEADLINE.size :].decode()
        lease_id = format_lease_id(shard, seq, nonce)
    return UrlState(
        url=expand_url(ukey, host), host=host, weight=w, change_rate=delta, recall=recall,
        false_signal_rate=nu, signal_time_equivalent_s=beta, threshold_s=thr,
        scored_lambda=slam, registered_at=reg, last_crawl_at=_opt(last),
        signals_since_crawl=n, last_signal_at=_opt(lsig), due_at=due, lease_id=lease_id,
        lease_deadline=deadline, clicks=clicks, signals=signals, crawls=crawls,
        changes=changes, fetch_errors=errors, last_click_at=_opt(lclick),
    )  # fmt: skip


def unpack_host(
    blob: bytes,
    host: str,
    *,
    urls: int,
    queued: int,
    due: int,
    next_due: bytes | str,
    lambda0: float | None,
) -> HostState:
    """A host record and its counts as a snapshot; λ_h needs the current λ₀."""
    delay, gate, _, _, scored = HOST.unpack(blob)
    lam0 = lambda0 or 0.0
    lam_h = host_multiplier(lambda0, LogMean(host_log_mean(blob), 1.0))
    return HostState(
        host=host, crawl_delay_s=delay, gate_at=gate, urls=urls, queued=queued, due=due,
        next_due_at=float(next_due) if next_due else None, lambda_h=lam_h,
        threshold=lam0 + lam_h, scored_lambda=_opt(scored),
    )  # fmt: skip


def host_log_mean(blob: bytes) -> float | None:
    """The host's log-mean estimate (ln of λ₀ + λ_h), or None."""
    mean = HOST.unpack(blob)[2]
    return None if math.isnan(mean) else mean
