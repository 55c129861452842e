"""The threshold search ι(Λ) = V⁻¹(Λ): Newton on ln ι against the bracketing search.

    python bench/threshold.py [--urls 2000] [--repeat 5] [--seed 0]

URLs drawn as in the default world (paper 004 §6.1: W, Δ ~ U(0, 1)/day scaled,
recall ~ Beta(0.25, 0.25), ν ~ U(0.05, 0.3)/day), Λ uniform in [0.5, 4] (λ₀ of the
default world is ~2).  Side by side in one run, best of ``--repeat``:

- the bracketing search alone (growth by factors of 8 from the no-signal threshold,
  then Chandrupatla's method, scipy): the inverse as it was before Newton;
- Newton from the no-signal threshold (``threshold_for_value`` without a guess:
  registration, a URL's first estimate);
- Newton from the previous thresholds after the parameters moved by −25%…+35% (the
  relearn path and the rescorer pass the URL's stored ι as ``guess``).

Prints wall time, evaluations of V per searched URL, the ratios against the
bracketing search, and the largest relative difference of the results.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table
from scipy.special import gammaincinv

import scheduler_core.threshold as threshold
from scheduler_core.params import FloatArray, UrlParams
from scheduler_core.value import _Model

DAY = 86_400.0


def _world(rng: np.random.Generator, m: int) -> tuple[UrlParams, FloatArray]:
    params = UrlParams.create(
        weight=rng.uniform(0.0, 2.0, m) / DAY,
        change_rate=rng.uniform(0.0, 1.0, m) / DAY,
        recall=rng.beta(0.25, 0.25, m),
        false_signal_rate=rng.uniform(0.05, 0.3, m) / DAY,
    )
    return params, rng.uniform(0.5, 4.0, m)


class _Count:
    """Rows of V evaluated through the threshold module's two entry points."""

    _NAMES = ("_value_and_interval", "_value")

    def __init__(self) -> None:
        self.rows = 0
        self._saved = {name: getattr(threshold, name) for name in self._NAMES}

    def __enter__(self) -> _Count:
        for name, fn in self._saved.items():
            setattr(threshold, name, self._counted(fn))
        return self

    def _counted(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def counted(model: _Model, iota: FloatArray, terms: int | None) -> Any:
            self.rows += iota.size
            return fn(model, iota, terms)

        return counted

    def __exit__(self, *exc: object) -> None:
        for name, fn in self._saved.items():
            setattr(threshold, name, fn)


def _bracketing(params: UrlParams, lam: FloatArray, template: FloatArray) -> FloatArray:
    """The inverse by the bracketing search alone, from the no-signal threshold, for the
    URLs ``template`` (the result elsewhere) does not settle without a search."""
    model = _Model.of(params)
    out = template.copy()
    rows = np.flatnonzero(~model.greedy & ~model.inert & np.isfinite(out) & (out > 0))
    sub, d = model.take(rows), model.change_rate[rows]
    start = gammaincinv(2.0, lam[rows] * d / sub.weight) / d
    out[rows] = threshold._bracket_and_search(sub, lam[rows], None, start)
    return out


def _time(fn: Callable[[], FloatArray], repeat: int) -> tuple[float, int, FloatArray]:
    best, rows, out = np.inf, 0, np.empty(0)
    for _ in range(repeat):
        with _Count() as count:
            t0 = time.perf_counter()
            out = fn()
            best = min(best, time.perf_counter() - t0)
        rows = count.rows
    return best, rows, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--urls", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    params, lam = _world(rng, args.urls)
    model = _Model.of(params)
    exact = threshold.threshold_for_value(params, lam)
    searched = int((~model.greedy & ~model.inert & np.isfinite(exact) & (exact > 0)).sum())
    moved = UrlParams.create(
        weight=params.weight * rng.uniform(0.75, 1.35, params.m),
        change_rate=params.change_rate * rng.uniform(0.75, 1.35, params.m),
        recall=params.recall,
        false_signal_rate=params.false_signal_rate * rng.uniform(0.75, 1.35, params.m),
    )
    template = threshold.threshold_for_value(moved, lam)  # where no search is needed
    runs = {
        "bracketing search (before)": lambda: _bracketing(moved, lam, template),
        "Newton, no guess": lambda: threshold.threshold_for_value(moved, lam),
        "Newton, previous ι as guess": lambda: threshold.threshold_for_value(
            moved, lam, guess=exact
        ),
    }
    table = Table(
        title=f"ι = V⁻¹(Λ) of {args.urls:,} default-world URLs after their parameters moved "
        f"({searched:,} searched, the rest GREEDY in closed form or never due)"
    )
    for col in ("search", "wall ms", "V rows per URL", "÷ before (time)", "max |ι/ι_before − 1|"):
        table.add_column(col)
    base_t, base_out = 0.0, np.empty(0)
    for name, fn in runs.items():
        t, rows, out = _time(fn, args.repeat)
        if not base_out.size:
            base_t, base_out = t, out
        fin = np.isfinite(base_out) & (base_out > 0)
        same_inf = bool((np.isinf(out) == np.isinf(base_out)).all())
        diff = float(np.max(np.abs(out[fin] / base_out[fin] - 1.0))) if fin.any() else 0.0
        table.add_row(
            name, f"{t * 1e3:.1f}", f"{rows / max(searched, 1):.2f}", f"{t / base_t:.2f}",
            f"{diff:.1e}" + ("" if same_inf else " (∞ differ)"),
        )  # fmt: skip
    Console(width=110).print(table)


if __name__ == "__main__":
    main()
