"""What a simulated web looks like: distributions of its parameters, budget, duration.

Defaults follow paper 004 §6.1 (weights and change rates uniform, recall
Beta(0.25, 0.25), false-signal rate uniform in [0.1, 0.6] in units of the mean
change rate), scaled to days, with URLs spread over hosts by a Zipf law.
Beyond the paper: signal quality per host or by classes of sources, host
outages, and heavy-tailed distributions (:mod:`scheduler_core.sim.dist`) for
web-like worlds (``docs/worlds.md``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scheduler_core.errors import ParameterError
from scheduler_core.sim.dist import Dist

__all__ = ["SIGNAL_QUALITIES", "Dist", "SignalSource", "WorldSpec"]

#: How signal quality is drawn: once per URL, or once per host (its signal source).
SIGNAL_QUALITIES = ("per_url", "per_host")


def _d(kind: str, **params: float) -> Any:
    return field(default_factory=lambda: Dist.of(kind, **params))


@dataclass(frozen=True)
class SignalSource:
    """One class of change-indicating signal sources: its share, recall and false signals.

    A world with several classes draws each URL's (or, ``per_host``, each
    host's) class by share, then its recall and false-signal rate from that
    class: recall and precision go together, as with the few good sources of
    paper 004 §6.7 (upper tails of both) among many poor ones.

    Attributes
    ----------
    share : float
        Relative share of the class (> 0; shares are normalised).
    recall : Dist
        Recall of the class's sources (draws clipped to [0, 1]).
    false_signal_rate : Dist
        False-signal rate, in the units of :attr:`WorldSpec.false_signal_rate`.

    Raises
    ------
    ParameterError
        On a share that is not finite and > 0, or a zipf distribution.
    """

    share: float
    recall: Dist
    false_signal_rate: Dist

    def __post_init__(self) -> None:
        if isinstance(self.share, bool) or not (np.isfinite(self.share) and self.share > 0):
            raise ParameterError("a signal source's `share` must be finite and > 0")
        if "zipf" in (self.recall.kind, self.false_signal_rate.kind):
            raise ParameterError("a signal source cannot take a zipf distribution")

    @classmethod
    def from_mapping(cls, data: Any) -> SignalSource:
        """From ``{"share": s, "recall": {...}, "false_signal_rate": {...}}``.

        Raises
        ------
        ParameterError
            On a missing or unknown key, or an invalid value.
        """
        keys = {"share", "recall", "false_signal_rate"}
        if not isinstance(data, Mapping) or set(data) != keys:
            raise ParameterError(f"each signal source takes exactly {sorted(keys)}, got {data!r}")
        share = data["share"]
        if isinstance(share, bool) or not isinstance(share, int | float):
            raise ParameterError("a signal source's `share` must be a number")
        return cls(
            float(share),
            Dist.from_mapping(data["recall"]),
            Dist.from_mapping(data["false_signal_rate"]),
        )

    def to_mapping(self) -> dict[str, Any]:
        """The inverse of :meth:`from_mapping`."""
        return {
            "share": self.share,
            "recall": self.recall.to_mapping(),
            "false_signal_rate": self.false_signal_rate.to_mapping(),
        }


@dataclass(frozen=True)
class WorldSpec:
    """A simulated web: sizes, parameter distributions, budget and duration.

    Build directly (keyword arguments), from a JSON/TOML mapping with
    :meth:`from_mapping`, or from another spec with :meth:`replace`.  Defaults
    follow paper 004 §6.1, scaled to days.

    Attributes
    ----------
    urls : int, default 1000
        Number of URLs m (≥ 1).
    hosts : int, default 50
        Number of hosts H (1 ≤ H ≤ m).
    host_size : Dist, default zipf(s=1)
        How URLs spread over hosts: ``zipf(s)`` (host h gets a share ∝
        1/(h+1)^s) or ``const`` (equal); every host gets at least one URL.
    weight_per_day : Dist, default uniform(0, 2)
        Importance W, clicks per day per URL.
    change_rate_per_day : Dist, default uniform(0, 1)
        Δ, changes per day per URL.
    recall : Dist, default beta(0.25, 0.25)
        Share of changes announced by a change-indicating signal (draws are
        clipped to [0, 1]).
    false_signal_rate : Dist, default uniform(0.1, 0.6)
        ν in units of the world's mean change rate: ν_i = draw × mean(Δ).
    signal_delay_s : Dist, default const(0)
        Delay of each signal after the change it announces, s (one draw per signal).
    crawl_delay_s : Dist, default const(60)
        Politeness per host: minimum seconds between two fetches on a host.
    budget_per_day : float, default 100
        R, crawls per day for the whole world (> 0).
    duration_days : float, default 200
        Simulated time, days (> 0).
    warmup_fraction : float, default 0.1
        Share of the run before freshness is measured, in [0, 1).
    seed : int, default 0
        Seed of every random draw (≥ 0).
    signals : bool, default True
        False: no change-indicating signals at all (recall = ν = 0, no signal events).
    clicks : bool, default True
        False: no click events are drawn (W still weighs the URLs); score such a
        world by its time-weighted freshness, the expectation of the
        click-weighted one, at a fraction of the memory for large worlds.
    signal_quality : {"per_url", "per_host"}, default "per_url"
        ``per_url``: every URL draws its own recall r_i and false-signal draw
        f_i, and ν_i = f_i × mean(Δ).  ``per_host``: each host's signal source
        draws r_h and f_h once; its URLs share the recall r_h and the precision
        p_h = r_h / (r_h + f_h) (what a URL of the mean change rate gets per
        URL), so ν_i = f_h × Δ_i.  Both give the same expected number of false
        signals.
    signal_sources : tuple of SignalSource, default ()
        Classes of signal sources: each URL (or host) draws its class by share,
        then recall and false-signal rate from it.  Empty: one class, ``recall``
        and ``false_signal_rate`` (a mapping may not give both forms).
    outage_share : float, default 0
        Share of hosts, in [0, 1], that go down once: each of round(share × H)
        hosts, drawn at random, is unavailable from a uniform time in [0,
        duration) for a drawn length; a crawl of it then fails (no new copy).
    outage_days : Dist, default const(1)
        Length of each outage, days.

    Raises
    ------
    ParameterError
        On construction, if a value lies outside the ranges above or a
        distribution does not fit its field (zipf is for ``host_size`` only).

    References
    ----------
    Paper 004 §6.1 (synthetic setup); ``MATH.md``, "Quantities".
    """

    urls: int = 1000
    hosts: int = 50
    host_size: Dist = _d("zipf", s=1.0)
    weight_per_day: Dist = _d("uniform", low=0.0, high=2.0)
    change_rate_per_day: Dist = _d("uniform", low=0.0, high=1.0)
    recall: Dist = _d("beta", a=0.25, b=0.25)
    false_signal_rate: Dist = _d("uniform", low=0.1, high=0.6)
    signal_delay_s: Dist = _d("const", value=0.0)
    crawl_delay_s: Dist = _d("const", value=60.0)
    budget_per_day: float = 100.0
    duration_days: float = 200.0
    warmup_fraction: float = 0.1
    seed: int = 0
    signals: bool = True
    clicks: bool = True
    signal_quality: str = "per_url"
    signal_sources: tuple[SignalSource, ...] = ()
    outage_share: float = 0.0
    outage_days: Dist = _d("const", value=1.0)

    def __post_init__(self) -> None:
        if not 1 <= self.urls:
            raise ParameterError("`urls` must be >= 1")
        if not 1 <= self.hosts <= self.urls:
            raise ParameterError("`hosts` must lie in [1, urls]")
        for name in ("budget_per_day", "duration_days"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value > 0):
                raise ParameterError(f"`{name}` must be finite and > 0")
        if self.seed < 0:
            raise ParameterError("`seed` must be >= 0")
        if not 0 <= self.warmup_fraction < 1:
            raise ParameterError("`warmup_fraction` must lie in [0, 1)")
        if self.host_size.kind not in ("zipf", "const"):
            raise ParameterError("`host_size` must be a zipf or const distribution")
        for name in _DIST_FIELDS:
            if name != "host_size" and getattr(self, name).kind == "zipf":
                raise ParameterError(f"`{name}` cannot be a zipf distribution")
        if self.signal_quality not in SIGNAL_QUALITIES:
            raise ParameterError(f"`signal_quality` must be one of {list(SIGNAL_QUALITIES)}")
        if not all(isinstance(s, SignalSource) for s in self.signal_sources):
            raise ParameterError("`signal_sources` must hold SignalSource entries")
        if not 0 <= self.outage_share <= 1:
            raise ParameterError("`outage_share` must lie in [0, 1]")

    def sources(self) -> tuple[SignalSource, ...]:
        """The signal-source classes: :attr:`signal_sources`, or the one class of
        ``recall`` and ``false_signal_rate``."""
        return self.signal_sources or (SignalSource(1.0, self.recall, self.false_signal_rate),)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> WorldSpec:
        """From a dict as read from JSON or TOML (distributions as nested dicts).

        Raises
        ------
        ParameterError
            On an unknown key (named in the message) or an invalid value.
        """
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ParameterError(f"unknown world spec key(s) {unknown}; known: {sorted(known)}")
        if data.get("signal_sources") and {"recall", "false_signal_rate"} & set(data):
            raise ParameterError(
                "give `signal_sources` or `recall` and `false_signal_rate`, not both"
            )
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key == "signal_quality":
                if value not in SIGNAL_QUALITIES:
                    raise ParameterError(
                        f"`signal_quality` must be one of {list(SIGNAL_QUALITIES)}"
                    )
                kwargs[key] = value
            elif key == "signal_sources":
                if not isinstance(value, list | tuple):
                    raise ParameterError("`signal_sources` must be a list")
                try:
                    kwargs[key] = tuple(SignalSource.from_mapping(v) for v in value)
                except ParameterError as exc:
                    raise ParameterError(f"`signal_sources`: {exc}") from None
            elif key in _DIST_FIELDS:
                try:
                    kwargs[key] = Dist.from_mapping(value)
                except ParameterError as exc:
                    raise ParameterError(f"`{key}`: {exc}") from None
            elif key in ("signals", "clicks"):
                if not isinstance(value, bool):
                    raise ParameterError(f"`{key}` must be true or false")
                kwargs[key] = value
            elif key in ("urls", "hosts", "seed"):
                if isinstance(value, bool) or not isinstance(value, int):
                    raise ParameterError(f"`{key}` must be an integer")
                kwargs[key] = value
            else:
                if isinstance(value, bool) or not isinstance(value, int | float):
                    raise ParameterError(f"`{key}` must be a number")
                kwargs[key] = float(value)
        return cls(**kwargs)

    def to_mapping(self) -> dict[str, Any]:
        """The inverse of :meth:`from_mapping` (with signal sources, without the
        unused ``recall`` and ``false_signal_rate``)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if self.signal_sources and f.name in ("recall", "false_signal_rate"):
                continue
            value = getattr(self, f.name)
            if isinstance(value, Dist):
                out[f.name] = value.to_mapping()
            elif f.name == "signal_sources":
                out[f.name] = [s.to_mapping() for s in value]
            else:
                out[f.name] = value
        return out

    def replace(self, **changes: Any) -> WorldSpec:
        """A copy with some fields changed, e.g. ``spec.replace(seed=3)``.

        Raises
        ------
        ParameterError
            If the result is invalid.
        TypeError
            On an unknown field name.
        """
        return dataclasses.replace(self, **changes)


_DIST_FIELDS = frozenset(f.name for f in dataclasses.fields(WorldSpec) if f.type in ("Dist", Dist))
