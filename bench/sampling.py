"""What the processes of the machine use while a phase runs.

:class:`Meter` measures one window (a ``with`` block): the CPU the API process, Redis,
this client and the rest of the machine used (share of one core, from ``/proc``),
Redis's own time per ``EVALSHA`` (``INFO commandstats``) and the URLs the API's
background rescorer recomputed meanwhile (``/metrics``).  :func:`used_memory` and
:func:`sample_key_memory` read Redis's memory; :func:`py_spy` records the API process
with ``py-spy`` during a block.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import redis
from rich.console import Console
from rich.table import Table

from config import SHARDS, Config
from service.store.base import shard_of

T = TypeVar("T")


def child_pid(fragment: str) -> int | None:
    """Pid of a child of this process whose command line contains ``fragment``."""
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == me and fragment in cmdline:
            return int(entry)
    return None


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds of process ``pid`` so far (0 when unknown)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rescored_urls(*bases: str | None) -> float:
    """``crawlsched_rescored_urls_total`` (URL thresholds a background rescorer
    recomputed so far) summed over the processes whose metrics are at ``bases``."""
    return metric_sum("crawlsched_rescored_urls_total", *bases)


def metric_sum(name: str, *bases: str | None) -> float:
    """The sample ``name`` (unlabelled) summed over the processes whose metrics are at
    ``bases`` (the API's, a worker's metrics port; None: none); NaN when one lacks it."""
    total = 0.0
    for base in bases:
        if base is None:
            continue
        text = httpx.get(f"{base}/metrics", timeout=30).text
        m = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
        total += float(m.group(1)) if m else float("nan")
    return total


def machine_busy_seconds() -> float:
    """CPU seconds all processes of the machine have used (``/proc/stat``, all cores)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def cpu_and_others(run: Callable[[], T]) -> tuple[T, float, float]:
    """``run()``'s result, the CPU s this process spent in it, and the CPU the rest of
    the machine used meanwhile (share of one core, ``/proc/stat``)."""
    t0, cpu0, all0 = time.perf_counter(), time.process_time(), machine_busy_seconds()
    out = run()
    cpu = time.process_time() - cpu0
    wall = max(time.perf_counter() - t0, 1e-9)
    return out, cpu, (machine_busy_seconds() - all0 - cpu) / wall


def own_and_redis_cpu_s(redis_pid: int) -> float:
    """CPU seconds of this process (threads included) and of the Redis server: what a
    bench subtracts from :func:`machine_busy_seconds` to get the others' load."""
    fields = Path(f"/proc/{redis_pid}/stat").read_text().rsplit(")", 1)[1].split()
    return time.process_time() + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rounds_summary(samples: dict[str, list[float]]) -> dict[str, dict[str, Any]]:
    """Per name: the least, the median and every round's figure (a bench's rounds
    alternate their variants; the least is the one least disturbed by the machine)."""
    return {
        k: {"min": min(v), "median": statistics.median(v), "all": v} for k, v in samples.items()
    }


