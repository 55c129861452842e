"""World specs and event traces on disk.

- A *spec* (JSON or TOML, see ``default_world.toml``) describes a simulated
  web by its distributions; :func:`load_spec` reads one, or a *preset* by name
  (:data:`PRESETS`: ``default``, the paper's world, and ``web``, a heavy-tailed
  web-like one, ``web_world.toml``).
- A *trace* (JSON lines) is one concrete world, replayed exactly.  Line 1 is
  the meta object::

      {"kind": "meta", "budget_per_s": R, "duration_s": D, "warmup_s": W,
       "seed": 0, "hosts": [{"host": "a.example", "crawl_delay_s": 60.0}, ...]}

  then one line per URL (rates per second; ``host`` defaults to the URL's
  network location, ``recall`` and ``false_signal_rate`` to 0)::

      {"kind": "url", "url": "https://a.example/x", "host": "a.example",
       "weight": 1e-5, "change_rate": 1e-6, "recall": 0.5, "false_signal_rate": 0.0}

  then the events in time order, times in [0, D) s::

      {"time": 12.5, "kind": "change" | "click" | "signal", "url": "https://a.example/x"}

  Users replay their own logs by writing them in this format.
"""

from __future__ import annotations

import json
import math
import tomllib
from array import array
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from scheduler_core.errors import ParameterError
from scheduler_core.params import UrlParams
from scheduler_core.sim import CHANGE, CLICK, SIGNAL, EventLog, World, WorldSpec

__all__ = [
    "PRESETS",
    "TraceError",
    "default_spec_toml",
    "load_spec",
    "preset_spec",
    "preset_toml",
    "read_trace",
    "write_trace",
]

#: World presets by name: the commented spec file of each (``service/loadgen``).
PRESETS = {"default": "default_world.toml", "web": "web_world.toml"}

_KIND_NAMES = {CHANGE: "change", CLICK: "click", SIGNAL: "signal"}
_KIND_CODES = {name: code for code, name in _KIND_NAMES.items()}
_META_KEYS = frozenset({"kind", "budget_per_s", "duration_s", "warmup_s", "seed", "hosts"})
_HOST_KEYS = frozenset({"host", "crawl_delay_s"})
_URL_KEYS = frozenset(
    {"kind", "url", "host", "weight", "change_rate", "recall", "false_signal_rate"}
)
_EVENT_KEYS = frozenset({"kind", "time", "url"})


class TraceError(ValueError):
    """A trace or spec file that cannot be read; the message names the file (and line)."""


def default_spec_toml() -> str:
    """The default world spec, every field commented (``service/loadgen/default_world.toml``)."""
    return preset_toml("default")


def preset_toml(name: str) -> str:
    """The spec file of preset ``name`` (one of :data:`PRESETS`), with its comments.

    Raises
    ------
    ParameterError
        On an unknown name (the known ones are named).
    """
    if name not in PRESETS:
        raise ParameterError(f"unknown world preset {name!r}; known: {', '.join(PRESETS)}")
    folder = resources.files(__package__ or "service.loadgen")  # also where a wheel puts it
    return folder.joinpath(PRESETS[name]).read_text("utf-8")


def preset_spec(name: str) -> WorldSpec:
    """The :class:`WorldSpec` of preset ``name``.

    Raises
    ------
    ParameterError
        On an unknown name.
    """
    return WorldSpec.from_mapping(tomllib.loads(preset_toml(name)))


def load_spec(path: Path | str) -> WorldSpec:
    """Read a world spec from a ``.toml`` or ``.json`` file, or a preset by name.

    A bare name of :data:`PRESETS` (``web``) with no such file is that preset.

    Raises
    ------
    TraceError
        If the suffix is neither, the file is missing or not valid TOML/JSON,
        or it describes an invalid world (unknown key, bad distribution); the
        message names the file and the problem.
    """
    path = Path(path)
    if str(path) in PRESETS and not path.exists():
        return preset_spec(str(path))
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".json"):
        raise TraceError(
            f"{path}: a world spec must end in .toml or .json (or name a preset: "
            f"{', '.join(PRESETS)})"
        )
    try:
        text = path.read_text("utf-8")
        data: Any = tomllib.loads(text) if suffix == ".toml" else json.loads(text)
        if not isinstance(data, dict):
            raise TraceError(f"{path}: a world spec must be a table/object")
        return WorldSpec.from_mapping(data)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise TraceError(f"{path}: {exc}") from exc
    except ParameterError as exc:
        raise TraceError(f"{path}: {exc}") from exc


