"""Servers the tools start as subprocesses: run one until a URL answers, stop it after."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence

import httpx

__all__ = ["served_process"]


@contextlib.contextmanager
def served_process(
    cmd: Sequence[str],
    env: Mapping[str, str],
    ready_url: str,
    *,
    name: str,
    startup_timeout_s: float,
) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``cmd`` with ``env``, wait until ``ready_url`` answers 200, yield the
    process; on exit terminate it (killed if it has not stopped after 10 s).

    Raises
    ------
    RuntimeError
        If the process exits first, or ``ready_url`` does not answer within
        ``startup_timeout_s`` wall seconds (the message names the server as ``name``).
    """
    proc = subprocess.Popen(list(cmd), env=dict(env))
    try:
        deadline = time.monotonic() + startup_timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with code {proc.returncode}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(ready_url, timeout=1.0).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not start in time")
            time.sleep(0.1)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
