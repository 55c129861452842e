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

__all__ = ["free_port", "served_app", "served_worker"]


@contextlib.contextmanager
def served_worker(
    env: dict[str, str], *, startup_timeout_s: float = 30.0, log_level: str = "warning"
) -> Iterator[str]:
    """Run ``crawlsched worker`` with ``env`` added (a Redis ``CRAWLSCHED_STORE``); yield
    the base URL of its metrics port once that answers.

    Raises
    ------
    RuntimeError
        If the worker exits, or its metrics port does not answer within
        ``startup_timeout_s``.
    """
    port = free_port()
    cmd = [
        sys.executable, "-m", _SERVICE, "worker", "--metrics-port", str(port),
        "--log-level", log_level,
    ]  # fmt: skip
    base_url = f"http://127.0.0.1:{port}"
    with served_process(
        cmd, {**os.environ, **env}, f"{base_url}/metrics", name="the worker",
        startup_timeout_s=startup_timeout_s,
    ):  # fmt: skip
        yield base_url


@contextlib.contextmanager
def served_app(
    env: dict[str, str],
    *,
    port: int | None = None,
    startup_timeout_s: float = 30.0,
    log_level: str = "warning",
    worker: bool = True,
) -> Iterator[str]:
    """Run ``crawlsched serve`` (loopback, logs from ``log_level`` up) with ``env``
    added; yield its base URL.  With a Redis store in ``env`` and ``worker``, a
    ``crawlsched worker`` runs beside it (:func:`served_worker`), as a deployment's
    does; without one, ``/healthz`` answers 503 and this waits for ``/metrics``.

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
    redis = environment.get("CRAWLSCHED_STORE", "memory") != "memory"
    with contextlib.ExitStack() as stack:
        if redis and worker:
            stack.enter_context(
                served_worker(env, startup_timeout_s=startup_timeout_s, log_level=log_level)
            )
        ready = f"{base_url}/metrics" if redis and not worker else f"{base_url}/healthz"
        stack.enter_context(
            served_process(
                cmd, environment, ready, name="the service", startup_timeout_s=startup_timeout_s
            )
        )
        yield base_url
