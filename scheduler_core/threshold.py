"""The inverse of the crawl value: the threshold ι(Λ) = V⁻¹(Λ) on τeff.

A URL is due when its crawl value reaches Λ = λ₀ + λ_h, that is when τeff reaches
ι(Λ) (``MATH.md``, "From values to decisions").  GREEDY has a closed form.  With
signals the root is found by Newton's method on ln V(e^u) = ln Λ, u = ln ι, with the
slope the model gives for free: V′(ι) = W·α·e^{−αι}·ψ(ι), and ψ comes with V.  In
logs a power law V ∝ ι^k (small ι, k ≈ 2) is a straight line, so a far start (a
cold one, or Λ moved by a factor) takes about one step where Newton on V itself
overshoots and crawls back.  The iterates build a bracket (V < Λ below the root, V ≥
Λ above it, V being increasing); a step that leaves it bisects it, and no step moves
ι by more than a factor of 8.  A row has settled when its step is at most
:data:`_LOG_TOL`, or when the step after it, predicted from the last two (Newton's
quadratic convergence: |s_{k+1}| ≈ |s_k|²·|s_k|/|s_{k−1}|², trusted once |s_{k−1}|
≤ :data:`_PREDICT_FROM`), would be: that saves the evaluation that only confirms the
root.  Rows Newton has not settled after
:data:`NEWTON_STEPS` evaluations go to a bracketing search (growth by factors of 8,
then Chandrupatla's method, scipy).

A caller that knows each URL's previous threshold (its parameters or Λ moved a
little) passes it as ``guess``: Newton then settles most rows in 2–3 evaluations.

References
----------
``MATH.md``, "Crawl value", "From values to decisions" and "Numerical traps" 3;
paper 004, Theorem 1 and App. A.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize.elementwise import find_root
from scipy.special import gammaincinv

from scheduler_core.errors import ParameterError
from scheduler_core.params import FloatArray, UrlParams, as_float_array
from scheduler_core.value import (
    _check_terms,
    _Model,
    _threshold_span,
    _value,
    _value_and_interval,
)

__all__ = ["NEWTON_STEPS", "threshold_for_value"]

#: Most Newton evaluations per row before the bracketing search takes the row over.
NEWTON_STEPS = 16
#: Converged when a Newton step, taken or predicted, moves ln ι by at most this
#: (relative precision of ι).
_LOG_TOL = 1e-12
#: The step after a Newton step is predicted (and the row settled by it) only when
#: the step before was this small: Newton's quadratic regime, where the ratio of the
#: last two steps gives its local constant (a far start's long steps may shrink by
#: any factor).
_PREDICT_FROM = 1e-2
#: Longest step on ln ι: a factor of 8 on ι.
_LOG_REACH = math.log(8.0)


def threshold_for_value(
    params: UrlParams,
    value: ArrayLike,
    *,
    terms: int | None = None,
    guess: ArrayLike | None = None,
) -> FloatArray:
    """The inverse ι(Λ) = V⁻¹(Λ): the τeff at which each URL's crawl value reaches Λ.

    Parameters
    ----------
    params : UrlParams
        The URLs' model, ``m`` URLs.
    value : array_like, shape (m,) or scalar
        The threshold value Λ = λ₀ + λ_h (W·s), finite.
    terms : int, optional
        NCIS-APPROX-J truncation (see :func:`~scheduler_core.value.crawl_value`).
    guess : array_like, shape (m,) or scalar, optional
        Where to start each search, seconds: the URL's previous threshold, say.
        Entries that are not finite and > 0 start from the no-signal threshold, as
        does every row without ``guess``.  Only the work depends on it, not the
        result (to the precision below).

    Returns
    -------
    ndarray, shape (m,)
        ι in seconds: 0 where Λ ≤ 0; ``inf`` where the URL is never worth a
        crawl at Λ (Λ ≥ W/Δ, V ≡ 0, or V stays below Λ up to the top of the span
        searched, max(THRESHOLD_SPAN/α, 64β), see
        :data:`~scheduler_core.value.THRESHOLD_SPAN`).  GREEDY in closed
        form (``gammaincinv(2, ΛΔ/W)/Δ``); with signals a vectorised safeguarded
        Newton search of ln V on ln ι to relative precision ~1e-12.

    Raises
    ------
    ParameterError
        If ``value`` is NaN, not finite or of the wrong shape, if ``guess`` has the
        wrong shape, or ``terms < 1``.

    References
    ----------
    ``MATH.md``, "From values to decisions" (due time) and "Numerical traps" 3.
    """
    _check_terms(terms)
    lam = as_float_array("value", value, params.m)
    if not np.isfinite(lam).all():
        raise ParameterError("`value` must be finite")
    start = None
    if guess is not None:
        start = np.asarray(guess, dtype=np.float64)
        if start.ndim > 1 or (start.ndim == 1 and start.size != params.m):
            raise ParameterError(f"`guess` must be a scalar or have shape ({params.m},)")
        start = np.broadcast_to(start, (params.m,))
    model = _Model.of(params)
    out = np.full(params.m, np.inf)
    out[lam <= 0] = 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        cap = np.where(model.inert, 0.0, model.weight / model.change_rate)
    open_ = (lam > 0) & ~model.inert & (lam < cap)
    greedy = open_ & model.greedy
    d = model.change_rate[greedy]
    out[greedy] = gammaincinv(2.0, lam[greedy] * d / model.weight[greedy]) / d
    rest = np.flatnonzero(open_ & ~model.greedy)
    if rest.size:
        warm = None if start is None else start[rest]
        out[rest] = _invert(model.take(rest), lam[rest], terms, warm)
    return out


def _invert(
    model: _Model, lam: FloatArray, terms: int | None, guess: FloatArray | None
) -> FloatArray:
    """ι with V(ι) = Λ for URLs with signals, shape (n,): safeguarded Newton of ln V on u = ln ι
    from ``guess`` (else the no-signal threshold), the bracketing search for the rest."""
    n = lam.size
    bottom, top = _threshold_span(model)
    u_top, u_min = np.log(top), np.log(bottom)
    d = model.change_rate
    start = gammaincinv(2.0, lam * d / model.weight) / d
    if guess is not None:
        start = np.where(np.isfinite(guess) & (guess > 0), guess, start)
    u = np.clip(np.log(np.maximum(start, bottom)), u_min, u_top)
    lo = np.full(n, -np.inf)  # V(e^lo) < Λ
    hi = np.full(n, np.inf)  # V(e^hi) ≥ Λ
    last = np.full(n, np.nan)  # each row's previous Newton step on u (NaN: none yet)
    log_lam = np.log(lam)
    result = np.full(n, np.nan)
    active = np.arange(n)
    for _ in range(NEWTON_STEPS):
        if not active.size:
            break
        sub, at, target = model.take(active), u[active], lam[active]
        iota = np.exp(at)
        v, psi = _value_and_interval(sub, iota, terms)
        below = v < target
        lo[active] = np.where(below, at, lo[active])
        hi[active] = np.where(below, hi[active], at)
        low, high = lo[active], hi[active]
        # d ln V/du = ι·V′(ι)/V; a zero slope (α·ι underflows) or V = 0 gives a
        # non-finite step
        slope = iota * sub.weight * sub.alpha * np.exp(-sub.alpha * iota) * psi
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            step = v * (np.log(v) - log_lam[active]) / slope
        newton = at - step
        inside = np.isfinite(newton) & (newton > low) & (newton < high)
        bracketed = np.isfinite(low) & np.isfinite(high)
        reach = np.where(below, at + _LOG_REACH, at - _LOG_REACH)
        nxt = np.where(inside, newton, np.where(bracketed, 0.5 * (low + high), reach))
        nxt = np.clip(np.clip(nxt, at - _LOG_REACH, at + _LOG_REACH), u_min[active], u_top[active])
        size = np.abs(step)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            # the step after this one, were it taken (NaN without a previous step)
            predicted = size**3 / np.square(last[active])
        converging = inside & (np.abs(last[active]) <= _PREDICT_FROM) & (predicted <= _LOG_TOL)
        tiny = (size <= _LOG_TOL) | converging  # False where the step is not finite
        last[active] = np.where(inside, step, np.nan)  # a bisection or a reach starts over
        settled = tiny | (bracketed & (high - low <= _LOG_TOL))
        never = below & (at >= u_top[active])  # V stays below Λ up to the top
        floor = ~below & (at <= u_min[active])  # V ≥ Λ already at the smallest threshold
        result[active[settled]] = np.exp(np.where(tiny, newton, nxt)[settled])
        result[active[never & ~settled]] = np.inf
        at_floor = active[floor & ~settled]
        result[at_floor] = bottom[at_floor]
        u[active] = nxt
        active = active[~(settled | never | floor)]
    if active.size:
        result[active] = _bracket_and_search(
            model.take(active), lam[active], terms, np.exp(u[active])
        )
    return result


def _bracket_and_search(
    model: _Model, lam: FloatArray, terms: int | None, start: FloatArray
) -> FloatArray:
    """ι with V(ι) = Λ by a bracket grown from ``start`` by factors of 8 (within the
    span of :func:`~scheduler_core.value._threshold_span`), then Chandrupatla's method
    on u = ln ι (scipy), shape (n,)."""
    bottom, top = _threshold_span(model)
    lo, hi = start.copy(), start.copy()
    up = _value(model, start, terms) < lam  # V(lo) < Λ holds; grow hi
    down = ~up  # V(hi) ≥ Λ holds; shrink lo
    unreachable = np.zeros(lam.shape, dtype=bool)
    while up.any():
        unreachable[up] = hi[up] >= top[up]
        up &= ~unreachable
        lo[up] = hi[up]
        hi[up] = np.minimum(hi[up] * 8.0, top[up])
        up[up] = _value(model.take(up), hi[up], terms) < lam[up]
    down &= lo > bottom
    while down.any():
        hi[down] = lo[down]
        lo[down] = np.maximum(lo[down] / 8.0, bottom[down])
        down[down] = (_value(model.take(down), lo[down], terms) >= lam[down]) & (
            lo[down] > bottom[down]
        )
    result = np.where(unreachable, np.inf, lo)  # rows at the floor keep their bottom
    todo = np.flatnonzero(~unreachable & (lo < hi) & (_value(model, lo, terms) < lam))
    if todo.size:
        sub, target = model.take(todo), lam[todo]

        def gap(u: FloatArray, index: FloatArray) -> FloatArray:
            idx = index.astype(np.int64).ravel()
            v = _value(sub.take(idx), np.exp(u.ravel()), terms)
            return (v - target[idx]).reshape(u.shape)

        res = find_root(
            gap,
            (np.log(lo[todo]), np.log(hi[todo])),
            args=(np.arange(todo.size, dtype=np.float64),),
            tolerances={"xatol": 1e-13, "xrtol": 0.0, "fatol": 0.0, "frtol": 0.0},
        )
        # A bracket whose end already sits at Λ within rounding can fail to
        # converge; its lower end is then the answer to double precision.
        result[todo] = np.where(np.isfinite(res.x), np.exp(res.x), lo[todo])
    return result
