"""Shared helpers of the paper-004 experiments (``bench/paper/fig*.py``).

Units.  The paper's time unit is one *paper day*: R = 100 crawls per day, t ≤
1000, Δ_i and the request rate μ_i ~ U(0, 1) per day, recall ~ Beta(0.25, 0.25),
ν_i ~ U(0.1, 0.6) per day (§6.1, §6.3, §6.6).  :func:`paper_spec` maps this onto
a :class:`WorldSpec` (whose ``false_signal_rate`` is in units of the world's mean
Δ = 0.5, hence U(0.2, 1.2)); one paper day is one simulated day, except with a
``delay``: then one simulated *second* is 1/R (see :func:`paper_spec`).  Convert
with :func:`unit_s` (simulated seconds per paper day) and :func:`per_r_s` (1/R).

Running.  A :class:`Job` is (world spec, policy name, options); :func:`run_jobs`
runs jobs on a pool of 2 processes, each keeping the last worlds it generated
(submit the jobs of one world next to each other), and returns plain numbers.
Besides the policies of ``make_policy`` and ``crawlsched`` (the service's own
code path), the names ``baseline`` (continuous optimum without signals) and
``optimum`` (continuous optimum with signals) evaluate the world's parameters.

Reporting.  :func:`mean_se`, :func:`fmt`, :func:`write_report` (markdown table to
``results/<name>.md``, also printed) and :func:`plot_panels` (``results/<name>.png``).

A script::

    args = cli("what it does")          # --reps, --quick, --workers
    jobs = [Job(paper_spec(m, seed=rep), "greedy") for rep in range(args.reps)]
    out = run_jobs(jobs, workers=args.workers)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from scheduler_core.sim.spec import Dist, WorldSpec
from scheduler_core.sim.world import CLICK, DAY_S, World

RESULTS = Path(__file__).resolve().parent / "results"

#: Pseudo-policies computed from the world's parameters instead of simulated.
BASELINE, OPTIMUM = "baseline", "optimum"


# --------------------------------------------------------------------------- worlds
def paper_spec(
    m: int,
    *,
    seed: int,
    signals: str = "none",
    delay: float | None = None,
    days: float = 1000.0,
    budget_per_day: float = 100.0,
    clicks: bool = True,
    hosts: int | None = None,
    warmup_fraction: float = 0.1,
) -> WorldSpec:
    """The paper's synthetic world (§6.1) with ``m`` pages, as a :class:`WorldSpec`.

    Parameters
    ----------
    m : int
        Number of pages.
    seed : int
        World seed (use the repetition number).
    signals : {"none", "cis", "ncis"}
        No signals; signals without false positives (ν = 0, §6.5); or with
        false positives ν ~ U(0.1, 0.6) per day (§6.6).
    delay : float, optional
        Mean of a Poisson signal delay in units of 1/R (App. C: Poisson(6));
        0 gives no delay in the same units (a paired reference world).
        The spec's ``signal_delay_s`` is a Poisson draw in *seconds*, so with a
        delay the world is built in "crawl ticks": one simulated second = 1/R,
        rates ×(86400/R) per day, duration ×R/86400 days.  Every policy here is
        time-scale invariant; use :func:`unit_s` / :func:`per_r_s` to convert.
    days, budget_per_day : float
        t ≤ ``days`` and R, in paper days (default 1000 and 100).
    clicks : bool
        False: no click events (accuracy = time-weighted freshness, its expectation).
    hosts : int, optional
        Hosts (Zipf sizes); default 1 (the paper has no hosts; no politeness here).
    warmup_fraction : float
        Share of the run not scored (default 0.1: the paper scores the whole run,
        but BASELINE is a steady state and every page is fresh at t = 0).
    """
    if signals not in ("none", "cis", "ncis"):
        raise ValueError("signals must be 'none', 'cis' or 'ncis'")
    scale = 1.0 if delay is None else DAY_S / budget_per_day  # paper days per sim day
    rate = Dist.of("uniform", low=0.0, high=scale)
    fp = (0.2, 1.2) if signals == "ncis" else (0.0, 0.0)  # × mean Δ = 0.5 → U(0.1, 0.6)
    return WorldSpec(
        urls=m,
        hosts=hosts or 1,
        host_size=Dist.of("zipf", s=1.0),
        weight_per_day=rate,
        change_rate_per_day=rate,
        recall=Dist.of("beta", a=0.25, b=0.25),
        false_signal_rate=Dist.of("uniform", low=fp[0], high=fp[1]),
        signal_delay_s=Dist.of("poisson", mean=delay) if delay else Dist.of("const", value=0.0),
        crawl_delay_s=Dist.of("const", value=0.0),
        budget_per_day=budget_per_day * scale,
        duration_days=days / scale,
        warmup_fraction=warmup_fraction,
        seed=seed,
        signals=signals != "none",
        clicks=clicks,
    )


def unit_s(spec: WorldSpec) -> float:
    """Simulated seconds per paper day: 86400, or R in a delayed-signal spec.

    Read from Δ's range (U(0, 1) per paper day = U(0, scale) per simulated day).
    """
    return DAY_S / dict(spec.change_rate_per_day.params)["high"]


def per_r_s(spec: WorldSpec) -> float:
    """1/R in simulated seconds (T_DELAY = 5/R is ``5 * per_r_s(spec)``)."""
    return DAY_S / spec.budget_per_day


# --------------------------------------------------------------------------- jobs
@dataclass(frozen=True)
class Job:
    """One run: ``policy`` on the world of ``spec``.

    Attributes
    ----------
    spec : WorldSpec
    policy : str
        A ``make_policy`` name, ``crawlsched``, ``baseline`` or ``optimum``.
    crawls_per_step : int
        Fetches per decision (1 = the paper's Algorithm 1).
    signal_discard_s : float
        T_DELAY in simulated seconds (GREEDY-NCIS-D when > 0).
    bandwidth : tuple of (start, rate), optional
        R(t) in paper days and crawls per paper day (App. D); default constant R.
    trailing : (float, int), optional
        (step, n): every ``step`` paper days, also return the click-weighted
        freshness of the clicks since the n-th last crawl (App. D: "computed on
        the last 1000 crawl events for every time step"), as ``windows``:
        a list of (paper day, freshness).
    label : str
        Name shown in tables (default: ``policy``).
    """

    spec: WorldSpec
    policy: str
    crawls_per_step: int = 1
    signal_discard_s: float = 0.0
    bandwidth: tuple[tuple[float, float], ...] | None = None
    trailing: tuple[float, int] | None = None
    label: str = ""

    @property
    def name(self) -> str:
        return self.label or self.policy


_WORLDS: dict[WorldSpec, World] = {}


def _world(spec: WorldSpec) -> World:
    if spec not in _WORLDS:
        while len(_WORLDS) >= 2:  # keep the last two worlds of this process
            _WORLDS.pop(next(iter(_WORLDS)))
        _WORLDS[spec] = World.generate(spec)
    return _WORLDS[spec]


def run_job(job: Job) -> dict[str, Any]:
    """Run one job in this process; a dict of plain numbers.

    Keys: ``accuracy`` (click-weighted freshness, or time-weighted without
    clicks; the optimum's accuracy for the pseudo-policies), ``time_weighted``,
    ``stderr`` (binomial, of one run), ``page_se`` (:func:`page_se`), ``wall_s``,
    ``cpu_s``, ``lambda0`` (crawlsched), ``windows`` (list of (paper day,
    freshness), if asked); per URL, for paired statistics: ``clicks_by_url``
    (scored clicks), ``fresh_by_url`` (of them, fresh; simulated policies) or
    ``freshness_by_url`` (the optimum's expected freshness; pseudo-policies).
    """
    from scheduler_core.optimal import baseline, solve_optimum
    from scheduler_core.sim.bandwidth import Bandwidth
    from scheduler_core.sim.simulator import simulate
    from service.sim_runner import build_policy

    started, cpu = time.perf_counter(), time.process_time()
    world = _world(job.spec)
    gen_s = time.perf_counter() - started
    out: dict[str, Any] = {"gen_s": gen_s, "lambda0": math.nan, "stderr": math.nan}
    out["page_se"] = math.nan
    if job.policy in (BASELINE, OPTIMUM):
        solve = baseline if job.policy == BASELINE else solve_optimum
        t0 = time.perf_counter()
        opt = solve(world.params, world.budget_per_s)
        acc = float(opt.accuracy)
        out.update(accuracy=acc, time_weighted=acc, wall_s=time.perf_counter() - t0)
        out["freshness_by_url"] = np.asarray(opt.freshness, np.float64).tolist()
        out["clicks_by_url"] = _clicks_by_url(world).tolist()
        out["cpu_s"] = time.process_time() - cpu
        return out
    band = None
    if job.bandwidth is not None:
        u = unit_s(job.spec)
        band = Bandwidth.steps([(a * u, r / u) for a, r in job.bandwidth])
    policy = build_policy(
        job.policy, seed=job.spec.seed, signal_discard_s=job.signal_discard_s, rescore_every_s=0.0
    )
    res = simulate(world, policy, crawls_per_step=job.crawls_per_step, bandwidth=band)
    out.update(
        accuracy=float(res.accuracy),
        time_weighted=float(res.report.time_weighted),
        stderr=float(res.report.click_stderr),
        wall_s=float(res.wall_s),
        crawls=int(res.report.crawls),
    )
    lam = getattr(policy, "lambda0", None)
    if lam is not None:
        out["lambda0"] = float(lam)
    fresh, clicks = fresh_clicks_by_url(world, res.crawl_url, res.crawl_time)
    out["fresh_by_url"], out["clicks_by_url"] = fresh.tolist(), clicks.tolist()
    out["page_se"] = page_se(fresh, clicks)
    if job.trailing is not None:
        step, n = job.trailing
        u = unit_s(job.spec)
        grid = np.arange(step, world.duration_s / u + 1e-9, step) * u
        starts = trailing_windows(res.crawl_time, grid, n)
        fresh = windowed_freshness(world, res.crawl_url, res.crawl_time, starts, grid)
        out["windows"] = [(g / u, f) for g, f in zip(grid.tolist(), fresh.tolist(), strict=True)]
    out["cpu_s"] = time.process_time() - cpu
    return out


def run_jobs(
    jobs: Sequence[Job], *, workers: int = 2, verbose: bool = True
) -> list[dict[str, Any]]:
    """Run ``jobs`` on ``workers`` processes (in-process if 1); results in job order.

    The pool starts the jobs by decreasing :func:`estimated_cpu_s` (the longest
    first, for balance); each process keeps the last two worlds it generated.
    Progress lines go to stderr as the results come in.
    """
    started = time.perf_counter()

    def note(i: int, job: Job, r: dict[str, Any]) -> None:
        if verbose:
            print(
                f"  [{i + 1}/{len(jobs)} {time.perf_counter() - started:6.0f}s] m={job.spec.urls}"
                f" seed={job.spec.seed} {job.name}: {r['accuracy']:.4f} ({r['wall_s']:.1f}s)",
                file=sys.stderr,
                flush=True,
            )

    if workers <= 1:
        results = []
        for i, job in enumerate(jobs):
            results.append(run_job(job))
            note(i, job, results[-1])
        return results
    order = sorted(range(len(jobs)), key=lambda i: -estimated_cpu_s(jobs[i]))
    results: list[dict[str, Any]] = [{} for _ in jobs]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(run_job, jobs[i]): i for i in order}  # longest first
        for done, fut in enumerate(as_completed(futures)):
            i = futures[fut]
            results[i] = fut.result()
            note(done, jobs[i], results[i])
    return results


#: Rough CPU seconds per crawl on this machine (measured at m ≤ 1000, k = 1), to order jobs.
_CPU_PER_CRAWL = {
    "crawlsched": 1.5e-3,
    "greedy-ncis": 1.0e-3,
    "greedy-cis": 0.7e-3,
    "greedy": 0.4e-3,
    "lds": 0.2e-3,
}


def estimated_cpu_s(job: Job) -> float:
    """A rough CPU time of ``job``, only to submit long jobs first."""
    if job.policy in (BASELINE, OPTIMUM):
        return job.spec.urls * 1e-3
    per = _CPU_PER_CRAWL.get(job.policy, 0.6e-3)
    crawls = job.spec.budget_per_day * job.spec.duration_days
    return crawls * per * (1.0 + job.spec.urls / 5000) / min(job.crawls_per_step, 5) ** 0.5


# --------------------------------------------------------------------------- freshness per window
def _click_fresh(
    world: World, crawl_url: np.ndarray, crawl_time: np.ndarray, t0: float, t1: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(url, time, fresh) of every click in [t0, t1), in time order.

    A click on URL i at t is fresh iff i did not change since its last crawl at
    or before t (every URL counts as fetched at time 0), as in
    ``schedule_freshness``.
    """
    log = world.events()
    lo, hi = np.searchsorted(log.time, [t0, t1], side="left")
    pos = lo + np.flatnonzero(log.kind[lo:hi] == CLICK)
    url, t = log.url[pos], log.time[pos]
    stride = world.change_index.stride
    crawl_key = np.asarray(crawl_url, np.int64) * stride + world.time_rank(crawl_time)
    order = np.argsort(crawl_key, kind="stable")
    crawl_key, ctime = crawl_key[order], np.asarray(crawl_time, np.float64)[order]
    j = np.searchsorted(crawl_key, url * stride + world.event_rank(pos), side="right") - 1
    same = (j >= 0) & (crawl_key[np.maximum(j, 0)] // stride == url)
    last = np.where(same, ctime[np.maximum(j, 0)], 0.0)
    return url, t, world.fresh_at(url, last, t)


def _clicks_by_url(world: World) -> np.ndarray:
    """Clicks per URL after the warm-up, shape (m,)."""
    log = world.events()
    lo = int(np.searchsorted(log.time, world.warmup_s, side="left"))
    url = log.url[lo:][log.kind[lo:] == CLICK]
    return np.bincount(url, minlength=len(world.urls))


def fresh_clicks_by_url(
    world: World, crawl_url: np.ndarray, crawl_time: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(fresh clicks, clicks) per URL after the warm-up, shape (m,) each, ints."""
    url, _, fresh = _click_fresh(world, crawl_url, crawl_time, world.warmup_s, world.duration_s)
    m = len(world.urls)
    return np.bincount(url[fresh], minlength=m), np.bincount(url, minlength=m)


def windowed_freshness(
    world: World,
    crawl_url: np.ndarray,
    crawl_time: np.ndarray,
    starts_s: np.ndarray,
    ends_s: np.ndarray,
) -> np.ndarray:
    """Click-weighted freshness of the clicks in each window [starts[j], ends[j]), shape (w,).

    Freshness of a click as in :func:`_click_fresh`; nan for a window without clicks.
    """
    starts, ends = np.asarray(starts_s, np.float64), np.asarray(ends_s, np.float64)
    _, t, fresh = _click_fresh(world, crawl_url, crawl_time, starts.min(), ends.max())
    total = np.concatenate([[0], np.cumsum(fresh)])
    a, b = np.searchsorted(t, starts, side="left"), np.searchsorted(t, ends, side="left")
    with np.errstate(invalid="ignore", divide="ignore"):
        return (total[b] - total[a]) / (b - a)


def trailing_windows(crawl_time: np.ndarray, grid_s: np.ndarray, crawls: int) -> np.ndarray:
    """Start of the span of the last ``crawls`` crawls before each time of ``grid_s``."""
    ct = np.sort(np.asarray(crawl_time, np.float64))
    n = np.searchsorted(ct, grid_s, side="right")
    return np.where(n >= crawls, ct[np.maximum(n - crawls, 0)], 0.0)


def run_or_load(
    name: str, jobs: Sequence[Job], args: argparse.Namespace
) -> tuple[list[dict[str, Any]], float]:
    """Run ``jobs`` (saving them to ``results/<name>.json``), or with ``--report`` load them.

    ``--report`` rewrites a figure's table from its last run (e.g. after new
    stepcheck.py rows) without simulating again; the jobs must be the same.
    Returns (results, runtime of the run in seconds).
    """
    path = RESULTS / f"{name}{'-quick' if args.quick else ''}.json"
    keys = [repr(job) for job in jobs]
    if args.report:
        saved = json.loads(path.read_text())
        if saved["jobs"] != keys:
            raise SystemExit(f"{path} holds other jobs: run without --report")
        return saved["results"], float(saved["runtime_s"])
    started = time.perf_counter()
    results = run_jobs(jobs, workers=args.workers)
    runtime = time.perf_counter() - started
    RESULTS.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"jobs": keys, "results": results, "runtime_s": runtime}) + "\n")
    return results, runtime


# ---------------------------------------------------------------- statistics, tables, plots
def mean_se(values: Iterable[float]) -> tuple[float, float, int]:
    """(mean, standard error of the mean, n); se is nan for n < 2."""
    v = np.asarray([x for x in values if not math.isnan(x)], dtype=np.float64)
    if v.size == 0:
        return math.nan, math.nan, 0
    se = float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else math.nan
    return float(v.mean()), se, int(v.size)


def fmt(mean: float, se: float = math.nan, digits: int = 4) -> str:
    """``0.8123 ± 0.0012`` (or just the mean)."""
    if math.isnan(mean):
        return "—"
    return f"{mean:.{digits}f}" if math.isnan(se) else f"{mean:.{digits}f} ± {se:.{digits}f}"


def page_se(fresh: np.ndarray, clicks: np.ndarray) -> float:
    """Standard error of one run's accuracy ΣF/ΣN from its spread over URLs.

    The delta-method (cluster) s.e. of a ratio over independent URLs:
    √(m/(m−1)·Σ(f_i − p·n_i)²)/N.  Unlike the binomial s.e. it also holds the
    noise of each URL's change process (and of its drawn parameters), which
    the clicks share; it is the s.e. against the mean over worlds.
    """
    f, n = np.asarray(fresh, np.float64), np.asarray(clicks, np.float64)
    total, m = n.sum(), f.size
    if total == 0 or m < 2:
        return math.nan
    u = f - f.sum() / total * n
    return float(math.sqrt(m / (m - 1) * float(u @ u)) / total)


def _per_url(run: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """(fresh clicks, clicks) per URL of a run; expected fresh clicks for a pseudo-policy."""
    n = np.asarray(run["clicks_by_url"], np.float64)
    if "fresh_by_url" in run:
        return np.asarray(run["fresh_by_url"], np.float64), n
    return n * np.asarray(run["freshness_by_url"], np.float64), n


def paired_se(a: dict[str, Any], b: dict[str, Any], *, relative: bool) -> float:
    """Cluster s.e. (over URLs) of a − b or a/b of two runs on one world."""
    fa, n = _per_url(a)
    fb, _ = _per_url(b)
    m = n.size
    if relative:
        r = fa.sum() / fb.sum()
        u = fa - r * fb
        return float(math.sqrt(m / (m - 1) * float(u @ u)) / fb.sum())
    d = (fa.sum() - fb.sum()) / n.sum()
    u = fa - fb - d * n
    return float(math.sqrt(m / (m - 1) * float(u @ u)) / n.sum())


def group(jobs: Sequence[Job], results: Sequence[dict[str, Any]]) -> dict[tuple[str, int], list]:
    """Results by (job name, m), in job order."""
    out: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for job, r in zip(jobs, results, strict=True):
        out.setdefault((job.name, job.spec.urls), []).append(r)
    return out


def summary(runs: Sequence[dict[str, Any]], key: str = "accuracy") -> tuple[float, float, int]:
    """(mean, s.e., n) over repetitions; for n = 1 the run's :func:`page_se`."""
    mean, se, n = mean_se(r[key] for r in runs)
    if n == 1:
        se = runs[0].get("page_se", math.nan)
    return mean, se, n


def cell(runs: Sequence[dict[str, Any]] | None, k: int = 1, digits: int = 4) -> str:
    """``mean ± se (n=…[, k=…])``; ``†`` marks a single run (s.e. over its URLs)."""
    if not runs:
        return "—"
    mean, se, n = summary(runs)
    extra = f", k={k}" if k > 1 else ""
    return f"{fmt(mean, se, digits)}{'†' if n == 1 else ''} (n={n}{extra})"


def ratio(runs: Sequence[dict[str, Any]], refs: Sequence[dict[str, Any]]) -> str:
    """Paired accuracy ratio runs/refs (same worlds, in order) as ``mean ± se``.

    With one world the s.e. is over its URLs (:func:`paired_se`), against a
    pseudo-policy's expected fresh clicks per URL.
    """
    if not runs:
        return "—"
    r = [a["accuracy"] / b["accuracy"] for a, b in zip(runs, refs, strict=False)]
    mean, se, n = mean_se(r)
    if n == 1:
        se = paired_se(runs[0], refs[0], relative=True)
    return fmt(mean, se) + ("†" if n == 1 else "")


def paired_diff(runs: Sequence[dict[str, Any]], refs: Sequence[dict[str, Any]]) -> str:
    """Mean ± s.e. of the paired accuracy difference runs − refs (same worlds, in order).

    With one world the s.e. is over its URLs (:func:`paired_se`): both runs
    see the same clicks and changes, so most of their noise cancels.
    """
    d = [a["accuracy"] - b["accuracy"] for a, b in zip(runs, refs, strict=False)]
    mean, se, n = mean_se(d)
    if n == 0:
        return "—"
    if n == 1:
        se = paired_se(runs[0], refs[0], relative=False)
    return f"{mean:+.4f} ± {se:.4f}{'†' if n == 1 else ''}"


def runtime_note(jobs: Sequence[Job], results: Sequence[dict[str, Any]]) -> str:
    """CPU seconds per (policy, m), summed over repetitions (load-independent), for the notes."""
    cost: dict[tuple[str, int], float] = {}
    for job, r in zip(jobs, results, strict=True):
        key = (job.name, job.spec.urls)
        cost[key] = cost.get(key, 0.0) + r["cpu_s"]
    order = sorted(cost.items(), key=lambda x: x[0][1])
    parts = [f"{name}@{m}: {s:.0f}" for (name, m), s in order]
    return "CPU seconds per cell (policy@m, all repetitions, with world generation): " + ", ".join(
        parts
    )


def load_note() -> str:
    """The machine's load average, to read the runtime against."""
    try:
        one, five, _ = os.getloadavg()
    except OSError:
        return ""
    cores = os.cpu_count()
    return f"load average at the end: {one:.1f} (1 min), {five:.1f} (5 min) on {cores} cores"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub markdown table."""
    lines = ["| " + " | ".join(map(str, header)) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in rows]
    return "\n".join(lines)


def write_report(
    name: str,
    title: str,
    header: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    settings: Sequence[str],
    notes: Sequence[str] = (),
    runtime_s: float,
    quick: bool = False,
) -> str:
    """Write ``results/<name>.md`` (``<name>-quick.md`` with ``quick``), print it, return it."""
    text = "\n".join(
        [
            f"# {title}",
            "",
            "Settings:",
            "",
            *[f"- {s}" for s in settings],
            "",
            markdown_table(header, rows),
            "",
            *([*[f"- {n}" for n in notes], ""] if notes else []),
            f"Runtime: {runtime_s:.0f} s wall on {os.cpu_count()} cores"
            f" (`python bench/paper/{name}.py{' --quick' if quick else ''}`).",
            "",
        ]
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}{'-quick' if quick else ''}.md").write_text(text)
    print(text)
    return text


def plot_panels(
    name: str,
    panels: Sequence[tuple[str, dict[str, tuple[float, float]], dict[str, float]]],
    *,
    ylabel: str = "accuracy (click-weighted freshness)",
    quick: bool = False,
) -> Path:
    """One panel per setting, like the paper's figures; write ``results/<name>.png``.

    ``panels``: (title, {policy: (mean, se)}, {reference line label: value}).
    Policies are points with ±1 s.e. bars; references are dashed lines.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 3.4), squeeze=False)
    for ax, (title, series, refs) in zip(axes[0], panels, strict=True):
        labels = list(series)
        for k, label in enumerate(labels):
            mean, se = series[label]
            ax.errorbar([k], [mean], yerr=[0 if math.isnan(se) else se], fmt="o", capsize=3)
        for k, (label, value) in enumerate(refs.items()):
            color = "red" if label == "BASELINE" else ("black", "tab:blue", "tab:green")[k % 3]
            ax.axhline(value, ls="--", lw=1, color=color, label=label)
        ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right", fontsize=7)
        ax.set_title(title, fontsize=9)
        ax.tick_params(axis="y", labelsize=7)
        if refs:
            ax.legend(fontsize=6, loc="best")
    axes[0][0].set_ylabel(ylabel, fontsize=8)
    fig.tight_layout()
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}{'-quick' if quick else ''}.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# --------------------------------------------------------------------------- command line
def cli(description: str, *, reps: int) -> argparse.Namespace:
    """``--reps N`` (default ``reps``), ``--quick`` (tiny smoke test), ``--workers`` (2),
    ``--report`` (rewrite the table from the saved results, see :func:`run_or_load`)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--reps", type=int, default=reps, help=f"repetitions (default {reps})")
    parser.add_argument("--quick", action="store_true", help="tiny settings: a smoke test")
    parser.add_argument("--workers", type=int, default=2, help="processes (default 2)")
    parser.add_argument(
        "--report", action="store_true", help="rewrite the table from the last run's results"
    )
    return parser.parse_args()
