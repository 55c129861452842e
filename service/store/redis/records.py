"""The packed records the scripts keep (layouts as in ``lua/lib.lua``) and lease ids.

Per URL the store keeps one entry in ``urls:<host>``: a form byte, the ``URL`` record
(124 bytes and the 21-byte ``URL_CTL`` tail) without the parts that hold only their
defaults, then the URL's estimator state: the prior registration gave, the decayed
click and signal counts and the last crawl outcomes (MATH.md, "Estimating
parameters"), only the parts present (``EST_*`` flags), at most ``est_size(L,
window)`` = 67 + L + 6·window bytes for a label of L bytes.  A URL registered with W
and Δ and not yet leased takes 1 + 72 + 17 = 90 bytes (:func:`unpack_entry`).  The
scripts answer the full record (:data:`URL_FULL` bytes) and the state apart.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence

import numpy as np

from scheduler_core.multipliers import LogMean, host_multiplier
from service.store.base import (
    BLOCK_CODES,
    RETIRE_CODES,
    HostState,
    Observations,
    Outcome,
    UrlPrior,
    UrlState,
)
from service.store.columns import URL_COLUMNS
from service.store.redis.keys import expand_url

__all__ = [
    "EST_CLICKS",
    "EST_FIXED",
    "EST_GIVEN",
    "EST_LABELLED",
    "EST_SIGNALS",
    "GRANT",
    "HOST",
    "HOST_CTL",
    "LAYOUT",
    "READS_AS_LAYOUT",
    "MAX_LABEL_BYTES",
    "OUTCOME",
    "PARAMS",
    "SCORED",
    "URL",
    "URL_CTL",
    "URL_FULL",
    "est_bytes",
    "est_head",
    "est_size",
    "format_lease_id",
    "host_log_mean",
    "pack_group",
    "pack_prior",
    "parse_lease_id",
    "unpack_entry",
    "unpack_est",
    "unpack_group",
    "unpack_host",
    "unpack_url",
]

#: URL record: 12 doubles (NaN = none) and 7 uint32; 124 bytes.
URL = struct.Struct("<12d7I")
#: One grant of ``lease.lua`` (its GRANT layout): the URL record as leased (its fields
#: named as in :data:`~service.store.columns.URL_COLUMNS`, then the lease seq), the
#: readiness its host had (Unix s), the host's log-mean estimate (NaN = none), the
#: lease seq, the shard's index in the call, the lengths of the host and URL key in the
#: answer's names, and whether it was gated (0 no, 1 yes, 2 no and already folded into
#: its host's estimate as it was leased); 151 bytes.
GRANT = np.dtype(
    [
        *((name, URL_COLUMNS[name]) for name in URL_COLUMNS.names or ()),
        ("lease_seq", "<u4"),
        ("ready", "<f8"),
        ("host_mean", "<f8"),
        ("seq", "<u4"),
        ("shard_index", "<u2"),
        ("host_len", "<u2"),
        ("key_len", "<u2"),
        ("gated", "u1"),
    ]
)
#: Host record: crawl delay s, gate Unix s, log-mean estimate, its count, Λ scored.
HOST = struct.Struct("<5d")
#: Its frontier controls' tail (lib.lua HOST_CTL): blocked until Unix s (NaN: never),
#: consecutive failures, in-flight cap (0: the store's default), leases out, paused,
#: block reason code, retired URLs.  Records without it read as the defaults.
HOST_CTL = struct.Struct("<dIHIBBI")
#: The URL record's frontier controls' tail (lib.lua URL_CTL): retired at Unix s (NaN:
#: not retired), refetch after Unix s (NaN: none), gone count, retire reason code.
URL_CTL = struct.Struct("<ddIB")
#: A full URL record, the tail included (as the scripts answer it).
URL_FULL = URL.size + URL_CTL.size
#: Version of the stored layout, kept in the global meta hash (``keys.GlobalKeys.meta``):
#: 5 is one entry per URL (:func:`unpack_entry`) with host queues, ready sets and
#: deadline sets scored in whole µs (lib.lua ``qscore``), a deadline set member per
#: lease call and shard ("<first seq>:<n>"); 4 the same with a member per lease (its
#: seq), 3 with deadlines in s, 2 with every score in s, 1 the record and the estimator
#: state in two hashes.
LAYOUT = 5
#: Layouts this version reads as they are and records as :data:`LAYOUT` at start (4's
#: one-lease members are read as ranges of one).
READS_AS_LAYOUT = frozenset({4})
#: The parts of the record a stored entry leaves out while they hold their defaults:
#: (form bit, first byte, end byte, default bytes) of the times (last crawl, last signal,
#: last click: NaN), the counts (n since crawl .. lease seq: 0) and the controls' tail.
_PARTS = (
    (1, 64, 88, struct.pack("<3d", math.nan, math.nan, math.nan)),
    (2, 96, URL.size, bytes(28)),
    (4, URL.size, URL_FULL, URL_CTL.pack(math.nan, math.nan, 0, 0)),
)
_RETIRE = {code: reason for reason, code in RETIRE_CODES.items()}
_BLOCK = {code: reason for reason, code in BLOCK_CODES.items()}
_DEADLINE = struct.Struct("<d")
#: Parameters of one URL as ``upsert.lua`` takes them (the prior follows).
PARAMS = struct.Struct("<9d")
#: Parameters of one URL as ``set_params.lua`` takes them: W, Δ, recall, ν, β, ι.
SCORED = struct.Struct("<6d")

#: Estimator state (MATH.md, "Estimating parameters"), variable length: only what a URL
#: has is stored, and a URL with nothing (no label, no given value, not fixed, no event,
#: no outcome) has no state at all (a missing field reads as the defaults).  One byte of
#: ``EST_*`` flags, then, when present and in this order: the click count (decayed mass,
#: reference Unix s: two doubles), the signal count (the same), the values given at
#: registration W (1/s), Δ (1/s), recall, ν (1/s) (a double each), the label's length L
#: (uint16) and the label (UTF-8), then the crawl outcomes, oldest first (``OUTCOME``).
#: At most ``est_size(L, window)`` = 67 + L + 6·window bytes; 17 for a URL registered
#: with W and Δ only.
EST_CLICKS, EST_SIGNALS, EST_FIXED, EST_LABELLED = 1, 2, 4, 8
#: Flags of the given W, Δ, recall and ν, in this order.
EST_GIVEN = (16, 32, 64, 128)
#: One crawl outcome: τ s as a 32-bit float, negative when the copy had changed; n,
#: the signals counted in that interval (capped at 65535).
OUTCOME = struct.Struct("<fH")
#: Longest label the state can hold, bytes (UTF-8).
MAX_LABEL_BYTES = 65_535


def _opt(x: float) -> float | None:
    return None if math.isnan(x) else x


def _head_struct(flags: int) -> struct.Struct:
    """The fixed part of a state with these flags: flags, counts, given values, L."""
    fmt = "<B" + "dd" * (flags & EST_CLICKS) + "dd" * ((flags & EST_SIGNALS) >> 1)
    fmt += "".join("d" for bit in EST_GIVEN if flags & bit)
    return struct.Struct(fmt + ("H" if flags & EST_LABELLED else ""))


#: The fixed part of the state, by its flags byte.
_HEADS = tuple(_head_struct(f) for f in range(256))


def _given(x: float | None) -> bool:
    return x is not None and not math.isnan(x)


def est_size(label_bytes: int, window: int) -> int:
    """Bytes of a URL's estimator state with every field present, a label of
    ``label_bytes`` and a full window of ``window`` outcomes: its bound.

    Examples
    --------
    >>> est_size(0, 64)
    451
    """
    return _HEADS[255].size + label_bytes + OUTCOME.size * window


def est_bytes(prior: UrlPrior, *, clicks: bool, signals: bool, outcomes: int) -> int:
    """Bytes of a URL's estimator state holding ``prior``, a click count if ``clicks``,
    a signal count if ``signals`` and ``outcomes`` outcomes; 0 when there is nothing to
    hold (no state is written).

    Examples
    --------
    >>> est_bytes(UrlPrior(weight=1e-5, change_rate=1e-6), clicks=False, signals=False,
    ...           outcomes=0)
    17
    >>> est_bytes(UrlPrior(), clicks=False, signals=False, outcomes=0)
    0
    """
    flags = _prior_flags(prior) | (EST_CLICKS if clicks else 0) | (EST_SIGNALS if signals else 0)
    label = 0 if prior.label is None else len(prior.label.encode())
    if not flags and not outcomes:
        return 0
    return _HEADS[flags].size + label + OUTCOME.size * outcomes


def _prior_flags(prior: UrlPrior) -> int:
    values = (prior.weight, prior.change_rate, prior.recall, prior.false_signal_rate)
    flags = (EST_FIXED if prior.fixed else 0) | (0 if prior.label is None else EST_LABELLED)
    return flags | sum(bit for bit, x in zip(EST_GIVEN, values, strict=True) if _given(x))


def pack_prior(prior: UrlPrior) -> bytes:
    """The prior as ``upsert.lua`` takes it: the flags byte (prior flags only), the given
    values, the label's length and the label (the estimator state's layout without counts
    and outcomes).

    Raises
    ------
    ValueError
        If the label is longer than ``MAX_LABEL_BYTES`` in UTF-8.
    """
    label = b"" if prior.label is None else prior.label.encode()
    if len(label) > MAX_LABEL_BYTES:
        raise ValueError(f"`label` must be at most {MAX_LABEL_BYTES} bytes in UTF-8")
    flags = _prior_flags(prior)
    values = (prior.weight, prior.change_rate, prior.recall, prior.false_signal_rate)
    given = [x for x in values if _given(x)]
    if prior.label is not None:
        given.append(len(label))
    return _HEADS[flags].pack(flags, *given) + label


_NO_PRIOR = UrlPrior()
_NO_STATE = (_NO_PRIOR, Observations())
#: The flags of a state that say something of its prior.
_PRIOR_BITS = EST_FIXED | EST_LABELLED | sum(EST_GIVEN)


def est_head(blob: bytes) -> tuple[UrlPrior, float, float | None, float, float | None, int]:
    """The fixed part of a (non-empty) estimator state: the prior, the click mass and its
    time, the signal mass and its time (None: no event), and where the outcomes start
    (bytes; :data:`OUTCOME` each from there to the end)."""
    flags = blob[0]
    head = _HEADS[flags]
    values = head.unpack_from(blob)
    k = 1
    click_mass, click_ref, signal_mass, signal_ref = 0.0, None, 0.0, None
    if flags & EST_CLICKS:
        click_mass, click_ref = values[1], values[2]
        k = 3
    if flags & EST_SIGNALS:
        signal_mass, signal_ref = values[k], values[k + 1]
        k += 2
    if not flags & _PRIOR_BITS:  # nothing given at registration: the one default prior
        return _NO_PRIOR, click_mass, click_ref, signal_mass, signal_ref, head.size
    given: list[float | None] = []
    for bit in EST_GIVEN:
        if flags & bit:
            given.append(values[k])
            k += 1
        else:
            given.append(None)
    start = head.size
    label = None
    if flags & EST_LABELLED:
        start += values[k]
        label = blob[head.size : start].decode()
    w, delta, recall, nu = given
    prior = UrlPrior(label, w, delta, recall, nu, fixed=bool(flags & EST_FIXED))
    return prior, click_mass, click_ref, signal_mass, signal_ref, start


def unpack_est(blob: bytes | None) -> tuple[UrlPrior, Observations]:
    """A URL's prior and observations from its estimator state (none: the defaults)."""
    if not blob:
        return _NO_STATE
    prior, click_mass, click_ref, signal_mass, signal_ref, start = est_head(blob)
    outcomes: tuple[Outcome, ...] = ()
    if start < len(blob):
        outcomes = tuple(
            [
                (abs(tau), n, math.copysign(1.0, tau) < 0)
                for tau, n in OUTCOME.iter_unpack(memoryview(blob)[start:])
            ]
        )
    return prior, Observations(click_mass, click_ref, signal_mass, signal_ref, outcomes)


