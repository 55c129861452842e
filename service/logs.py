"""Structured logs: structlog for the service's own events, stdlib logging (uvicorn's
and every ``logging.getLogger`` of the service) through the same formatter.

Each record is one JSON object per line (``json``) or ``time [level] event
key=value ...`` (``console``); ``auto`` picks ``console`` when stderr is a
terminal.  A request's records carry its ``request_id``
(:mod:`service.observability` binds it).  Nothing logs request bodies or
headers, so no token reaches a log.

The app only sends records (:func:`configure_structlog`: structlog hands them to
stdlib logging); the command that runs it decides where they go and from which
level (:func:`logging_config`, given to uvicorn, or :func:`setup_logging`).
"""

from __future__ import annotations

import enum
import logging
import logging.config
import sys
from typing import Any

import structlog
from structlog.types import Processor

__all__ = [
    "LOG_FORMATS",
    "LOG_LEVELS",
    "LogFormat",
    "LogLevel",
    "StderrHandler",
    "configure_structlog",
    "formatter",
    "logging_config",
    "setup_logging",
]

LOG_FORMATS: tuple[str, ...] = ("auto", "json", "console")
LOG_LEVELS: tuple[str, ...] = ("debug", "info", "warning", "error", "critical")


class LogLevel(enum.StrEnum):
    """The least severe level logged (the commands' ``--log-level``)."""

    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"


class LogFormat(enum.StrEnum):
    """``json``: one JSON object per line; ``console``: key=value; ``auto``: console on
    a terminal (the commands' ``--log-format``)."""

    auto = "auto"
    json = "json"
    console = "console"


#: What both structlog's and stdlib's records get before rendering.
_SHARED: list[Processor] = [
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
]


def configure_structlog() -> None:
    """Send structlog's records to stdlib logging (idempotent).

    Until a command configures handlers (:func:`setup_logging`), stdlib prints only
    warnings and errors, unformatted: an app built in a test stays quiet.
    """
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *_SHARED,
            structlog.processors.StackInfoRenderer(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )


def formatter(fmt: str = "auto") -> logging.Formatter:
    """The formatter of every record: structlog's and stdlib's alike.

    Parameters
    ----------
    fmt : {"auto", "json", "console"}
        One JSON object per line, or ``key=value`` for people; ``auto``: ``console``
        when stderr is a terminal.

    Raises
    ------
    ValueError
        On an unknown format.
    """
    if fmt not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}, not {fmt!r}")
    tty = sys.stderr.isatty()
    render: list[Processor] = [structlog.stdlib.ProcessorFormatter.remove_processors_meta]
    if fmt == "console" or (fmt == "auto" and tty):
        render.append(structlog.dev.ConsoleRenderer(colors=tty))
    else:
        render += [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
    return structlog.stdlib.ProcessorFormatter(processors=render, foreign_pre_chain=_SHARED)


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A stream handler on standard error as it is when a record is emitted, not as
    it was when logging was configured: a record still reaches stderr after
    ``sys.stderr`` is replaced (a test's capture, a supervisor's redirection) and
    never goes to a stream closed since."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr  # under the handler's lock (Handler.handle)
        super().emit(record)


def logging_config(level: str = "info", fmt: str = "auto") -> dict[str, Any]:
    """A :func:`logging.config.dictConfig` mapping: every logger (uvicorn's, the
    service's, structlog's) to stderr through one :func:`formatter`.

    Parameters
    ----------
    level : {"debug", "info", "warning", "error", "critical"}
        The root level.
    fmt : {"auto", "json", "console"}
        As in :func:`formatter`.

    Raises
    ------
    ValueError
        On an unknown level or format.
    """
    if level.lower() not in LOG_LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LOG_LEVELS)}, not {level!r}")
    formatter(fmt)  # refuses an unknown format now, not inside dictConfig
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"structlog": {"()": formatter, "fmt": fmt}},
        "handlers": {"default": {"()": StderrHandler, "formatter": "structlog"}},
        "root": {"handlers": ["default"], "level": level.upper()},
        # uvicorn's own loggers: no handlers of their own, through the root's
        "loggers": {
            name: {"handlers": [], "propagate": True, "level": level.upper()}
            for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi")
        },
    }


def setup_logging(level: str = "info", fmt: str = "auto") -> None:
    """Configure stdlib logging and structlog for a command (see :func:`logging_config`).

    Raises
    ------
    ValueError
        On an unknown level or format.
    """
    logging.config.dictConfig(logging_config(level, fmt))
    configure_structlog()
