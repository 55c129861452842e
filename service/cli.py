"""The ``crawlsched`` command: serve, loadgen, demo, simulate, world."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from scheduler_core.errors import ParameterError
from scheduler_core.policies import POLICY_NAMES
from scheduler_core.sim import DAY_S, World, WorldSpec
from scheduler_core.sim.bandwidth import Bandwidth
from service.client import CrawlschedClient
from service.loadgen.demo import served_app
from service.loadgen.report import LoadgenReport
from service.loadgen.runner import LoadgenOptions, run_loadgen
from service.loadgen.worldfile import (
    TraceError,
    default_spec_toml,
    load_spec,
    read_trace,
    write_trace,
)
from service.sim_runner import run_simulation
from service.simulation import ParamMode
from service.store.redis.local import LocalRedis

__all__ = ["app", "main"]

app = typer.Typer(
    help="crawlsched: a streaming crawl scheduler (near-optimal freshness under a budget).",
    no_args_is_help=True,
    add_completion=False,
)
console = Console(stderr=True)

WorldOpt = Annotated[
    Path | None, typer.Option("--world", help="world spec (JSON or TOML); default world if absent")
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


def _world(
    world: Path | None,
    seed: int | None,
    no_signals: bool,
    trace_in: Path | None,
    trace_out: Path | None,
) -> World:
    """The world to replay: a trace, or a spec (default if none) drawn; optionally recorded."""
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


def _finish(report: LoadgenReport, json_path: Path | None) -> None:
    report.print(Console())
    if json_path is not None:
        report.write_json(json_path)
        console.print(f"report written to {json_path}")


async def _drive(base_url: str, world: World, workers: int, params: str) -> LoadgenReport:
    async with CrawlschedClient(base_url) as client:
        options = LoadgenOptions(workers=workers, params=params)
        return await run_loadgen(world, client, options, log=console.print)


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="interface to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8000,
) -> None:
    """Run the HTTP service (configuration from CRAWLSCHED_* environment variables)."""
    import uvicorn

    uvicorn.run("service.app:create_app", factory=True, host=host, port=port)


@app.command()
def loadgen(
    url: Annotated[str, typer.Option("--url", help="base URL of a running service")],
    world: WorldOpt = None,
    seed: SeedOpt = None,
    no_signals: NoSignalsOpt = False,
    json_path: JsonOpt = None,
    trace_out: TraceOutOpt = None,
    trace_in: TraceInOpt = None,
    workers: WorkersOpt = 4,
    params: ParamsOpt = ParamMode.learned,
) -> None:
    """Replay a simulated web against a running service (accelerated clock) and score it."""
    w = _world(world, seed, no_signals, trace_in, trace_out)
    _finish(asyncio.run(_drive(url, w, workers, params.value)), json_path)


@app.command()
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
) -> None:
    """Start the service (in-memory store by default) and run the load generator against it."""
    w = _world(world, seed, no_signals, trace_in, trace_out)
    speed = w.duration_s / wall_seconds
    cap_s = w.duration_s if max_revisit_days is None else max_revisit_days * DAY_S
    if store not in ("memory", "redis") and not store.startswith(("redis://", "rediss://")):
        raise typer.BadParameter(
            "must be `memory`, `redis` or a redis:// URL", param_hint="--store"
        )
    with contextlib.ExitStack() as stack:
        if store == "redis":
            store = stack.enter_context(LocalRedis()).url
            console.print(f"started a private redis-server at {store}")
        report = _demo(w, speed, cap_s, store, workers, params.value)
    _finish(report, json_path)


def _demo(
    w: World, speed: float, cap_s: float, store: str, workers: int, params: str
) -> LoadgenReport:
    env = {
        "CRAWLSCHED_STORE": store,
        "CRAWLSCHED_CLOCK": "accelerated",
        "CRAWLSCHED_CLOCK_SPEED": repr(speed),
        "CRAWLSCHED_LEASE_TTL_S": repr(30.0 * speed),
        "CRAWLSCHED_MAX_REVISIT_S": repr(cap_s),
        # the learner's pass (host, label and global priors) every ~2 simulated days,
        # at most once a wall second
        "CRAWLSCHED_LEARN_INTERVAL_S": repr(max(1.0, 2 * DAY_S / speed)),
    }
    console.print(
        f"serving on an accelerated clock: {speed:.0f} simulated s per wall s; "
        f"revisit cap {cap_s / DAY_S:g} days"
    )
    with served_app(env) as base_url:
        return asyncio.run(_drive(base_url, w, workers, params))


def _bandwidth(text: str | None) -> Bandwidth | None:
    """``"0:100,400:150"`` (day:crawls per day, ...) as a Bandwidth."""
    if text is None:
        return None
    try:
        pairs = [tuple(float(x) for x in part.split(":")) for part in text.split(",")]
        return Bandwidth.steps([(a * DAY_S, b / DAY_S) for a, b in pairs])
    except (ValueError, ParameterError) as exc:
        raise typer.BadParameter(
            f"expected day:crawls_per_day,... starting at day 0 ({exc})", param_hint="--bandwidth"
        ) from None


@app.command("simulate")
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
    trace_out: TraceOutOpt = None,
    trace_in: TraceInOpt = None,
) -> None:
    """Run policies in process on a simulated world (or a recorded trace) and compare
    them with the optimum."""
    if trace_in is not None and (world is not None or seed is not None or no_signals):
        raise typer.BadParameter(
            "a trace is one recorded world: --world, --seed and --no-signals do not apply",
            param_hint="--trace-in",
        )
    w = _world(world, seed, no_signals, trace_in, trace_out)
    report = run_simulation(
        w,
        policy or ["crawlsched", "greedy", "greedy-ncis"],
        seed=w.seed,
        crawls_per_step=crawls_per_step,
        host_limits=host_limits,
        bandwidth=_bandwidth(bandwidth),
        signal_discard_s=signal_discard_s,
        rescore_every_s=rescore_every_s,
        params=params.value,
        log=console.print,
    )
    report.print(Console())
    if json_path is not None:
        report.write_json(json_path)
        console.print(f"report written to {json_path}")


@app.command("world")
def world_cmd() -> None:
    """Print the default world spec (TOML, commented) to start your own from."""
    typer.echo(default_spec_toml())


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``crawlsched`` console script; returns the exit code.

    Bad world specs and traces end with a one-line error (exit code 2), not a
    traceback.
    """
    try:
        app(args=argv, prog_name="crawlsched", standalone_mode=False)
    except typer.Exit as done:
        return int(done.exit_code)
    except typer.TyperException as exc:  # usage errors: bad option values, unknown options
        show = getattr(exc, "show", None)
        if callable(show):
            show()
        else:
            console.print(f"error: {exc.format_message()}", highlight=False)
        return int(exc.exit_code)
    except typer.Abort:
        console.print("aborted")
        return 130
    except (TraceError, ParameterError) as exc:
        console.print(f"[red]error:[/red] {exc}", markup=True, highlight=False)
        return 2
    return 0
