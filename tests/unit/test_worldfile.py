"""World specs (TOML/JSON) and JSON-lines traces."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import numpy as np
import pytest

from scheduler_core.sim import World, WorldSpec
from service.loadgen.worldfile import (
    TraceError,
    default_spec_toml,
    load_spec,
    read_trace,
    write_trace,
)


def test_default_spec_file_is_the_default_spec() -> None:
    assert WorldSpec.from_mapping(tomllib.loads(default_spec_toml())) == WorldSpec()


def test_load_toml_and_json(tmp_path: Path) -> None:
    toml = tmp_path / "w.toml"
    toml.write_text('urls = 30\nhosts = 3\nrecall = {kind = "const", value = 0.5}\n')
    assert load_spec(toml) == WorldSpec(urls=30, hosts=3).replace(recall=load_spec(toml).recall)
    assert load_spec(toml).recall.mean == 0.5
    js = tmp_path / "w.json"
    js.write_text(json.dumps({"urls": 30, "hosts": 3, "budget_per_day": 7}))
    assert load_spec(js).budget_per_day == 7.0


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("a.toml", "urls = [", "a.toml"),
        ("a.json", '{"urls": 10, "colour": 1}', "colour"),
        ("a.yaml", "urls: 1", "toml or .json"),
        ("a.json", "[1, 2]", "object"),
    ],
)
def test_bad_spec_files(tmp_path: Path, name: str, text: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(TraceError, match=message):
        load_spec(path)
    with pytest.raises(TraceError, match="missing"):
        load_spec(tmp_path / "missing.toml")


def test_trace_round_trip(tmp_path: Path) -> None:
    world = World.generate(WorldSpec(urls=40, hosts=4, duration_days=10, seed=3))
    path = tmp_path / "trace.jsonl"
    write_trace(world, path)
    back = read_trace(path)
    assert back.urls == world.urls and back.hosts == world.hosts
    np.testing.assert_array_equal(back.host_of, world.host_of)
    np.testing.assert_allclose(back.params.weight, world.params.weight)
    np.testing.assert_allclose(back.params.false_signal_rate, world.params.false_signal_rate)
    np.testing.assert_array_equal(back.events().time, world.events().time)
    np.testing.assert_array_equal(back.events().kind, world.events().kind)
    np.testing.assert_array_equal(back.events().url, world.events().url)
    assert (back.budget_per_s, back.duration_s, back.warmup_s) == (
        world.budget_per_s,
        world.duration_s,
        world.warmup_s,
    )
    np.testing.assert_array_equal(back.crawl_delay_s, world.crawl_delay_s)


def _trace(tmp_path: Path, *lines: dict[str, object]) -> Path:
    path = tmp_path / "t.jsonl"
    meta = {"kind": "meta", "budget_per_s": 0.01, "duration_s": 100.0, "warmup_s": 0.0}
    url = {"kind": "url", "url": "https://a.example/x", "weight": 0.1, "change_rate": 0.01}
    path.write_text("\n".join(json.dumps(x) for x in (meta, url, *lines)) + "\n")
    return path


def test_hand_written_trace(tmp_path: Path) -> None:
    world = read_trace(
        _trace(
            tmp_path,
            {"time": 1.0, "kind": "click", "url": "https://a.example/x"},
            {"time": 2.0, "kind": "change", "url": "https://a.example/x"},
        )
    )
    assert world.hosts == ["a.example"] and len(world.events()) == 2
    assert world.changed_between([0], [1.5], [2.5]).tolist() == [True]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"time": 1.0, "kind": "visit", "url": "https://a.example/x"}, ":3: unknown line kind"),
        ({"time": "soon", "kind": "click", "url": "https://a.example/x"}, ":3: `time`"),
        ({"time": 1.0, "kind": "click", "url": "https://b.example/"}, ":3: event for a URL"),
    ],
)
def test_bad_trace_lines_are_named(tmp_path: Path, line: dict[str, object], message: str) -> None:
    with pytest.raises(TraceError, match=message):
        read_trace(_trace(tmp_path, line))


def test_events_out_of_order(tmp_path: Path) -> None:
    path = _trace(
        tmp_path,
        {"time": 5.0, "kind": "click", "url": "https://a.example/x"},
        {"time": 1.0, "kind": "click", "url": "https://a.example/x"},
    )
    with pytest.raises(TraceError, match=":4: events must be in time order"):
        read_trace(path)
