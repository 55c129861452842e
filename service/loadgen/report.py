"""The load generator's report: the freshness table and its JSON form."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from service.humanize import duration

__all__ = ["BEHIND_SHARE", "LoadgenReport"]

#: The run is *behind* the replayed clock when a page would change during the average
#: lag with more than this probability (lag × the click-weighted change rate), or when
#: the workers owe more than this share of the budget.  A healthy run lags by about a
#: tick and a round trip: a probability of about 0.01 on the default world.
BEHIND_SHARE = 0.05


@dataclass(frozen=True)
class LoadgenReport:
    """What one load-generator run measured (stable JSON keys).

    Freshness figures are fractions in [0, 1]; ``freshness`` is click-weighted
    (the share of clicks after the warm-up that found a fresh copy).
    ``client_retries``, ``client_unavailable`` and ``client_transport_errors``
    count the client's retried requests, 503 answers and transport errors during
    the run (:class:`service.client.ClientStats`): non-zero after an outage.
    ``lag_max_s`` and ``lag_mean_s`` say how late, in simulated seconds, events
    reached the service and workers' rounds (/next, fetch, result) completed;
    ``crawls_behind`` the crawls the workers were due to ask for but had not by the
    end; ``clock_rate`` the simulated seconds per wall second; ``change_rate_per_s``
    the world's click-weighted mean change rate Σ W·Δ / Σ W (1/s).
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
    lag_max_s: float = 0.0
    lag_mean_s: float = 0.0
    crawls_behind: float = 0.0
    clock_rate: float = 0.0
    change_rate_per_s: float = 0.0
    host_limited: bool = False
    binding_hosts: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def best_possible(self) -> float:
        """The best freshness this budget allows: the continuous optimum with signals
        when the world has them (and it was computed), else BASELINE."""
        if self.signal_optimum_accuracy is not None:
            return self.signal_optimum_accuracy
        return self.baseline_accuracy

    @property
    def changes_during_lag(self) -> float:
        """The chance a clicked page changes during the average lag, 1 − e^{−Δ̄·lag}."""
        return -math.expm1(-self.change_rate_per_s * self.lag_mean_s)

    @property
    def behind(self) -> bool:
        """The service could not keep up with the replayed clock (:data:`BEHIND_SHARE`)."""
        budget = self.budget_per_s * self.simulated_seconds
        return self.changes_during_lag > BEHIND_SHARE or self.crawls_behind > BEHIND_SHARE * budget

    def lag_sentence(self) -> str:
        """By how much the service fell behind the replayed clock, in words."""
        rate = self.clock_rate or 1.0
        text = (
            f"events reached the service and workers' rounds completed "
            f"{duration(self.lag_mean_s)} late on average, up to {duration(self.lag_max_s)} "
            f"(simulated; {self.lag_mean_s / rate:.3f} and {self.lag_max_s / rate:.3f} wall s), "
            f"time enough for {self.changes_during_lag:.0%} of clicked pages to change"
        )
        if self.crawls_behind >= 1.0:
            budget = self.budget_per_s * self.simulated_seconds
            text += (
                f"; the workers were {self.crawls_behind:.0f} crawls "
                f"({self.crawls_behind / budget:.1%} of the budget) behind at the end"
            )
        return text

    def sentences(self) -> list[str]:
        """What the figures mean, in words."""
        fresh = (
            f"{self.freshness:.2f} of clicks found a fresh copy; the best possible with this "
            f"budget is {self.best_possible:.2f}; crawling in turn gives "
            f"{self.round_robin_freshness:.2f}."
        )
        out = [fresh]
        if self.signal_optimum_accuracy is not None:
            out.append(
                f"Without change-indicating signals the best possible (BASELINE) is "
                f"{self.baseline_accuracy:.2f}: the signals are worth "
                f"{self.signal_optimum_accuracy - self.baseline_accuracy:+.2f}."
            )
        if self.behind:
            out.append(
                f"The service fell behind the replayed clock ({self.lag_sentence()}): "
                "this machine was too busy, and the freshness above is lower than the "
                "service achieves when it keeps up; replay over more wall seconds."
            )
        return out

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
            f" ± {self.freshness_stderr:.4f}" + (" (behind: see below)" if self.behind else ""),
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
        for sentence in self.sentences():
            console.print(
                sentence, style="bold yellow" if sentence.startswith("The service fell") else None
            )
        if not self.behind and self.clock_rate:
            console.print(f"the service kept up with the replayed clock: {self.lag_sentence()}")
        if self.client_retries:
            console.print(
                f"the service was unavailable at times: {self.client_retries} requests "
                f"retried ({self.client_unavailable} answers 503, "
                f"{self.client_transport_errors} transport errors)"
            )
