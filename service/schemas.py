"""Request and response bodies of the HTTP API (pydantic models).

Units: times are Unix seconds (clock time), rates per second, crawl values in
weighted fresh requests per crawl (MATH.md, "From values to decisions").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

from service import examples
from service.explain_schemas import DueReason, ReadableExplanation
from service.openapi import bound_by
from service.urls import MAX_URL_LENGTH, URL_PATTERN, canonical_url

__all__ = [
    "MAX_CRAWL_DELAY_S",
    "MAX_RATE_PER_S",
    "MAX_TIMESTAMP",
    "MIN_RATE_PER_S",
    "MIN_RECALL",
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

#: Largest rate accepted (weight, change rate, false-signal rate), events per second:
#: a million a second is beyond any page; larger values only overflow the value sums.
MAX_RATE_PER_S = 1e6
#: Smallest positive rate accepted, events per second: a floor of the arithmetic, not of
#: plausibility (smaller values make reciprocals and ratios overflow); below it a rate
#: must be 0.  Ratios of accepted rates stay within 1e106.
MIN_RATE_PER_S = 1e-100
#: Smallest positive recall accepted, the same floor of the arithmetic: a signal rate
#: rΔ + ν > 0 stays above 1e-200 per second, far from the subnormal numbers.
MIN_RECALL = 1e-100
#: Longest crawl delay accepted, s: a host fetched less than once a day is blocked,
#: not delayed (a larger delay keeps the host out of the frontier for good).
MAX_CRAWL_DELAY_S = 86_400.0
#: Latest time accepted, Unix s (1e11 s is in the year 5138): far beyond any clock,
#: accelerated ones included; times are also refused when they lead the clock.
MAX_TIMESTAMP = 1e11


def _valid_unicode(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("not valid Unicode (lone surrogate)") from None
    return text


Url = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_URL_LENGTH,
        description="an http(s) URL; stored in canonical form (lower-case scheme and host, "
        "IDNA host in punycode, no default port, no fragment)",
        json_schema_extra={"pattern": URL_PATTERN},
    ),
    AfterValidator(canonical_url),
]


def _zero_or_at_least(least: float, what: str) -> Callable[[float], float]:
    def check(value: float) -> float:
        if 0 < value < least:
            raise ValueError(f"{what} must be 0 or at least {least:g}")
        return value

    return check


def _zero_or_between(least: float, most: float) -> WithJsonSchema:
    """The JSON schema of a number that is 0 or in [least, most]."""
    return WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "const": 0},
                {"type": "number", "minimum": least, "maximum": most},
            ]
        }
    )


Rate = Annotated[
    float,
    Field(ge=0, le=MAX_RATE_PER_S, allow_inf_nan=False),
    AfterValidator(_zero_or_at_least(MIN_RATE_PER_S, "a rate (per second)")),
    _zero_or_between(MIN_RATE_PER_S, MAX_RATE_PER_S),
]
Recall = Annotated[
    float,
    Field(ge=0, le=1, allow_inf_nan=False),
    AfterValidator(_zero_or_at_least(MIN_RECALL, "recall")),
    _zero_or_between(MIN_RECALL, 1.0),
]
Timestamp = Annotated[
    float,
    Field(ge=0, le=MAX_TIMESTAMP, allow_inf_nan=False, description="Unix s, at most 1e11"),
]
#: Words without white space or control characters (the same set in every regex dialect).
_NO_SPACE = r"^[^\x00-\x20\x7f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+$"
Label = Annotated[
    str, Field(min_length=1, max_length=128, pattern=_NO_SPACE), AfterValidator(_valid_unicode)
]
Text = Annotated[str, AfterValidator(_valid_unicode)]


def _whole(value: object) -> object:
    """JSON Schema's integers include 200.0; a float with a fraction stays refused."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


#: An HTTP status as JSON Schema's integers have it (``200`` or ``200.0``), never a
#: boolean or a string; 0 for a network error.
HttpStatus = Annotated[int, Field(ge=0, le=599), BeforeValidator(_whole)]


