"""The HTML reports of ``crawlsched demo --report`` and ``crawlsched simulate --report``:
each run's figures and numbers handed to :func:`service.html_report.write_report`."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from scheduler_core.sim import DAY_S, World
from service.figures import Curve
from service.html_report import ReportInputs, Schedule, write_report
from service.loadgen.report import LoadgenReport
from service.loadgen.runner import RunRecord
from service.sim_runner import SimulationRecord, SimulationReport

__all__ = ["write_demo_report", "write_simulation_report"]

BASELINE = "BASELINE (best without signals)"
OPTIMUM = "best possible with signals"


def _lambda0_curve(label: str, samples: list[tuple[float, float]]) -> list[Curve]:
    if not samples:
        return []
    t, lam = np.array(samples, dtype=np.float64).T
    return [Curve(label, t / DAY_S, lam)]


def _world_note(world: World) -> str:
    return (
        f"{len(world.urls):,} URLs on {len(world.hosts)} hosts, {world.duration_s / DAY_S:g} "
        f"simulated days (the first {world.warmup_s / DAY_S:g} are warm-up, not scored), "
        f"a budget of {world.budget_per_s * DAY_S:g} crawls per day, seed {world.seed}."
    )


def write_demo_report(
    directory: Path, world: World, report: LoadgenReport, record: RunRecord
) -> Path:
    """The demo's page: the service over HTTP against the optima and round-robin.

    Raises
    ------
    ConfigError
        If matplotlib is missing or ``directory`` cannot be created.
    """
    base, best = record.baseline, record.optimum
    assert base is not None, "run_loadgen fills the record's optima"
    levels = {BASELINE: base.accuracy}
    offline = {"offline, without signals": base.lambda0}
    if best is not None:
        levels[OPTIMUM] = best.accuracy
        offline["offline, with signals"] = best.lambda0
    label = f"crawlsched over HTTP ({report.params} parameters)"
    inputs = ReportInputs(
        world=world,
        schedules=[
            Schedule(
                label,
                np.asarray(record.crawl_url, dtype=np.int64),
                np.asarray(record.crawl_time, dtype=np.float64),
            )
        ],  # fmt: skip
        optimum_rates_per_s=(best or base).rates,
        levels=levels,
        lambda0_online=_lambda0_curve("online (the service's /metrics)", record.lambda0),
        lambda0_offline=offline,
    )
    rows = [
        (label + (" (behind)" if report.behind else ""),
         f"{report.freshness:.4f} ± {report.freshness_stderr:.4f}"),
        ("  same run, time-weighted", f"{report.freshness_time_weighted:.4f}"),
        (BASELINE, f"{report.baseline_accuracy:.4f}"),
    ]  # fmt: skip
    if report.signal_optimum_accuracy is not None:
        rows.append((OPTIMUM, f"{report.signal_optimum_accuracy:.4f}"))
    rows.append(("crawling in turn (round-robin)", f"{report.round_robin_freshness:.4f}"))
    notes = [
        _world_note(world),
        f"{report.crawls:,} crawls, {report.crawl_rate_per_s / report.budget_per_s:.3f} of "
        f"the budget; {report.clicks:,} clicks scored; {report.wall_seconds:.1f} wall s.",
        ("Behind the replayed clock: " if report.behind else "Kept up with the replayed clock: ")
        + report.lag_sentence()
        + ".",
    ]
    return write_report(
        directory, inputs, title="crawlsched demo", sentences=report.sentences(),
        header=("policy", "freshness"), rows=rows, notes=notes,
    )  # fmt: skip


def write_simulation_report(
    directory: Path, world: World, report: SimulationReport, record: SimulationRecord
) -> Path:
    """The simulation's page: every policy against the optima and round-robin.

    Raises
    ------
    ConfigError
        If matplotlib is missing or ``directory`` cannot be created.
    """
    base, best = record.baseline, record.optimum
    assert base is not None and best is not None, "run_simulation fills the record's optima"
    levels = {BASELINE: report.baseline}
    offline = {"offline (solver)": report.lambda0}
    if report.optimum is not None:
        levels[OPTIMUM] = report.optimum
    schedules = [Schedule(name, r.crawl_url, r.crawl_time) for name, r in record.results.items()]
    online = [c for name, s in record.lambda0.items() for c in _lambda0_curve(name, s)]
    inputs = ReportInputs(
        world=world, schedules=schedules, optimum_rates_per_s=best.rates, levels=levels,
        lambda0_online=online, lambda0_offline=offline,
    )  # fmt: skip
    rows = [(BASELINE, f"{report.baseline:.4f}", "", "1.000")]
    if report.optimum is not None:
        rows.append(
            (OPTIMUM, f"{report.optimum:.4f}", "", f"{report.optimum / report.baseline:.3f}")
        )
    for r in report.rows:
        se = "" if math.isnan(r.stderr) else f"{r.stderr:.4f}"
        rows.append((r.policy, f"{r.accuracy:.4f}", se, f"{r.accuracy / report.baseline:.3f}"))
    sentences = report.sentences()
    notes = [_world_note(world), f"Solving the optima took {report.solve_s:.1f} s."]
    return write_report(
        directory, inputs, title="crawlsched simulate", sentences=sentences,
        header=("policy", "freshness", "± s.e.", "÷ BASELINE"), rows=rows, notes=notes,
    )  # fmt: skip
