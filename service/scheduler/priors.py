"""Many URLs' priors at once, as arrays: :func:`stack_priors`.

The relearn path needs the priors of thousands of URLs per batch, each its chain
(URL ← host ← label ← global, shared by the URLs of a host) with the values given at
registration on top.  Calling :func:`scheduler_core.estimate.learn.given_priors` once
per URL builds a dict and up to eight :class:`GammaPrior` objects each; this module
computes the same numbers column-wise: the chain-dependent parts once per chain (with
:mod:`math`, as ``given_priors`` does), the per-URL arithmetic with numpy (IEEE
operations in the same order: bit-identical results) and the per-URL logarithm with
:mod:`math` again.  A URL whose given values are not all finite goes through
``given_priors`` itself (so it fails, or not, exactly as there).
``tests/api/test_stacked_priors.py`` holds the two to bit equality.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from scheduler_core.estimate.hierarchy import QUANTITIES
from scheduler_core.estimate.learn import URL_THETA_SHAPE, Prior4, Priors, given_priors
from service.store.base import UrlPrior

__all__ = ["stack_priors"]


def _column(values: Sequence[float | None]) -> np.ndarray:
    return np.array([math.nan if v is None else v for v in values], dtype=np.float64)


def stack_priors(chains: Sequence[Prior4], given: Sequence[UrlPrior], strength: float) -> Priors:
    """``Priors.stack([given_priors(c, ..., strength=strength) for c, p in ...])``,
    column-wise.

    Parameters
    ----------
    chains : sequence of Prior4, length m
        Each URL's prior chain (:func:`~scheduler_core.estimate.learn.prior_chain`);
        URLs of one chain share the object.
    given : sequence of UrlPrior, length m
        The values given at registration (None = not given).
    strength : float
        Gamma shape of a given value's prior (``prior_strength``).

    Returns
    -------
    Priors
        (m,) shape and rate arrays per quantity.

    Raises
    ------
    ParameterError
        Where ``given_priors`` raises.
    """
    m = len(chains)
    ids: dict[int, int] = {}
    unique: list[Prior4] = []
    which = np.empty(m, dtype=np.int64)
    for i, chain in enumerate(chains):
        k = ids.get(id(chain))
        if k is None:
            k = ids[id(chain)] = len(unique)
            unique.append(chain)
        which[i] = k
    shape = {q: np.array([c[q].shape for c in unique], dtype=np.float64)[which] for q in QUANTITIES}
    rate = {q: np.array([c[q].rate for c in unique], dtype=np.float64)[which] for q in QUANTITIES}
    if m == 0 or not math.isfinite(strength):
        return _scalar(chains, given, strength, shape, rate, np.arange(m))
    w = _column([p.weight for p in given])
    delta = _column([p.change_rate for p in given])
    recall = _column([p.recall for p in given])
    nu = _column([p.false_signal_rate for p in given])
    values = np.stack([w, delta, recall, nu])
    odd = np.isinf(values).any(axis=0)  # given but not finite: given_priors decides
    has = ~np.isnan(values)
    # W: a positive given value sets its prior
    sel = has[0] & (w > 0) & ~odd
    shape["weight"][sel] = strength
    rate["weight"][sel] = strength / w[sel]
    # Δ, recall, ν: the missing ones from the chain's means (given_priors' formulas)
    per_chain = np.array([_chain_means(c) for c in unique], dtype=np.float64).reshape(-1, 3)
    rows = has[1:].any(axis=0) & ~odd
    c = per_chain[which[rows]]
    d = np.where(has[1, rows], delta[rows], c[:, 0])
    r = np.where(has[2, rows], recall[rows], c[:, 1])
    n = np.where(has[3, rows], nu[rows], c[:, 2])
    gamma = r * d + n
    alpha = (1 - r) * d
    bad = ~(np.isfinite(gamma) & np.isfinite(alpha))  # overflow: given_priors decides
    if bad.any():
        odd[np.flatnonzero(rows)[bad]] = True
        keep = ~bad
        rows[rows] = keep
        d, r, n, gamma, alpha = d[keep], r[keep], n[keep], gamma[keep], alpha[keep]
    s = max(strength, 1.5)
    index = np.flatnonzero(rows)
    pos = alpha > 0
    shape["alpha"][index[pos]] = s
    rate["alpha"][index[pos]] = (s - 1.0) / (s / (s / alpha[pos]))
    pos = gamma > 0
    shape["signal_rate"][index[pos]] = strength
    rate["signal_rate"][index[pos]] = strength / gamma[pos]
    ratio = (n[pos] / gamma[pos]).tolist()
    theta = np.array(
        [-math.log(x) if y > 0 else 20.0 for x, y in zip(ratio, n[pos].tolist(), strict=True)],
        dtype=np.float64,
    )
    st = max(URL_THETA_SHAPE, s)
    set_theta = index[pos][theta > 0]
    shape["theta"][set_theta] = st
    rate["theta"][set_theta] = (st - 1.0) / (st / (st / theta[theta > 0]))
    return _scalar(chains, given, strength, shape, rate, np.flatnonzero(odd))


def _chain_means(chain: Prior4) -> tuple[float, float, float]:
    """Δ, recall and ν a URL without given values would have under ``chain`` (as
    ``given_priors`` computes them)."""
    gm = chain["signal_rate"].mean
    tm = (chain["theta"].shape - 1.0) / chain["theta"].rate
    am = (chain["alpha"].shape - 1.0) / chain["alpha"].rate
    p = -math.expm1(-tm)
    return am + gm * p, gm * p / (am + gm * p), gm * (1 - p)


def _scalar(
    chains: Sequence[Prior4],
    given: Sequence[UrlPrior],
    strength: float,
    shape: dict[str, np.ndarray],
    rate: dict[str, np.ndarray],
    rows: np.ndarray,
) -> Priors:
    """``given_priors`` for ``rows`` (written into ``shape`` and ``rate``)."""
    for i in rows.tolist():
        p = given[i]
        out = given_priors(
            chains[i], weight=p.weight, change_rate=p.change_rate, recall=p.recall,
            false_signal_rate=p.false_signal_rate, strength=strength,
        )  # fmt: skip
        for q in QUANTITIES:
            shape[q][i], rate[q][i] = out[q].shape, out[q].rate
    return Priors(shape, rate)
