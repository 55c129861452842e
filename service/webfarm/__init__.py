"""A simulated web over real HTTP (``crawlsched webfarm``).

``farm`` serves a world's pages on a clock and keeps its fetch log, ``plan`` draws
which hosts enforce their crawl delay and when hosts are down, ``pages`` renders
pages, robots.txt and sitemaps, ``score`` is what the farm measures, ``app`` the
ASGI app, ``feed`` posts the world's clicks and signals to a crawl scheduler,
``baseline`` is a round-robin crawler to compare with, ``server`` runs a farm.
"""

from service.webfarm.app import farm_app
from service.webfarm.farm import Answer, Farm
from service.webfarm.plan import FarmOptions, HostPlan, Outage, plan_hosts
from service.webfarm.score import FarmScore, HostAudit

__all__ = [
    "Answer",
    "Farm",
    "FarmOptions",
    "FarmScore",
    "HostAudit",
    "HostPlan",
    "Outage",
    "farm_app",
    "plan_hosts",
]
