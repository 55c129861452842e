"""Many URLs' priors at once, as arrays: :func:`stack_priors`.

The relearn path needs the priors of thousands of URLs per batch: each URL's chain
(URL ← host ← label ← global, one object shared by the URLs of a host) with the
values given at registration on top
(:func:`scheduler_core.estimate.learn.given_priors_many`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from scheduler_core.estimate.learn import Prior4, Priors, given_priors_many
from service.store.base import UrlPrior

__all__ = ["stack_priors"]


def _column(values: Sequence[float | None]) -> np.ndarray:
    return np.array([math.nan if v is None else v for v in values], dtype=np.float64)


def stack_priors(chains: Sequence[Prior4], given: Sequence[UrlPrior], strength: float) -> Priors:
    """The priors of m URLs as (m,) arrays.

    Parameters
    ----------
    chains : sequence of Prior4, length m
        Each URL's prior chain (:func:`~scheduler_core.estimate.learn.prior_chain`);
        URLs of one chain share the object, stacked once.
    given : sequence of UrlPrior, length m
        The values given at registration (None = not given).
    strength : float
        Gamma shape of a given value's prior (``prior_strength``).

    Raises
    ------
    ParameterError
        As :func:`~scheduler_core.estimate.learn.given_priors_many`.
    """
    ids: dict[int, int] = {}
    unique: list[Prior4] = []
    which = np.empty(len(chains), dtype=np.int64)
    for i, chain in enumerate(chains):
        k = ids.get(id(chain))
        if k is None:
            k = ids[id(chain)] = len(unique)
            unique.append(chain)
        which[i] = k
    stacked = Priors.stack(unique).take(which)
    return given_priors_many(
        stacked,
        _column([p.weight for p in given]),
        _column([p.change_rate for p in given]),
        _column([p.recall for p in given]),
        _column([p.false_signal_rate for p in given]),
        strength,
    )
