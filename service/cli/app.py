"""The ``crawlsched`` Typer application, its console and its global options."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from service import __version__

__all__ = ["app", "console"]

app = typer.Typer(
    help="crawlsched: a streaming crawl scheduler (near-optimal freshness under a budget).",
    no_args_is_help=True,
    add_completion=False,
)
console = Console(stderr=True)


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
