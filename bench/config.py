"""The bench's configuration and its synthetic frontier.

:class:`Config` is the command line; :func:`url_of` and :func:`spec_of` name the URLs the
bench registers (``https://h{h}.example/p/{j}/index.html``, ``--urls`` over ``--hosts``,
host by host, as sitemaps would register them) and their registration bodies.  The
constants here are those of the setup the other modules share.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DAY_S = 86_400.0
#: Crawl delay of every host: politeness never binds at these rates.
CRAWL_DELAY_S = 0.001
#: Leases a host may have out at once: the dispatch phase settles none, and the raw
#: scripts it is compared with cap no host's leases in flight.
MAX_IN_FLIGHT = 65_535
#: Registration batch (the API's default ``max_batch``).
LOAD_BATCH = 10_000
#: Shards of the store (the default of CRAWLSCHED_SHARDS).
SHARDS = 16


@dataclass(frozen=True)
class Config:
    """The command line."""

    urls: int
    hosts: int
    seconds: float
    workers: int
    n: int
    event_batch: int
    load_budget: float
    load_workers: int
    warmup: float
    seed: int
    json_out: Path | None
    profile: Path | None
    store: str = "redis"  # the API's store: "redis" (a private redis-server) or "memory"

    @property
    def per_host(self) -> int:
        """URLs per host (the last host may have fewer)."""
        return max(1, -(-self.urls // self.hosts))


def url_of(i: int, per_host: int) -> str:
    """The ``i``-th URL: host ``i // per_host``, page ``i % per_host``."""
    h, j = divmod(i, per_host)
    return f"https://h{h}.example/p/{j}/index.html"


def spec_of(i: int, per_host: int, rng: random.Random) -> dict[str, Any]:
    """Registration body of the ``i``-th URL: W ~ U(0.01, 2)/day, Δ ~ U(0.01, 1)/day."""
    return {
        "url": url_of(i, per_host),
        "weight": rng.uniform(0.01, 2.0) / DAY_S,
        "change_rate": rng.uniform(0.01, 1.0) / DAY_S,
        "crawl_delay_s": CRAWL_DELAY_S,
    }
