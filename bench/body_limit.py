"""Time to refuse an oversized request body (413) over a real socket.

    python bench/body_limit.py [--megabytes 20] [--repeat 5]

Serves the app as ``crawlsched serve`` would (uvicorn in its own process, memory
store, default ``CRAWLSCHED_MAX_BODY_BYTES`` of 8 MiB) and POSTs a JSON body of
``--megabytes`` MB of URLs to ``/urls``, ``--repeat`` times each:

- with ``Content-Length`` (refused before a byte of the body is read);
- chunked, without a length (refused once the limit is passed);

then asks ``/healthz``.  Prints the time from the start of the request to the 413,
best / median / worst, and the ``/healthz`` time after the last refusal.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Iterator

import httpx
from rich.console import Console
from rich.table import Table

from service.loadgen.demo import served_app

_CHUNK = 1 << 16


def _body(megabytes: float) -> bytes:
    n = int(megabytes * 1e6 / 40) + 1  # 40-42 bytes an item
    return json.dumps(
        {"urls": [{"url": f"https://h{i % 997}.example/p/{i}"} for i in range(n)]}
    ).encode()


def _chunks(body: bytes) -> Iterator[bytes]:
    for i in range(0, len(body), _CHUNK):
        yield body[i : i + _CHUNK]


def _refusal_s(client: httpx.Client, body: bytes, chunked: bool) -> float:
    content = _chunks(body) if chunked else body
    started = time.perf_counter()
    answer = client.post("/urls", content=content, headers={"content-type": "application/json"})
    took = time.perf_counter() - started
    if answer.status_code != 413:
        raise RuntimeError(f"expected 413, got {answer.status_code}: {answer.text[:200]}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=float, default=20.0)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    body = _body(args.megabytes)
    table = Table(title=f"413 for a {len(body) / 1e6:.1f} MB body (limit 8 MiB)")
    for column in ["body sent", "best ms", "median ms", "worst ms"]:
        table.add_column(column, justify="right")
    with served_app({"CRAWLSCHED_STORE": "memory"}) as base_url:
        with httpx.Client(base_url=base_url, timeout=60.0) as client:
            for chunked in (False, True):
                times = [_refusal_s(client, body, chunked) for _ in range(args.repeat)]
                table.add_row(
                    "chunked" if chunked else "with Content-Length",
                    *(f"{1e3 * t:.1f}" for t in (min(times), statistics.median(times), max(times))),
                )
            started = time.perf_counter()
            client.get("/healthz").raise_for_status()
            health_ms = 1e3 * (time.perf_counter() - started)
    console = Console()
    console.print(table)
    console.print(f"/healthz right after: {health_ms:.1f} ms")


if __name__ == "__main__":
    main()
