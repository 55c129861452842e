"""Hierarchical priors: URL ← host ← label ← global (paper 003 §4.2).

A URL with little history borrows from the URLs like it: first its host, then
the operator's label (category, merchant, ...), then all URLs.  Each level keeps
moment sums of its members' own estimates (:class:`Moments`: count, Σx, Σx² and
Σ of their sampling variances) for the four learned quantities (importance W,
signal rate γ, unannounced change rate α, and signal quality θ); the sums add
up, so a label's statistics are the sums over its hosts' shares.

The prior of a level is a Gamma distribution moment-matched to its members'
spread once their sampling noise is taken out (empirical Bayes, method of
moments), shrunk towards the level above with a pseudo-count of
``pseudo_members`` members (:func:`shrink`).  Root priors come from the
operator's defaults, weak.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike
from scipy.stats import chi2, norm

from scheduler_core.errors import ParameterError

__all__ = [
    "MIN_EVIDENCE_DOF",
    "MIN_POOLED_OUTCOMES",
    "MIN_THETA_DOF",
    "QUANTITIES",
    "GammaPrior",
    "GroupStats",
    "Moments",
    "moments_of",
    "shrink",
]

NAN = float("nan")

#: The learned quantities, in the order of :class:`GroupStats`.
QUANTITIES = ("weight", "signal_rate", "alpha", "theta")

#: Signal-bearing outcomes a host needs before its pooled θ_h is reported.
MIN_POOLED_OUTCOMES = 20

#: Degrees of freedom (URLs beyond one a host) that the comparison of α's spreads
#: (:meth:`GroupStats.alpha_follows_signals`) needs: its margin is a normal
#: approximation, which wants a χ² near normal.
MIN_EVIDENCE_DOF = 20

#: Degrees of freedom that the within-host spread of θ (:meth:`GroupStats.theta_cv2`)
#: needs.  Its bound takes the exact χ² quantile of Cochran's Q, so it needs no normal
#: approximation, but its URLs must still stand for their population.  Measured with
#: `python bench/anchors.py` (200 URLs, seeds 0–4): at 2, two URLs of the paper's world
#: (quality per URL) that happened to agree passed it on one seed; at 5, none on any;
#: with quality per host learned ÷ oracle was 0.957 at 2, 0.956 at 5, 0.952 at 8 and
#: 0.952 at 20 with the normal approximation.
MIN_THETA_DOF = 5

#: A prior's shape stays within these: ≥ 1 keeps a MAP finite, the cap keeps any
#: group from overruling a URL's own data.
MIN_SHAPE, MAX_SHAPE = 1.0, 50.0


@dataclass(frozen=True, slots=True)
class GammaPrior:
    """Gamma(shape, rate) on a positive quantity: mean shape/rate."""

    shape: float
    rate: float

    @property
    def mean(self) -> float:
        return self.shape / self.rate

    def with_mode_at_mean(self) -> GammaPrior:
        """The prior of the same shape (> 1) whose mode is this one's mean: what a
        MAP estimate returns without data."""
        if not self.shape > 1:
            raise ParameterError("a Gamma prior has a mode > 0 only for shape > 1")
        return GammaPrior(self.shape, (self.shape - 1.0) / self.mean)

    def with_mode_at_median(self, shape: float) -> GammaPrior:
        """The prior of ``shape`` (> 1) whose mode is the typical member of the
        population this one describes: the median of the lognormal distribution with
        this prior's mean and variance, mean/√(1 + 1/self.shape).

        A rate spread over decades (change rates: Cho & Garcia-Molina 2003,
        Brewington & Cybenko 2000) has its mean set by its fastest members, a factor
        √(1 + CV²) above its median; a MAP estimate without data returns the mode,
        which belongs at the median.  For a narrow population the two meet.

        Examples
        --------
        >>> p = GammaPrior.from_mean(2.0, 1.0 / 3.0).with_mode_at_median(1.5)
        >>> round((p.shape - 1.0) / p.rate, 6), p.shape
        (1.0, 1.5)
        """
        if not (self.shape > 0 and shape > 1):
            raise ParameterError("a Gamma prior has a mode > 0 only for shape > 1")
        median = self.mean / math.sqrt(1.0 + 1.0 / self.shape)
        return GammaPrior(shape, (shape - 1.0) / median)

    @classmethod
    def from_mean(cls, mean: float, shape: float) -> GammaPrior:
        """The prior with this mean (> 0) and shape (> 0).

        Raises
        ------
        ParameterError
            If ``mean`` or ``shape`` is not positive and finite.
        """
        if not (0 < mean < np.inf and 0 < shape < np.inf):
            raise ParameterError("a Gamma prior needs a positive finite mean and shape")
        return cls(shape, shape / mean)


@dataclass(frozen=True, slots=True)
class Moments:
    """Sums over a group's members of one quantity: count, Σx, Σx², Σ sampling var."""

    n: float = 0.0
    s1: float = 0.0
    s2: float = 0.0
    sv: float = 0.0

    def __add__(self, other: Moments) -> Moments:
        return Moments(self.n + other.n, self.s1 + other.s1, self.s2 + other.s2, self.sv + other.sv)

    def mean_var(self) -> tuple[float, float] | None:
        """Members' mean and their spread net of sampling noise.

        The noise taken out is at most three quarters of the observed spread
        (asymptotic variances overstate the noise of shrunk, short-window
        estimates), and the spread at least (5% of the mean)².
        """
        if self.n <= 0:
            return None
        mean = self.s1 / self.n
        if not mean >= 0:
            return None
        if mean == 0:  # e.g. a host whose URLs were never clicked
            return 0.0, 0.0
        total = max(self.s2 / self.n - mean * mean, 0.0)
        spread = max(total - self.sv / self.n, 0.25 * total)
        return mean, max(spread, (0.05 * mean) ** 2)


