"""The Redis store's answer to ``estimate_columns``: URL entries decoded into columns.

``get.lua`` answers each URL's record and its estimator state (``records``); this
module reads the fields re-estimation needs from the records and the fixed parts of
the states, and decodes the crawl-outcome windows of the whole batch at once: the
windows' bytes laid end to end, one ``numpy.frombuffer`` (:data:`OUTCOME_DTYPE`).  No
per-URL snapshot and no per-outcome tuple are built.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from service.store.base import UrlPrior
from service.store.estimate_columns import ESTIMATE_FIELDS, EstimateColumns
from service.store.redis.keys import expand_url
from service.store.redis.records import OUTCOME, URL, est_head

__all__ = ["OUTCOME_DTYPE", "decode_estimates"]

#: One stored outcome (:data:`~service.store.redis.records.OUTCOME`, ``<fH``): τ in s as
#: float32 whose sign bit says "changed", and the signals seen in the interval.
OUTCOME_DTYPE = np.dtype([("tau", "<f4"), ("n", "<u2")])
assert OUTCOME_DTYPE.itemsize == OUTCOME.size

_NO_PRIOR = UrlPrior()
_NAN = math.nan
_NO_COUNTS = (0.0, _NAN, 0.0, _NAN)
#: Where the :data:`ESTIMATE_FIELDS` are among a record's first nine fields (W, Δ,
#: recall, ν, β, ι, scored Λ, registration time, last crawl).
_FIELDS = [0, 1, 2, 3, 5, 7, 6, 8]
assert len(_FIELDS) == len(ESTIMATE_FIELDS)


def decode_estimates(
    entries: Sequence[tuple[str, str, bytes, bytes | None]],
) -> EstimateColumns:
    """Columns of URL entries, in order: (host, URL key, record, estimator state or
    None/empty for none) each, as ``get.lua`` answers them.

    Raises
    ------
    struct.error
        On a record or state shorter than its layout.
    """
    urls, hosts, priors = [], [], []
    params: list[tuple[float, ...]] = []
    counts: list[tuple[float, float, float, float]] = []
    per_url: list[int] = []
    windows: list[bytes] = []
    unpack = URL.unpack_from
    for host, ukey, record, est in entries:
        params.append(unpack(record)[:9])  # W, Δ, recall, ν, β, ι, scored Λ, registered, last
        urls.append(expand_url(ukey, host))
        hosts.append(host)
        if not est:
            priors.append(_NO_PRIOR)
            counts.append(_NO_COUNTS)
            per_url.append(0)
            continue
        prior, c_mass, c_ref, s_mass, s_ref, start = est_head(est)
        priors.append(prior)
        counts.append(
            (c_mass, _NAN if c_ref is None else c_ref, s_mass, _NAN if s_ref is None else s_ref)
        )
        windows.append(est[start:])
        per_url.append((len(est) - start) // OUTCOME.size)
    m = len(urls)
    table = np.array(params, dtype=np.float64).reshape(m, 9)[:, _FIELDS]
    c = np.array(counts, dtype=np.float64).reshape(m, 4)
    outcomes = np.frombuffer(b"".join(windows), dtype=OUTCOME_DTYPE)
    tau = outcomes["tau"]
    return EstimateColumns(
        urls=urls, hosts=hosts, priors=priors, params=table, clicks=c[:, :2].copy(),
        signals=c[:, 2:].copy(), outcome_tau=np.abs(tau).astype(np.float64),
        outcome_n=outcomes["n"].astype(np.float64), outcome_changed=np.signbit(tau),
        outcome_counts=np.array(per_url, dtype=np.int64),
    )  # fmt: skip
