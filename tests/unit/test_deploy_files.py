"""The Dockerfile and docker-compose.yml say what the README promises (no Docker engine
is needed to check that; CI has none)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from service.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def _compose() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


def test_compose_runs_redis_with_aof_two_replicas_and_an_opt_in_loadgen() -> None:
    services = _compose()["services"]
    redis_cmd = services["redis"]["command"]
    assert redis_cmd[redis_cmd.index("--appendonly") + 1] == "yes"
    assert redis_cmd[redis_cmd.index("--appendfsync") + 1] == "always"
    assert services["api"]["deploy"]["replicas"] == 2
    assert services["api"]["depends_on"]["redis"]["condition"] == "service_healthy"
    assert services["loadgen"]["profiles"] == ["loadgen"]
    assert services["loadgen"]["command"][:2] == ["crawlsched", "loadgen"]


def test_compose_sets_only_real_settings() -> None:
    env = _compose()["services"]["api"]["environment"]
    fields = {f"CRAWLSCHED_{name.upper()}" for name in Settings.model_fields}
    assert set(env) <= fields, set(env) - fields
    assert env["CRAWLSCHED_STORE"].startswith("redis://")


def test_image_is_slim_non_root_and_health_checked() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert "FROM python:3.11-slim" in text
    assert "\nUSER crawlsched" in text
    assert "HEALTHCHECK" in text and "/healthz" in text
