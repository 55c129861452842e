"""Configuration is checked before anything starts: ``crawlsched serve`` (a real
subprocess) ends with one line on stderr and exit code 2 for an unknown variable,
an invalid value, a refused bind or half a TLS pair; the other commands check the
environment the same way."""

from __future__ import annotations

import os
import subprocess
import sysconfig
from pathlib import Path

import pytest
from pydantic import SecretStr

from service.cli import main
from service.errors import ConfigError
from service.ports import free_port
from service.serving import check_bind, is_loopback
from service.settings import Settings, check_environment, known_variables

CRAWLSCHED = Path(sysconfig.get_path("scripts")) / "crawlsched"
SECRET = "zz-very-secret-token"


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without any CRAWLSCHED_* variable, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("CRAWLSCHED_")}
    return {**env, **extra}


def serve(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``crawlsched serve`` that is expected to refuse to start (a start times out)."""
    assert CRAWLSCHED.exists(), f"{CRAWLSCHED}: install the package (pip install -e .)"
    cmd = [str(CRAWLSCHED), "serve", "--port", str(free_port()), *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)


#: (environment, serve options, what the one line names); the first cases run as real
#: subprocesses, all of them also in process through ``main``.
REFUSALS = [
    ({"CRAWLSCHED_LEASE_TTL": "5"}, [], ["CRAWLSCHED_LEASE_TTL ", "CRAWLSCHED_LEASE_TTL_S?"]),
    ({"CRAWLSCHED_STORE": "foo"}, [], ["CRAWLSCHED_STORE:", "redis://", "'foo'"]),
    ({"CRAWLSCHED_AUTH_TOKENS": f"wroker:{SECRET}"}, [], ["CRAWLSCHED_AUTH_TOKENS:", "role"]),
    ({}, ["--host", "0.0.0.0"], ["refusing to bind 0.0.0.0", "--insecure"]),
    ({}, ["--ssl-keyfile", "/etc/hostname"], ["--ssl-keyfile and --ssl-certfile go together"]),
    # in process only
    ({"CRAWLSCHED_SHARDS": "0"}, [], ["CRAWLSCHED_SHARDS:", "greater than or equal to 1"]),
    ({"CRAWLSCHED_CLOCK": "sundial"}, [], ["CRAWLSCHED_CLOCK:", "'sundial'"]),
    ({"CRAWLSCHED_LEASE_TTL_S": "nan"}, [], ["CRAWLSCHED_LEASE_TTL_S:", "finite"]),
    ({"CRAWLSCHED_LEASE_TTL_S": "ten"}, [], ["CRAWLSCHED_LEASE_TTL_S:", "'ten'"]),
    ({"CRAWLSCHED_AUTH_TOKENS": f"{SECRET}:admin"}, [], ["CRAWLSCHED_AUTH_TOKENS:"]),
    ({"CRAWLSCHED_AUTH_TOKENS_FILE": "/nonexistent/t"}, [], ["AUTH_TOKENS_FILE:", "read"]),
    ({}, ["--host", "::"], ["refusing to bind ::", "CRAWLSCHED_AUTH_TOKENS"]),
    # the clients' variables are known: the bind is what is refused here
    ({"CRAWLSCHED_TOKEN": SECRET, "CRAWLSCHED_URL": "http://x"}, ["--host", "0.0.0.0"], ["bind"]),
    ({}, ["--ssl-keyfile", "/etc/hostname", "--ssl-certfile", "/etc/hostname"], ["TLS"]),
]
SUBPROCESS_CASES = 5


def _check_one_line(stderr: str, names: list[str]) -> None:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ")
    for name in names:
        assert name in lines[0]
    assert SECRET not in stderr and "Traceback" not in stderr


@pytest.mark.slow
@pytest.mark.parametrize(("env", "args", "names"), REFUSALS[:SUBPROCESS_CASES])
def test_serve_refuses_to_start_with_one_line(
    env: dict[str, str], args: list[str], names: list[str]
) -> None:
    done = serve(clean_env(**env), *args)
    assert done.returncode == 2, done.stderr
    _check_one_line(done.stderr, names)
    assert SECRET not in done.stdout


@pytest.mark.parametrize(("env", "args", "names"), REFUSALS)
def test_serve_refuses_in_process_too(
    env: dict[str, str],
    args: list[str],
    names: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name in list(os.environ):
        if name.upper().startswith("CRAWLSCHED_"):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["serve", "--port", str(free_port()), *args]) == 2
    _check_one_line(capsys.readouterr().err, names)


def test_several_unknown_variables_are_all_named() -> None:
    env = {"CRAWLSCHED_DEFAULT_CRAWL_DELAY": "2", "CRAWLSCHED_XYZZY": "1", "crawlsched_shard": "2"}
    with pytest.raises(ConfigError) as caught:
        check_environment(env)
    message = str(caught.value)
    assert (
        "CRAWLSCHED_DEFAULT_CRAWL_DELAY (did you mean CRAWLSCHED_DEFAULT_CRAWL_DELAY_S?)" in message
    )
    assert "crawlsched_shard (did you mean CRAWLSCHED_SHARDS?)" in message
    assert "CRAWLSCHED_XYZZY (see" in message
    assert "\n" not in message


def test_every_setting_and_client_variable_is_known() -> None:
    known = known_variables()
    assert {"CRAWLSCHED_TOKEN", "CRAWLSCHED_URL", "CRAWLSCHED_AUTH_TOKENS"} <= set(known)
    assert {f"CRAWLSCHED_{name.upper()}" for name in Settings.model_fields} <= set(known)
    check_environment(dict.fromkeys(known, "1") | {"PATH": "/bin", "CRAWLSCHEDX": "1"})


@pytest.mark.parametrize("command", [["demo"], ["loadgen", "--url", "http://127.0.0.1:9"]])
def test_other_commands_check_the_environment(
    command: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CRAWLSCHED_LEASE_TTL", "5")
    assert main(command) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "CRAWLSCHED_LEASE_TTL_S" in err


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("localhost", True),
        ("LOCALHOST", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.5", False),
        ("192.168.1.1", False),
        ("example.org", False),
        ("localhost.example.org", False),
        ("", False),
    ],
)
def test_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_tokens_or_insecure_allow_any_bind() -> None:
    open_settings, secured = Settings(), Settings(auth_tokens=SecretStr("admin:a1"))
    assert check_bind("127.0.0.1", open_settings, insecure=False) is False
    assert check_bind("0.0.0.0", secured, insecure=False) is False
    assert check_bind("0.0.0.0", open_settings, insecure=True) is True  # allowed, but said
    with pytest.raises(ConfigError, match="refusing to bind 10.0.0.5"):
        check_bind("10.0.0.5", open_settings, insecure=False)
