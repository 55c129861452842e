"""Serve the app in a subprocess on an accelerated clock and run the load generator at it."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

from service.ports import free_port
from service.subprocesses import served_process

#: The service package as installed (``service`` in the repository; the wheel ships it
#: under another name, docs/operations.md "Packaging"), run with ``python -m``.
_SERVICE = __name__.removesuffix(".loadgen.demo")

__all__ = ["free_port", "served_app"]


@contextlib.contextmanager
def served_app(
    env: dict[str, str],
    *,
    port: int | None = None,
    startup_timeout_s: float = 30.0,
    log_level: str = "warning",
) -> Iterator[str]:
    """Run ``crawlsched serve`` (loopback, logs from ``log_level`` up) with ``env``
    added; yield its base URL.

    Raises
    ------
    RuntimeError
        If the service does not answer ``/healthz`` within ``startup_timeout_s``.
    """
    port = port or free_port()
    base_url = f"http://127.0.0.1:{port}"
    cmd = [
        sys.executable, "-m", _SERVICE, "serve",
        "--host", "127.0.0.1", "--port", str(port), "--log-level", log_level,
    ]  # fmt: skip
    environment = {**os.environ, **env}
    with served_process(
        cmd, environment, f"{base_url}/healthz", name="the service",
        startup_timeout_s=startup_timeout_s,
    ):  # fmt: skip
        yield base_url
