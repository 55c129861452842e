"""``crawlsched loadgen`` and ``crawlsched demo``: a simulated web replayed over HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from typing import Annotated

import typer

from scheduler_core.sim import DAY_S, World
from service.cli.app import console
from service.cli.options import (
    JsonOpt,
    NoSignalsOpt,
    ParamsOpt,
    ReportOpt,
    SeedOpt,
    TraceInOpt,
    TraceOutOpt,
    WorkersOpt,
    WorldOpt,
    drive,
    finish,
    world_of,
)
from service.loadgen.demo import served_app
from service.loadgen.report import LoadgenReport
from service.loadgen.runner import RunRecord
from service.logs import LogLevel
from service.settings import check_environment
from service.simulation import ParamMode
from service.store.redis.local import LocalRedis


def loadgen(
    url: Annotated[
        str, typer.Option("--url", envvar="CRAWLSCHED_URL", help="base URL of a running service")
    ],
    world: WorldOpt = None,
    seed: SeedOpt = None,
    no_signals: NoSignalsOpt = False,
    json_path: JsonOpt = None,
    trace_out: TraceOutOpt = None,
    trace_in: TraceInOpt = None,
    workers: WorkersOpt = 4,
    params: ParamsOpt = ParamMode.learned,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="CRAWLSCHED_TOKEN",
            help="bearer token of the admin role (the load generator plays every role)",
        ),
    ] = None,
) -> None:
    """Replay a simulated web against a running service (accelerated clock) and score it."""
    check_environment()
    w = world_of(world, seed, no_signals, trace_in, trace_out)
    finish(asyncio.run(drive(url, w, workers, params.value, token)), json_path)


def demo(
    world: WorldOpt = None,
    seed: SeedOpt = None,
    no_signals: NoSignalsOpt = False,
    json_path: JsonOpt = None,
    trace_out: TraceOutOpt = None,
    trace_in: TraceInOpt = None,
    workers: WorkersOpt = 4,
    wall_seconds: Annotated[
        float, typer.Option("--wall-seconds", min=5, help="wall time the world replays in")
    ] = 60.0,
    max_revisit_days: Annotated[
        float | None,
        typer.Option(
            "--max-revisit-days",
            min=0.001,
            help="the service's revisit cap (default: the run's length, i.e. none, as BASELINE)",
        ),
    ] = None,
    store: Annotated[
        str,
        typer.Option(
            "--store",
            help="`memory`, `redis` (a private redis-server for the run) or a redis:// URL",
        ),
    ] = "memory",
    params: ParamsOpt = ParamMode.learned,
    report_dir: ReportOpt = None,
    log_level: Annotated[
        LogLevel, typer.Option("--log-level", help="least severe level the service logs")
    ] = LogLevel.warning,
) -> None:
    """Start the service (in-memory store by default) and run the load generator against it."""
    check_environment()
    if report_dir is not None:
        from service.html_report import prepare_report_dir

        prepare_report_dir(report_dir)  # before the run: a missing matplotlib fails now
    w = world_of(world, seed, no_signals, trace_in, trace_out)
    speed = w.duration_s / wall_seconds
    cap_s = w.duration_s if max_revisit_days is None else max_revisit_days * DAY_S
    if store not in ("memory", "redis") and not store.startswith(("redis://", "rediss://")):
        raise typer.BadParameter(
            "must be `memory`, `redis` or a redis:// URL", param_hint="--store"
        )
    record = RunRecord()
    with contextlib.ExitStack() as stack:
        if store == "redis":
            store = stack.enter_context(LocalRedis()).url
            console.print(f"started a private redis-server at {store}")
        report = _demo(w, speed, cap_s, store, workers, params.value, record, log_level.value)
    finish(report, json_path)
    if report_dir is not None:
        from service.reports import write_demo_report

        console.print(f"report written to {write_demo_report(report_dir, w, report, record)}")


def _demo(
    w: World,
    speed: float,
    cap_s: float,
    store: str,
    workers: int,
    params: str,
    record: RunRecord | None = None,
    log_level: str = "warning",
) -> LoadgenReport:
    token = secrets.token_urlsafe(32)  # the run's own admin token
    env = {
        "CRAWLSCHED_AUTH_TOKENS": f"admin:{token}",
        "CRAWLSCHED_STORE": store,
        "CRAWLSCHED_CLOCK": "accelerated",
        "CRAWLSCHED_CLOCK_SPEED": repr(speed),
        "CRAWLSCHED_LEASE_TTL_S": repr(30.0 * speed),
        "CRAWLSCHED_MAX_REVISIT_S": repr(cap_s),
        # the learner's pass (host, label and global priors) every ~2 simulated days,
        # at most once a wall second
        "CRAWLSCHED_LEARN_INTERVAL_S": repr(max(1.0, 2 * DAY_S / speed)),
        # signals and clicks folded within ~10 simulated minutes (a wall second is days
        # here), at most every 10 wall ms
        "CRAWLSCHED_FOLD_LAG_S": repr(min(1.0, max(0.01, 600.0 / speed))),
    }
    console.print(
        f"serving on an accelerated clock: {speed:.0f} simulated s per wall s; "
        f"revisit cap {cap_s / DAY_S:g} days"
    )
    with served_app(env, log_level=log_level) as base_url:
        return asyncio.run(drive(base_url, w, workers, params, token, record))
