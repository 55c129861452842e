"""Service configuration from ``CRAWLSCHED_*`` environment variables.

Durations are in clock seconds: under an accelerated clock they are simulated
seconds.  Build with :func:`get_settings`; tests pass a :class:`Settings` to
``create_app`` instead.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["DAY_S", "Settings", "get_settings"]

DAY_S = 86_400.0


class Settings(BaseSettings):
    """Every knob of the service, with its default and unit."""

    model_config = SettingsConfigDict(env_prefix="CRAWLSCHED_", extra="forbid", frozen=True)

    store: str = Field("memory", description="`memory` (embedded default) or a redis:// URL")
    shards: int = Field(16, ge=1, le=4096, description="host shards (one sorted set of hosts each)")

    clock: Literal["system", "accelerated", "manual"] = "system"
    clock_speed: float = Field(1.0, gt=0, description="accelerated clock: clock s per wall s")
    clock_start: float | None = Field(
        None, ge=0, description="accelerated clock: its reading when the first API process started"
    )

    lease_ttl_s: float = Field(600.0, gt=0, description="a lease expires this long after dispatch")
    lease_history: int = Field(200_000, ge=1000, description="settled leases remembered")
    max_next: int = Field(1000, ge=1, description="largest n accepted by GET /next")
    max_batch: int = Field(10_000, ge=1, description="largest batch accepted by POST routes")
    max_body_bytes: int = Field(
        8 * 1024 * 1024, ge=1024, description="largest request body read, bytes (413 beyond)"
    )
    body_timeout_s: float = Field(
        30.0, gt=0, description="wall s a request body may take to arrive after its headers (408)"
    )
    header_timeout_s: float = Field(
        10.0, gt=0, description="wall s request headers may take (connection closed beyond)"
    )
    keep_alive_s: float = Field(
        5.0, gt=0, description="wall s an idle keep-alive connection stays open"
    )
    dispatch_ahead: bool = Field(
        True, description="fill /next with not-yet-due URLs (below threshold) when too few are due"
    )

    default_weight: float = Field(1.0 / DAY_S, ge=0, description="W of a URL without one, 1/s")
    default_change_rate: float = Field(
        1.0 / (7 * DAY_S), ge=0, description="Δ of a URL without one, 1/s"
    )
    default_recall: float = Field(0.0, ge=0, le=1)
    default_false_signal_rate: float = Field(0.0, ge=0, description="ν default, 1/s")
    default_crawl_delay_s: float = Field(1.0, gt=0, description="politeness of a new host, s")

    max_revisit_s: float = Field(30 * DAY_S, gt=0, description="every URL revisited this often")
    retry_delay_s: float = Field(3600.0, gt=0, description="failed fetch: due again after this")
    signal_discard_s: float = Field(
        0.0, ge=0, description="T_DELAY: signals up to this long after a crawl carry no news"
    )
    future_tolerance_s: float = Field(
        300.0, ge=0, description="event times may lead the clock by this many wall seconds"
    )
    value_terms: int | None = Field(
        None, ge=1, description="NCIS-APPROX-J: cut the value sums after J terms (None: exact)"
    )

    lambda_window: float = Field(64.0, ge=1, description="dispatches in the λ estimate window")
    lambda_clip: float = Field(2.0, gt=0, description="largest log step of one observation")
    initial_lambda0: float | None = Field(None, gt=0, description="λ₀ before any dispatch")
    rescore_tolerance: float = Field(
        0.05, gt=0, description="rescore a host when its threshold drifted by this fraction"
    )
    rescore_interval_s: float = Field(0.25, gt=0, description="wall s between rescoring passes")
    rescore_batch: int = Field(20_000, ge=1, description="URLs rescored per pass at most")
    estimate_decay_s: float = Field(
        30 * DAY_S, gt=0, description="time constant of the decayed click and signal counts, s"
    )
    outcome_window: int = Field(
        64, ge=1, le=4096, description="crawl outcomes kept per URL for the change-rate fit"
    )
    prior_strength: float = Field(
        2.0, gt=0, description="Gamma shape of the priors a registration gives (pseudo-events)"
    )
    prior_pseudo_urls: float = Field(
        5.0, gt=0, description="URLs' worth of weight a group's parent prior carries"
    )
    relearn_tolerance: float = Field(
        0.1, gt=0, description="re-score a URL when an estimate moved by this fraction"
    )
    relearn_interval_s: float = Field(
        1.0, gt=0, description="wall s between batches of URLs re-estimated after events"
    )
    relearn_batch: int = Field(
        2000, ge=1, description="URLs re-estimated per batch; a full queue is flushed at once"
    )
    learn_batch: int = Field(
        5000, ge=1, description="URLs the learner's background pass covers at most"
    )
    learn_interval_s: float = Field(
        5.0, gt=0, description="wall s between background passes over the hosts' estimates"
    )
    metrics_top_hosts: int = Field(20, ge=0, description="hosts whose λ_h /metrics exports")

    @field_validator("store")
    @classmethod
    def _known_store(cls, value: str) -> str:
        if value != "memory" and not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must be `memory` or a redis:// URL")
        return value


def get_settings() -> Settings:
    """Settings from the environment (a new object each call; no global)."""
    return Settings()
