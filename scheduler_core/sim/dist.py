"""Distributions of the per-URL and per-host quantities of a simulated web.

A :class:`Dist` is a kind and its parameters, read from a world spec as
``{"kind": ..., **params}``.  The kinds:

==============  ==============================  ======================================
kind            parameters                      a draw
==============  ==============================  ======================================
``const``       value                           value
``uniform``     low, high                       U(low, high)
``beta``        a, b                            Beta(a, b)
``exponential`` mean                            Exp(mean)
``lognormal``   median, sigma, cap (optional)   min(cap, median·e^{σZ}), Z ~ N(0, 1)
``pareto``      scale, shape, cap (optional)    min(cap, scale·U^{−1/shape})
``poisson``     mean                            Poisson(mean)
``mixture``     parts: [{weight, kind, ...}]    a part drawn with probability ∝ weight
``zipf``        s                               host sizes only (:meth:`Dist.shares`)
==============  ==============================  ======================================

A cap clips a heavy tail (a point mass at the cap), as a crawler cannot tell
apart changes faster than it can observe; without one the tail is the
distribution's own.  See ``docs/worlds.md`` for where each is used.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from scheduler_core.errors import ParameterError
from scheduler_core.params import FloatArray

__all__ = ["Dist"]

#: Required parameter names of each kind (``mixture`` takes ``parts`` instead).
_KINDS: dict[str, tuple[str, ...]] = {
    "const": ("value",),
    "uniform": ("low", "high"),
    "beta": ("a", "b"),
    "exponential": ("mean",),
    "lognormal": ("median", "sigma"),
    "pareto": ("scale", "shape"),
    "poisson": ("mean",),
    "zipf": ("s",),
    "mixture": (),
}

#: Optional parameters and their defaults (left out of :meth:`Dist.to_mapping` at the default).
_OPTIONAL: dict[str, dict[str, float]] = {
    "lognormal": {"cap": math.inf},
    "pareto": {"cap": math.inf},
}

#: What each kind's parameters must satisfy.
_RULES: dict[str, tuple[str, Callable[[dict[str, float]], bool]]] = {
    "const": ("value >= 0", lambda p: p["value"] >= 0),
    "uniform": ("0 <= low <= high", lambda p: 0 <= p["low"] <= p["high"]),
    "beta": ("a > 0 and b > 0", lambda p: p["a"] > 0 and p["b"] > 0),
    "exponential": ("mean >= 0", lambda p: p["mean"] >= 0),
    "lognormal": (
        "median > 0, sigma >= 0 and cap > 0",
        lambda p: p["median"] > 0 and p["sigma"] >= 0 and p["cap"] > 0,
    ),
    "pareto": (
        "scale > 0, shape > 0 and cap >= scale",
        lambda p: p["scale"] > 0 and p["shape"] > 0 and p["cap"] >= p["scale"],
    ),
    "poisson": ("mean >= 0", lambda p: p["mean"] >= 0),
    "zipf": ("s >= 0", lambda p: p["s"] >= 0),
    "mixture": ("", lambda p: True),
}


def _names(kind: str) -> tuple[str, ...]:
    return _KINDS[kind] + tuple(_OPTIONAL.get(kind, {}))


def _std_normal_cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


@dataclass(frozen=True, slots=True)
class Dist:
    """A distribution of one per-URL (or per-host) quantity.

    Attributes
    ----------
    kind : str
        One of the kinds in the module docstring.
    params : tuple of (str, float)
        The kind's parameters in its order, optional ones included.
    parts : tuple of (float, Dist)
        ``mixture`` only: (weight, part) pairs; weights > 0, relative.

    Examples
    --------
    >>> Dist.from_mapping({"kind": "uniform", "low": 0, "high": 2})
    Dist(kind='uniform', params=(('low', 0.0), ('high', 2.0)), parts=())
    >>> Dist.of("lognormal", median=1.0, sigma=2.0, cap=50.0).to_mapping()
    {'kind': 'lognormal', 'median': 1.0, 'sigma': 2.0, 'cap': 50.0}
    """

    kind: str
    params: tuple[tuple[str, float], ...] = ()
    parts: tuple[tuple[float, Dist], ...] = ()

    @classmethod
    def of(cls, kind: str, **params: float) -> Dist:
        """Build and validate, e.g. ``Dist.of("beta", a=0.25, b=0.25)``.

        Raises
        ------
        ParameterError
            On an unknown kind, missing or extra parameters, or invalid values
            (``mixture`` is built with :meth:`mixture`).
        """
        if kind not in _KINDS:
            raise ParameterError(f"unknown distribution kind {kind!r}; one of {sorted(_KINDS)}")
        if kind == "mixture":
            raise ParameterError("a mixture takes `parts`: [{weight, kind, ...}, ...]")
        required, optional = _KINDS[kind], _OPTIONAL.get(kind, {})
        if not set(required) <= set(params) <= set(required) | set(optional):
            raise ParameterError(
                f"distribution {kind!r} takes {list(required)}"
                + (f" and optionally {list(optional)}" if optional else "")
                + f", got {sorted(params)}"
            )
        values = dict(optional)
        for name, value in params.items():
            if isinstance(value, bool) or not isinstance(value, int | float | np.number):
                raise ParameterError(f"{kind}.{name} must be a number, got {value!r}")
            if not np.isfinite(value):
                raise ParameterError(f"{kind}.{name} must be finite")
            values[name] = float(value)
        return cls(kind, tuple((n, values[n]) for n in _names(kind)))

    @classmethod
    def mixture(cls, *parts: tuple[float, Dist]) -> Dist:
        """A mixture: each draw comes from ``part`` with probability ∝ ``weight``.

        Raises
        ------
        ParameterError
            Without parts, on a weight that is not finite and > 0, or a zipf part.
        """
        return cls("mixture", (), tuple((float(w), d) for w, d in parts))

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ParameterError(
                f"unknown distribution kind {self.kind!r}; one of {sorted(_KINDS)}"
            )
        if tuple(name for name, _ in self.params) != _names(self.kind):
            raise ParameterError(f"distribution {self.kind!r} takes {list(_names(self.kind))}")
        if self.kind == "mixture":
            if not self.parts:
                raise ParameterError("a mixture needs at least one part")
            for w, part in self.parts:
                if not (math.isfinite(w) and w > 0):
                    raise ParameterError(f"mixture weights must be finite and > 0, got {w!r}")
                if not isinstance(part, Dist) or part.kind == "zipf":
                    raise ParameterError("a mixture's parts must be distributions other than zipf")
        elif self.parts:
            raise ParameterError(f"only a mixture has parts, not {self.kind!r}")
        p = dict(self.params)
        rule, ok = _RULES[self.kind]
        if not ok(p):
            raise ParameterError(f"invalid {self.kind} parameters {p}: need {rule}")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | float) -> Dist:
        """From ``{"kind": ..., **params}``; a bare number means ``const``.

        A mixture is ``{"kind": "mixture", "parts": [{"weight": w, "kind": ...,
        ...}, ...]}``.

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
        if data["kind"] != "mixture":
            return cls.of(str(data["kind"]), **rest)
        parts = rest.pop("parts", None)
        if rest or not isinstance(parts, list) or not parts:
            raise ParameterError("a mixture takes only `parts`: a non-empty list")
        built = []
        for part in parts:
            if not isinstance(part, Mapping) or "weight" not in part:
                raise ParameterError(f"each mixture part needs a 'weight', got {part!r}")
            w = part["weight"]
            if isinstance(w, bool) or not isinstance(w, int | float):
                raise ParameterError(f"mixture weight must be a number, got {w!r}")
            built.append(
                (float(w), cls.from_mapping({k: v for k, v in part.items() if k != "weight"}))
            )
        return cls.mixture(*built)

    def to_mapping(self) -> dict[str, Any]:
        """The inverse of :meth:`from_mapping` (optional parameters at their default left out)."""
        if self.kind == "mixture":
            return {
                "kind": "mixture",
                "parts": [{"weight": w, **d.to_mapping()} for w, d in self.parts],
            }
        optional = _OPTIONAL.get(self.kind, {})
        kept = {n: v for n, v in self.params if n not in optional or v != optional[n]}
        return {"kind": self.kind, **kept}

    @property
    def mean(self) -> float:
        """The distribution's mean (``inf`` for an uncapped Pareto with shape ≤ 1).

        Raises
        ------
        ParameterError
            For zipf, which has no mean here.
        """
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
                return _lognormal_mean(p["median"], p["sigma"], p["cap"])
            case "pareto":
                return _pareto_mean(p["scale"], p["shape"], p["cap"])
            case "mixture":
                total = sum(w for w, _ in self.parts)
                return sum(w * d.mean for w, d in self.parts) / total
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
                return np.minimum(p["median"] * np.exp(rng.normal(0.0, p["sigma"], n)), p["cap"])
            case "pareto":
                # numpy's pareto is the Lomax law: scale·(1 + Lomax) is Pareto (type I).
                return np.minimum(p["scale"] * (1.0 + rng.pareto(p["shape"], n)), p["cap"])
            case "poisson":
                return rng.poisson(p["mean"], n).astype(np.float64)
            case "mixture":
                weights = np.array([w for w, _ in self.parts])
                which = rng.choice(weights.size, size=n, p=weights / weights.sum())
                out = np.empty(n)
                for j, (_, part) in enumerate(self.parts):
                    at = np.flatnonzero(which == j)
                    out[at] = part.sample(rng, at.size)
                return out
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


def _lognormal_mean(median: float, sigma: float, cap: float) -> float:
    """E[min(cap, median·e^{σZ})]."""
    if sigma == 0 or math.isinf(cap):
        return min(cap, median * math.exp(sigma**2 / 2))
    z = math.log(cap / median) / sigma
    return median * math.exp(sigma**2 / 2) * _std_normal_cdf(z - sigma) + cap * (
        1.0 - _std_normal_cdf(z)
    )


def _pareto_mean(scale: float, shape: float, cap: float) -> float:
    """E[min(cap, X)] for X Pareto(scale, shape): scale + ∫_scale^cap (scale/x)^shape dx."""
    if math.isinf(cap):
        return shape * scale / (shape - 1.0) if shape > 1 else math.inf
    if shape == 1.0:
        return scale + scale * math.log(cap / scale)
    tail = (cap ** (1.0 - shape) - scale ** (1.0 - shape)) / (1.0 - shape)
    return float(scale + scale**shape * tail)
