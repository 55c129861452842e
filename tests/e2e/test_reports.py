"""``--report DIR``: the HTML page and its figures, the words beside the numbers, and a
run that falls behind the replayed clock saying so."""

from __future__ import annotations

import json
import re
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from scheduler_core.sim import World
from service.cli import main
from service.loadgen.report import LoadgenReport
from service.loadgen.worldfile import load_spec
from service.sim_runner import SimulationRecord, run_simulation

PNG = b"\x89PNG\r\n\x1a\n"
FIGURES = ("freshness.png", "allocation.png", "lambda0.png")


def _check_page(directory: Path) -> str:
    page = (directory / "index.html").read_text(encoding="utf-8")
    for name in FIGURES:
        assert (directory / name).read_bytes().startswith(PNG), name
        assert f"src='{name}'" in page
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    return page


def _world(tmp_path: Path) -> Path:
    path = tmp_path / "world.json"
    path.write_text(json.dumps({"urls": 40, "hosts": 4, "duration_days": 12,
                                "budget_per_day": 10.0, "seed": 5}))  # fmt: skip
    return path


def test_simulate_report_writes_the_page_and_its_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report"
    args = ["simulate", "--world", str(_world(tmp_path)), "-p", "greedy", "-p", "uniform",
            "--report", str(out)]  # fmt: skip
    assert main(args) == 0
    page = _check_page(out)
    printed = capsys.readouterr().out
    sentence = re.compile(
        r"(\d\.\d\d) of clicks found a fresh copy with greedy; the best possible with this "
        r"budget is (\d\.\d\d); crawling in turn gives (\d\.\d\d)\."
    )
    said = sentence.search(" ".join(printed.split()))
    assert said is not None, printed
    assert said.group(0) in page  # the page says what the terminal said
    greedy, best, turn = (float(x) for x in said.groups())
    assert turn < greedy <= best + 0.05
    assert "<td>greedy</td>" in page and "<td>uniform</td>" in page


def test_simulation_record_samples_the_services_lambda0(tmp_path: Path) -> None:
    world = World.generate(load_spec(_world(tmp_path)))
    record = SimulationRecord()
    seen: dict[str, list[float]] = {}
    report = run_simulation(
        world, ["crawlsched", "greedy"], crawls_per_step=2, record=record,
        progress=lambda name, share: seen.setdefault(name, []).append(share),
    )  # fmt: skip
    assert set(record.results) == {"crawlsched", "greedy"} == set(seen)
    assert all(shares[-1] == 1.0 and shares == sorted(shares) for shares in seen.values())
    samples = record.lambda0["crawlsched"]  # the service's policy only
    assert set(record.lambda0) == {"crawlsched"} and len(samples) >= 10
    times = [t for t, _ in samples]
    assert times == sorted(times) and times[-1] <= world.duration_s
    assert all(lam > 0 for _, lam in samples)
    assert samples[-1][1] == pytest.approx(report.rows[0].lambda0_online, rel=0.5)
    assert record.optimum is not None and record.optimum.rates.shape == (len(world.urls),)


@pytest.mark.slow
def test_demo_report_writes_the_page_and_says_how_far_behind_it_ran(tmp_path: Path) -> None:
    out = tmp_path / "report"
    args = ["demo", "--world", str(_world(tmp_path)), "--wall-seconds", "6",
            "--report", str(out), "--json", str(tmp_path / "demo.json")]  # fmt: skip
    assert main(args) == 0
    page = _check_page(out)
    report = json.loads((tmp_path / "demo.json").read_text())
    assert "of clicks found a fresh copy; the best possible with this budget is" in page
    assert f"{report['freshness']:.2f} of clicks found a fresh copy" in page
    assert report["lag_mean_s"] > 0 and report["lag_max_s"] >= report["lag_mean_s"]
    assert report["clock_rate"] > 1 and report["change_rate_per_s"] > 0
    # whichever way this machine ran, the page says by how much
    assert ("Behind the replayed clock: " in page) or ("Kept up with the replayed clock: " in page)


def _report(**changes: float) -> LoadgenReport:
    base = LoadgenReport(
        freshness=0.31, freshness_stderr=0.004, clicks=10_000, freshness_time_weighted=0.3,
        baseline_accuracy=0.36, round_robin_freshness=0.28, signal_optimum_accuracy=0.39,
        dispatch_per_s=50.0, events_per_s=500.0, urls=300, hosts=10,
        simulated_seconds=60 * 86_400.0, wall_seconds=20.0, crawls=1700,
        budget_per_s=30 / 86_400.0, crawl_rate_per_s=1700 / (60 * 86_400.0),
        lambda0_online=1.2, lambda0_baseline=1.7, signals=True, seed=1,
        lag_mean_s=600.0, lag_max_s=3600.0, clock_rate=259_200.0, change_rate_per_s=0.5 / 86_400,
    )  # fmt: skip
    return replace(base, **changes)


def _printed(report: LoadgenReport) -> str:
    console = Console(width=200, record=True)
    report.print(console)
    return " ".join(console.export_text().split())


def test_a_run_that_kept_up_says_so_and_by_how_much() -> None:
    report = _report()  # 10 min of lag at 0.5 changes a day: 0.3% of pages change
    assert not report.behind
    text = _printed(report)
    assert "the service kept up with the replayed clock" in text
    assert "10 min late on average, up to 1 h" in text
    assert "behind" not in text.replace("kept up", "")
    assert report.sentences()[0] == (
        "0.31 of clicks found a fresh copy; the best possible with this budget is 0.39; "
        "crawling in turn gives 0.28."
    )


def test_a_run_behind_the_replayed_clock_says_so_and_marks_its_freshness() -> None:
    # 8 h of lag at 0.5 changes a day: 15% of pages change while the service catches up
    report = _report(lag_mean_s=8 * 3600.0, lag_max_s=3 * 86_400.0)
    assert report.behind
    text = _printed(report)
    assert "0.3100 ± 0.0040 (behind: see below)" in text
    assert "The service fell behind the replayed clock" in text
    assert "8 h late on average, up to 3 d" in text and "15% of clicked pages" in text
    assert "0.111 and 1.000 wall s" in text


def test_crawls_owed_at_the_end_count_as_behind() -> None:
    budget = 30 / 86_400.0 * 60 * 86_400.0
    report = _report(crawls_behind=0.06 * budget)
    assert report.behind
    assert "the workers were 108 crawls (6.0% of the budget) behind" in report.lag_sentence()


def test_report_without_matplotlib_is_one_line_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    args = ["simulate", "--world", str(_world(tmp_path)), "-p", "greedy",
            "--report", str(tmp_path / "r")]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: --report needs matplotlib: pip install 'crawlsched[report]'"
