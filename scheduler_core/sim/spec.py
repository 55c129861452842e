"""What a simulated web looks like: distributions of its parameters, budget, duration.

Defaults follow paper 004 §6.1 (weights and change rates uniform, recall
Beta(0.25, 0.25), false-signal rate uniform in [0.1, 0.6] in units of the mean
change rate), scaled to days, with URLs spread over hosts by a Zipf law.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
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
            try:
                values[name] = float(params[name])
            except (TypeError, ValueError):
                raise ParameterError(f"{kind}.{name} must be a number") from None
            if not np.isfinite(values[name]):
                raise ParameterError(f"{kind}.{name} must be finite")
        dist = cls(kind, tuple((n, values[n]) for n in names))
        dist._validate()
        return dist

    def _validate(self) -> None:
        p = dict(self.params)
        bad = {
            "const": p.get("value", 0.0) < 0,
            "uniform": not 0 <= p.get("low", 0.0) <= p.get("high", 0.0),
            "beta": min(p.get("a", 1.0), p.get("b", 1.0)) <= 0,
            "exponential": p.get("mean", 1.0) < 0,
            "lognormal": p.get("median", 1.0) <= 0 or p.get("sigma", 0.0) < 0,
            "poisson": p.get("mean", 1.0) < 0,
            "zipf": p.get("s", 0.0) < 0,
        }[self.kind]
        if bad:
            raise ParameterError(f"invalid {self.kind} parameters {p} (values must be >= 0)")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | float) -> Dist:
        """From ``{"kind": ..., **params}``; a bare number means ``const``.

        Raises
        ------
        ParameterError
            As :meth:`of`, or if ``kind`` is missing.
        """
        if isinstance(data, int | float):
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
        """``n`` independent draws, shape (n,), float64.

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

    Attributes
    ----------
    urls, hosts : int
        Number of URLs m and hosts H (1 ≤ H ≤ m).
    host_size : Dist
        How URLs spread over hosts: ``zipf(s)`` (host j ∝ 1/(j+1)^s) or ``const``
        (equal); every host gets at least one URL.
    weight_per_day : Dist
        Importance W, clicks per day per URL.
    change_rate_per_day : Dist
        Δ, changes per day per URL.
    recall : Dist
        Share of changes announced by a change-indicating signal, in [0, 1].
    false_signal_rate : Dist
        ν in units of the world's mean change rate (ν_i = draw × mean Δ).
    signal_delay_s : Dist
        Delay of each signal after the change it announces, seconds.
    crawl_delay_s : Dist
        Politeness per host: minimum seconds between two fetches on a host.
    budget_per_day : float
        R, crawls per day for the whole world.
    duration_days : float
        Simulated time.
    warmup_fraction : float
        Share of the run before freshness is measured, in [0, 1).
    seed : int
        Seed of every random draw.
    signals : bool
        False: no change-indicating signals at all (recall = ν = 0).
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

    def __post_init__(self) -> None:
        if not 1 <= self.urls:
            raise ParameterError("`urls` must be >= 1")
        if not 1 <= self.hosts <= self.urls:
            raise ParameterError("`hosts` must lie in [1, urls]")
        for name in ("budget_per_day", "duration_days"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value > 0):
                raise ParameterError(f"`{name}` must be finite and > 0")
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
            elif key == "signals":
                if not isinstance(value, bool):
                    raise ParameterError("`signals` must be true or false")
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
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)


_DIST_FIELDS = frozenset(f.name for f in dataclasses.fields(WorldSpec) if f.type in ("Dist", Dist))
