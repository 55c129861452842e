"""What a simulated web looks like: distributions of its parameters, budget, duration.

Defaults follow paper 004 §6.1 (weights and change rates uniform, recall
Beta(0.25, 0.25), false-signal rate uniform in [0.1, 0.6] in units of the mean
change rate), scaled to days, with URLs spread over hosts by a Zipf law.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scheduler_core.errors import ParameterError
from scheduler_core.params import FloatArray

__all__ = ["Dist", "WorldSpec"]

#: Parameter names of each distribution kind.
_KINDS: dict[str, tuple[str, ...]] = {
    "const": ("value",),
    "uniform": ("low", "high"),
    "beta": ("a", "b"),
    "exponential": ("mean",),
    "lognormal": ("median", "sigma"),
    "poisson": ("mean",),
    "zipf": ("s",),
}

#: What each kind's parameters must satisfy.
_RULES: dict[str, tuple[str, Callable[[dict[str, float]], bool]]] = {
    "const": ("value >= 0", lambda p: p["value"] >= 0),
    "uniform": ("0 <= low <= high", lambda p: 0 <= p["low"] <= p["high"]),
    "beta": ("a > 0 and b > 0", lambda p: p["a"] > 0 and p["b"] > 0),
    "exponential": ("mean >= 0", lambda p: p["mean"] >= 0),
    "lognormal": ("median > 0 and sigma >= 0", lambda p: p["median"] > 0 and p["sigma"] >= 0),
    "poisson": ("mean >= 0", lambda p: p["mean"] >= 0),
    "zipf": ("s >= 0", lambda p: p["s"] >= 0),
}


@dataclass(frozen=True, slots=True)
class Dist:
    """A distribution of one per-URL (or per-host) quantity.

    ``kind`` is one of ``const(value)``, ``uniform(low, high)``, ``beta(a, b)``,
    ``exponential(mean)``, ``lognormal(median, sigma)``, ``poisson(mean)`` and
    ``zipf(s)`` (only for host sizes: host j gets a share ∝ 1/(j+1)^s).

    Examples
    --------
    >>> Dist.from_mapping({"kind": "uniform", "low": 0, "high": 2})
    Dist(kind='uniform', params=(('low', 0.0), ('high', 2.0)))
    """

    kind: str
    params: tuple[tuple[str, float], ...] = ()

    @classmethod
    def of(cls, kind: str, **params: float) -> Dist:
        """Build and validate, e.g. ``Dist.of("beta", a=0.25, b=0.25)``.

        Raises
        ------
        ParameterError
            On an unknown kind, missing or extra parameters, or invalid values.
        """
        if kind not in _KINDS:
            raise ParameterError(f"unknown distribution kind {kind!r}; one of {sorted(_KINDS)}")
        names = _KINDS[kind]
        if set(params) != set(names):
            raise ParameterError(f"distribution {kind!r} takes {list(names)}, got {sorted(params)}")
        values = {}
        for name in names:
            value = params[name]
            if isinstance(value, bool) or not isinstance(value, int | float | np.number):
                raise ParameterError(f"{kind}.{name} must be a number, got {value!r}")
            values[name] = float(value)
            if not np.isfinite(values[name]):
                raise ParameterError(f"{kind}.{name} must be finite")
        return cls(kind, tuple((n, values[n]) for n in names))

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ParameterError(
                f"unknown distribution kind {self.kind!r}; one of {sorted(_KINDS)}"
            )
        if tuple(name for name, _ in self.params) != _KINDS[self.kind]:
            raise ParameterError(f"distribution {self.kind!r} takes {list(_KINDS[self.kind])}")
        p = dict(self.params)
        rule, ok = _RULES[self.kind]
        if not ok(p):
            raise ParameterError(f"invalid {self.kind} parameters {p}: need {rule}")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | float) -> Dist:
        """From ``{"kind": ..., **params}``; a bare number means ``const``.

        Raises
        ------
        ParameterError
            As :meth:`of`, or if ``kind`` is missing.
        """
        if isinstance(data, int | float) and not isinstance(data, bool):
            return cls.of("const", value=float(data))
        if not isinstance(data, Mapping) or "kind" not in data:
            raise ParameterError(f"a distribution needs a 'kind', got {data!r}")
        rest = {k: v for k, v in data.items() if k != "kind"}
        return cls.of(str(data["kind"]), **rest)

    def to_mapping(self) -> dict[str, Any]:
        """The inverse of :meth:`from_mapping`."""
        return {"kind": self.kind, **dict(self.params)}

    @property
    def mean(self) -> float:
        """The distribution's mean (for zipf: not defined, raises)."""
        p = dict(self.params)
        match self.kind:
            case "const":
                return p["value"]
            case "uniform":
                return (p["low"] + p["high"]) / 2
            case "beta":
                return p["a"] / (p["a"] + p["b"])
            case "exponential" | "poisson":
                return p["mean"]
            case "lognormal":
                return float(p["median"] * np.exp(p["sigma"] ** 2 / 2))
        raise ParameterError("a zipf distribution has no mean here")

    def sample(self, rng: np.random.Generator, n: int) -> FloatArray:
        """``n`` independent draws from ``rng``.

        Parameters
        ----------
        rng : numpy.random.Generator
        n : int
            Number of draws.

        Returns
        -------
        ndarray of float64, shape (n,)

        Raises
        ------
        ParameterError
            For ``zipf``, which only shapes host sizes (see :meth:`shares`).
        """
        p = dict(self.params)
        match self.kind:
            case "const":
                return np.full(n, p["value"])
            case "uniform":
                return rng.uniform(p["low"], p["high"], n)
            case "beta":
                return rng.beta(p["a"], p["b"], n)
            case "exponential":
                return rng.exponential(p["mean"], n)
            case "lognormal":
                return p["median"] * np.exp(rng.normal(0.0, p["sigma"], n))
            case "poisson":
                return rng.poisson(p["mean"], n).astype(np.float64)
        raise ParameterError("zipf only describes host sizes")

    def shares(self, hosts: int) -> FloatArray:
        """Host shares for ``zipf`` (∝ 1/(j+1)^s, summing to 1), shape (hosts,).

        Raises
        ------
        ParameterError
            For kinds other than ``zipf`` and ``const`` (equal shares).
        """
        if self.kind == "const":
            return np.full(hosts, 1.0 / hosts)
        if self.kind != "zipf":
            raise ParameterError("host sizes take a zipf (or const) distribution")
        w = 1.0 / np.arange(1, hosts + 1, dtype=np.float64) ** dict(self.params)["s"]
        return np.asarray(w / w.sum(), dtype=np.float64)


def _d(kind: str, **params: float) -> Any:
    return field(default_factory=lambda: Dist.of(kind, **params))


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
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key in _DIST_FIELDS:
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
        """The inverse of :meth:`from_mapping`."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = value.to_mapping() if isinstance(value, Dist) else value
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
