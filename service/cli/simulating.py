"""``crawlsched simulate``, ``webfarm`` and ``world``: simulated worlds in process and
served as a web."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from scheduler_core.policies import POLICY_NAMES
from scheduler_core.sim import DAY_S
from service.cli.app import console
from service.cli.options import (
    JsonOpt,
    LogLevelOpt,
    NoSignalsOpt,
    ParamsOpt,
    ReportOpt,
    SeedOpt,
    TraceInOpt,
    TraceOutOpt,
    WorldOpt,
    bandwidth_of,
    world_of,
)
from service.loadgen.worldfile import PRESETS, preset_toml
from service.logs import LogLevel, setup_logging
from service.outage_study import outage_study, with_outages
from service.progress import policy_progress
from service.sim_runner import SimulationRecord, run_simulation
from service.simulation import ParamMode


def simulate_cmd(
    world: WorldOpt = None,
    seed: SeedOpt = None,
    no_signals: NoSignalsOpt = False,
    policy: Annotated[
        list[str] | None,
        typer.Option(
            "--policy",
            "-p",
            help=f"policy to run (repeat the option); known: crawlsched, {', '.join(POLICY_NAMES)}",
        ),
    ] = None,
    crawls_per_step: Annotated[
        int, typer.Option("--crawls-per-step", min=1, help="fetches per decision step")
    ] = 1,
    host_limits: Annotated[
        bool, typer.Option("--host-limits", help="enforce each host's crawl delay (politeness)")
    ] = False,
    bandwidth: Annotated[
        str | None,
        typer.Option("--bandwidth", help="R over time: day:crawls_per_day,... e.g. 0:100,400:150"),
    ] = None,
    signal_discard_s: Annotated[
        float, typer.Option("--signal-discard-s", min=0, help="T_DELAY (GREEDY-NCIS-D), s")
    ] = 0.0,
    rescore_every_s: Annotated[
        float,
        typer.Option("--rescore-every-s", min=0, help="crawlsched: s between rescoring passes"),
    ] = 0.0,
    params: ParamsOpt = ParamMode.learned,
    json_path: JsonOpt = None,
    report_dir: ReportOpt = None,
    log_level: LogLevelOpt = LogLevel.warning,
    progress: Annotated[
        bool, typer.Option("--progress/--no-progress", help="show a progress bar")
    ] = True,
    trace_out: TraceOutOpt = None,
    trace_in: TraceInOpt = None,
    outage_share: Annotated[
        float | None,
        typer.Option(
            "--outage-share",
            min=0,
            max=1,
            help="share of hosts that answer no fetch for a while (the world's outage_share); "
            "> 0 also compares crawlsched's freshness on the other hosts with and without",
        ),
    ] = None,
    outage_days: Annotated[
        float | None, typer.Option("--outage-days", min=0, help="length of each outage, days")
    ] = None,
) -> None:
    """Run policies in process on a simulated world (or a recorded trace) and compare
    them with the optimum."""
    setup_logging(log_level.value)
    if trace_in is not None and (world is not None or seed is not None or no_signals):
        raise typer.BadParameter(
            "a trace is one recorded world: --world, --seed and --no-signals do not apply",
            param_hint="--trace-in",
        )
    if report_dir is not None:
        from service.html_report import prepare_report_dir

        prepare_report_dir(report_dir)  # before the run: a missing matplotlib fails now
    w = world_of(world, seed, no_signals, trace_in, trace_out)
    if outage_share is not None or outage_days is not None:
        w = with_outages(w, outage_share, outage_days)
    names = policy or ["crawlsched", "greedy", "greedy-ncis"]
    record = SimulationRecord() if report_dir is not None else None
    with policy_progress(names, console, show=progress) as advance:
        report = run_simulation(
            w,
            names,
            seed=w.seed,
            crawls_per_step=crawls_per_step,
            host_limits=host_limits,
            bandwidth=bandwidth_of(bandwidth),
            signal_discard_s=signal_discard_s,
            rescore_every_s=rescore_every_s,
            params=params.value,
            log=console.print,
            progress=advance,
            record=record,
        )
    report.print(Console())
    if w.outages is not None and w.outages.hosts_down_ever and "crawlsched" in names:
        study = outage_study(
            w, seed=w.seed, crawls_per_step=crawls_per_step, host_limits=host_limits,
            bandwidth=bandwidth_of(bandwidth), signal_discard_s=signal_discard_s,
            rescore_every_s=rescore_every_s, params=params.value,
        )  # fmt: skip
        Console().print(f"Outages: {study.sentence()}.")
    if json_path is not None:
        report.write_json(json_path)
        console.print(f"report written to {json_path}")
    if report_dir is not None and record is not None:
        from service.reports import write_simulation_report

        page = write_simulation_report(report_dir, w, report, record)
        console.print(f"report written to {page}")


def webfarm_cmd(
    world: WorldOpt = None,
    seed: SeedOpt = None,
    no_signals: NoSignalsOpt = False,
    trace_in: TraceInOpt = None,
    host: Annotated[str, typer.Option(help="interface to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8080,
    service: Annotated[
        str | None,
        typer.Option("--service", help="share the clock of the crawlsched service at this URL"),
    ] = None,
    token: Annotated[
        str | None, typer.Option("--token", envvar="CRAWLSCHED_TOKEN", help="its bearer token")
    ] = None,
    feed: Annotated[
        bool, typer.Option("--feed", help="post the world's clicks and signals to --service")
    ] = False,
    wall_seconds: Annotated[
        float,
        typer.Option("--wall-seconds", min=1, help="without --service: the world's wall time"),
    ] = 600.0,
    strict_share: Annotated[
        float, typer.Option("--strict-share", min=0, max=1, help="hosts answering 429")
    ] = 0.3,
    down_share: Annotated[
        float, typer.Option("--down-share", min=0, max=1, help="hosts down now and then (503)")
    ] = 0.2,
    tolerance_wall_s: Annotated[
        float,
        typer.Option("--tolerance-wall-s", min=0, help="politeness slack, wall s"),
    ] = 0.02,
    start_on_request: Annotated[
        bool,
        typer.Option("--start-on-request", help="world time starts at the first page request"),
    ] = False,
    json_path: JsonOpt = None,
) -> None:
    """Serve a simulated web over HTTP: the world's pages on its clock; score the crawl.

    Use the farm as an HTTP proxy (`http_proxy=http://HOST:PORT`) or send `Host:
    host017.example`; `GET /_farm/score` reports freshness and politeness.
    """
    import httpx

    from service.clock import AcceleratedClock
    from service.webfarm.plan import FarmOptions
    from service.webfarm.server import FarmRun, run_farm, service_clock

    if feed and service is None:
        raise typer.BadParameter("--feed needs --service", param_hint="--feed")
    w = world_of(world, seed, no_signals, trace_in, None)
    try:
        clock = (
            AcceleratedClock(w.duration_s / wall_seconds)
            if service is None
            else service_clock(service, token=token)
        )
    except httpx.HTTPError as exc:
        raise typer.BadParameter(f"cannot read its clock: {exc}", param_hint="--service") from None
    options = FarmOptions(
        strict_share=strict_share, down_share=down_share, tolerance_wall_s=tolerance_wall_s
    )
    run = FarmRun(
        w, clock, options=options, feed_url=service if feed else None, token=token,
        start_on_request=start_on_request,
    )  # fmt: skip
    console.print(
        f"serving {len(w.urls)} URLs on {len(w.hosts)} hosts at http://{host}:{port} "
        f"(an HTTP proxy for http://{w.hosts[0]}/…); {w.duration_s / DAY_S:g} days at "
        f"{clock.rate:.0f} clock s per wall s{'; feeding clicks and signals' if feed else ''}"
    )
    run_farm(run, host=host, port=port)
    score = run.farm.score()
    score.print(Console())
    if json_path is not None:
        score.write_json(json_path)
        console.print(f"score written to {json_path}")


def world_cmd(
    preset: Annotated[
        str,
        typer.Option("--preset", help=f"which world: {', '.join(PRESETS)} (see docs/worlds.md)"),
    ] = "default",
) -> None:
    """Print a world spec (TOML, commented) to start your own from: the default world,
    or a preset."""
    if preset not in PRESETS:
        raise typer.BadParameter(f"one of {', '.join(PRESETS)}", param_hint="--preset")
    typer.echo(preset_toml(preset), nl=False)
