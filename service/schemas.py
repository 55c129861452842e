"""Request and response bodies of the HTTP API (pydantic models).

Units: times are Unix seconds (clock time), rates per second, crawl values in
weighted fresh requests per crawl (MATH.md, "From values to decisions").
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from service.explain_schemas import DueReason, ReadableExplanation
from service.urls import MAX_URL_LENGTH, canonical_url

__all__ = [
    "BatchOut",
    "ClickIn",
    "ClicksIn",
    "CrawlResultIn",
    "CrawlResultsIn",
    "HealthOut",
    "HostOut",
    "EstimateOut",
    "IgnoredEvent",
    "LearningOut",
    "LeaseOut",
    "NextOut",
    "RegisterOut",
    "RemoveOut",
    "SignalIn",
    "SignalsIn",
    "UrlExplanation",
    "UrlIn",
    "UrlsIn",
    "UrlsRemoveIn",
]

Url = Annotated[str, Field(min_length=1, max_length=MAX_URL_LENGTH), AfterValidator(canonical_url)]
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Timestamp = Annotated[float, Field(ge=0, allow_inf_nan=False, description="Unix s")]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


Label = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^\S+$")]


class UrlIn(_In):
    """A URL to keep fresh, with optional priors and a label.

    Given parameters are priors the estimators start from (with the strength of
    ``prior_strength`` events); with ``fixed`` they are the URL's parameters for good
    (missing ones from the settings' defaults).  A URL without them starts from its
    host's and label's estimates.
    """

    url: Url
    weight: NonNegative | None = Field(None, description="importance W, requests/s")
    change_rate: NonNegative | None = Field(None, description="Δ, changes/s")
    recall: Annotated[float, Field(ge=0, le=1)] | None = Field(
        None, description="share of changes announced by a signal"
    )
    false_signal_rate: NonNegative | None = Field(None, description="ν, signals/s without change")
    crawl_delay_s: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = Field(
        None, description="politeness of the URL's host: seconds between two fetches"
    )
    last_crawled_at: Timestamp | None = Field(None, description="fetch time of a copy already held")
    label: Label | None = Field(
        None,
        description="operator metadata (category, merchant...): URLs with one label share priors",
    )
    fixed: bool = Field(False, description="the given parameters are truths, not priors")


class UrlsIn(_In):
    urls: list[UrlIn] = Field(min_length=1)
    keep_known: bool = Field(
        False,
        description="leave URLs already registered as they are (discovered links): only new "
        "ones are created; a `crawl_delay_s` still sets the host's politeness",
    )


class UrlsRemoveIn(_In):
    urls: list[Url] = Field(min_length=1)


class SignalIn(_In):
    """A change-indicating signal (sitemap lastmod, CDN ping, IndexNow...)."""

    url: Url
    time: Timestamp
    source: Annotated[str, Field(max_length=128)] | None = None


class SignalsIn(_In):
    signals: list[SignalIn] = Field(min_length=1)


class ClickIn(_In):
    """A request for the URL's cached copy (the importance signal)."""

    url: Url
    time: Timestamp


class ClicksIn(_In):
    clicks: list[ClickIn] = Field(min_length=1)


class CrawlResultIn(_In):
    """Outcome of a leased fetch."""

    url: Url
    lease_id: Annotated[str, Field(min_length=1, max_length=64)]
    fetched_at: Timestamp
    status: Annotated[int, Field(ge=0, le=599)] = Field(
        200, description="HTTP status; 0 for a network error"
    )
    changed: bool | None = Field(None, description="content differs from the previous copy")


class CrawlResultsIn(_In):
    results: list[CrawlResultIn] = Field(min_length=1)


class RegisterOut(BaseModel):
    created: int
    updated: int
    kept: int | None = Field(
        None, description="with `keep_known`: URLs already registered, left alone"
    )


class RemoveOut(BaseModel):
    removed: int


class IgnoredEvent(BaseModel):
    index: int
    status: str


class BatchOut(BaseModel):
    """Counts of a batch; ``ignored`` lists the events that changed nothing, and why."""

    accepted: int
    ignored: list[IgnoredEvent]


class LeaseOut(BaseModel):
    url: str
    host: str
    lease_id: str
    deadline: float
    crawl_value: float = Field(description="V at dispatch")
    threshold: float = Field(description="Λ_h = λ₀ + λ_h of the URL's host")
    due_at: float


class NextOut(BaseModel):
    now: float
    leases: list[LeaseOut]


class EstimateOut(BaseModel):
    """One learned quantity of a URL."""

    estimate: float | None = Field(description="the value the scheduler uses; null: infinite")
    prior_mean: float | None = Field(description="mean of its prior; null for fixed URLs")
    prior_shape: float | None = Field(description="Gamma shape of the prior (its weight)")
    observations: float = Field(
        description="evidence behind it: decayed clicks or signals, or crawl outcomes"
    )


class LearningOut(BaseModel):
    """What the estimators make of a URL (MATH.md, "Estimating parameters")."""

    fixed: bool
    label: str | None
    weight: EstimateOut = Field(description="W, requests/s, from clicks")
    signal_rate: EstimateOut = Field(description="γ, signals/s")
    unsignalled_change_rate: EstimateOut = Field(description="α = (1 − recall)Δ, 1/s, MAP")
    signal_quality: EstimateOut = Field(description="θ = −ln(1 − precision), host-pooled")


class UrlExplanation(BaseModel):
    """Why a URL is (not) being crawled: parameters, state, value and threshold."""

    url: str
    host: str
    weight: float
    change_rate: float
    recall: float
    false_signal_rate: float
    signal_rate: float
    precision: float
    unsignalled_change_rate: float
    signal_time_equivalent_s: float | None = Field(description="β; null when infinite")
    now: float
    registered_at: float
    last_crawl_at: float | None
    elapsed_s: float | None = Field(description="τ")
    signals_since_crawl: int
    effective_elapsed_s: float | None = Field(description="τeff = τ + βn; null when infinite")
    crawl_value: float
    max_value: float = Field(description="W/Δ: the value of a surely stale copy")
    threshold: float = Field(description="current Λ_h = λ₀ + λ_h")
    lambda0: float | None
    lambda_h: float
    scored_threshold: float = Field(description="Λ the due time was computed for")
    threshold_s: float | None = Field(description="ι = V⁻¹(Λ); null when never worth it")
    due_at: float
    due_in_s: float
    freshness_probability: float = Field(description="P(copy fresh) = exp(−α τeff)")
    lease_id: str | None
    lease_deadline: float | None
    host_gate_at: float | None = Field(description="host's politeness gate; null: never used")
    clicks: int
    signals: int
    crawls: int
    changes: int
    fetch_errors: int
    learning: LearningOut
    decision: str
    due_reason: DueReason = Field(description="the rule that set due_at; `decision` says it")
    readable: ReadableExplanation = Field(description="times, durations and rates for people")


class HostOut(BaseModel):
    host: str
    crawl_delay_s: float
    gate_at: float | None
    urls: int
    queued: int
    due: int
    next_due_at: float | None
    lambda_h: float
    threshold: float
    scored_threshold: float | None
    signal_precision: float | None = Field(
        description="precision of the host's signal source, 1 − e^{−θ_h} (pooled over its "
        "URLs at the learner's last pass); null before any signal-bearing crawl outcome"
    )
    signal_outcomes: float = Field(description="signal-bearing crawl outcomes behind it")


class HealthOut(BaseModel):
    status: str
    now: float
    clock_rate: float
    store: str