@dataclass
class Meter:
    """CPU shares (of one core) of the API, its worker (Redis store), Redis and this
    client over one window, Redis's own ``EVALSHA`` time (``INFO commandstats``) and the
    URLs the background rescorer (the API's, or the worker's) recomputed meanwhile."""

    api_pid: int | None
    redis_pid: int | None
    admin: redis.Redis
    base: str | None = None
    worker_pid: int | None = None
    worker_base: str | None = None  # the worker's metrics port
    wall: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)
    evalsha_calls: int = 0
    evalsha_usec: float = 0.0
    rescored: float = 0.0

    @contextlib.contextmanager
    def window(self) -> Iterator[Meter]:
        """Measure the ``with`` body."""
        rescored0 = rescored_urls(self.base, self.worker_base)
        self.admin.config_resetstat()
        t0, me0 = time.perf_counter(), time.process_time()
        api0, red0 = cpu_seconds(self.api_pid), cpu_seconds(self.redis_pid)
        worker0 = cpu_seconds(self.worker_pid) if self.worker_pid else 0.0
        all0 = machine_busy_seconds()
        yield self
        self.wall = time.perf_counter() - t0
        self.cpu = {
            "api": (cpu_seconds(self.api_pid) - api0) / self.wall,
            "redis": (cpu_seconds(self.redis_pid) - red0) / self.wall,
            "bench": (time.process_time() - me0) / self.wall,
        }
        if self.worker_pid:
            self.cpu["worker"] = (cpu_seconds(self.worker_pid) - worker0) / self.wall
        self.cpu["others"] = (machine_busy_seconds() - all0) / self.wall - sum(self.cpu.values())
        stats = self.admin.info("commandstats")
        ev = stats.get("cmdstat_evalsha", {})
        self.evalsha_calls, self.evalsha_usec = int(ev.get("calls", 0)), float(ev.get("usec", 0))
        self.rescored = rescored_urls(self.base, self.worker_base) - rescored0

    def note(self, units: float = 0.0, unit: str = "") -> str:
        """CPU shares, Redis time and rescoring, in words; with ``units`` (URLs, events)
        done in the window, the API's CPU and Redis's script time per ``unit`` too."""
        c = self.cpu
        api = f"api {c['api']:.0%}, " if self.api_pid is not None else ""
        worker = f"worker {c['worker']:.0%}, " if "worker" in c else ""
        text = (
            f"CPU {api}{worker}redis {c['redis']:.0%}, client {c['bench']:.0%}, "
            f"other processes {max(0.0, c['others']):.0%}"
        )
        if self.evalsha_calls:
            per = self.evalsha_usec / self.evalsha_calls
            busy = self.evalsha_usec / 1e6 / self.wall
            text += f"; EVALSHA {per:,.0f} µs/call, {busy:.0%} of wall"
        if units > 0 and self.api_pid is not None:
            api_us = c["api"] * self.wall / units * 1e6
            text += f"; per {unit}: API CPU {api_us:,.0f} µs, Redis scripts "
            text += f"{self.evalsha_usec / units:,.0f} µs"
        elif units > 0:  # Redis alone (raw Redis's loops)
            redis_us = c["redis"] * self.wall / units * 1e6
            text += f"; per {unit}: Redis CPU {redis_us:,.1f} µs"
            if self.evalsha_calls:
                text += f", its scripts {self.evalsha_usec / units:,.1f} µs"
        if self.rescored > 0:
            text += f"; background rescoring: {self.rescored:,.0f} URLs"
        return text

    def as_dict(self) -> dict[str, Any]:
        """For the JSON report."""
        return {
            "wall_s": self.wall,
            "cpu_share": self.cpu,
            "evalsha_calls": self.evalsha_calls,
            "evalsha_usec": self.evalsha_usec,
            "rescored_urls": self.rescored,
        }


def used_memory(admin: redis.Redis) -> int:
    """``used_memory`` of ``INFO memory``, bytes."""
    return int(admin.info("memory")["used_memory"])


def sample_key_memory(admin: redis.Redis, cfg: Config) -> dict[str, float | str]:
    """``MEMORY USAGE`` per URL of one full host's keys (queue zset, record hash)."""
    host = "h0.example"
    tag = f"cs:{{s{shard_of(host, SHARDS)}}}:"
    out: dict[str, float | str] = {}
    for name in ("queue", "urls"):
        usage = admin.memory_usage(f"{tag}{name}:{host}", samples=0) or 0
        out[name] = usage / cfg.per_host
        out[f"{name}_encoding"] = str(admin.object("encoding", f"{tag}{name}:{host}"))
    return out


@contextlib.contextmanager
def py_spy(pid: int | None, out: Path | None, name: str, seconds: float) -> Iterator[None]:
    """Record ``pid`` with py-spy (raw collapsed stacks to ``out/name.txt``) during the body."""
    exe = shutil.which("py-spy")
    if out is None or pid is None or exe is None:
        yield
        return
    out.mkdir(parents=True, exist_ok=True)
    cmd = [
        exe, "record", "--pid", str(pid), "--rate", "250", "--format", "raw", "--nonblocking",
        "--duration", str(max(1, round(seconds))), "--output", str(out / f"{name}.txt"),
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=15)
        if proc.poll() is None:
            proc.terminate()
            proc.wait()


def show_and_save(table: Table, data: Any, path: Path | None) -> None:
    """Print ``table``; write ``data`` to ``path`` as JSON when one is given."""
    Console().print(table)
    if path is not None:
        path.write_text(json.dumps(data, indent=1))
