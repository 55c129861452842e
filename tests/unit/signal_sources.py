"""A host's crawl history under signals of known quality, for the estimator tests."""

from __future__ import annotations

import math

import numpy as np

from scheduler_core.estimate.learn import History
from scheduler_core.estimate.rates import add_event, decayed_count, decayed_exposure
from scheduler_core.params import FloatArray

DAY = 86_400.0
DECAY_S = 30 * DAY


def host_events(
    rng: np.random.Generator,
    precision: FloatArray,
    recall: FloatArray,
    k: int,
    slowest: float = 0.2,
) -> tuple[FloatArray, History]:
    """A host of m URLs (Δ ~ U(``slowest``, 1)/day) crawled every τ = 1/Δ for k
    intervals: changes Poisson(Δ), each announced (a signal at the change) with
    probability recall_i, false signals Poisson(ν_i = γ_i(1 − p_i)), γ_i = r_iΔ/p_i.
    The decayed signal counts are folded with add_event in any arrival order, as
    the stores do.  Returns Δ (1/s, (m,)) and the history."""
    m = precision.size
    delta = rng.uniform(slowest, 1.0, m) / DAY
    nu = recall * delta / precision * (1 - precision)
    span = k / delta
    now = float(span.max())
    start = now - span
    outcomes, counts = [], []
    for i in range(m):
        changes = rng.uniform(start[i], now, rng.poisson(delta[i] * span[i]))
        announced = changes[rng.random(changes.size) < recall[i]]
        false = rng.uniform(start[i], now, rng.poisson(nu[i] * span[i]))
        signals = rng.permutation(np.concatenate([announced, false]))
        mass, ref = 0.0, None
        for t in signals.tolist():
            mass, ref = add_event(mass, ref, t, DECAY_S)
        counts.append(decayed_count(mass, math.nan if ref is None else ref, now, DECAY_S)[0])
        edges = start[i] + np.arange(k + 1) / delta[i]
        n = np.histogram(signals, edges)[0]
        z = np.histogram(changes, edges)[0] > 0
        outcomes.append([(1 / delta[i], int(c), bool(c2)) for c, c2 in zip(n, z, strict=True)])
    exposure = decayed_exposure(start, now, DECAY_S)
    return delta, History.create([0.0] * m, counts, exposure.tolist(), outcomes)
