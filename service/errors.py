"""Exceptions of :mod:`service`; the app maps each to one HTTP answer.

The tree::

    ServiceError               root
    ├── InvalidInput           bad input the schemas cannot see (422, field + reason)
    ├── NotFound               unknown URL or host (404)
    ├── StoreUnavailable       the store cannot be reached (503)
    ├── NoWorker               a Redis deployment has no live crawlsched worker (503)
    ├── Unauthenticated        no bearer token, or an unknown one (401)
    ├── Forbidden              a token whose role may not make this call (403)
    └── ConfigError            a setting is unknown or invalid (startup; exit code 2)
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "ConfigError",
    "Forbidden",
    "InvalidInput",
    "NoWorker",
    "NotFound",
    "Overloaded",
    "ServiceError",
    "StoreUnavailable",
    "Unauthenticated",
]


class ServiceError(Exception):
    """Root of every error raised by :mod:`service`."""


class NoWorker(ServiceError):
    """No ``crawlsched worker`` beats for the Redis store: appended signals and clicks
    are not folded, thresholds not rescored, estimates not learned."""


class InvalidInput(ServiceError):
    """A request is well-formed but not acceptable; nothing was changed.

    Parameters
    ----------
    loc : sequence of str or int
        Where in the request body, e.g. ``("results", 3, "lease_id")``.
    reason : str
        Why, for a person.
    """

    def __init__(self, loc: Sequence[str | int], reason: str) -> None:
        super().__init__(f"{'.'.join(map(str, loc))}: {reason}")
        self.loc = tuple(loc)
        self.reason = reason


class NotFound(ServiceError):
    """The named URL or host is not registered."""


class Overloaded(ServiceError):
    """The fold lags more than its bound behind the appended events: a batch of signals
    or clicks is refused whole, nothing of it appended (:mod:`service.scheduler.admission`).

    Parameters
    ----------
    lag_s : float
        The fold's lag, wall s.
    bound_s : float
        The bound (``ingest_max_lag_s``), wall s.
    retry_after_s : int
        When to send the batch again, wall s.
    """

    def __init__(self, lag_s: float, bound_s: float, retry_after_s: int) -> None:
        super().__init__(
            f"the fold lags {lag_s:.2f} s behind the appended events, more than its bound "
            f"of {bound_s:g} s (CRAWLSCHED_INGEST_MAX_LAG_S): "
            f"nothing of this batch was applied; "
            f"send it again after {retry_after_s} s"
        )
        self.lag_s = lag_s
        self.bound_s = bound_s
        self.retry_after_s = retry_after_s


class StoreUnavailable(ServiceError):
    """The store did not answer; the request changed nothing it acknowledged."""


class Unauthenticated(ServiceError):
    """The request carries no bearer token, or one the service does not know."""


class Forbidden(ServiceError):
    """The caller's token is known, but its role may not make this call."""


class ConfigError(ServiceError):
    """A ``CRAWLSCHED_*`` variable is unknown or holds an invalid value.

    The message is one line, names the variable and never quotes a secret.
    """