def write_trace(world: World, path: Path | str) -> None:
    """Write ``world`` (hosts, URLs, parameters and every event) as a JSON-lines trace.

    Times and rates are written with ``repr`` precision, so :func:`read_trace`
    rebuilds the same world exactly.
    """
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
                for h, d in zip(world.hosts, world.crawl_delay_s.tolist(), strict=True)
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
        quoted = [json.dumps(u) for u in world.urls]
        kinds = {code: json.dumps(name) for code, name in _KIND_NAMES.items()}
        log, step = world.events(), 65_536
        for start in range(0, len(log), step):
            times = log.time[start : start + step].tolist()
            codes = log.kind[start : start + step].tolist()
            urls = log.url[start : start + step].tolist()
            out.writelines(
                f'{{"time": {t!r}, "kind": {kinds[k]}, "url": {quoted[u]}}}\n'
                for t, k, u in zip(times, codes, urls, strict=True)
            )


def read_trace(path: Path | str) -> World:
    """Rebuild the world of a JSON-lines trace (format in the module docstring).

    The world's events are exactly the trace's, in its order.

    Raises
    ------
    TraceError
        If the first line is not the meta object, a line is not a JSON object,
        has an unknown kind, an unknown or bad field, repeats a URL, names a URL
        with no ``url`` line, or is out of time order or outside [0, duration);
        the message names the file and line number.
    """
    path = Path(path)
    reader = _TraceReader(path)
    try:
        with path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, start=1):
                if line.strip():
                    reader.line(number, line)
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"{path}: {exc}") from exc
    return reader.world()


