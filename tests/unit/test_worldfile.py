"""World specs (TOML/JSON) and JSON-lines traces."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import numpy as np
import pytest

from scheduler_core.sim import Dist, World, WorldSpec
from service.loadgen.worldfile import (
    TraceError,
    default_spec_toml,
    load_spec,
    read_trace,
    write_trace,
)


def test_default_spec_file_is_the_default_spec(tmp_path: Path) -> None:
    text = default_spec_toml()
    assert WorldSpec.from_mapping(tomllib.loads(text)) == WorldSpec()
    # every field is set (and so documented) in the file
    assert set(tomllib.loads(text)) == set(WorldSpec().to_mapping())
    path = tmp_path / "default.toml"
    path.write_text(text)
    assert load_spec(path) == WorldSpec()


def test_load_toml_and_json(tmp_path: Path) -> None:
    toml = tmp_path / "w.toml"
    toml.write_text('urls = 30\nhosts = 3\nrecall = {kind = "const", value = 0.5}\n')
    assert load_spec(toml) == WorldSpec(urls=30, hosts=3, recall=Dist.of("const", value=0.5))
    js = tmp_path / "w.json"
    js.write_text(json.dumps({"urls": 30, "hosts": 3, "budget_per_day": 7}))
    assert load_spec(js) == WorldSpec(urls=30, hosts=3, budget_per_day=7.0)
    assert load_spec(str(js)).budget_per_day == 7.0
    js.write_text(json.dumps(WorldSpec(urls=5, hosts=2, signals=False).to_mapping()))
    assert load_spec(js) == WorldSpec(urls=5, hosts=2, signals=False)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("a.toml", "urls = [", "a.toml"),
        ("a.json", '{"urls": 10, "colour": 1}', "colour"),
        ("a.json", '{"recall": {"kind": "gamma"}}', "gamma"),
        ("a.toml", "hosts = 0", "hosts"),
        ("a.yaml", "urls: 1", "toml or .json"),
        ("a.json", "[1, 2]", "object"),
    ],
)
def test_bad_spec_files(tmp_path: Path, name: str, text: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(TraceError, match=message) as info:
        load_spec(path)
    assert name in str(info.value)
    assert isinstance(info.value, ValueError)


def test_missing_spec_file(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="missing"):
        load_spec(tmp_path / "missing.toml")


@pytest.mark.parametrize(
    "spec",
    [
        WorldSpec(urls=40, hosts=4, duration_days=10, seed=3),
        WorldSpec(
            urls=20,
            hosts=20,
            duration_days=5,
            signals=False,
            crawl_delay_s=Dist.of("uniform", low=1.0, high=9.0),
        ),
    ],
)
def test_trace_round_trip(tmp_path: Path, spec: WorldSpec) -> None:
    world = World.generate(spec)
    path = tmp_path / "trace.jsonl"
    write_trace(world, path)
    lines = path.read_text().splitlines()
    assert json.loads(lines[0])["kind"] == "meta"
    assert len(lines) == 1 + len(world.urls) + len(world.events())
    back = read_trace(path)
    assert back.urls == world.urls and back.hosts == world.hosts
    np.testing.assert_array_equal(back.host_of, world.host_of)
    for name in ("weight", "change_rate", "recall", "false_signal_rate"):
        np.testing.assert_array_equal(getattr(back.params, name), getattr(world.params, name))
    np.testing.assert_array_equal(back.events().time, world.events().time)
    np.testing.assert_array_equal(back.events().kind, world.events().kind)
    np.testing.assert_array_equal(back.events().url, world.events().url)
    assert (back.budget_per_s, back.duration_s, back.warmup_s, back.seed) == (
        world.budget_per_s,
        world.duration_s,
        world.warmup_s,
        world.seed,
    )
    np.testing.assert_array_equal(back.crawl_delay_s, world.crawl_delay_s)
    rng = np.random.default_rng(0)
    u, t0 = rng.integers(0, len(world.urls), 500), rng.uniform(0, world.duration_s, 500)
    t1 = t0 + rng.exponential(world.duration_s / 10, 500)
    assert (back.changed_between(u, t0, t1) == world.changed_between(u, t0, t1)).all()


META = {"kind": "meta", "budget_per_s": 0.01, "duration_s": 100.0, "warmup_s": 0.0}
URL = {"kind": "url", "url": "https://a.example/x", "weight": 0.1, "change_rate": 0.01}


def _trace(tmp_path: Path, *lines: dict[str, object], meta: dict[str, object] = META) -> Path:
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in (meta, URL, *lines)) + "\n")
    return path


def test_hand_written_trace(tmp_path: Path) -> None:
    world = read_trace(
        _trace(
            tmp_path,
            {"time": 1.0, "kind": "click", "url": "https://a.example/x"},
            {"time": 2.0, "kind": "change", "url": "https://a.example/x"},
            {"time": 2.0, "kind": "signal", "url": "https://a.example/x"},
        )
    )
    assert world.hosts == ["a.example"] and len(world.events()) == 3
    assert world.crawl_delay_s.tolist() == [0.0] and world.spec is None
    assert world.params.recall.tolist() == [0.0]
    assert world.changed_between([0], [1.5], [2.5]).tolist() == [True]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"time": 1.0, "kind": "visit", "url": "https://a.example/x"}, ":3: unknown line kind"),
        ({"time": "soon", "kind": "click", "url": "https://a.example/x"}, ":3: `time`"),
        ({"time": 1.0, "kind": "click", "url": "https://b.example/"}, ":3: event for a URL"),
        ({"time": 100.0, "kind": "click", "url": "https://a.example/x"}, ":3: `time` must lie"),
        ({"time": -1.0, "kind": "click", "url": "https://a.example/x"}, ":3: `time` must lie"),
        ({"time": 1, "kind": "click", "url": "https://a.example/x", "n": 2}, ":3: unknown field"),
        ({**URL, "url": "https://a.example/y", "weight": -1.0}, ":3: rates"),
        ({**URL, "url": "https://a.example/y", "recall": 2.0}, ":3: `recall`"),
        ({**URL, "url": "https://a.example/y", "change_rate": None}, ":3: `change_rate`"),
        (URL, ":3: URL 'https://a.example/x' listed twice"),
        ({**URL, "url": "no-host"}, ":3: no `host`"),
        (META, ":3: a second meta"),
    ],
)
def test_bad_trace_lines_are_named(tmp_path: Path, line: dict[str, object], message: str) -> None:
    with pytest.raises(TraceError, match=message):
        read_trace(_trace(tmp_path, line))


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        ({**META, "budget_per_s": "x"}, ":1: `budget_per_s`"),
        ({**META, "duration_s": 0}, ":1: `budget_per_s` and `duration_s`"),
        ({**META, "warmup_s": 100.0}, ":1: `warmup_s`"),
        ({**META, "seed": 1.5}, ":1: `seed`"),
        ({**META, "hosts": [{"crawl_delay_s": 1}]}, ":1: each host"),
        ({**META, "hosts": [{"host": "a", "crawl_delay_s": -1}]}, ":1: `crawl_delay_s`"),
        ({**META, "colour": 1}, ":1: unknown field"),
        (URL, ":1: the first line must be the meta"),
    ],
)
def test_bad_meta_lines_are_named(tmp_path: Path, meta: dict[str, object], message: str) -> None:
    with pytest.raises(TraceError, match=message):
        read_trace(_trace(tmp_path, meta=meta))


def test_not_json_and_events_out_of_order(tmp_path: Path) -> None:
    path = _trace(
        tmp_path,
        {"time": 5.0, "kind": "click", "url": "https://a.example/x"},
        {"time": 1.0, "kind": "click", "url": "https://a.example/x"},
    )
    with pytest.raises(TraceError, match=":4: events must be in time order"):
        read_trace(path)
    path.write_text(json.dumps(META) + "\n{oops\n")
    with pytest.raises(TraceError, match=":2: not JSON"):
        read_trace(path)
    path.write_text(json.dumps(META) + "\n")
    with pytest.raises(TraceError, match="no `url` lines"):
        read_trace(path)
    with pytest.raises(TraceError, match="gone"):
        read_trace(tmp_path / "gone.jsonl")
