"""The Dockerfile and docker-compose.yml say what the README promises (no Docker engine
is needed to check that; CI has none)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import SecretStr

from service.auth import Role, TokenTable
from service.errors import ConfigError
from service.serving import check_bind
from service.settings import Settings, known_variables

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


def _default(value: str) -> str:
    """The default of a compose ``${VAR:-default}`` value."""
    assert value.startswith("${") and ":-" in value and value.endswith("}"), value
    return value[value.index(":-") + 2 : -1]


def test_compose_api_has_tokens_and_the_loadgen_an_admin_one() -> None:
    services = _compose()["services"]
    tokens = _default(services["api"]["environment"]["CRAWLSCHED_AUTH_TOKENS"])
    settings = Settings(auth_tokens=SecretStr(tokens))
    loadgen_env = services["loadgen"]["environment"]
    assert set(loadgen_env) <= set(known_variables())
    loadgen_token = _default(loadgen_env["CRAWLSCHED_TOKEN"])
    assert TokenTable(settings.auth_pairs()).role_of(loadgen_token) is Role.ADMIN


def test_image_binds_every_interface_only_with_tokens() -> None:
    text = (ROOT / "Dockerfile").read_text()
    cmd = json.loads(text[text.index("\nCMD ") + 5 :].splitlines()[0])
    assert cmd[:2] == ["crawlsched", "serve"]
    host = cmd[cmd.index("--host") + 1]
    tokens = _default(_compose()["services"]["api"]["environment"]["CRAWLSCHED_AUTH_TOKENS"])
    assert check_bind(host, Settings(auth_tokens=SecretStr(tokens)), insecure=False) is False
    with pytest.raises(ConfigError, match="refusing to bind"):
        check_bind(host, Settings(), insecure=False)
