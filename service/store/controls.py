"""The frontier controls' vocabulary (docs/operations.md, "Frontier controls"): why a
host is blocked or a URL retired, the rules a store obeys (:class:`ControlRules`), the
back-off they give, and an operator's change to a host.  Every store applies them the
same way; :mod:`service.store.base` re-exports all of it."""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass

__all__ = [
    "BLOCK_CODES",
    "NO_LIMITS",
    "RETIRE_CODES",
    "BlockReason",
    "ControlRules",
    "HostChange",
    "HostOrder",
    "RetireReason",
    "back_off_s",
    "is_back_off",
]


class BlockReason(enum.StrEnum):
    """Why a host is blocked (``GET /hosts/{host}``)."""

    BACK_OFF = "back_off"  # it answered 429, 5xx or not at all (status 0)
    OPERATOR = "operator"  # ``PATCH /hosts/{host}`` with ``blocked_until``


class RetireReason(enum.StrEnum):
    """Why a URL is retired: it is not scheduled until registered again or signalled."""

    GONE = "gone"  # `gone_after` consecutive 404/410 answers (410 counts double)
    REDIRECT = "redirect"  # a permanent redirect (301/308) to another URL
    DONE = "done"  # the crawler said so (``retire``)


#: Codes of the reasons in the Redis records (0: none).
RETIRE_CODES = {RetireReason.GONE: 1, RetireReason.REDIRECT: 2, RetireReason.DONE: 3}
BLOCK_CODES = {BlockReason.BACK_OFF: 1, BlockReason.OPERATOR: 2}


class HostOrder(enum.StrEnum):
    """Orders of ``GET /hosts``."""

    DUE = "due"  # by when the host can next give out a URL (idle hosts last)
    LAMBDA = "lambda"  # by λ_h, largest first
    BLOCKED = "blocked"  # the hosts blocked or paused now, latest block end first


@dataclass(frozen=True, slots=True)
class ControlRules:
    """What the frontier obeys besides the crawl value (docs/operations.md, "Frontier
    controls").

    Attributes
    ----------
    min_revisit_s : float
        No URL is leased again sooner than this after its last fetch, s (>= 0).
    backoff_base_s : float
        First back-off of a host that answered 429/5xx/0 without Retry-After, s; it
        doubles per consecutive failure.
    max_block_s : float
        Cap on any back-off, and on a Retry-After, s.
    backoff_jitter : float
        Relative jitter of a back-off, in [0, 1): ±10% with 0.1 (deterministic: a hash of
        the host and its failure count).
    gone_after : int
        Consecutive 404 answers (410 counts 2) that retire a URL (>= 1).
    max_in_flight : int
        Concurrent leases of a host that was given no cap (>= 1).
    """

    min_revisit_s: float = 60.0
    backoff_base_s: float = 60.0
    max_block_s: float = 86_400.0
    backoff_jitter: float = 0.1
    gone_after: int = 3
    max_in_flight: int = 1


#: No minimum revisit and no in-flight cap (back-off and retirement as by default): what
#: a store obeys when it is given no rules.  The service passes its settings' rules.
NO_LIMITS = ControlRules(min_revisit_s=0.0, max_in_flight=1_000_000)


def is_back_off(status: int) -> bool:
    """True for an answer that backs its host off: 429, any 5xx, 0 (network error)."""
    return status == 429 or status == 0 or 500 <= status <= 599


def back_off_s(host: str, failures: int, retry_after_s: float | None, rules: ControlRules) -> float:
    """How long a host is blocked after its ``failures``-th consecutive failure, s.

    With a Retry-After (``retry_after_s``, s) that, capped at ``rules.max_block_s``;
    otherwise ``backoff_base_s · 2^(failures − 1)``, capped, times 1 + j with j in
    [−jitter, jitter] from the SHA-1 of ``"<host> <failures>"`` (the Redis store's
    scripts compute the same with ``redis.sha1hex``).

    Examples
    --------
    >>> back_off_s("a.example", 1, 30.0, ControlRules())
    30.0
    >>> back_off_s("a.example", 40, None, ControlRules(backoff_jitter=0.0))
    86400.0
    """
    if retry_after_s is not None:
        return min(max(retry_after_s, 0.0), rules.max_block_s)
    base = min(rules.backoff_base_s * 2.0 ** min(failures - 1, 60), rules.max_block_s)
    digest = hashlib.sha1(f"{host} {failures}".encode()).hexdigest()
    unit = int(digest[:8], 16) / 0xFFFFFFFF  # [0, 1]
    return min(base * (1.0 + rules.backoff_jitter * (2.0 * unit - 1.0)), rules.max_block_s)


@dataclass(frozen=True, slots=True)
class HostChange:
    """An operator's change to a host (None: leave as it is)."""

    crawl_delay_s: float | None = None  # s between fetch starts
    max_in_flight: int | None = None  # concurrent leases
    blocked_until: float | None = None  # Unix s; 0 unblocks
    paused: bool | None = None
