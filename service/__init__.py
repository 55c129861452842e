"""crawlsched service: HTTP API, storage, time and metrics around :mod:`scheduler_core`."""

__version__ = "0.1.0"
