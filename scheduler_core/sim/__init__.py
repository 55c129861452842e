"""Simulated webs for the load generator and the experiments.

``spec`` describes a world (distributions, budget, duration), ``world`` draws
it and its events (changes, clicks, signals), ``evaluate`` scores a crawl
schedule against it.
"""

from scheduler_core.sim.dist import Dist
from scheduler_core.sim.evaluate import (
    FreshnessReport,
    fresh_clicks_by_url,
    freshness_over_time,
    round_robin_freshness,
    round_robin_schedule,
    schedule_freshness,
)
from scheduler_core.sim.outages import HostOutages
from scheduler_core.sim.spec import SignalSource, WorldSpec
from scheduler_core.sim.world import CHANGE, CLICK, DAY_S, SIGNAL, EventLog, World

__all__ = [
    "CHANGE",
    "CLICK",
    "DAY_S",
    "SIGNAL",
    "SignalSource",
    "Dist",
    "EventLog",
    "FreshnessReport",
    "HostOutages",
    "World",
    "WorldSpec",
    "fresh_clicks_by_url",
    "freshness_over_time",
    "round_robin_freshness",
    "round_robin_schedule",
    "schedule_freshness",
]
