"""Crawl value functions with noisy change-indicating signals.

For a threshold policy "crawl as soon as τeff ≥ ι" this module gives, per URL,

- ψ(ι), the expected time between crawls (:func:`expected_interval`), and the
  crawl frequency f = 1/ψ (:func:`crawl_frequency`);
- w(ι), the expected fresh time per crawl interval (:func:`expected_fresh_time`),
  and the time-averaged freshness w/ψ (:func:`freshness_at_threshold`);
- the crawl value V(ι) = W·(w(ι) − e^{−αι}ψ(ι)) (:func:`crawl_value`) and its
  derivative; its inverse ι(Λ) = V⁻¹(Λ) is
  :func:`scheduler_core.threshold.threshold_for_value`.

One code path serves GREEDY (no signals), GREEDY-CIS (no false signals, β = ∞),
GREEDY-NCIS (general) and NCIS-APPROX-J (``terms=J``: the sums cut after J
terms).  All functions are vectorised over ``(m,)`` arrays.

The sums Σ_k R^k(x_k) over k = 0..⌊ι/β⌋ can have ~1e15 terms (β → 0); only a
window around the Poisson crossing point k ≈ x_k is summed, the terms below it
being 1 (geometrically weighted in w) to double precision and those above it 0
(``MATH.md``, "Numerical traps" 1).  A window wider than :data:`MAX_WINDOW_POINTS`
(only for γι ≳ 1e4 with uninformative signals) is summed blockwise with one
evaluation per block at the block's midpoint.

References
----------
``MATH.md``, "Crawl value" and "Numerical traps"; paper 004 (noisy CIS),
Theorem 1, App. A and §5.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import gammainc

from scheduler_core.errors import ParameterError
from scheduler_core.params import FloatArray, UrlParams, as_float_array

__all__ = [
    "THRESHOLD_SPAN",
    "crawl_frequency",
    "crawl_value",
    "crawl_value_and_interval",
    "crawl_value_derivative",
    "expected_fresh_time",
    "expected_interval",
    "freshness_at_threshold",
]

#: How far the inverse searches, in each URL's own time scales (no time unit is
#: assumed): up to max(THRESHOLD_SPAN/α, 64β) — 1/α the slowest scale on which V
#: still rises, 1/(Δ + ν) where α = 0 — and down to 1/(THRESHOLD_SPAN²·(Δ + ν)),
#: where V is below 1e-24 of W/Δ.  See ``MATH.md``, "Numerical traps" 3.
THRESHOLD_SPAN = 1e10
#: Half-width of the summation window in Poisson standard deviations.  The
#: Poisson tails beyond 9 SD are below 1e-18; against 12 SD values changed by
#: < 5e-14 relative (20,000 noisy-signal URLs) and valuing took ~17% less time.
_WINDOW_SD = 9.0
#: Most evaluation points per URL in one windowed sum.
MAX_WINDOW_POINTS = 512
#: Largest (Δ+ν)ι summed by the short-time series, and its number of terms.
_SERIES_MAX = 2.0
_SERIES_TERMS = 30
#: Rows evaluated at once; each is two windowed sums (ψ's and w's), so this bounds
#: memory at 2 × rows × points floats.
_CHUNK_ROWS = 4096
#: Rows whose windows have similar numbers of points share one (rows, points) grid;
#: the groups of a few rows are merged while that adds at most this many cells of
#: zeros (a grid costs tens of µs to set up whatever its size, a cell tens of ns).
_MERGE_CELLS = 1024


@dataclass(frozen=True, slots=True)
class _Model:
    """Derived per-URL constants, shape (m,) each."""

    weight: FloatArray
    change_rate: FloatArray
    alpha: FloatArray
    gamma: FloatArray
    total_rate: FloatArray  # Δ + ν = α + γ
    beta: FloatArray
    log_q: FloatArray  # ln(ν/(Δ+ν)), computed as log1p(−Δ/(Δ+ν))
    greedy: np.ndarray  # bool: signals carry no information (β = 0)
    inert: np.ndarray  # bool: W = 0 or Δ = 0, V ≡ 0

    @classmethod
    def of(cls, params: UrlParams) -> _Model:
        w, d = params.weight, params.change_rate
        gamma = params.signal_rate
        total = d + params.false_signal_rate
        beta = params.signal_time_equivalent
        safe_total = np.where(total > 0, total, 1.0)
        with np.errstate(divide="ignore"):  # ν = 0: ln q = −∞
            log_q = np.where(total > 0, np.log1p(-d / safe_total), 0.0)
        return cls(
            weight=w,
            change_rate=d,
            alpha=params.unsignalled_change_rate,
            gamma=gamma,
            total_rate=total,
            beta=beta,
            log_q=np.asarray(log_q, dtype=np.float64),
            greedy=beta == 0,
            inert=(w == 0) | (d == 0),
        )

    def take(self, idx: np.ndarray) -> _Model:
        return _Model(*(getattr(self, f)[idx] for f in self.__slots__))


def _threshold_span(model: _Model) -> tuple[FloatArray, FloatArray]:
    """The smallest and largest threshold the inverse searches per URL, s, shape (m,) each.

    Bottom 1/(THRESHOLD_SPAN²·(Δ + ν)); top max(THRESHOLD_SPAN/α, 64β) (1/(Δ + ν) for
    α, and 0 for β, where those are 0 or ∞).  Rows with Δ + ν = 0 (inert) get 1/1 scales.
    """
    total = np.where(model.total_rate > 0, model.total_rate, 1.0)
    slow = np.where(model.alpha > 0, model.alpha, total)
    finite_beta = np.where(np.isfinite(model.beta), model.beta, 0.0)
    bottom = 1.0 / (THRESHOLD_SPAN * THRESHOLD_SPAN * total)
    top = np.maximum(THRESHOLD_SPAN / slow, 64.0 * finite_beta)
    return np.asarray(bottom, dtype=np.float64), np.asarray(top, dtype=np.float64)


def _geometric(count: FloatArray, log_q: FloatArray) -> FloatArray:
    """Σ_{k=0}^{count−1} q^k with q = e^{log_q} ∈ [0, 1], exact in the limits q → 0, 1."""
    count = np.maximum(count, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        general = np.expm1(count * log_q) / np.expm1(log_q)
    out = np.where(log_q == 0, count, general)
    return np.where(np.isneginf(log_q), np.minimum(count, 1.0), out)


def _power(k: FloatArray, log_q: FloatArray) -> FloatArray:
    """q^k with q^0 = 1 also for q = 0."""
    with np.errstate(invalid="ignore", over="ignore"):
        return np.where(k == 0, 1.0, np.exp(k * log_q))


def _windowed_sum(
    rate: FloatArray, iota: FloatArray, beta: FloatArray, k_max: FloatArray, log_q: FloatArray
) -> FloatArray:
    """Σ_{k=0}^{k_max} q^k · R^k(rate·(ι − kβ)), shape (n,).

    Inputs are (n,) arrays with rate > 0, 0 < ι < ∞, β ∈ (0, ∞], k_max ≥ 0
    integral (float), log_q = ln q ≤ 0.  R^k(x) = ``gammainc(k + 1, x)``.
    """
    rb = rate * beta
    with np.errstate(invalid="ignore"):
        k_star = np.where(np.isinf(beta), 0.0, rate * iota / (1.0 + rb))
    half = (_WINDOW_SD * np.sqrt(k_star + 1.0) + 2.0) / (1.0 + rb) + 1.0
    k_lo = np.minimum(np.maximum(np.floor(k_star - half), 0.0), k_max + 1.0)
    k_hi = np.minimum(np.ceil(k_star + half), k_max)
    n_window = np.maximum(k_hi - k_lo + 1.0, 0.0)
    total = _geometric(k_lo, log_q)  # terms k < k_lo are R^k = 1
    stride = np.maximum(np.ceil(n_window / MAX_WINDOW_POINTS), 1.0)
    points = np.ceil(n_window / stride)
    for rows, width in _grids(points):
        total[rows] += _window_terms(
            rate[rows], iota[rows], beta[rows], log_q[rows], k_lo[rows], k_hi[rows],
            stride[rows], width,
        )  # fmt: skip
    return total


def _grids(points: FloatArray) -> list[tuple[np.ndarray, int]]:
    """The (rows, width) grids that cover the rows with ``points`` > 0: rows whose
    window sizes lie within a factor 2 share one grid as wide as their largest
    window, and consecutive grids merge while the merge adds at most
    :data:`_MERGE_CELLS` cells (a cell beyond a row's window holds 0, and the sums
    run in order: a row's sum does not depend on its grid's width)."""
    live = np.flatnonzero(points > 0)
    if live.size == 0:
        return []
    order = live[np.argsort(points[live], kind="stable")]
    bucket = np.ceil(np.log2(points[order]))
    cuts = np.flatnonzero(np.diff(bucket)) + 1
    grids: list[tuple[np.ndarray, int]] = []
    for rows in np.split(order, cuts):
        width = int(points[rows[-1]])
        if grids:
            prev, prev_width = grids[-1]
            if prev.size * (width - prev_width) <= _MERGE_CELLS:
                grids[-1] = (np.concatenate([prev, rows]), width)
                continue
        grids.append((rows, width))
    return grids


def _window_terms(
    rate: FloatArray,
    iota: FloatArray,
    beta: FloatArray,
    log_q: FloatArray,
    k_lo: FloatArray,
    k_hi: FloatArray,
    stride: FloatArray,
    points: int,
) -> FloatArray:
    """Σ_{k=k_lo}^{k_hi} q^k R^k(rate·(ι − kβ)), blockwise with ``stride`` terms a block.

    The grid is (points, rows): a row's terms run down a column, and the sum over the
    first axis adds them in order, so the zeros past a row's window change nothing (a
    row's sum does not depend on its grid's width, nor then on its batch-mates)."""
    j = np.arange(points, dtype=np.float64)[:, None]
    k0 = k_lo + j * stride
    count = np.clip(np.minimum(stride, k_hi - k0 + 1.0), 0.0, None)
    k_mid = k0 + np.maximum(count - 1.0, 0.0) / 2.0
    with np.errstate(invalid="ignore"):
        shift = np.where(k_mid == 0, 0.0, k_mid * beta)
    x = np.maximum(rate * (iota - shift), 0.0)
    block = _power(k0, log_q) * _geometric(count, log_q)
    terms = np.where(count > 0, block * gammainc(k_mid + 1.0, x), 0.0)
    return np.asarray(terms.sum(axis=0), dtype=np.float64)


def _interval_and_fresh_time(
    model: _Model, iota: FloatArray, terms: int | None
) -> tuple[FloatArray, FloatArray]:
    """ψ(ι) and w(ι) for finite ι ≥ 0, shape (m,) each (``MATH.md``, "Crawl value")."""
    psi = np.array(iota, dtype=np.float64, copy=True)
    d = model.change_rate
    # GREEDY (β = 0): ψ = ι, w = (1 − e^{−Δι})/Δ → ι as Δ → 0.
    with np.errstate(invalid="ignore", divide="ignore"):
        fresh = np.where(d > 0, -np.expm1(-d * iota) / d, iota)
    fresh = np.asarray(fresh, dtype=np.float64)
    sig = np.flatnonzero(~model.greedy & (iota > 0))
    for start in range(0, sig.size, _CHUNK_ROWS):
        idx = sig[start : start + _CHUNK_ROWS]
        sub = model.take(idx)
        it = iota[idx]
        with np.errstate(divide="ignore"):
            k_max = np.floor(np.where(np.isinf(sub.beta), 0.0, it / sub.beta))
        if terms is not None:
            k_max = np.minimum(k_max, float(terms - 1))
        # ψ's sum (rate γ, q = 1) and w's (rate Δ + ν, q = ν/(Δ + ν)) in one pass
        n = idx.size
        both = _windowed_sum(
            np.concatenate([sub.gamma, sub.total_rate]), np.concatenate([it, it]),
            np.concatenate([sub.beta, sub.beta]), np.concatenate([k_max, k_max]),
            np.concatenate([np.zeros(n), sub.log_q]),
        )  # fmt: skip
        psi[idx] = both[:n] / sub.gamma
        fresh[idx] = both[n:] / sub.total_rate
    return psi, fresh


def _check_terms(terms: int | None) -> None:
    if terms is not None and terms < 1:
        raise ParameterError("`terms` must be >= 1 (or None for the exact sums)")


def _thresholds(params: UrlParams, threshold: ArrayLike) -> FloatArray:
    iota = as_float_array("threshold", threshold, params.m)
    if (iota < 0).any():
        raise ParameterError("`threshold` must be >= 0 seconds")
    return iota


def _value(model: _Model, iota: FloatArray, terms: int | None) -> FloatArray:
    """V(ι), shape (m,), for validated ι ∈ [0, ∞]."""
    return _value_and_interval(model, iota, terms)[0]


def _value_and_interval(
    model: _Model, iota: FloatArray, terms: int | None
) -> tuple[FloatArray, FloatArray]:
    """V(ι) and ψ(ι), shape (m,) each, for validated ι ∈ [0, ∞]; ψ is what the slope
    V′(ι) = W·α·e^{−αι}·ψ(ι) needs (0 where V ≡ 0, ``inf`` at ι = ∞)."""
    out = np.zeros(iota.shape)
    interval = np.zeros(iota.shape)
    live = ~model.inert
    inf = live & np.isinf(iota)
    # V(∞) = W/Δ (a surely stale copy); NCIS-APPROX-J keeps its truncated limit.
    out[inf] = model.weight[inf] / model.change_rate[inf]
    interval[inf] = np.inf
    if terms is not None and inf.any():
        q_j = _power(np.full(int(inf.sum()), float(terms)), model.log_q[inf])
        out[inf] *= np.where(model.greedy[inf], 1.0, 1.0 - q_j)
    greedy = live & ~inf & model.greedy
    d = model.change_rate[greedy]
    out[greedy] = model.weight[greedy] / d * gammainc(2.0, d * iota[greedy])
    interval[greedy] = iota[greedy]
    rest = live & ~inf & ~model.greedy
    # Before the first possible signal shift (ι < β) and for small (Δ+ν)ι the
    # difference w − e^{−αι}ψ cancels; a series of positive terms is exact there.
    with np.errstate(invalid="ignore"):  # 0·∞ where ι = ∞; those rows are not `rest`
        short = rest & (iota < model.beta) & (model.total_rate * iota <= _SERIES_MAX)
    idx = np.flatnonzero(short)
    if idx.size:
        sub = model.take(idx)
        out[idx] = sub.weight * _short_value(sub.alpha, sub.gamma, iota[idx])
        interval[idx] = -np.expm1(-sub.gamma * iota[idx]) / sub.gamma  # ψ with no shift
    idx = np.flatnonzero(rest & ~short)
    if idx.size:
        sub = model.take(idx)
        psi, fresh = _interval_and_fresh_time(sub, iota[idx], terms)
        out[idx] = np.maximum(sub.weight * (fresh - np.exp(-sub.alpha * iota[idx]) * psi), 0.0)
        interval[idx] = psi
    return out, interval


def _short_value(alpha: FloatArray, gamma: FloatArray, iota: FloatArray) -> FloatArray:
    """V/W for ι < β (no signal can have shifted τeff yet), shape (n,).

    V/W = e^{−Dι}·(expm1(Dι)/D − expm1(γι)/γ) = ι·e^{−x}·(α/D)·Σ_{k≥1} S_k·x^k/(k+1)!
    with D = α + γ, x = Dι, g = γ/D and S_k = Σ_{j<k} g^j (S_1 = 1, S_{k+1} = g·S_k + 1):
    every term is positive, so there is no cancellation, and every factor is of order
    one, whatever the unit of time (no power of a rate or of ι alone can overflow or
    underflow).  Valid for x ≤ 2.
    """
    total = alpha + gamma
    x = total * iota
    g = gamma / total
    k = np.arange(1, _SERIES_TERMS + 1, dtype=np.float64)
    coef = np.cumprod(x[:, None] / (k + 1.0), axis=1)  # x^k/(k+1)!, (n, terms)
    s_k = np.cumsum(g[:, None] ** (k - 1.0), axis=1)  # S_k = Σ_{j<k} g^j
    acc = (coef * s_k).sum(axis=1)
    return np.asarray(np.exp(-x) * (alpha / total) * iota * acc, dtype=np.float64)


def _sums_at(
    params: UrlParams, threshold: ArrayLike, terms: int | None
) -> tuple[_Model, FloatArray, np.ndarray, FloatArray, FloatArray]:
    """Validate and evaluate: (model, ι, finite mask, ψ, w); ψ and w hold 0 where ι = ∞."""
    _check_terms(terms)
    model = _Model.of(params)
    iota = _thresholds(params, threshold)
    finite = np.isfinite(iota)
    psi, fresh = _interval_and_fresh_time(model, np.where(finite, iota, 0.0), terms)
    return model, iota, finite, psi, fresh


def crawl_value(params: UrlParams, tau_eff: ArrayLike, *, terms: int | None = None) -> FloatArray:
    """Crawl value V(τeff) of ``m`` URLs (GREEDY, GREEDY-CIS, GREEDY-NCIS).

    Parameters
    ----------
    params : UrlParams
        The URLs' model, ``m`` URLs.
    tau_eff : array_like, shape (m,) or scalar
        Effective elapsed time τ + β·n since the last crawl, seconds, ≥ 0;
        ``inf`` for a copy known to be stale (never crawled, or a signal with
        β = ∞).
    terms : int, optional
        NCIS-APPROX-J: keep only the first J terms of the sums.  ``None``
        (default) is exact.

    Returns
    -------
    ndarray, shape (m,)
        V in weighted fresh requests gained per crawl (W·s); increasing in
        τeff, V(0) = 0, V(∞) = W/Δ; 0 where W = 0 or Δ = 0.

    Raises
    ------
    ParameterError
        If ``tau_eff`` is negative, NaN or of the wrong shape, or ``terms < 1``.

    References
    ----------
    ``MATH.md``, "Crawl value"; paper 004, Theorem 1 and App. A.

    Examples
    --------
    >>> p = UrlParams.create(weight=1.0, change_rate=1.0)
    >>> float(crawl_value(p, [float("inf")])[0])
    1.0
    >>> round(float(crawl_value(p, [1.0])[0]), 6)  # 1 − 2/e
    0.264241
    """
    _check_terms(terms)
    return _value(_Model.of(params), _thresholds(params, tau_eff), terms)


def crawl_value_and_interval(
    params: UrlParams, tau_eff: ArrayLike, *, terms: int | None = None
) -> tuple[FloatArray, FloatArray]:
    """V(τeff) and ψ(τeff) of ``m`` URLs in one pass, shape (m,) each.

    V is exactly :func:`crawl_value` (the same computation); ψ, the expected
    interval under threshold τeff (s, :func:`expected_interval`), is what the
    slope V′(τeff) = W·α·e^{−ατeff}·ψ(τeff) needs, so a caller gets the value and
    its rate of growth for the price of the value.  ψ is 0 where V ≡ 0 and
    ``inf`` at τeff = ∞.

    Raises
    ------
    ParameterError
        As :func:`crawl_value`.

    References
    ----------
    ``MATH.md``, "Crawl value"; paper 004, Theorem 1 and App. A.
    """
    _check_terms(terms)
    return _value_and_interval(_Model.of(params), _thresholds(params, tau_eff), terms)


def crawl_value_derivative(
    params: UrlParams, tau_eff: ArrayLike, *, terms: int | None = None
) -> FloatArray:
    """V′(τeff) = W·α·e^{−ατeff}·ψ(τeff), shape (m,), in W per second (0 at ∞).

    Raises
    ------
    ParameterError
        As :func:`crawl_value`.

    References
    ----------
    ``MATH.md``, "Crawl value"; paper 004, App. A.
    """
    model, iota, finite, psi, _ = _sums_at(params, tau_eff, terms)
    out = model.weight * model.alpha * np.exp(-model.alpha * iota) * psi
    return np.where(finite & ~model.inert, out, 0.0)


def expected_interval(
    params: UrlParams, threshold: ArrayLike, *, terms: int | None = None
) -> FloatArray:
    """ψ(ι), the expected time between crawls under threshold ι, seconds, shape (m,).

    ψ = Σ_{k=0}^{⌊ι/β⌋} R^k(γ(ι − kβ))/γ; ψ = ι without signals; ``inf`` at ι = ∞.

    Raises
    ------
    ParameterError
        If ``threshold`` is negative, NaN or of the wrong shape, or ``terms < 1``.

    References
    ----------
    ``MATH.md``, "Crawl value"; paper 004, App. A.
    """
    _, _, finite, psi, _ = _sums_at(params, threshold, terms)
    return np.where(finite, psi, np.inf)


def expected_fresh_time(
    params: UrlParams, threshold: ArrayLike, *, terms: int | None = None
) -> FloatArray:
    """w(ι), the expected fresh time per crawl interval, seconds, shape (m,).

    w = Σ_k ν^k/(Δ+ν)^{k+1} · R^k((Δ+ν)(ι − kβ)); w(∞) = 1/Δ (``inf`` if Δ = 0).

    Raises
    ------
    ParameterError
        If ``threshold`` is negative, NaN or of the wrong shape, or ``terms < 1``.

    References
    ----------
    ``MATH.md``, "Crawl value"; paper 004, App. A.
    """
    model, _, finite, _, fresh = _sums_at(params, threshold, terms)
    d = model.change_rate
    with np.errstate(divide="ignore"):
        limit = np.where(d > 0, 1.0 / np.where(d > 0, d, 1.0), np.inf)
    return np.where(finite, fresh, limit)


def crawl_frequency(
    params: UrlParams, threshold: ArrayLike, *, terms: int | None = None
) -> FloatArray:
    """f(ι) = 1/ψ(ι), crawls per second under threshold ι, shape (m,); 0 at ι = ∞.

    Raises
    ------
    ParameterError
        As :func:`expected_interval`.

    References
    ----------
    ``MATH.md``, "Crawl value"; paper 004, Lemma 2 (f decreasing in ι).
    """
    psi = expected_interval(params, threshold, terms=terms)
    with np.errstate(divide="ignore"):
        return np.asarray(1.0 / psi, dtype=np.float64)


def freshness_at_threshold(
    params: UrlParams, threshold: ArrayLike, *, terms: int | None = None
) -> FloatArray:
    """Time-averaged freshness w(ι)/ψ(ι) of each URL under threshold ι, shape (m,).

    At ι = 0 (crawled continuously) it is 1; at ι = ∞ (never crawled) it is 0,
    or 1 for a URL that never changes (Δ = 0).

    Raises
    ------
    ParameterError
        As :func:`expected_interval`.

    References
    ----------
    ``MATH.md``, "Crawl value"; paper 004, §4.
    """
    _check_terms(terms)
    model = _Model.of(params)
    iota = _thresholds(params, threshold)
    finite = np.isfinite(iota) & (iota > 0)
    psi, fresh = _interval_and_fresh_time(model, np.where(finite, iota, 1.0), terms)
    never_changes = model.change_rate == 0
    out = np.where(finite, fresh / psi, np.where(iota == 0, 1.0, 0.0))
    return np.where(never_changes, 1.0, out)
