"""``crawlsched serve`` and ``crawlsched worker``: the processes of a deployment."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from service.cli.app import console
from service.cli.options import LogFormatOpt, LogLevelOpt
from service.logs import LogFormat, LogLevel, logging_config, setup_logging
from service.serving import check_bind, check_tls
from service.settings import get_settings


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
