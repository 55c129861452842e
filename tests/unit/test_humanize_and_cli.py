"""Human forms (ISO times, durations, rates per day), ``crawlsched --version`` and the
logging options."""

from __future__ import annotations

import doctest
import io
import logging
import logging.config
import math
import sys

import pytest

from service import __version__, humanize, logs
from service.cli import main
from service.humanize import duration, iso_time, per_day, relative


def test_the_modules_examples_hold() -> None:
    failed, tried = doctest.testmod(humanize)
    assert failed == 0 and tried > 0


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0, "0 ms"),
        (0.0004, "0 ms"),
        (59.4, "59 s"),
        (59.6, "1 min"),
        (3599.6, "1 h"),
        (3 * 3600 + 12 * 60 + 40, "3 h 12 min"),  # the two largest units, rounded down
        (86_400 + 59, "1 d"),
        (86_400 + 3600 + 1, "1 d 1 h"),
        (30 * 86_400.0, "30 d"),
        (-90.0, "1 min 30 s"),
        (math.inf, "forever"),
    ],
)
def test_durations(seconds: float, text: str) -> None:
    assert duration(seconds) == text


def test_times_rates_and_relative_phrases() -> None:
    assert iso_time(0.0) == "1970-01-01T00:00:00Z"
    assert iso_time(None) is None and duration(None) is None
    assert iso_time(1e300) == "never"
    assert relative(-3600.0) == "1 h ago" and relative(86_400.0) == "in 1 d"
    assert per_day(2 / 86_400) == pytest.approx(2.0)


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"crawlsched {__version__}"


@pytest.mark.parametrize("option", [["--log-level", "loud"], ["--log-format", "xml"]])
def test_bad_log_options_are_usage_errors(
    option: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", *option]) == 2
    assert option[0] in capsys.readouterr().err


def test_logs_go_to_stderr_as_it_is_when_they_are_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Configured while stderr was one stream, logging follows stderr when it is
    replaced, and writes nothing to the old stream once that is closed."""
    first, second = io.StringIO(), io.StringIO()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    monkeypatch.setattr(sys, "stderr", first)
    try:
        logging.config.dictConfig(logs.logging_config("info", "json"))
        logging.getLogger("crawlsched.test").info("one")
        assert '"event": "one"' in first.getvalue()
        first.close()
        monkeypatch.setattr(sys, "stderr", second)
        logging.getLogger("crawlsched.test").info("two")  # a closed stream would raise
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    assert '"event": "two"' in second.getvalue()
    assert '"event": "one"' not in second.getvalue()


def test_logging_config_refuses_unknown_levels_and_formats() -> None:
    with pytest.raises(ValueError, match="log level"):
        logs.logging_config("loud")
    with pytest.raises(ValueError, match="log format"):
        logs.logging_config("info", "xml")
    config = logs.logging_config("debug", "json")
    assert config["root"]["level"] == "DEBUG"
    assert all(not v["handlers"] and v["propagate"] for v in config["loggers"].values())
