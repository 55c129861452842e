"""``schemathesis run --checks all`` finds nothing, against the memory store and a
private Redis, with a fixed seed and a bounded number of examples per operation.

The service runs as a real process on a free port, numeric warnings raised as
errors (an overflow or NaN on the way answers 500).  Its clock is a manual one set
past the latest time the schema admits (``MAX_TIMESTAMP``): times that lead the
service's clock are refused (422), a rule no static schema can state, so the fuzzer
must never meet it; the rule has tests of its own (tests/api/test_validation.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from service.loadgen.demo import served_app
from service.schemas import MAX_TIMESTAMP

pytestmark = pytest.mark.slow

SEED = 20231114
EXAMPLES = 50  # per operation and phase
ADMIN_TOKEN = "schemathesis-admin-token"


def _schemathesis() -> str:
    beside = Path(sys.executable).with_name("schemathesis")
    found = str(beside) if beside.exists() else shutil.which("schemathesis")
    if found is None:
        raise RuntimeError("schemathesis is not installed: pip install -e '.[dev]'")
    return found


def test_schemathesis_finds_nothing(store_setting: str, tmp_path: Path) -> None:
    env = {
        "CRAWLSCHED_STORE": store_setting,
        "CRAWLSCHED_SHARDS": "4",
        "CRAWLSCHED_CLOCK": "manual",
        "CRAWLSCHED_CLOCK_START": repr(MAX_TIMESTAMP + 1.0),
        "CRAWLSCHED_AUTH_TOKENS": f"admin:{ADMIN_TOKEN}",
        "PYTHONWARNINGS": "error::RuntimeWarning",  # an overflow on the way is a 500
    }
    with served_app(env) as base_url:
        command = [
            _schemathesis(), "run", f"{base_url}/openapi.json", "--checks", "all",
            "--seed", str(SEED), "--max-examples", str(EXAMPLES), "--workers", "1",
            "--generation-database", "none", "--no-color", "--request-timeout", "30",
            "--header", f"Authorization: Bearer {ADMIN_TOKEN}",
        ]  # fmt: skip
        run = subprocess.run(
            command, cwd=tmp_path, capture_output=True, text=True, timeout=280,
            env={**os.environ, "SCHEMATHESIS_HOOKS": ""},
        )  # fmt: skip
    report = run.stdout + run.stderr
    assert run.returncode == 0, report
    assert "No issues found" in report or " passed" in report, report
