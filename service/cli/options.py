"""Options and helpers the ``crawlsched`` commands share: worlds, traces, reports."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from scheduler_core.errors import ParameterError
from scheduler_core.sim import DAY_S, World, WorldSpec
from scheduler_core.sim.bandwidth import Bandwidth
from service.cli.app import console
from service.client import CrawlschedClient
from service.loadgen.report import LoadgenReport
from service.loadgen.runner import LoadgenOptions, RunRecord, run_loadgen
from service.loadgen.worldfile import load_spec, read_trace, write_trace
from service.logs import LogFormat, LogLevel
from service.simulation import ParamMode

WorldOpt = Annotated[
    Path | None,
    typer.Option(
        "--world", help="world spec (JSON or TOML) or a preset name (web); default world if absent"
    ),
]
SeedOpt = Annotated[int | None, typer.Option("--seed", help="random seed (overrides the spec)")]
NoSignalsOpt = Annotated[
    bool, typer.Option("--no-signals", help="a world without change-indicating signals")
]


ParamsOpt = Annotated[
    ParamMode,
    typer.Option(
        "--params",
        help="learned: URLs registered bare, every parameter estimated online; "
        "oracle: the world's true parameters registered as fixed",
    ),
]
JsonOpt = Annotated[Path | None, typer.Option("--json", help="write the report as JSON here")]
TraceOutOpt = Annotated[
    Path | None, typer.Option("--trace-out", help="record the world's events (JSON lines)")
]
TraceInOpt = Annotated[
    Path | None, typer.Option("--trace-in", help="replay a recorded trace instead of a world")
]
WorkersOpt = Annotated[int, typer.Option("--workers", min=1, help="concurrent worker tasks")]
ReportOpt = Annotated[
    Path | None,
    typer.Option(
        "--report",
        help="write an HTML page with plots to this directory (needs crawlsched[report])",
    ),
]


LogLevelOpt = Annotated[LogLevel, typer.Option("--log-level", help="least severe level logged")]
LogFormatOpt = Annotated[
    LogFormat,
    typer.Option(
        "--log-format",
        help="json: one JSON object per line; console: key=value; auto: console on a terminal",
    ),
]


def world_of(
    world: Path | None,
    seed: int | None,
    no_signals: bool,
    trace_in: Path | None,
    trace_out: Path | None,
) -> World:
    """The world to replay: a trace, or a spec (default if none) drawn; optionally recorded.

    Raises
    ------
    TraceError
        On a trace or spec file that cannot be read.
    ParameterError
        On a spec whose values are out of range.
    """
    w = _draw(world, seed, no_signals) if trace_in is None else read_trace(trace_in)
    if trace_out is not None:
        write_trace(w, trace_out)
    return w


def _draw(world: Path | None, seed: int | None, no_signals: bool) -> World:
    spec = load_spec(world) if world is not None else WorldSpec()
    if seed is not None:
        spec = spec.replace(seed=seed)
    if no_signals:
        spec = spec.replace(signals=False)
    return World.generate(spec)


def finish(report: LoadgenReport, json_path: Path | None) -> None:
    """Print a load-generator report, and write it as JSON to ``json_path`` if given."""
    report.print(Console())
    if json_path is not None:
        report.write_json(json_path)
        console.print(f"report written to {json_path}")


async def drive(
    base_url: str,
    world: World,
    workers: int,
    params: str,
    token: str | None,
    record: RunRecord | None = None,
) -> LoadgenReport:
    """Replay ``world`` against the service at ``base_url`` with ``workers`` concurrent
    tasks (``params``: learned or oracle) and score it.

    Raises
    ------
    CrawlschedError
        When the service answers an error the client does not retry.
    """
    async with CrawlschedClient(base_url, token=token) as client:
        options = LoadgenOptions(workers=workers, params=params)
        return await run_loadgen(world, client, options, log=console.print, record=record)


def bandwidth_of(text: str | None) -> Bandwidth | None:
    """``"0:100,400:150"`` (day:crawls per day, ...) as a Bandwidth (None for None).

    Raises
    ------
    typer.BadParameter
        On text that is not such a list starting at day 0.
    """
    if text is None:
        return None
    try:
        pairs = [tuple(float(x) for x in part.split(":")) for part in text.split(",")]
        return Bandwidth.steps([(a * DAY_S, b / DAY_S) for a, b in pairs])
    except (ValueError, ParameterError) as exc:
        raise typer.BadParameter(
            f"expected day:crawls_per_day,... starting at day 0 ({exc})", param_hint="--bandwidth"
        ) from None
