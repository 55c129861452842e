"""The farm's score of a crawl: freshness its users saw, and the politeness audit."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

__all__ = ["FarmScore", "HostAudit"]


@dataclass(frozen=True)
class HostAudit:
    """One host's page requests against its crawl delay (times in clock s).

    Attributes
    ----------
    host : str
    crawl_delay_s : float
        The host's crawl delay (robots.txt).
    strict : bool
        Whether it answers 429 to requests that come too soon.
    outages : int
        Outages planned over the world's span.
    page_requests : int
        Requests to its pages (index included; robots.txt and sitemap not).
    min_interval_s : float or None
        Shortest time between two consecutive page requests; None before two.
    violations : int
        Page requests that came sooner than ``crawl_delay_s − tolerance_s`` after
        the previous one.
    throttled : int
        Answers 429.
    unavailable : int
        Answers 503 (the host was down).
    """

    host: str
    crawl_delay_s: float
    strict: bool
    outages: int
    page_requests: int
    min_interval_s: float | None
    violations: int
    throttled: int
    unavailable: int


@dataclass(frozen=True)
class FarmScore:
    """What the farm measured of the crawl it served (stable JSON keys).

    Attributes
    ----------
    freshness : float
        Click-weighted freshness: share of the world's clicks after its warm-up
        that found the copy last fetched (200 or 304) fresh; nan without clicks.
    freshness_stderr : float
        Its binomial standard error.
    clicks : int
        Clicks measured.
    freshness_time_weighted : float
        Importance-weighted share of time fresh.
    crawls : int
        Fetches scored (200 and 304 answers to world URLs within the world's span).
    round_robin_reference : float
        Uniform round-robin at the world's budget, politeness not modelled.
    requests : dict of str to int
        Answers by status code.
    violations : int
        Page requests, over all hosts, sooner than the crawl delay allows.
    tolerance_s : float
        Slack of the audit and of the 429s, clock s.
    world_time_s, duration_s : float
        World time now and the world's span, s.
    done : bool
        Whether the world's span is over.
    hosts : tuple of HostAudit
    """

    freshness: float
    freshness_stderr: float
    clicks: int
    freshness_time_weighted: float
    crawls: int
    round_robin_reference: float
    requests: dict[str, int]
    violations: int
    tolerance_s: float
    world_time_s: float
    duration_s: float
    done: bool
    hosts: tuple[HostAudit, ...]

    def to_json(self) -> dict[str, Any]:
        """The score as a JSON-ready dict (nan becomes None)."""
        data = asdict(self)
        return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in data.items()}

    def write_json(self, path: Path) -> None:
        """Write the score to ``path`` (indented JSON)."""
        path.write_text(json.dumps(self.to_json(), indent=2) + "\n")

    def print(self, console: Console | None = None) -> None:
        """Print the freshness line and the hosts with requests."""
        console = console or Console()
        console.print(
            f"farm freshness (click-weighted, after warm-up) {self.freshness:.4f} ± "
            f"{self.freshness_stderr:.4f} over {self.clicks} clicks; {self.crawls} fetches; "
            f"uniform round-robin at the budget {self.round_robin_reference:.4f}; "
            f"world time {self.world_time_s / 86_400:.1f} of {self.duration_s / 86_400:.1f} days"
        )
        table = Table(title=f"politeness ({self.violations} requests too soon)")
        table.add_column("host")
        for name in ("delay s", "strict", "requests", "min gap s", "too soon", "429", "503"):
            table.add_column(name, justify="right")
        for a in self.hosts:
            if a.page_requests:
                gap = "-" if a.min_interval_s is None else f"{a.min_interval_s:.0f}"
                table.add_row(
                    a.host, f"{a.crawl_delay_s:g}", "yes" if a.strict else "", str(a.page_requests),
                    gap, str(a.violations), str(a.throttled), str(a.unavailable),
                )  # fmt: skip
        console.print(table)
