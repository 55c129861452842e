"""crawlsched's scheduling math: pure, vectorised numpy/scipy, no I/O.

Modules: ``params`` (per-URL model), ``value`` (crawl value functions and their
inverse), ``optimal`` (the continuous optimum), ``host_optimum`` (the
continuous optimum under per-host politeness limits), ``due`` (the due-time
rule), ``multipliers`` (online λ₀ / λ_h estimates), ``sim`` (simulated worlds
and their scoring).  See ``MATH.md`` for the model.
"""
