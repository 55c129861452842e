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

Exact without evaluating every URL every step: each URL's value now is bracketed
by bounds from an exact value of the same crawl cycle and the closed-form slope
of V (:mod:`~scheduler_core.policies.value_bounds`).  A step whose k best lower
bounds lie above every other URL's upper bound (and, for k > 1, are ordered among
themselves) is decided without evaluating V; with host limits a URL also drops out
when its host's room is filled by picks worth more.  Otherwise the URLs whose
brackets overlap the picks are evaluated exactly and the k best of them picked,
and the URLs nearly as valuable are evaluated in the same batch, so that their
bounds stay tight.  The picks, and their order, are those of the exact argmax of
V over all URLs (:func:`~scheduler_core.policies.base.top_k_within_room`), ties
included.

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
from scheduler_core.policies.base import (
    BoolArray,
    IntArray,
    Policy,
    Problem,
    top_k_within_room,
)
from scheduler_core.policies.value_bounds import ValueBounds
from scheduler_core.value import crawl_value, crawl_value_and_interval

__all__ = ["GREEDY_MODELS", "GreedyPolicy", "value_model"]

#: The value models :class:`GreedyPolicy` knows (``ncis-approx-J`` for any J ≥ 1).
GREEDY_MODELS = ("greedy", "cis", "ncis", "cis+", "ncis-approx-J")

#: GREEDY-CIS+ treats a URL's signals as noiseless above these (paper 004 §6.7).
CIS_PLUS_PRECISION, CIS_PLUS_RECALL = 0.7, 0.6
#: When a step needs exact values, the URLs whose upper bound reaches this share of
#: the k-th best lower bound are evaluated in the same batch, ...
_NEAR = 0.97
#: ... at most ``_PREFETCH + k`` of them, highest upper bounds first.
_PREFETCH = 32


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

    Attributes
    ----------
    evaluated : int
        URLs whose V was evaluated exactly in the run, the anchors included (how
        well the bounds work: a few per step at most on the default world).
    batches : int
        Batches of those evaluations; each costs about as much as a few dozen URLs.

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
        self._beta = np.empty(0)
        self._bounds: ValueBounds | None = None
        self.evaluated = 0
        self.batches = 0

    def start(self, problem: Problem) -> None:
        super().start(problem)
        self._params, self._terms = value_model(self.model, problem.params)
        self._beta = self._params.signal_time_equivalent
        self.evaluated = 0
        self.batches = 0
        cap = crawl_value(self._params, np.full(problem.m, np.inf), terms=self._terms)
        self._bounds = ValueBounds(self._params, cap, self._evaluate)
        self.evaluated = self._bounds.evaluated

    def _evaluate(self, urls: IntArray, tau: FloatArray) -> tuple[FloatArray, FloatArray]:
        self.batches += 1
        self.evaluated += urls.size
        return crawl_value_and_interval(self._params.take(urls), tau, terms=self._terms)

    def _tau(self, now: float, urls: IntArray | None = None) -> FloatArray:
        """τeff = τ + β·n of URLs ``urls`` (all by default) at ``now``, s."""
        h = self.history
        n = h.signals if urls is None else h.signals[urls]
        beta = self._beta if urls is None else self._beta[urls]
        last = h.last_crawl if urls is None else h.last_crawl[urls]
        tau = np.maximum(now - last, 0.0)
        signalled = n > 0  # β·0 would be NaN where β = ∞
        if signalled.any():
            tau[signalled] += beta[signalled] * n[signalled]
        return tau

    def values(self, now: float, urls: IntArray) -> FloatArray:
        """Crawl value of URLs ``urls`` (k,) at ``now`` under this policy's model, shape (k,)."""
        return crawl_value(self._params.take(urls), self._tau(now, urls), terms=self._terms)

    def observe_signals(self, url: IntArray, time: FloatArray) -> None:
        super().observe_signals(url, time)
        if self._bounds is not None and url.size:
            urls = np.unique(url)
            self._bounds.signalled(urls, self.history.signals[urls])

    def observe_crawls(self, url: IntArray, now: float, changed: BoolArray) -> None:
        super().observe_crawls(url, now, changed)
        if self._bounds is not None:
            self._bounds.crawled(url)

    def select(self, now: float, k: int, host_room: IntArray) -> IntArray:
        p, bounds = self.problem, self._bounds
        if k <= 0 or bounds is None:
            return np.empty(0, dtype=np.int64)
        tau = self._tau(now)
        lower, upper = bounds.bounds(tau)
        bar: float | FloatArray
        if k == 1 and host_room.min() >= 1:  # the argmax; ties to the lower index
            pick = np.array([np.argmax(lower)], dtype=np.int64)
            bar = float(lower[pick[0]])
        else:
            pick = top_k_within_room(lower, k, p.host_of, host_room)
            if pick.size == 0:  # no host has room
                return pick
            # A URL left out cannot be picked if it is worth less than the k-th pick,
            # or than every pick of its host when those fill the host's room.
            hosts = p.host_of[pick]
            full = np.bincount(hosts, minlength=host_room.size) >= host_room
            host_floor = np.full(host_room.size, np.inf)
            np.minimum.at(host_floor, hosts, lower[pick])
            floor = float(lower[pick[-1]]) if pick.size == k else -np.inf  # picks descend
            bar = np.maximum(floor, np.where(full, host_floor, -np.inf)[p.host_of])
        overlap = upper >= bar
        overlap[pick] = False
        ordered = pick.size == 1 or bool(
            (lower[pick[:-1]] > np.maximum.accumulate(upper[pick][::-1])[::-1][1:]).all()
        )
        if ordered and not overlap.any():
            return pick
        exact = np.union1d(pick, np.flatnonzero(overlap))
        near = upper >= _NEAR * float(lower[pick[-1]])
        near[exact] = False
        extra = np.flatnonzero(near & np.isfinite(tau))
        if extra.size > _PREFETCH + k:
            extra = extra[np.argsort(-upper[extra], kind="stable")[: _PREFETCH + k]]
        values = self._exact(exact, extra, tau)
        chosen = top_k_within_room(values, k, p.host_of[exact], host_room)
        return np.asarray(exact[chosen], dtype=np.int64)

    def _exact(self, urls: IntArray, extra: IntArray, tau: FloatArray) -> FloatArray:
        """Exact V of URLs ``urls`` (sorted) at ``tau``; URLs ``extra`` are evaluated in
        the same batch, and every URL evaluated takes its value as base point."""
        assert self._bounds is not None
        both = np.concatenate([urls, extra])
        at = tau[both]
        finite = np.isfinite(at)
        values = np.empty(both.size)
        values[~finite] = self._bounds.cap[both[~finite]]
        if finite.any():
            sub = both[finite]
            v, psi = self._evaluate(sub, at[finite])
            values[finite] = v
            self._bounds.record(sub, at[finite], v, psi)
        return values[: urls.size]