class _TraceReader:
    """The state of :func:`read_trace`: meta, URLs so far, events so far."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.meta: dict[str, Any] | None = None
        self.hosts: list[str] = []
        self.host_index: dict[str, int] = {}
        self.delays: list[float] = []
        self.urls: list[str] = []
        self.url_index: dict[str, int] = {}
        self.host_of = array("q")
        self.params = array("d")  # 4 per URL: W, Δ, recall, ν
        self.times = array("d")
        self.kinds = array("b")
        self.event_urls = array("q")

    def line(self, number: int, text: str) -> None:
        where = f"{self.path}:{number}"
        try:
            row = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TraceError(f"{where}: not JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise TraceError(f"{where}: each line must be a JSON object")
        kind = row.get("kind")
        if self.meta is None:
            if kind != "meta":
                raise TraceError(f"{where}: the first line must be the meta object")
            self._meta(row, where)
        elif kind == "meta":
            raise TraceError(f"{where}: a second meta line")
        elif kind == "url":
            self._url(row, where)
        elif kind in _KIND_CODES:
            self._event(row, where, _KIND_CODES[kind])
        else:
            raise TraceError(f"{where}: unknown line kind {kind!r}")

    def _meta(self, row: dict[str, Any], where: str) -> None:
        _known(row, _META_KEYS, where)
        budget = _number(row, "budget_per_s", where)
        duration = _number(row, "duration_s", where)
        warmup = _number(row, "warmup_s", where, 0.0)
        seed = row.get("seed", 0)
        if budget <= 0 or duration <= 0:
            raise TraceError(f"{where}: `budget_per_s` and `duration_s` must be > 0")
        if not 0 <= warmup < duration:
            raise TraceError(f"{where}: `warmup_s` must lie in [0, duration_s)")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TraceError(f"{where}: `seed` must be an integer")
        hosts = row.get("hosts", [])
        if not isinstance(hosts, list):
            raise TraceError(f"{where}: `hosts` must be a list")
        for host in hosts:
            if not isinstance(host, dict) or not isinstance(host.get("host"), str):
                raise TraceError(f"{where}: each host needs a `host` name")
            _known(host, _HOST_KEYS, where)
            delay = _number(host, "crawl_delay_s", where, 0.0)
            if delay < 0:
                raise TraceError(f"{where}: `crawl_delay_s` must be >= 0")
            if host["host"] in self.host_index:
                raise TraceError(f"{where}: host {host['host']!r} listed twice")
            self._add_host(host["host"], delay)
        self.meta = {"budget": budget, "duration": duration, "warmup": warmup, "seed": seed}

    def _add_host(self, name: str, delay: float) -> int:
        self.host_index[name] = len(self.hosts)
        self.hosts.append(name)
        self.delays.append(delay)
        return len(self.hosts) - 1

    def _url(self, row: dict[str, Any], where: str) -> None:
        _known(row, _URL_KEYS, where)
        url = row.get("url")
        if not isinstance(url, str) or not url:
            raise TraceError(f"{where}: `url` must be a non-empty string")
        if url in self.url_index:
            raise TraceError(f"{where}: URL {url!r} listed twice")
        host = row.get("host", urlsplit(url).netloc)
        if not isinstance(host, str) or not host:
            raise TraceError(f"{where}: no `host` given and none in the URL")
        weight = _number(row, "weight", where)
        change = _number(row, "change_rate", where)
        recall = _number(row, "recall", where, 0.0)
        false_rate = _number(row, "false_signal_rate", where, 0.0)
        if min(weight, change, false_rate) < 0:
            raise TraceError(f"{where}: rates must be >= 0")
        if not 0 <= recall <= 1:
            raise TraceError(f"{where}: `recall` must lie in [0, 1]")
        h = self.host_index.get(host)
        self.host_of.append(self._add_host(host, 0.0) if h is None else h)
        self.url_index[url] = len(self.urls)
        self.urls.append(url)
        self.params.extend((weight, change, recall, false_rate))

    def _event(self, row: dict[str, Any], where: str, code: int) -> None:
        assert self.meta is not None
        _known(row, _EVENT_KEYS, where)
        t = _number(row, "time", where)
        if not 0 <= t < self.meta["duration"]:
            raise TraceError(f"{where}: `time` must lie in [0, duration_s)")
        if self.times and t < self.times[-1]:
            raise TraceError(f"{where}: events must be in time order")
        url = row.get("url")
        i = self.url_index.get(url) if isinstance(url, str) else None
        if i is None:
            raise TraceError(f"{where}: event for a URL with no `url` line")
        self.times.append(t)
        self.kinds.append(code)
        self.event_urls.append(i)

    def world(self) -> World:
        if self.meta is None:
            raise TraceError(f"{self.path}: no meta line")
        if not self.urls:
            raise TraceError(f"{self.path}: no `url` lines")
        # one contiguous array per parameter: a strided column would sum in another
        # order than the drawn world's arrays, and the replay differ in the last bit
        w, d, r, nu = np.frombuffer(self.params, dtype=np.float64).reshape(-1, 4).T.copy()
        try:
            return World.from_arrays(
                self.urls,
                self.hosts,
                np.frombuffer(self.host_of, dtype=np.int64),
                UrlParams.create(w, d, r, nu),
                np.asarray(self.delays, dtype=np.float64),
                self.meta["budget"],
                self.meta["duration"],
                self.meta["warmup"],
                self.meta["seed"],
                events=EventLog(
                    np.frombuffer(self.times, dtype=np.float64),
                    np.frombuffer(self.kinds, dtype=np.int8),
                    np.frombuffer(self.event_urls, dtype=np.int64),
                ),
            )
        except ParameterError as exc:
            raise TraceError(f"{self.path}: {exc}") from exc


def _known(row: dict[str, Any], keys: frozenset[str], where: str) -> None:
    unknown = sorted(set(row) - keys)
    if unknown:
        raise TraceError(f"{where}: unknown field(s) {unknown}")


def _number(row: dict[str, Any], key: str, where: str, default: float | None = None) -> float:
    value = row.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise TraceError(f"{where}: `{key}` must be a finite number")
    return float(value)
