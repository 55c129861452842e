"""The ``crawlsched`` command: serve, loadgen, demo, simulate, webfarm, world."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from scheduler_core.errors import ParameterError
from scheduler_core.policies import POLICY_NAMES
from scheduler_core.sim import DAY_S, World, WorldSpec
from scheduler_core.sim.bandwidth import Bandwidth
from service import __version__
from service.client import CrawlschedClient, CrawlschedError
from service.errors import ConfigError
from service.loadgen.demo import served_app
from service.loadgen.report import LoadgenReport
from service.loadgen.runner import LoadgenOptions, RunRecord, run_loadgen
from service.loadgen.worldfile import (
    PRESETS,
    TraceError,
    load_spec,
    preset_toml,
    read_trace,
    write_trace,
)
from service.logs import LogFormat, LogLevel, logging_config, setup_logging
from service.outage_study import outage_study, with_outages
from service.progress import policy_progress
from service.serving import check_bind, check_tls
from service.settings import check_environment, get_settings
from service.sim_runner import SimulationRecord, run_simulation
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


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"crawlsched {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="print the version and exit"
        ),
    ] = False,
) -> None:
    """crawlsched: a streaming crawl scheduler (near-optimal freshness under a budget)."""


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


async def _drive(
    base_url: str,
    world: World,
    workers: int,
    params: str,
    token: str | None,
    record: RunRecord | None = None,
) -> LoadgenReport:
    async with CrawlschedClient(base_url, token=token) as client:
        options = LoadgenOptions(workers=workers, params=params)
        return await run_loadgen(world, client, options, log=console.print, record=record)


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="interface to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8000,
    insecure: Annotated[
        bool,
        typer.Option(
            "--insecure",
            help="bind beyond loopback although no token is configured (anyone who "
            "reaches the port may change the frontier)",
        ),
    ] = False,
    ssl_keyfile: Annotated[
        Path | None,
        typer.Option("--ssl-keyfile", help="TLS: private key (PEM), with --ssl-certfile"),
    ] = None,
    ssl_certfile: Annotated[
        Path | None,
        typer.Option("--ssl-certfile", help="TLS: certificate chain (PEM), with --ssl-keyfile"),
    ] = None,
    grpc_port: Annotated[
        int | None,
        typer.Option(
            "--grpc-port",
            min=0,
            max=65535,
            help="also serve URLFrontier's gRPC protocol on this TCP port (same interface, "
            "tokens and TLS files)",
        ),
    ] = None,
    log_level: LogLevelOpt = LogLevel.info,
    log_format: LogFormatOpt = LogFormat.auto,
) -> None:
    """Run the HTTP service (configuration from CRAWLSCHED_* environment variables).

    Without a token configured it binds only to loopback unless --insecure.  Logs
    (uvicorn's too) are structured, one line per record, each request's with its
    request id; every request is logged at the ``info`` level.
    """
    import uvicorn

    from service.app import create_app
    from service.http_timeouts import uvicorn_options

    setup_logging(log_level.value, log_format.value)
    settings = get_settings()
    check_tls(ssl_keyfile, ssl_certfile)
    if check_bind(host, settings, insecure=insecure):
        console.print(
            f"warning: serving on {host} without authentication (--insecure): anyone who "
            "reaches the port may register, lease, settle and delete URLs",
            highlight=False,
        )
    tls = None if ssl_keyfile is None or ssl_certfile is None else (ssl_keyfile, ssl_certfile)
    uvicorn.run(
        create_app(settings, grpc_port=grpc_port, grpc_host=host, grpc_tls=tls),
        host=host,
        port=port,
        ssl_keyfile=None if ssl_keyfile is None else str(ssl_keyfile),
        ssl_certfile=None if ssl_certfile is None else str(ssl_certfile),
        log_config=logging_config(log_level.value, log_format.value),
        log_level=log_level.value,
        access_log=False,  # the service logs each request itself, with its request id
        **uvicorn_options(settings),  # header deadline, keep-alive timeout
    )


@app.command()
def worker(
    metrics_port: Annotated[
        int,
        typer.Option(
            "--metrics-port", min=0, max=65535, help="serve Prometheus metrics here (0: none)"
        ),
    ] = 0,
    metrics_host: Annotated[
        str, typer.Option("--metrics-host", help="interface the metrics port binds")
    ] = "127.0.0.1",
    log_level: LogLevelOpt = LogLevel.info,
    log_format: LogFormatOpt = LogFormat.auto,
) -> None:
    """Run the background work of a Redis deployment (CRAWLSCHED_STORE=redis://…): fold
    the appended signals and clicks, rescore, learn, and beat so that the API's
    /healthz knows a worker runs.  Start at least one beside the API processes."""
    from service.worker import main_loop

    setup_logging(log_level.value, log_format.value)
    settings = get_settings()
    if settings.store == "memory":
        raise typer.BadParameter(
            "a worker serves a Redis store: set CRAWLSCHED_STORE=redis://… (with the memory "
            "store the API process does this work itself)"
        )
    main_loop(settings, metrics_port, metrics_host)


@app.command()
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
    w = _world(world, seed, no_signals, trace_in, trace_out)
    _finish(asyncio.run(_drive(url, w, workers, params.value, token)), json_path)


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
    w = _world(world, seed, no_signals, trace_in, trace_out)
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
    _finish(report, json_path)
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
        return asyncio.run(_drive(base_url, w, workers, params, token, record))


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
    w = _world(world, seed, no_signals, trace_in, trace_out)
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
            bandwidth=_bandwidth(bandwidth),
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
            bandwidth=_bandwidth(bandwidth), signal_discard_s=signal_discard_s,
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


@app.command("webfarm")
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
    w = _world(world, seed, no_signals, trace_in, None)
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


@app.command("world")
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


def _error(message: str) -> None:
    """``error: message`` on stderr, on one line however long."""
    console.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``crawlsched`` console script; returns the exit code.

    Bad world specs and traces, unknown or invalid ``CRAWLSCHED_*`` variables and
    a refused bind end with a one-line error (exit code 2), not a traceback; so
    does an error answer of the service to the load generator (exit code 1).
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
    except (TraceError, ParameterError, ConfigError) as exc:
        _error(str(exc))
        return 2
    except CrawlschedError as exc:
        hint = " (pass --token or set CRAWLSCHED_TOKEN)" if exc.status_code in (401, 403) else ""
        _error(f"{exc}{hint}")
        return 1
    return 0
