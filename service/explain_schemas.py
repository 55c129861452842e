"""The human side of ``GET /urls/{url}``: why the due time is what it is, and the
explanation's numbers in forms people read (ISO 8601 times, durations, rates per
day).  :class:`service.schemas.UrlExplanation` carries both beside its numbers.
"""

from __future__ import annotations

import enum

from pydantic import BaseModel, Field

__all__ = ["DueReason", "ReadableExplanation"]


class DueReason(enum.StrEnum):
    """The rule that set a URL's due time (the decision sentence says it in words).

    The first four are :class:`scheduler_core.due.DueCause`; the store adds the
    others.  A new rule (an operator's block, a retired URL) is a new member with
    its sentence in :mod:`service.scheduler.explain`.
    """

    LEASED = "leased"  #: a worker holds it under a lease
    FETCH_RETRY = "fetch_retry"  #: its last fetch failed: due again after the retry delay
    REGISTERED = "registered"  #: never crawled: due from its registration
    VALUE = "value"  #: its crawl value reaches the threshold Λ
    REVISIT_CAP = "revisit_cap"  #: the revisit cap comes before the value's due time
    NOT_WORTH = "not_worth"  #: ι = ∞ (W/Δ ≤ Λ): only the revisit cap brings it back


class ReadableExplanation(BaseModel):
    """The explanation's times as ISO 8601 (UTC, of the service's clock), durations as
    text (``3 h 12 min``), and rates per day."""

    now: str
    registered_at: str
    last_crawl_at: str | None = Field(description="null: never crawled")
    due_at: str
    due: str = Field(description="when, from now: `in 3 h 12 min` or `5 min ago`")
    lease_deadline: str | None
    host_gate_at: str | None = Field(description="null: the host never gave out a URL")
    elapsed: str | None = Field(description="τ, since the last crawl")
    effective_elapsed: str | None = Field(description="τeff = τ + βn")
    threshold_interval: str = Field(description="ι: τeff at which the crawl value reaches Λ")
    signal_time_equivalent: str = Field(description="β: the silence one signal is worth")
    max_revisit: str = Field(description="the revisit cap")
    retry_delay: str = Field(description="how long a failed fetch waits")
    requests_per_day: float = Field(description="W per day")
    changes_per_day: float = Field(description="Δ per day")
    signals_per_day: float = Field(description="γ per day")
    false_signals_per_day: float = Field(description="ν per day")
    unsignalled_changes_per_day: float = Field(description="α per day")
    mean_time_between_changes: str = Field(description="1/Δ")
    freshness_probability: str = Field(description="P(copy fresh) as a percentage")
