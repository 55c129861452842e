"""Serve the app in a subprocess on an accelerated clock and run the load generator at it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx

from service.ports import free_port

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
        sys.executable, "-m", "service", "serve",
        "--host", "127.0.0.1", "--port", str(port), "--log-level", log_level,
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, env={**os.environ, **env})
    try:
        deadline = time.monotonic() + startup_timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the service exited with code {proc.returncode}")
            try:
                if httpx.get(f"{base_url}/healthz", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the service did not become healthy in time")
            time.sleep(0.1)
        yield base_url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
