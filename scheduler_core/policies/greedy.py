"""GREEDY, GREEDY-CIS, GREEDY-NCIS and NCIS-APPROX-J: exact argmax of crawl value.

Paper 004's Algorithm 1: at each step crawl the URLs of highest crawl value
V_i(τeff_i(now)).  The policies differ only in the value model they believe:

=================  ==============================================================
``greedy``         no signals: V(τ) = (W/Δ)·R¹(Δτ), signals ignored
``cis``            signals assumed noiseless (ν = 0): after a signal V = W/Δ
``ncis``           the general model with false signals (τeff = τ + β·n)
``ncis-approx-J``  ``ncis`` with the value sums cut after J terms
``cis+``           paper 004 §6.7: ``cis`` for URLs with precision > 0.7 and
                   recall > 0.6 (as the policy believes them), ``greedy`` for the rest
=================  ==============================================================

With ``signal_discard_s`` = T_DELAY > 0 a signal that arrives within T_DELAY
after the URL's last crawl is not counted (GREEDY-NCIS-D, paper 004 App. C).

Exact without evaluating every URL every step: V is increasing in τeff, so a
URL with τeff < ι_i(Λ) = V_i⁻¹(Λ) is worth less than Λ.  Each URL keeps such a
bound (Λ and ι_i(Λ), computed when it was last a candidate); only URLs past
their bound are evaluated, and the answer is exact whenever the k-th value
picked is at least the largest bound Λ in use (else the bounds are lowered and
the step is redone).

References
----------
Paper 004 §4 (Algorithm 1), §5.1 (value functions), §6.2 (the policies),
§6.7 (GREEDY-CIS+), App. C (T_DELAY); ``MATH.md``, "Crawl value".
"""

from __future__ import annotations

import re

import numpy as np

from scheduler_core.errors import ParameterError
from scheduler_core.params import FloatArray, UrlParams
from scheduler_core.policies.base import IntArray, Policy, Problem, top_k_within_room
from scheduler_core.threshold import threshold_for_value
from scheduler_core.value import crawl_value

__all__ = ["GREEDY_MODELS", "GreedyPolicy", "value_model"]

#: The value models :class:`GreedyPolicy` knows (``ncis-approx-J`` for any J ≥ 1).
GREEDY_MODELS = ("greedy", "cis", "ncis", "cis+", "ncis-approx-J")

#: GREEDY-CIS+ treats a URL's signals as noiseless above these (paper 004 §6.7).
CIS_PLUS_PRECISION, CIS_PLUS_RECALL = 0.7, 0.6
#: Candidates beyond ``_CROWD·k + _SLACK`` make the bounds rise ...
_CROWD, _SLACK = 4, 32
#: ... to this share of the (2k + slack)-th value.
_MARGIN = 0.8
#: Raise bounds once this many needless evaluations piled up (a bound costs ~50).
_REBOUND_COST = 4000
#: Doublings and bisections of a raised bound (:meth:`GreedyPolicy._raise`).
_GALLOP, _BISECT = 5, 3
#: Bounds above the k-th value picked are lowered to this share of it.
_LOWER = 0.5


def value_model(model: str, params: UrlParams) -> tuple[UrlParams, int | None]:
    """The parameters (and NCIS-APPROX-J truncation) a GREEDY variant values with.

    Parameters
    ----------
    model : str
        One of :data:`GREEDY_MODELS` (``ncis-approx-2`` etc.).
    params : UrlParams
        What the policy believes of the ``m`` URLs.

    Returns
    -------
    (UrlParams, int or None)

    Raises
    ------
    ParameterError
        On an unknown model.
    """
    if model == "greedy":
        return params.without_signals(), None
    if model == "ncis":
        return params, None
    if model == "cis":
        return UrlParams(params.weight, params.change_rate, params.recall, 0 * params.recall), None
    if model == "cis+":
        good = (params.precision > CIS_PLUS_PRECISION) & (params.recall > CIS_PLUS_RECALL)
        recall = np.where(good, params.recall, 0.0)
        return UrlParams(params.weight, params.change_rate, recall, np.zeros(params.m)), None
    found = re.fullmatch(r"ncis-approx-([1-9][0-9]*)", model)
    if found:
        return params, int(found.group(1))
    raise ParameterError(f"unknown GREEDY model {model!r}; known: {', '.join(GREEDY_MODELS)}")


