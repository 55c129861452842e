"""The load generator's report: the freshness table and its JSON form."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

__all__ = ["LoadgenReport"]


@dataclass(frozen=True)
class LoadgenReport:
    """What one load-generator run measured (stable JSON keys).

    Freshness figures are fractions in [0, 1]; ``freshness`` is click-weighted
    (the share of clicks after the warm-up that found a fresh copy).
    ``client_retries``, ``client_unavailable`` and ``client_transport_errors``
    count the client's retried requests, 503 answers and transport errors during
    the run (:class:`service.client.ClientStats`): non-zero after an outage.
    ``baseline_accuracy``, ``signal_optimum_accuracy`` and ``lambda0_baseline`` are
    those of the optimum under the hosts' crawl delays when ``host_limited``
    (``binding_hosts`` of them bind, :mod:`service.loadgen.yardstick`), else those
    without host limits (which then change nothing).
    """

    freshness: float
    freshness_stderr: float
    clicks: int
    freshness_time_weighted: float
    baseline_accuracy: float
    round_robin_freshness: float
    signal_optimum_accuracy: float | None
    dispatch_per_s: float
    events_per_s: float
    urls: int
    hosts: int
    simulated_seconds: float
    wall_seconds: float
    crawls: int
    budget_per_s: float
    crawl_rate_per_s: float
    lambda0_online: float | None
    lambda0_baseline: float
    signals: bool
    seed: int
    params: str = "learned"
    client_retries: int = 0
    client_unavailable: int = 0
    client_transport_errors: int = 0
    host_limited: bool = False
    binding_hosts: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON-ready dict."""
        return asdict(self)

    def write_json(self, path: Path) -> None:
        """Write the report to ``path`` (indented JSON)."""
        path.write_text(json.dumps(self.to_json(), indent=2) + "\n")

    def print(self, console: Console | None = None) -> None:
        """Print the freshness table."""
        console = console or Console()
        table = Table(title="crawlsched freshness (click-weighted, after warm-up)")
        table.add_column("policy")
        table.add_column("freshness", justify="right")
        table.add_column("vs BASELINE", justify="right")
        base = self.baseline_accuracy

        def row(name: str, value: float, note: str = "") -> None:
            table.add_row(name, f"{value:.4f}{note}", f"{value / base:.3f}" if base else "-")

        row(
            f"crawlsched over HTTP ({self.params} parameters)",
            self.freshness,
            f" ± {self.freshness_stderr:.4f}",
        )
        row("  same run, time-weighted", self.freshness_time_weighted)
        limits = ", host-limited" if self.host_limited else ""
        row(f"BASELINE (continuous optimum, no signals{limits})", base)
        if self.signal_optimum_accuracy is not None:
            row(f"continuous optimum with signals{limits}", self.signal_optimum_accuracy)
        row("uniform round-robin", self.round_robin_freshness)
        console.print(table)
        if self.host_limited:
            console.print(
                f"BASELINE and the optimum shown are host-limited: {self.binding_hosts} "
                "host(s) bind at the crawl delays the service enforces"
            )
        else:
            console.print(
                "BASELINE and the optimum shown have no host limits: no host's crawl delay binds"
            )
        console.print(
            f"{self.urls} URLs on {self.hosts} hosts, {self.simulated_seconds / 86400:.0f} "
            f"simulated days in {self.wall_seconds:.1f} s; {self.crawls} crawls "
            f"({self.crawl_rate_per_s / self.budget_per_s:.3f} of the budget), "
            f"{self.clicks} clicks measured; {self.dispatch_per_s:.0f} dispatches/s, "
            f"{self.events_per_s:.0f} events/s; signals {'on' if self.signals else 'off'}; "
            f"λ₀ online {self.lambda0_online or float('nan'):.4g} vs "
            f"BASELINE{limits} {self.lambda0_baseline:.4g}"
        )
        if self.client_retries:
            console.print(
                f"the service was unavailable at times: {self.client_retries} requests "
                f"retried ({self.client_unavailable} answers 503, "
                f"{self.client_transport_errors} transport errors)"
            )
