"""World specs and event traces on disk.

- A *spec* (JSON or TOML, see ``default_world.toml``) describes a simulated
  web by its distributions; :func:`load_spec` reads one.
- A *trace* (JSON lines) is one concrete world: a ``meta`` line (budget,
  duration, warm-up, hosts and their crawl delays), one ``url`` line per URL
  with its parameters (rates per second), then its events in time order:
  ``{"time": s, "kind": "change" | "click" | "signal", "url": ...}``.  Users
  replay their own logs by writing them in this format.
"""

from __future__ import annotations

import json
import math
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from scheduler_core.errors import ParameterError
from scheduler_core.params import UrlParams
from scheduler_core.sim import CHANGE, CLICK, SIGNAL, EventLog, World, WorldSpec

__all__ = ["TraceError", "default_spec_toml", "load_spec", "read_trace", "write_trace"]

_KIND_NAMES = {CHANGE: "change", CLICK: "click", SIGNAL: "signal"}
_KIND_CODES = {name: code for code, name in _KIND_NAMES.items()}


class TraceError(ValueError):
    """A trace or spec file that cannot be read; the message names file and line."""


def default_spec_toml() -> str:
    """The default world spec, commented (``service/loadgen/default_world.toml``)."""
    return resources.files("service.loadgen").joinpath("default_world.toml").read_text("utf-8")


def load_spec(path: Path) -> WorldSpec:
    """Read a world spec from a ``.toml`` or ``.json`` file.

    Raises
    ------
    TraceError
        If the file is missing, not valid TOML/JSON, or describes an invalid
        world (unknown key, bad distribution); the message names the file.
    """
    try:
        text = Path(path).read_text("utf-8")
        if Path(path).suffix.lower() == ".toml":
            data: Any = tomllib.loads(text)
        elif Path(path).suffix.lower() == ".json":
            data = json.loads(text)
        else:
            raise TraceError(f"{path}: a world spec must end in .toml or .json")
        if not isinstance(data, dict):
            raise TraceError(f"{path}: a world spec must be a table/object")
        return WorldSpec.from_mapping(data)
    except (OSError, tomllib.TOMLDecodeError, json.JSONDecodeError, ParameterError) as exc:
        raise TraceError(f"{path}: {exc}") from exc


def write_trace(world: World, path: Path) -> None:
    """Write ``world`` (its URLs, parameters and every event) as a JSON-lines trace."""
    p = world.params
    with Path(path).open("w", encoding="utf-8") as out:
        meta = {
            "kind": "meta",
            "budget_per_s": world.budget_per_s,
            "duration_s": world.duration_s,
            "warmup_s": world.warmup_s,
            "seed": world.seed,
            "hosts": [
                {"host": h, "crawl_delay_s": float(d)}
                for h, d in zip(world.hosts, world.crawl_delay_s, strict=True)
            ],
        }
        out.write(json.dumps(meta) + "\n")
        for i, url in enumerate(world.urls):
            row = {
                "kind": "url",
                "url": url,
                "host": world.hosts[world.host_of[i]],
                "weight": float(p.weight[i]),
                "change_rate": float(p.change_rate[i]),
                "recall": float(p.recall[i]),
                "false_signal_rate": float(p.false_signal_rate[i]),
            }
            out.write(json.dumps(row) + "\n")
        log = world.events()
        for t, k, u in zip(log.time.tolist(), log.kind.tolist(), log.url.tolist(), strict=True):
            out.write(json.dumps({"time": t, "kind": _KIND_NAMES[k], "url": world.urls[u]}) + "\n")


def _number(row: dict[str, Any], key: str, where: str, default: float | None = None) -> float:
    value = row.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise TraceError(f"{where}: `{key}` must be a finite number")
    return float(value)


def read_trace(path: Path) -> World:
    """Rebuild the world of a JSON-lines trace (see the module docstring).

    Raises
    ------
    TraceError
        On a missing meta line, an unknown line kind, a bad field, an event
        naming an unregistered URL, or events out of time order; the message
        names the line.
    """
    meta: dict[str, Any] | None = None
    urls: list[str] = []
    index: dict[str, int] = {}
    host_names: list[str] = []
    host_index: dict[str, int] = {}
    host_of: list[int] = []
    rows: list[tuple[float, float, float, float]] = []
    times: list[float] = []
    kinds: list[int] = []
    event_urls: list[int] = []
    with Path(path).open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            where = f"{path}:{number}"
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TraceError(f"{where}: not JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise TraceError(f"{where}: each line must be a JSON object")
            kind = row.get("kind")
            if kind == "meta":
                meta = row
                for host in row.get("hosts", []):
                    host_index[host["host"]] = len(host_names)
                    host_names.append(host["host"])
            elif kind == "url":
                url = row.get("url")
                if not isinstance(url, str) or url in index:
                    raise TraceError(f"{where}: `url` must be a new URL string")
                host = row.get("host") or url.split("/")[2]
                if host not in host_index:
                    host_index[host] = len(host_names)
                    host_names.append(host)
                index[url] = len(urls)
                urls.append(url)
                host_of.append(host_index[host])
                rows.append(
                    (
                        _number(row, "weight", where),
                        _number(row, "change_rate", where),
                        _number(row, "recall", where, 0.0),
                        _number(row, "false_signal_rate", where, 0.0),
                    )
                )
            elif kind in _KIND_CODES:
                t = _number(row, "time", where)
                if times and t < times[-1]:
                    raise TraceError(f"{where}: events must be in time order")
                if row.get("url") not in index:
                    raise TraceError(f"{where}: event for a URL with no `url` line")
                times.append(t)
                kinds.append(_KIND_CODES[kind])
                event_urls.append(index[row["url"]])
            else:
                raise TraceError(f"{where}: unknown line kind {kind!r}")
    if meta is None:
        raise TraceError(f"{path}: no meta line")
    delays = {h["host"]: float(h.get("crawl_delay_s", 0.0)) for h in meta.get("hosts", [])}
    try:
        arr = np.array(rows, dtype=np.float64).reshape(-1, 4)
        params = UrlParams.create(arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3])
        return World.from_arrays(
            urls=urls,
            hosts=host_names,
            host_of=host_of,
            params=params,
            crawl_delay_s=[delays.get(h, 0.0) for h in host_names],
            budget_per_s=_number(meta, "budget_per_s", f"{path}: meta"),
            duration_s=_number(meta, "duration_s", f"{path}: meta"),
            warmup_s=_number(meta, "warmup_s", f"{path}: meta", 0.0),
            seed=int(meta.get("seed", 0)),
            events=EventLog(
                np.array(times, dtype=np.float64),
                np.array(kinds, dtype=np.int8),
                np.array(event_urls, dtype=np.int64),
            ),
        )
    except ParameterError as exc:
        raise TraceError(f"{path}: {exc}") from exc
