"""The report's three figures as PNG files (matplotlib, no display needed).

matplotlib is the ``report`` extra (``pip install 'crawlsched[report]'``): it is
imported when a figure is drawn, so the service itself never needs it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from scheduler_core.params import FloatArray

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["Curve", "plot_allocation", "plot_freshness", "plot_lambda0"]

_DPI = 110
_REFERENCE_STYLES = ("--", ":", "-.")


@dataclass(frozen=True)
class Curve:
    """One line of a figure: (n,) x and y arrays and its legend label."""

    label: str
    x: FloatArray
    y: FloatArray


def _figure() -> tuple[Figure, Axes]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 4.2), dpi=_DPI, layout="constrained")
    return fig, fig.add_subplot()


def _references(ax: Axes, refs: Mapping[str, float]) -> None:
    for k, (label, value) in enumerate(refs.items()):
        style = _REFERENCE_STYLES[k % len(_REFERENCE_STYLES)]
        ax.axhline(value, linestyle=style, color=f"C{k + 3}", label=f"{label} ({value:.3g})")


def plot_freshness(path: Path, curves: Sequence[Curve], refs: Mapping[str, float]) -> Path:
    """Freshness over simulated days, with horizontal reference levels.

    Parameters
    ----------
    path : Path
        The PNG to write.
    curves : sequence of Curve
        x: days, y: share of clicks that found a fresh copy in the span.
    refs : mapping of str to float
        Levels drawn across (BASELINE, the optimum with signals).
    """
    fig, ax = _figure()
    for k, c in enumerate(curves):
        ax.plot(c.x, c.y, marker=".", color=f"C{k}", label=c.label)
    _references(ax, refs)
    ax.set_xlabel("simulated day")
    ax.set_ylabel("share of clicks that found a fresh copy")
    top = max(
        [float(np.nanmax(c.y)) for c in curves if np.isfinite(c.y).any()]
        + list(refs.values())
        + [0.0]
    )
    ax.set_ylim(0.0, min(1.0, 1.2 * top) if top > 0 else 1.0)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize="small")
    fig.savefig(path)
    return path


def plot_allocation(
    path: Path, worth: FloatArray, achieved: FloatArray, optimum: FloatArray, label: str
) -> Path:
    """Crawls per day of each URL against W/Δ, achieved and optimal.

    Parameters
    ----------
    path : Path
        The PNG to write.
    worth : ndarray, shape (m,)
        W/Δ of each URL: requests per change (its most valuable crawl); > 0.
    achieved, optimum : ndarray, shape (m,)
        Crawls per day the run gave each URL, and the optimum's rate, per day.
    label : str
        Who achieved ``achieved``.
    """
    fig, ax = _figure()
    shown = np.isfinite(worth) & (worth > 0)
    positive = np.concatenate([achieved[achieved > 0], optimum[optimum > 0]])
    floor = float(positive.min()) / 3 if positive.size else 1e-3
    for k, (name, rates, marker) in enumerate(((label, achieved, "o"), ("optimum", optimum, "x"))):
        y = np.where(rates > 0, rates, floor)
        ax.scatter(worth[shown], y[shown], s=9, marker=marker, alpha=0.55, color=f"C{k}",
                   label=name)  # fmt: skip
    ax.axhline(floor, color="grey", linewidth=0.6)
    ax.text(0.01, 0.02, "never crawled", transform=ax.transAxes, fontsize="small", color="grey")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("W/Δ: requests per change (the most one crawl can be worth)")
    ax.set_ylabel("crawls per day")
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="upper left", fontsize="small")
    fig.savefig(path)
    return path


def plot_lambda0(path: Path, curves: Sequence[Curve], refs: Mapping[str, float]) -> Path:
    """λ₀ tracked online over simulated days against the solver's (offline) values.

    Parameters
    ----------
    path : Path
        The PNG to write.
    curves : sequence of Curve
        x: days, y: λ₀ online (> 0 where drawn on the log scale).
    refs : mapping of str to float
        The offline solutions' λ₀.
    """
    fig, ax = _figure()
    for k, c in enumerate(curves):
        ax.plot(c.x, c.y, color=f"C{k}", label=c.label)
    _references(ax, refs)
    values = [v for c in curves for v in c.y.tolist() if v > 0] + [
        v for v in refs.values() if v > 0
    ]
    if values:
        ax.set_yscale("log")
    ax.set_xlabel("simulated day")
    ax.set_ylabel("λ₀: requests one more crawl is worth")
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="best", fontsize="small")
    fig.savefig(path)
    return path
