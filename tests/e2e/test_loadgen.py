"""The load generator against a served app (uvicorn subprocess, accelerated clock)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from scheduler_core.sim import World, WorldSpec
from service.cli import main
from service.client import CrawlschedClient
from service.loadgen.demo import served_app
from service.loadgen.runner import LoadgenOptions, run_loadgen

pytestmark = pytest.mark.e2e


@pytest.mark.slow
@pytest.mark.parametrize("params", ["oracle", "learned"])
def test_loadgen_keeps_a_small_world_fresh(params: str) -> None:
    world = World.generate(
        WorldSpec(urls=200, hosts=10, duration_days=60, budget_per_day=20, seed=11)
    )
    speed = world.duration_s / 8.0  # 60 simulated days in 8 wall seconds
    env = {
        "CRAWLSCHED_CLOCK": "accelerated",
        "CRAWLSCHED_CLOCK_SPEED": repr(speed),
        "CRAWLSCHED_LEASE_TTL_S": repr(30 * speed),
        "CRAWLSCHED_MAX_REVISIT_S": repr(world.duration_s),
    }

    async def drive(base_url: str) -> dict[str, float]:
        async with CrawlschedClient(base_url) as client:
            options = LoadgenOptions(workers=2, progress=False, signal_optimum=False, params=params)
            report = await run_loadgen(world, client, options)
            health = await client.healthz()
        assert health["status"] == "ok"
        return report.to_json()

    with served_app(env) as base_url:
        report = asyncio.run(drive(base_url))
    budget = world.budget_per_s * world.duration_s
    assert 0.9 * budget <= report["crawls"] <= 1.05 * budget
    assert report["clicks"] > 5000
    # noisy-signal world: the service must beat round-robin, and with the true
    # parameters come near BASELINE (6 crawls per URL in 60 days are too few to
    # learn them well; bench and README measure learned against oracle at length)
    margin = 4 * report["freshness_stderr"]
    assert report["freshness"] > report["round_robin_freshness"] + margin
    if params == "oracle":
        assert report["freshness"] > 0.9 * report["baseline_accuracy"]
    assert report["lambda0_online"] is not None and report["lambda0_online"] > 0


def test_cli_prints_the_default_world(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["world"]) == 0
    text = capsys.readouterr().out
    assert "budget_per_day" in text
    spec = tmp_path / "w.json"
    spec.write_text(json.dumps({"urls": 10, "nonsense": 1}))
    assert main(["loadgen", "--url", "http://127.0.0.1:9", "--world", str(spec)]) == 2
    assert "nonsense" in capsys.readouterr().err
    assert main(["demo", "--wall-seconds", "1"]) == 2  # below the minimum of 5


def test_demo_scores_against_the_host_limited_optimum(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With a host held back by its crawl delay, the demo's BASELINE and optimum are the
    host-limited ones the service can reach, and the report says so."""
    from service.loadgen.worldfile import load_spec
    from service.loadgen.yardstick import yardstick

    spec = tmp_path / "polite.json"
    spec.write_text(
        json.dumps(
            {"urls": 150, "hosts": 6, "duration_days": 10, "budget_per_day": 40, "seed": 4,
             "crawl_delay_s": {"kind": "const", "value": 7200.0}}
        )
    )  # fmt: skip
    out = tmp_path / "report.json"
    code = main(["demo", "--world", str(spec), "--wall-seconds", "5", "--params", "oracle",
                 "--workers", "2", "--json", str(out)])  # fmt: skip
    assert code == 0
    report = json.loads(out.read_text())
    expected = yardstick(World.generate(load_spec(spec)))
    assert expected.host_limited
    assert report["host_limited"] is True and report["binding_hosts"] == expected.binding_hosts
    assert report["baseline_accuracy"] == expected.baseline
    assert report["signal_optimum_accuracy"] == expected.optimum
    text = capsys.readouterr().out
    assert "BASELINE and the optimum shown are host-limited" in text