def unpack_entry(blob: bytes) -> tuple[bytes, bytes]:
    """The full record (:data:`URL_FULL` bytes) and the estimator state (``b""``: none) of
    a stored entry of ``urls:<host>`` (``lua/lib.lua`` unpack_entry: a form byte, record
    bytes 0-63, the times if form bit 1, bytes 88-95, the counts if bit 2, the tail if
    bit 4, then the state).

    Examples
    --------
    >>> head = URL.pack(*range(8), math.nan, math.nan, math.nan, 9.0, *(0,) * 7)[:64]
    >>> rec, est = unpack_entry(bytes([0]) + head + struct.pack("<d", 9.0) + bytes([16]))
    >>> len(rec), URL.unpack_from(rec)[11], URL_CTL.unpack_from(rec, URL.size)[2], est.hex()
    (145, 9.0, 0, '10')
    """
    form, at, out = blob[0], 65, [blob[1:65]]
    for bit, start, end, default in _PARTS:
        if bit == 2:  # the due time lies between the times and the counts
            out.append(blob[at : at + 8])
            at += 8
        if form & bit:
            out.append(blob[at : at + end - start])
            at += end - start
        else:
            out.append(default)
    return b"".join(out), blob[at:]


def pack_group(values: Sequence[float]) -> bytes:
    """A group's statistics as stored: little-endian doubles."""
    return struct.pack(f"<{len(values)}d", *values)