class _In(BaseModel):
    """A request body: unknown fields refused; no type coercion (``false`` is not a
    number, ``"1"`` not a number, ``0`` not a boolean), as the JSON schema states."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class UrlIn(_In):
    """A URL to keep fresh, with optional priors and a label.

    Given parameters are priors the estimators start from (with the strength of
    ``prior_strength`` events); with ``fixed`` they are the URL's parameters for good
    (missing ones from the settings' defaults).  A URL without them starts from its
    host's and label's estimates.
    """

    url: Url
    weight: Rate | None = Field(None, description="importance W, requests/s: 0 or in [1e-100, 1e6]")
    change_rate: Rate | None = Field(None, description="Δ, changes/s: 0 or in [1e-100, 1e6]")
    recall: Recall | None = Field(
        None, description="share of changes announced by a signal: 0 or in [1e-100, 1]"
    )
    false_signal_rate: Rate | None = Field(
        None, description="ν, signals/s without change: 0 or in [1e-100, 1e6]"
    )
    crawl_delay_s: (
        Annotated[float, Field(gt=0, le=MAX_CRAWL_DELAY_S, allow_inf_nan=False)] | None
    ) = Field(
        None,
        description="politeness of the URL's host: seconds between two fetches, in (0, 86400]",
    )
    last_crawled_at: Timestamp | None = Field(None, description="fetch time of a copy already held")
    label: Label | None = Field(
        None,
        description="operator metadata (category, merchant...): URLs with one label share priors",
    )
    fixed: bool = Field(False, description="the given parameters are truths, not priors")


def _batch(what: str) -> Any:
    return Field(
        min_length=1,
        description=f"{what}; at most `max_batch` (CRAWLSCHED_MAX_BATCH) per request",
        json_schema_extra=bound_by("max_batch"),
    )


class UrlsIn(_In):
    model_config = ConfigDict(json_schema_extra={"examples": [examples.URLS_IN]})

    urls: list[UrlIn] = _batch("URLs to register or update")
    keep_known: bool = Field(
        False,
        description="leave URLs already registered as they are (discovered links): only new "
        "ones are created; a `crawl_delay_s` still sets the host's politeness",
    )


class UrlsRemoveIn(_In):
    model_config = ConfigDict(json_schema_extra={"examples": [examples.URLS_REMOVE_IN]})

    urls: list[Url] = _batch("URLs to drop")


class SignalIn(_In):
    """A change-indicating signal (sitemap lastmod, CDN ping, IndexNow...)."""

    url: Url
    time: Timestamp
    source: Annotated[Text, Field(max_length=128)] | None = None


class SignalsIn(_In):
    model_config = ConfigDict(json_schema_extra={"examples": [examples.SIGNALS_IN]})

    signals: list[SignalIn] = _batch("change-indicating signals")


class ClickIn(_In):
    """A request for the URL's cached copy (the importance signal)."""

    url: Url
    time: Timestamp


class ClicksIn(_In):
    model_config = ConfigDict(json_schema_extra={"examples": [examples.CLICKS_IN]})

    clicks: list[ClickIn] = _batch("requests (clicks)")


class CrawlResultIn(_In):
    """Outcome of a leased fetch."""

    url: Url
    lease_id: Annotated[Text, Field(min_length=1, max_length=64)]
    fetched_at: Timestamp
    status: HttpStatus = Field(200, description="HTTP status; 0 for a network error")
    changed: bool | None = Field(None, description="content differs from the previous copy")
    retry_after_s: float | None = Field(
        None,
        ge=0,
        le=MAX_TIMESTAMP,
        allow_inf_nan=False,
        description="the answer's Retry-After, s: with a back-off status (429, 5xx, 0) the "
        "host is blocked until then (capped by CRAWLSCHED_MAX_BLOCK_S)",
    )
    redirect_to: Url | None = Field(
        None,
        description="where the URL redirects; with 301 or 308 the target is registered with "
        "the source's importance and the source is retired (`redirect`)",
    )
    refetch_after: Timestamp | None = Field(
        None, description="Unix s: the URL is not leased again before then"
    )
    retire: bool = Field(
        False, description="the crawler is done with this URL: it is retired (`done`)"
    )


class CrawlResultsIn(_In):
    model_config = ConfigDict(json_schema_extra={"examples": [examples.CRAWL_RESULTS_IN]})

    results: list[CrawlResultIn] = _batch("outcomes of leased fetches")


class RegisterOut(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [examples.REGISTER_OUT]})

    created: int
    updated: int
    kept: int | None = Field(
        None, description="with `keep_known`: URLs already registered, left alone"
    )


class RemoveOut(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [examples.REMOVE_OUT]})

    removed: int


class IgnoredEvent(BaseModel):
    index: int
    status: str


class BatchOut(BaseModel):
    """Counts of a batch; ``ignored`` lists the events that changed nothing, and why."""

    model_config = ConfigDict(json_schema_extra={"examples": [examples.BATCH_OUT]})

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
    model_config = ConfigDict(json_schema_extra={"examples": [examples.NEXT_OUT]})

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

    model_config = ConfigDict(json_schema_extra={"examples": [examples.URL_EXPLANATION]})

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
    signals: int = Field(description="signals counted, the stale ones included")
    stale_signals: int = Field(
        0,
        description="signals the fold found stale (within CRAWLSCHED_SIGNAL_DISCARD_S of a "
        "crawl: counted, the due time not moved); events for unregistered URLs are counted "
        'in `crawlsched_events_total{status="unknown_url"}` only',
    )
    crawls: int
    changes: int
    fetch_errors: int
    learning: LearningOut
    decision: str
    due_reason: DueReason = Field(description="the rule that set due_at; `decision` says it")
    readable: ReadableExplanation = Field(description="times, durations and rates for people")
    status: str = Field("active", description="`active`, or `retired`: not scheduled")
    retire_reason: str | None = Field(None, description="`gone`, `redirect` or `done`")
    retired_at: float | None = Field(None, description="Unix s")
    gone_count: int = Field(0, description="consecutive 404 (1 each) and 410 (2 each) answers")
    refetch_after: float | None = Field(None, description="not leased before this, Unix s")


class HostOut(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [examples.HOST_OUT]})

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
    source_precision: float | None = Field(
        None,
        description="precision of the host's signal source as one source shared by its "
        "URLs: the posterior from all their crawl outcomes under the hosts' population, at "
        "the learner's last pass; null before the learner has fitted the population",
    )
    source_recall: float | None = Field(
        None, description="recall of the host's signal source, the same posterior's"
    )
    max_in_flight: int = Field(1, description="concurrent leases allowed")
    in_flight: int = Field(0, description="leases out now")
    paused: bool = False
    blocked: bool = Field(False, description="blocked or paused now: out of /next")
    blocked_until: float | None = Field(None, description="end of the latest block, Unix s")
    block_reason: str | None = Field(None, description="`back_off` or `operator`")
    consecutive_failures: int = Field(0, description="429/5xx/0 answers in a row")
    retired: int = Field(0, description="retired URLs (not in `urls`)")
    rate_limit_per_s: float | None = Field(
        None,
        description="fetch starts per second the host allows, 1 / crawl_delay_s (the "
        "per-host limit of the optimisation); null: no limit (crawl delay 0 or next to it)",
    )
    why: str = Field("", description="in a sentence: whether the host gives out URLs now")


class HealthOut(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [examples.HEALTH_OUT]})

    status: str
    now: float
    clock_rate: float
    store: str
