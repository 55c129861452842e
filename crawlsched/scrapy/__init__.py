"""Scrapy on crawlsched: ``SCHEDULER = "crawlsched.scrapy.Scheduler"``.

Needs ``pip install crawlsched[scrapy]`` (Scrapy ≥ 2.18, with its default asyncio
reactor).  See :mod:`crawlsched.scrapy.scheduler` for the settings and what goes
where.
"""

from crawlsched.scrapy.changes import ChangeDetector, ServiceClock
from crawlsched.scrapy.dupefilter import DupeFilter
from crawlsched.scrapy.politeness import HostDelays
from crawlsched.scrapy.scheduler import Scheduler
from crawlsched.scrapy.templates import LEASE_META, REGISTRATION_META, RequestTemplates

__all__ = [
    "LEASE_META",
    "REGISTRATION_META",
    "ChangeDetector",
    "DupeFilter",
    "HostDelays",
    "RequestTemplates",
    "Scheduler",
    "ServiceClock",
]
