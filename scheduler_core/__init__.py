"""crawlsched's scheduling math: pure, vectorised numpy/scipy, no I/O.

Modules: ``params`` (per-URL model), ``value`` (crawl value functions and their
inverse), ``optimal`` (the continuous optimum), ``host_optimum`` (the
continuous optimum under per-host politeness limits), ``discrete_optimum``
(the discrete-time LambdaCrawl solution), ``due`` (the due-time rule),
``multipliers`` (online λ₀ / λ_h estimates), ``policies`` (GREEDY family and
reference policies behind one interface), ``sim`` (simulated worlds, the
simulator and scoring).  See ``MATH.md`` for the model.
"""