def unpack_group(blob: bytes | None) -> tuple[float, ...] | None:
    """Inverse of :func:`pack_group` (None stays None)."""
    return None if blob is None else struct.unpack(f"<{len(blob) // 8}d", blob)


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
    blob: bytes,
    host: str,
    ukey: str,
    shard: int,
    lease: tuple[str, float] | None = None,
    est: bytes | None = None,
) -> UrlState:
    """A URL record as a snapshot; its lease from the suffix ``get.lua`` appends, or
    ``lease`` (id, deadline) when the caller knows it; its prior and observations
    from ``est``, its estimator state (None: the defaults)."""
    (w, delta, recall, nu, beta, thr, slam, reg, last, lsig, lclick, due,
     n, clicks, signals, crawls, changes, errors, seq) = URL.unpack_from(blob)  # fmt: skip
    lease_id, deadline = lease or (None, None)
    retired_at, refetch, gone, reason = URL_CTL.unpack_from(blob, URL.size)
    if seq and len(blob) > URL_FULL:
        (deadline,) = _DEADLINE.unpack_from(blob, URL_FULL)
        nonce = blob[URL_FULL + _DEADLINE.size :].decode()
        lease_id = format_lease_id(shard, seq, nonce)
    prior, observations = unpack_est(est)
    return UrlState(
        url=expand_url(ukey, host), host=host, weight=w, change_rate=delta, recall=recall,
        false_signal_rate=nu, signal_time_equivalent_s=beta, threshold_s=thr,
        scored_lambda=slam, registered_at=reg, last_crawl_at=_opt(last),
        signals_since_crawl=n, last_signal_at=_opt(lsig), due_at=due, lease_id=lease_id,
        lease_deadline=deadline, clicks=clicks, signals=signals, crawls=crawls,
        changes=changes, fetch_errors=errors, last_click_at=_opt(lclick), prior=prior,
        observations=observations, retired_at=_opt(retired_at),
        retire_reason=_RETIRE.get(reason), gone_count=gone, refetch_after=_opt(refetch),
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
    default_in_flight: int = 1,
) -> HostState:
    """A host record and its counts as a snapshot (``urls`` with its retired ones; the
    snapshot's without); λ_h needs the current λ₀."""
    delay, gate, _, _, scored = HOST.unpack_from(blob)
    blocked, failures, cap, flight, paused, reason, retired = (
        HOST_CTL.unpack_from(blob, HOST.size)
        if len(blob) >= HOST.size + HOST_CTL.size
        else (math.nan, 0, 0, 0, 0, 0, 0)
    )
    lam0 = lambda0 or 0.0
    lam_h = host_multiplier(lambda0, LogMean(host_log_mean(blob), 1.0))
    return HostState(
        host=host, crawl_delay_s=delay, gate_at=gate, urls=int(urls) - retired, queued=queued,
        due=due, next_due_at=float(next_due) if next_due else None, lambda_h=lam_h,
        threshold=lam0 + lam_h, scored_lambda=_opt(scored),
        max_in_flight=cap or default_in_flight, in_flight=flight, paused=bool(paused),
        blocked_until=_opt(blocked), block_reason=_BLOCK.get(reason),
        consecutive_failures=failures, retired=retired,
    )  # fmt: skip


def host_log_mean(blob: bytes) -> float | None:
    """The host's log-mean estimate (ln of λ₀ + λ_h), or None."""
    mean = HOST.unpack_from(blob)[2]
    return None if math.isnan(mean) else mean
