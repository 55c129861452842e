"""Service configuration from ``CRAWLSCHED_*`` environment variables.

Durations are in clock seconds: under an accelerated clock they are simulated
seconds.  Build with :func:`get_settings`, which also refuses ``CRAWLSCHED_*``
variables nobody reads (naming the closest known one) and turns invalid values
into a one-line :class:`~service.errors.ConfigError`; tests pass a
:class:`Settings` to ``create_app`` instead.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

from service.auth import Role, TokenTable, parse_tokens
from service.errors import ConfigError

__all__ = [
    "CLIENT_VARIABLES",
    "DAY_S",
    "ENV_PREFIX",
    "Settings",
    "check_environment",
    "get_settings",
    "known_variables",
]

ENV_PREFIX = "CRAWLSCHED_"

#: Variables read by the clients (the load generator, tools), not by the service.
CLIENT_VARIABLES = {
    "CRAWLSCHED_TOKEN": "bearer token the load generator sends",
    "CRAWLSCHED_URL": "base URL of the service the load generator drives",
}

DAY_S = 86_400.0


class Settings(BaseSettings):
    """Every knob of the service, with its default and unit."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, extra="forbid", frozen=True, allow_inf_nan=False
    )

    store: str = Field("memory", description="`memory` (embedded default) or a redis:// URL")
    shards: int = Field(16, ge=1, le=4096, description="host shards (one sorted set of hosts each)")
    redis_timeout_s: float = Field(
        5.0, gt=0, description="wall s a Redis answer may take; past it the call answers 503"
    )

    auth_tokens: SecretStr | None = Field(
        None, description="role:token pairs, comma-separated (roles: admin, worker, events, read)"
    )
    auth_tokens_file: Path | None = Field(
        None, description="a file of role:token pairs, one a line"
    )

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
    min_revisit_s: float = Field(
        60.0, ge=0, description="no URL is leased again sooner than this after its last fetch, s"
    )
    backoff_base_s: float = Field(
        60.0, gt=0, description="first back-off of a host answering 429/5xx/0, s; doubles"
    )
    max_block_s: float = Field(
        DAY_S, gt=0, description="cap on a host's back-off and on a Retry-After, s"
    )
    backoff_jitter: float = Field(0.1, ge=0, lt=1, description="relative jitter of a back-off")
    gone_after: int = Field(
        3, ge=1, description="consecutive 404 answers (410 counts 2) that retire a URL"
    )
    max_in_flight: int = Field(
        1, ge=1, le=65_535, description="concurrent leases of a host given no cap of its own"
    )
    signal_discard_s: float = Field(
        0.0, ge=0, description="T_DELAY: signals up to this long after a crawl carry no news"
    )
    future_tolerance_s: float = Field(
        300.0,
        ge=0,
        description="event times may lead the clock, and a fetch time its lease's issue "
        "time, by this many wall seconds (crawlers' clock skew)",
    )
    idempotency_s: float = Field(
        DAY_S,
        gt=0,
        description="wall s an event batch's Idempotency-Key is remembered: a batch repeated "
        "with its key within this time gets its first answer and changes nothing",
    )
    value_terms: int | None = Field(
        None, ge=1, description="NCIS-APPROX-J: cut the value sums after J terms (None: exact)"
    )

    lambda_window: float = Field(64.0, ge=1, description="dispatches in the λ estimate window")
    lambda_clip: float = Field(2.0, gt=0, description="largest log step of one observation")
    initial_lambda0: float | None = Field(None, gt=0, description="λ₀ before any dispatch")
    rescore_tolerance: float = Field(
        0.05,
        gt=0,
        description="rescore a host when its threshold drifted by this fraction "
        "(or by λ₀'s own noise, 2 standard errors, when larger)",
    )
    rescore_interval_s: float = Field(0.25, gt=0, description="wall s between rescoring passes")
    rescore_batch: int = Field(20_000, ge=1, description="URLs rescored per pass at most")
    rescore_slice: int = Field(
        256, ge=1, description="URLs a rescoring pass handles between turns of serving requests"
    )
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
        1.0,
        gt=0,
        description="unused: the fold's rounds re-estimate (CRAWLSCHED_FOLD_LAG_S); "
        "accepted so that configurations setting it still load",
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
    fold_lag_s: float = Field(
        1.0,
        gt=0,
        le=3600,
        description="wall s: the lag the fold aims at; it runs every quarter of it and "
        "re-estimates for at most half of it per round",
    )
    ingest_backpressure: bool = Field(
        True,
        description="refuse batches of signals and clicks (503, Retry-After) while the fold "
        "lags more than ingest_max_lag_s behind, so that due times follow them within it",
    )
    ingest_max_lag_s: float = Field(
        10.0,
        gt=0,
        le=3600,
        description="wall s: with ingest_backpressure, signals and clicks are refused (503) "
        "while the fold lags more than this behind",
    )
    fold_batch: int = Field(
        64, ge=1, description="appended batches per shard one fold step reads at most"
    )
    fold_claim_s: float = Field(
        30.0, gt=0, description="wall s before a folder takes over batches another left unfolded"
    )
    heap_freeze_interval_s: float = Field(
        1.0,
        ge=0,
        description="memory store: wall s between passes that move the surviving heap out of "
        "the garbage collector's full passes (0: never)",
    )
    worker_ttl_s: float = Field(
        15.0, gt=0, description="wall s a worker's heartbeat holds; the worker beats 3× as often"
    )

    @field_validator("store")
    @classmethod
    def _known_store(cls, value: str) -> str:
        if value != "memory" and not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must be `memory` or a redis:// URL")
        return value

    @field_validator("auth_tokens")
    @classmethod
    def _token_pairs(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not parse_tokens(value.get_secret_value(), one_per_line=False):
            raise ValueError("holds no role:token pair (unset it to turn authentication off)")
        return value

    @field_validator("auth_tokens_file")
    @classmethod
    def _token_file(cls, value: Path | None) -> Path | None:
        if value is not None:
            _read_token_file(value)
        return value

    @model_validator(mode="after")
    def _distinct_tokens(self) -> Settings:
        TokenTable(self.auth_pairs())  # raises ValueError if a token is listed twice
        return self

    def auth_pairs(self) -> list[tuple[Role, SecretStr]]:
        """The configured ``(role, token)`` pairs, from both sources; empty: auth off.

        Raises
        ------
        ValueError
            If the token file cannot be read or holds a malformed pair.
        """
        pairs = []
        if self.auth_tokens is not None:
            pairs += parse_tokens(self.auth_tokens.get_secret_value(), one_per_line=False)
        if self.auth_tokens_file is not None:
            pairs += _read_token_file(self.auth_tokens_file)
        return pairs


def _read_token_file(path: Path) -> list[tuple[Role, SecretStr]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ValueError(f"cannot read {path}: {reason}") from None
    pairs = parse_tokens(text, one_per_line=True)
    if not pairs:
        raise ValueError(f"{path} holds no role:token pair")
    return pairs


def known_variables() -> list[str]:
    """Every ``CRAWLSCHED_*`` variable something reads: the settings and the clients'."""
    fields = [ENV_PREFIX + name.upper() for name in Settings.model_fields]
    return sorted([*fields, *CLIENT_VARIABLES])


def check_environment(environ: Mapping[str, str] | None = None) -> None:
    """Refuse ``CRAWLSCHED_*`` variables that nothing reads (a misspelt one would be
    silently ignored).

    Parameters
    ----------
    environ : mapping, optional
        Defaults to :data:`os.environ`.  Names are compared case-insensitively, as
        the settings read them.

    Raises
    ------
    ConfigError
        Naming each unknown variable and the closest known one (:mod:`difflib`).
    """
    environ = os.environ if environ is None else environ
    known = known_variables()
    unknown = sorted(
        name
        for name in environ
        if name.upper().startswith(ENV_PREFIX) and name.upper() not in known
    )
    if unknown:
        raise ConfigError("; ".join(_unknown(name, known) for name in unknown))


def _unknown(name: str, known: list[str]) -> str:
    # compared without the shared prefix, which would make every name look close
    suffixes = [k.removeprefix(ENV_PREFIX) for k in known]
    close = difflib.get_close_matches(name.upper().removeprefix(ENV_PREFIX), suffixes, n=1)
    hint = f"did you mean {ENV_PREFIX}{close[0]}?" if close else "see the README's Configuration"
    return f"unknown variable {name} ({hint})"


#: Settings whose values are never quoted in an error.
_SECRET_FIELDS = frozenset({"auth_tokens"})


def _describe(error: Mapping[str, object]) -> str:
    loc = error["loc"]
    assert isinstance(loc, tuple)
    msg = str(error["msg"]).removeprefix("Value error, ")
    if not loc:  # a check across fields: its message names the variables
        return f"{ENV_PREFIX}AUTH_TOKENS / {ENV_PREFIX}AUTH_TOKENS_FILE: {msg}"
    field = str(loc[0])
    text = f"{ENV_PREFIX}{field.upper()}: {msg}"
    value = error.get("input")
    if field not in _SECRET_FIELDS and isinstance(value, str):
        shown = value if len(value) <= 60 else value[:60] + "…"
        text += f" (got {shown!r})"
    return text


def get_settings() -> Settings:
    """Settings from the environment (a new object each call; no global).

    Raises
    ------
    ConfigError
        If a ``CRAWLSCHED_*`` variable is unknown (:func:`check_environment`) or a
        value is invalid; the message is one line and never quotes a token.
    """
    check_environment()
    try:
        return Settings()
    except ValidationError as exc:
        raise ConfigError("; ".join(_describe(e) for e in exc.errors())) from None
    except SettingsError as exc:
        raise ConfigError(str(exc).replace("\n", " ")) from None
