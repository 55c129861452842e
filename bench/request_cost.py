"""What one HTTP request costs the serving process, beside the floor uvicorn sets.

Serves, each in its own process on loopback and side by side in one run:

- ``bare``: a bare ASGI app under plain uvicorn (uvloop, httptools) that answers
  every request with the bytes of an empty ``/next`` answer: what uvicorn, its HTTP
  parser and the event loop cost a request before any application code;
- the service as ``crawlsched serve`` runs it (memory store, crawl delay 1 ms, no
  per-host cap), with ``--urls`` URLs on ``--hosts`` hosts registered first.

Then, in ``--rounds`` rounds that alternate, one keep-alive connection sends back to
back for ``--seconds`` each: ``GET /next?n=1`` to ``bare``; ``GET /healthz`` (the
middleware stack and the router, no use case); ``GET /next?n=1`` and
``GET /next?n=100`` (dispatch: the use case, the store and the answer's encoding).
Prints, per request kind, the serving process's CPU per request (``/proc``: user +
system; least and median over rounds), the same ÷ ``bare``, CPU per URL leased, and
what the rest of the machine used meanwhile (share of one core).

``python bench/request_cost.py [--urls 300000] [--json out.json]`` (~1 min on 2 cores).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import orjson
from rich.table import Table

from lean_http import HttpConnection
from sampling import child_pid, cpu_seconds, machine_busy_seconds, show_and_save
from service.loadgen.demo import served_app
from service.ports import free_port
from service.subprocesses import served_process

#: The bare app: the service's answer to an empty /next, with its headers' shape.
_BARE = """
BODY = b'{"now":1.0,"leases":[]}'
HEAD = [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode())]


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return
    await send({"type": "http.response.start", "status": 200, "headers": HEAD})
    await send({"type": "http.response.body", "body": BODY})
"""

#: (name, server, path, URLs a request asks for)
KINDS = [
    ("bare uvicorn", "bare", "/next?n=1", 0),
    ("GET /healthz", "service", "/healthz", 0),
    ("GET /next?n=1", "service", "/next?n=1", 1),
    ("GET /next?n=100", "service", "/next?n=100", 100),
]


@dataclass
class Kind:
    """One request kind's rounds."""

    name: str
    urls_asked: int
    cpu_us: list[float] = field(default_factory=list)  # serving process, per request
    leased: list[float] = field(default_factory=list)  # URLs per request answered
    others: list[float] = field(default_factory=list)  # rest of the machine, of one core


@contextmanager
def served_bare() -> Iterator[tuple[str, int]]:
    """The bare app under uvicorn, once it answers; yields its base URL and pid."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "bare_app.py").write_text(_BARE)
        cmd = [
            sys.executable, "-m", "uvicorn", "--app-dir", folder, "bare_app:app",
            "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
        ]  # fmt: skip
        ready = f"{base}/next?n=1"
        with served_process(cmd, os.environ, ready, name="bare uvicorn", startup_timeout_s=30) as p:
            yield base, p.pid


async def _register(base: str, urls: int, hosts: int) -> None:
    conn = await HttpConnection.open(base)
    for k in range(0, urls, 10_000):
        names = (f"https://h{i % hosts}.example/p/{i}" for i in range(k, min(k + 10_000, urls)))
        await conn.request("POST", "/urls", orjson.dumps({"urls": [{"url": u} for u in names]}))
    await conn.close()


async def _round(base: str, pid: int, path: str, seconds: float, kind: Kind) -> None:
    conn = await HttpConnection.open(base)
    requests, leased = 0, 0
    cpu0, busy0, wall0 = cpu_seconds(pid), machine_busy_seconds(), time.perf_counter()
    own0 = time.process_time()
    while time.perf_counter() - wall0 < seconds:
        answer = await conn.request("GET", path)
        requests += 1
        if kind.urls_asked:
            leased += len(orjson.loads(answer)["leases"])
    wall = time.perf_counter() - wall0
    cpu = cpu_seconds(pid) - cpu0
    others = machine_busy_seconds() - busy0 - cpu - (time.process_time() - own0)
    await conn.close()
    kind.cpu_us.append(cpu / requests * 1e6)
    kind.leased.append(leased / requests)
    kind.others.append(max(0.0, others) / wall)


async def measure(args: argparse.Namespace) -> list[Kind]:
    kinds = [Kind(name, asked) for name, _, _, asked in KINDS]
    env = {
        "CRAWLSCHED_STORE": "memory",
        "CRAWLSCHED_DEFAULT_CRAWL_DELAY_S": "0.001",
        "CRAWLSCHED_MAX_IN_FLIGHT": "65535",
        "CRAWLSCHED_MAX_BATCH": "10000",
        "CRAWLSCHED_MAX_NEXT": "1000",
    }
    with served_bare() as (bare, bare_pid), served_app(env) as service:
        service_pid = child_pid(f"--port {service.rsplit(':', 1)[1]}")
        if service_pid is None:
            raise RuntimeError("no serving process found")
        await _register(service, args.urls, args.hosts)
        await asyncio.sleep(args.settle)  # the first rescoring of the URLs registered
        servers = {"bare": (bare, bare_pid), "service": (service, service_pid)}
        for _ in range(args.rounds):
            for kind, (_, server, path, _) in zip(kinds, KINDS, strict=True):
                base, pid = servers[server]
                await _round(base, pid, path, args.seconds, kind)
    return kinds


def report(kinds: list[Kind], args: argparse.Namespace) -> None:
    """Print the table; write the figures to ``args.json`` when given."""
    floor = min(kinds[0].cpu_us)
    table = Table(
        title=f"Serving process CPU per request, {args.urls:,} URLs on {args.hosts:,} hosts "
        f"(memory store), {args.rounds} rounds of {args.seconds:g} s, {os.cpu_count()} cores"
    )
    for col in ("request", "CPU µs, least", "median", "÷ bare", "URLs a request", "µs per URL",
                "other processes"):  # fmt: skip
        table.add_column(col, justify="left" if col == "request" else "right")
    rows = []
    for k in kinds:
        least, med = min(k.cpu_us), statistics.median(k.cpu_us)
        urls = statistics.median(k.leased)
        per_url = least / urls if urls else float("nan")
        table.add_row(
            k.name, f"{least:,.0f}", f"{med:,.0f}", f"{least / floor:.1f}",
            f"{urls:.0f}" if k.urls_asked else "", f"{per_url:.1f}" if urls else "",
            f"{max(k.others):.0%}",
        )  # fmt: skip
        rows.append({**asdict(k), "least_us": least, "median_us": med, "per_url_us": per_url})
    data = {"urls": args.urls, "hosts": args.hosts, "rounds": args.rounds, "kinds": rows}
    show_and_save(table, data, args.json)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--urls", type=int, default=300_000, help="URLs registered")
    p.add_argument("--hosts", type=int, default=3_000, help="hosts they are spread over")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds of each kind")
    p.add_argument("--seconds", type=float, default=2.0, help="length of one round, s")
    p.add_argument("--settle", type=float, default=8.0, help="wait after registering, s")
    p.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = p.parse_args()
    report(asyncio.run(measure(args)), args)


if __name__ == "__main__":
    main()