def moments_of(x: ArrayLike, sampling_var: ArrayLike | None = None) -> Moments:
    """Moment sums of member estimates ``x`` (shape (m,)) and their sampling variances."""
    arr = np.asarray(x, dtype=np.float64)
    sv = 0.0 if sampling_var is None else float(np.sum(np.asarray(sampling_var, dtype=np.float64)))
    return Moments(float(arr.size), float(arr.sum()), float((arr * arr).sum()), sv)


#: The fields of :class:`GroupStats` that are sums over a group's hosts.
_SUMMED = (
    "theta_excess", "theta_scale", "theta_dof", "ss_ln_alpha", "ss_ln_alpha_per_signal",
    "alpha_signal_dof", "sum_ln_alpha_per_signal", "alpha_signal_pairs",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class GroupStats:
    """What a group (host, label, all URLs) knows of its URLs.

    Attributes
    ----------
    moments : moment sums of each of :data:`QUANTITIES` over the members.
    pooled_theta, pooled_outcomes : a host's pooled signal quality θ_h and the
        signal-bearing outcomes behind it (a sum of groups has neither).
    theta_excess, theta_scale, theta_dof : how far θ strays among a host's URLs
        around θ_h (:meth:`theta_cv2`; :func:`.members.theta_heterogeneity`).
    ss_ln_alpha, ss_ln_alpha_per_signal, alpha_signal_dof : how α goes with γ
        among a host's URLs (:meth:`alpha_follows_signals`).
    sum_ln_alpha_per_signal, alpha_signal_pairs : Σ ln(α̂/γ̂) over those URLs and
        their count (:func:`.members.alpha_and_signals`).
    source : a host's signal source, its posterior under the hosts' population
        (:class:`.source.SourcePosterior`: c = α/γ, θ, and the standard deviations of
        their logarithms), NaN without one.
    population, evidence : the global group's hosts' population of sources (the five
        floats of :meth:`.source.SourcePopulation.to_tuple`) and the log Bayes factor
        of one source per host (:func:`.source.source_evidence`), NaN without them.
    sources_shared : 1 where the learner takes each host's URLs as sharing one
        source (:func:`.source.sources_shared`), else 0.

    The fields from ``theta_excess`` to ``alpha_signal_pairs`` are sums over hosts, so
    a label's or the global group's pool every host's evidence; ``source``,
    ``population``, ``evidence`` and ``sources_shared`` are not summed (a sum has
    none).
    """

    moments: tuple[Moments, Moments, Moments, Moments] = field(
        default_factory=lambda: (Moments(), Moments(), Moments(), Moments())
    )
    pooled_theta: float = float("nan")
    pooled_outcomes: float = 0.0
    theta_excess: float = 0.0
    theta_scale: float = 0.0
    theta_dof: float = 0.0
    ss_ln_alpha: float = 0.0
    ss_ln_alpha_per_signal: float = 0.0
    alpha_signal_dof: float = 0.0
    sum_ln_alpha_per_signal: float = 0.0
    alpha_signal_pairs: float = 0.0
    source: tuple[float, float, float, float] = (NAN, NAN, NAN, NAN)
    population: tuple[float, float, float, float, float] = (NAN, NAN, NAN, NAN, NAN)
    evidence: float = NAN
    sources_shared: float = 0.0

    def __add__(self, other: GroupStats) -> GroupStats:
        return GroupStats(
            tuple(a + b for a, b in zip(self.moments, other.moments, strict=True)),  # type: ignore[arg-type]
            **{f: getattr(self, f) + getattr(other, f) for f in _SUMMED},
        )

    def alpha_follows_signals(self) -> bool:
        """Whether, among the URLs of a host, α varies less in proportion to their
        signal rate γ than on its own: the within-host sums of squares of ln(α̂/γ̂)
        and ln α̂ around each host's mean (:func:`.members.members`), summed over the
        hosts summed here, with :data:`MIN_EVIDENCE_DOF` degrees of freedom or more,
        by a margin of two standard errors of the log of one of them, √(2/dof) (the
        two share α̂'s noise, so their ratio varies less than that of independent
        ones).  Where a source's recall r is shared by its URLs, α = (1 − r)Δ =
        γ·p(1 − r)/r is γ times a constant of the host."""
        if not (
            self.alpha_signal_dof >= MIN_EVIDENCE_DOF
            and self.ss_ln_alpha > 0
            and self.ss_ln_alpha_per_signal > 0
        ):
            return False
        margin = 2.0 * math.sqrt(2.0 / self.alpha_signal_dof)
        return math.log(self.ss_ln_alpha / self.ss_ln_alpha_per_signal) > margin

    def theta_cv2(self, z: float = 0.0) -> float:
        """The squared coefficient of variation of θ among the URLs of a host, around
        the host's θ_h, pooled over the hosts summed here: (Q − (k − 1)) / Σθ_h²D
        summed over them (:func:`.members.theta_heterogeneity`), at least 0; NaN
        without data or with fewer than :data:`MIN_THETA_DOF` degrees of freedom.

        ``z`` > 0 gives an upper confidence bound at the one-sided level of ``z``
        standard normal errors (Φ(−z)): Q less the lower Φ(−z) quantile of its null
        distribution, χ² with Σ(k − 1) degrees of freedom, which is exact however few
        they are (the normal approximation, (k − 1) − z√(2(k − 1)), needs many)."""
        if not (self.theta_scale > 0 and self.theta_dof >= MIN_THETA_DOF):
            return float("nan")
        q = self.theta_excess + self.theta_dof
        null = self.theta_dof if z == 0 else float(chi2.ppf(norm.sf(z), self.theta_dof))
        return max(q - null, 0.0) / self.theta_scale

    def of(self, quantity: str) -> Moments:
        """The moment sums of one of :data:`QUANTITIES`."""
        return self.moments[QUANTITIES.index(quantity)]

    def to_tuple(self) -> tuple[float, ...]:
        """The floats a store keeps (:data:`TUPLE_LENGTH`)."""
        out: list[float] = []
        for mo in self.moments:
            out += [mo.n, mo.s1, mo.s2, mo.sv]
        return (
            *out, self.pooled_theta, self.pooled_outcomes, *(getattr(self, f) for f in _SUMMED),
            *self.source, *self.population, self.evidence, self.sources_shared,
        )  # fmt: skip

    @classmethod
    def from_tuple(cls, values: Sequence[float] | None) -> GroupStats:
        """Inverse of :meth:`to_tuple`; None or a tuple of another length (one a
        layout before this one wrote) gives empty stats, which the learner's next
        cycle writes again."""
        if values is None or len(values) != TUPLE_LENGTH:
            return cls()
        v = [float(x) for x in values]
        mos = tuple(Moments(*v[4 * k : 4 * k + 4]) for k in range(4))
        k = 18 + len(_SUMMED)
        summed = dict(zip(_SUMMED, v[18:k], strict=True))
        return cls(
            mos,  # type: ignore[arg-type]
            v[16], v[17], **summed,
            source=(v[k], v[k + 1], v[k + 2], v[k + 3]),
            population=(v[k + 4], v[k + 5], v[k + 6], v[k + 7], v[k + 8]),
            evidence=v[k + 9],
            sources_shared=v[k + 10],
        )  # fmt: skip


#: Floats in :meth:`GroupStats.to_tuple`.
TUPLE_LENGTH = 18 + len(_SUMMED) + 11


def shrink(
    own: Moments, parent: GammaPrior, pseudo_members: float, min_shape: float = MIN_SHAPE
) -> GammaPrior:
    """A group's Gamma prior: its members' moments pooled with ``pseudo_members``
    members drawn from ``parent``, moment-matched (shape = mean²/variance, kept
    within [``min_shape``, MAX_SHAPE]).

    With no members it is ``parent`` (shape clipped the same way).

    Examples
    --------
    >>> p = shrink(Moments(), GammaPrior.from_mean(2.0, 4.0), 5.0)
    >>> round(p.mean, 6), p.shape
    (2.0, 4.0)
    """
    pm, ps = parent.mean, parent.shape
    pvar = pm * pm / ps
    stats = own.mean_var()
    if stats is None:
        mean, var = pm, pvar
    else:
        m, v = stats
        w = own.n / (own.n + pseudo_members)
        mean = w * m + (1 - w) * pm
        second = w * (v + m * m) + (1 - w) * (pvar + pm * pm)
        var = max(second - mean * mean, (0.05 * mean) ** 2)
    shape = float(np.clip(mean * mean / var, min_shape, MAX_SHAPE))
    return GammaPrior.from_mean(mean, shape)
