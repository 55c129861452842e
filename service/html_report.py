"""``--report DIR`` of ``crawlsched demo`` and ``crawlsched simulate``: a small HTML
page with three PNG figures and, in words, what they mean.

- ``freshness.png``: the share of clicks that found a fresh copy, span by span after
  the warm-up (:func:`scheduler_core.sim.freshness_over_time`), for the run and for
  crawling in turn (uniform round-robin at the same budget), beside the optima;
- ``allocation.png``: crawls per day of each URL against W/Δ, the run's and the
  optimum's (MATH.md, "The continuous optimum");
- ``lambda0.png``: λ₀ as the service tracked it online against the solver's.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from scheduler_core.params import FloatArray
from scheduler_core.policies.base import IntArray
from scheduler_core.sim import DAY_S, World, freshness_over_time, round_robin_schedule
from service.errors import ConfigError
from service.figures import Curve, plot_allocation, plot_freshness, plot_lambda0

__all__ = ["ReportInputs", "Schedule", "prepare_report_dir", "write_report"]

ROUND_ROBIN = "crawling in turn (round-robin)"


@dataclass(frozen=True)
class Schedule:
    """A run's crawls: URL index, (c,) int64, and world time, (c,) s."""

    label: str
    url: IntArray
    time: FloatArray


@dataclass
class ReportInputs:
    """What the figures are drawn from.

    Attributes
    ----------
    world : World
    schedules : list of Schedule
        The runs; the first one's allocation is drawn.
    optimum_rates_per_s : ndarray, shape (m,)
        The optimum's crawl rate of each URL, 1/s.
    levels : mapping of str to float
        Freshness levels drawn across (BASELINE, the optimum with signals).
    lambda0_online : list of Curve
        λ₀ over simulated days, as tracked online.
    lambda0_offline : mapping of str to float
        The solvers' λ₀.
    """

    world: World
    schedules: list[Schedule]
    optimum_rates_per_s: FloatArray
    levels: Mapping[str, float]
    lambda0_online: list[Curve] = field(default_factory=list)
    lambda0_offline: Mapping[str, float] = field(default_factory=dict)


def prepare_report_dir(directory: Path) -> Path:
    """Check that a report can be written to ``directory`` (created if missing) before a
    long run starts.

    Raises
    ------
    ConfigError
        If matplotlib is missing or the directory cannot be created.
    """
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ConfigError("--report needs matplotlib: pip install 'crawlsched[report]'") from None
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--report: cannot create {directory}: {exc.strerror}") from None
    return directory


def _freshness_curves(world: World, schedules: Sequence[Schedule], bins: int) -> list[Curve]:
    rr_url, rr_time = round_robin_schedule(world)
    curves = []
    for s in [*schedules, Schedule(ROUND_ROBIN, rr_url, rr_time)]:
        edges, share, _ = freshness_over_time(world, s.url, s.time, bins)
        centres = (edges[:-1] + edges[1:]) / 2 / DAY_S
        curves.append(Curve(s.label, centres, share))
    return curves


def _crawls_per_day(world: World, s: Schedule) -> FloatArray:
    """Crawls per day of each URL after the warm-up, (m,)."""
    keep = s.time >= world.warmup_s
    counts = np.bincount(s.url[keep], minlength=len(world.urls))
    return np.asarray(counts / ((world.duration_s - world.warmup_s) / DAY_S), dtype=np.float64)


def _page(
    title: str, sentences: Sequence[str], header: Sequence[str],
    rows: Sequence[Sequence[str]], notes: Sequence[str],
) -> str:  # fmt: skip
    e = html.escape
    table = "<tr>" + "".join(f"<th>{e(h)}</th>" for h in header) + "</tr>\n"
    table += "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>\n" for row in rows)
    figures = (
        ("freshness.png", "Freshness over time",
         "The share of clicks that found a fresh copy, span by span after the warm-up, for "
         "the run and for crawling in turn at the same budget. Dashed lines: the best "
         "possible averages (continuous optima)."),
        ("allocation.png", "Crawl allocation against the optimum",
         "Crawls per day each URL received, against W/Δ (requests per change: the most one "
         "crawl can be worth). The optimum crawls URLs worth more more often and abandons "
         "those worth least; the closer the two clouds, the better the allocation."),
        ("lambda0.png", "λ₀ online against offline",
         "λ₀, the value of one more crawl, as the service tracked it from the values of the "
         "URLs it dispatched, against the value the offline solver computes from the true "
         "parameters."),
    )  # fmt: skip
    body = "".join(
        f"<figure><img src='{f}' alt='{e(t)}'><figcaption><b>{e(t)}.</b> {e(c)}"
        "</figcaption></figure>\n"
        for f, t, c in figures
    )
    said = "".join(f"<p>{e(x)}</p>\n" for x in sentences)
    noted = "".join(f"<li>{e(x)}</li>\n" for x in notes)
    style = (
        "body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}"
        "table{border-collapse:collapse}td,th{padding:.2rem .6rem;border-bottom:1px solid #ddd;"
        "text-align:right}td:first-child,th:first-child{text-align:left}"
        "img{max-width:100%}figure{margin:2rem 0}figcaption{color:#444}"
    )
    return (
        f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>{e(title)}"
        f"</title><style>{style}</style></head><body>\n<h1>{e(title)}</h1>\n{said}"
        f"<table>\n{table}</table>\n{body}<ul>\n{noted}</ul>\n</body></html>\n"
    )


def write_report(
    directory: Path,
    inputs: ReportInputs,
    *,
    title: str,
    sentences: Sequence[str],
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    notes: Sequence[str] = (),
    bins: int = 40,
) -> Path:
    """Write ``index.html`` and its three figures to ``directory``; returns the page.

    Raises
    ------
    ConfigError
        If matplotlib is missing or the directory cannot be created.
    """
    prepare_report_dir(directory)
    w = inputs.world
    plot_freshness(
        directory / "freshness.png", _freshness_curves(w, inputs.schedules, bins), inputs.levels
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        worth = w.params.weight / w.params.change_rate
    first = inputs.schedules[0]
    plot_allocation(
        directory / "allocation.png", worth, _crawls_per_day(w, first),
        inputs.optimum_rates_per_s * DAY_S, first.label,
    )  # fmt: skip
    plot_lambda0(directory / "lambda0.png", inputs.lambda0_online, inputs.lambda0_offline)
    page = directory / "index.html"
    page.write_text(_page(title, sentences, header, rows, notes), encoding="utf-8")
    return page
