"""The ``crawlsched`` command: serve, worker, loadgen, demo, simulate, webfarm, world.

One module per group of commands (:mod:`~service.cli.serving`, :mod:`~service.cli.runs`,
:mod:`~service.cli.simulating`); this module puts them on the application of
:mod:`~service.cli.app`, and is the entry point with its error handling.
"""

from __future__ import annotations

import typer
from rich.markup import escape

from scheduler_core.errors import ParameterError
from service.cli import runs, serving, simulating
from service.cli.app import app, console
from service.client import CrawlschedError
from service.errors import ConfigError
from service.loadgen.worldfile import TraceError

__all__ = ["app", "main"]

# The commands, in the order ``crawlsched --help`` lists them.
app.command()(serving.serve)
app.command()(serving.worker)
app.command()(runs.loadgen)
app.command()(runs.demo)
app.command("simulate")(simulating.simulate_cmd)
app.command("webfarm")(simulating.webfarm_cmd)
app.command("world")(simulating.world_cmd)


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