class GreedyPolicy(Policy):
    """Crawl the k URLs of highest crawl value now (paper 004, Algorithm 1).

    Parameters
    ----------
    model : str
        The value model, one of :data:`GREEDY_MODELS`.
    signal_discard_s : float
        T_DELAY, s (0: every signal counts).
    seed : int
        Unused (the policy is deterministic; ties go to the lower URL index).

    Raises
    ------
    ParameterError
        On an unknown model or a negative ``signal_discard_s``.
    """

    def __init__(self, model: str = "ncis", *, signal_discard_s: float = 0.0, seed: int = 0):
        super().__init__(seed=seed)
        if signal_discard_s < 0:
            raise ParameterError("`signal_discard_s` must be >= 0")
        value_model(model, UrlParams.create(weight=[1.0], change_rate=[1.0]))  # validates
        self.model = model
        self.signal_discard_s = float(signal_discard_s)
        suffix = "-d" if signal_discard_s > 0 else ""
        self.name = f"greedy-{model}{suffix}" if model != "greedy" else f"greedy{suffix}"
        empty = np.empty(0)
        self._params = UrlParams(empty, empty, empty, empty)
        self._terms: int | None = None
        self._bound = np.empty(0)  # Λ_i of each URL's bound
        self._bound_at = np.empty(0)  # ι_i(Λ_i), s
        self._lam = 0.0  # the largest Λ_i in use
        self._waste = 0  # candidates evaluated but not picked since the last raise
        self._beta = np.empty(0)
        #: URLs evaluated exactly, summed over steps (how well the bounds work).
        self.evaluated = 0

    def start(self, problem: Problem) -> None:
        super().start(problem)
        self._params, self._terms = value_model(self.model, problem.params)
        self._beta = self._params.signal_time_equivalent
        self._bound = np.zeros(problem.m)
        self._bound_at = np.zeros(problem.m)
        self._lam = 0.0
        self._waste = 0
        self.evaluated = 0

    def values(self, now: float, urls: IntArray) -> FloatArray:
        """Crawl value of URLs ``urls`` (k,) at ``now`` under this policy's model, shape (k,)."""
        h = self.history
        n = h.signals[urls]
        with np.errstate(invalid="ignore"):
            shift = np.where(n > 0, self._beta[urls] * n, 0.0)
        tau = np.maximum(now - h.last_crawl[urls], 0.0) + shift
        return crawl_value(self._params.take(urls), tau, terms=self._terms)

    def _rebound(self, urls: IntArray, lam: float) -> None:
        self._bound[urls] = lam
        self._bound_at[urls] = threshold_for_value(self._params.take(urls), lam, terms=self._terms)

    def _raise(self, urls: IntArray, lam: float, tau: FloatArray) -> None:
        """Bounds at Λ = ``lam`` for URLs known to be worth less than it at τeff = ``tau``.

        Any ι' with V(ι') < Λ is a valid bound, so instead of V⁻¹(Λ) to full
        precision (~35 evaluations of V) this gallops up from τ by doublings and
        bisects the last doubling three times (≤ 8 evaluations, ι' within 9% of
        V⁻¹(Λ)); URLs not bracketed after the doublings, and those at τ = 0 (no
        scale to double), get the exact inverse.  The gallop starts at τ itself:
        any floor in seconds would assume a time unit.
        """
        params = self._params.take(urls)
        lo = np.array(tau, dtype=np.float64, copy=True)
        hi = np.full(urls.size, np.inf)
        reach = params.max_value > lam  # V never reaches Λ elsewhere
        lo[~reach] = np.inf
        open_ = np.flatnonzero(reach & (lo > 0))
        from_zero = np.flatnonzero(reach & ~(lo > 0))
        for _ in range(_GALLOP):
            if open_.size == 0:
                break
            trial = 2.0 * lo[open_]
            above = crawl_value(params.take(open_), trial, terms=self._terms) >= lam
            hi[open_[above]] = trial[above]
            lo[open_[~above]] = trial[~above]
            open_ = open_[~above]
        open_ = np.concatenate([open_, from_zero])
        if open_.size:
            lo[open_] = threshold_for_value(params.take(open_), lam, terms=self._terms)
        within = np.flatnonzero(np.isfinite(hi))
        for _ in range(_BISECT):
            if within.size == 0:
                break
            mid = np.sqrt(lo[within] * hi[within])
            above = crawl_value(params.take(within), mid, terms=self._terms) >= lam
            hi[within[above]] = mid[above]
            lo[within[~above]] = mid[~above]
        self._bound[urls] = lam
        self._bound_at[urls] = lo

    def select(self, now: float, k: int, host_room: IntArray) -> IntArray:
        p = self.problem
        if k <= 0:
            return np.empty(0, dtype=np.int64)
        h = self.history
        with np.errstate(invalid="ignore"):
            shift = np.where(h.signals > 0, self._beta * h.signals, 0.0)
        tau = np.maximum(now - h.last_crawl, 0.0) + shift
        while True:
            cand = np.flatnonzero(tau >= self._bound_at)
            values = crawl_value(self._params.take(cand), tau[cand], terms=self._terms)
            self.evaluated += cand.size
            pick = top_k_within_room(values, k, p.host_of[cand], host_room)
            kth = float(values[pick[-1]]) if pick.size == k else 0.0
            if kth >= self._lam:
                break
            # The k-th value fell below some bounds: lower those and redo the step.
            self._lam = _LOWER * kth
            self._rebound(np.flatnonzero(self._bound > self._lam), self._lam)
        self._waste += cand.size - pick.size
        if cand.size > _CROWD * k + _SLACK and self._waste > _REBOUND_COST:
            self._waste = 0
            # Too many candidates: raise the bounds of those worth well below the
            # (2k + slack)-th value, a level that one spiking URL does not move.
            rank = min(2 * k + _SLACK, cand.size - 1)
            lam = _MARGIN * float(-np.partition(-values, rank)[rank])
            is_low = values < lam
            if is_low.any() and lam > 0:
                self._lam = max(self._lam, lam)
                low = cand[is_low]
                self._raise(low, lam, tau[low])
        return np.asarray(cand[pick], dtype=np.int64)
