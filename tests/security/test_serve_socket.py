"""``crawlsched serve`` as a real subprocess on a free port: tokens over a real socket
(memory store and a private ``redis-server``), the token file, binding beyond
loopback, TLS, and the SDK and load generator sending their token."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import ssl
import subprocess
import sysconfig
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import trustme

from scheduler_core.sim import DAY_S
from service.cli import main
from service.client import CrawlschedClient, CrawlschedError
from service.loadgen.demo import served_worker
from service.ports import free_port
from service.store.redis.local import LocalRedis

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # each test starts `crawlsched serve`

CRAWLSCHED = Path(sysconfig.get_path("scripts")) / "crawlsched"
BODY = {"urls": [{"url": "https://a.example/1"}]}


@dataclass
class Served:
    base_url: str
    log: Path

    def stderr(self) -> str:
        return self.log.read_text()


@contextlib.contextmanager
def served(
    tmp_path: Path,
    env: dict[str, str],
    *args: str,
    scheme: str = "http",
    verify: ssl.SSLContext | bool = True,
) -> Iterator[Served]:
    """Run ``crawlsched serve --port P *args`` with ``env`` (and no other CRAWLSCHED_*
    variable) until /healthz answers on 127.0.0.1; stop it afterwards."""
    assert CRAWLSCHED.exists(), f"{CRAWLSCHED}: install the package (pip install -e .)"
    port = free_port()
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("CRAWLSCHED_")}
    log = tmp_path / f"serve-{port}.log"
    with log.open("w") as sink:
        proc = subprocess.Popen(
            [str(CRAWLSCHED), "serve", "--port", str(port), *args],
            env={**clean, **env},
            stdout=sink,
            stderr=sink,
        )
    base_url = f"{scheme}://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30.0
        while True:
            assert proc.poll() is None, f"serve exited {proc.returncode}: {log.read_text()}"
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{base_url}/healthz", timeout=1.0, verify=verify).is_success:
                    break
            assert time.monotonic() < deadline, f"serve never became healthy: {log.read_text()}"
            time.sleep(0.1)
        yield Served(base_url, log)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def redis_server() -> Iterator[LocalRedis]:
    with LocalRedis() as server:
        yield server


@pytest.mark.parametrize("store", ["memory", "redis"])
def test_tokens_on_a_real_socket(
    tmp_path: Path, store: str, request: pytest.FixtureRequest
) -> None:
    env = {"CRAWLSCHED_AUTH_TOKENS": "admin:a1,worker:w1"}
    worker: contextlib.AbstractContextManager[object] = contextlib.nullcontext()
    if store == "redis":  # a Redis deployment is healthy once a worker runs beside it
        env["CRAWLSCHED_STORE"] = request.getfixturevalue("redis_server").url
        worker = served_worker(env)
    with worker, served(tmp_path, env) as server:
        urls = f"{server.base_url}/urls"
        anonymous = httpx.post(urls, json=BODY)
        assert anonymous.status_code == 401
        assert anonymous.headers["WWW-Authenticate"] == "Bearer"
        assert httpx.post(urls, json=BODY, headers=bearer("w1")).status_code == 403
        assert httpx.post(urls, json=BODY, headers=bearer("a1")).status_code == 200
        assert httpx.get(f"{server.base_url}/healthz").status_code == 200
        assert httpx.get(f"{server.base_url}/next", headers=bearer("w1")).status_code == 200
        log = server.stderr()
    # one JSON object per line (stderr is no terminal); no token in any field but the
    # random request ids and the times
    records = [json.loads(line) for line in log.splitlines()]
    memory_warning = "the memory store keeps nothing across restarts"
    warned = [r for r in records if r["event"].startswith(memory_warning)]
    assert [r["level"] for r in warned] == (["warning"] if store == "memory" else []), log
    assert {r["status"] for r in records if r.get("logger") == "service.access"} >= {401, 403}
    said = json.dumps([{k: v for k, v in r.items() if k not in ("request_id", "timestamp")}
                       for r in records])  # fmt: skip
    assert "a1" not in said.replace("127.0.0.1", "") and "w1" not in said


async def _sdk_calls(base_url: str) -> None:
    async with CrawlschedClient(base_url, token="a1", retry_for_s=0) as admin:
        assert await admin.register([{"url": "https://sdk.example/1"}]) == {
            "created": 1,
            "updated": 0,
        }
    async with CrawlschedClient(base_url, token="w1", retry_for_s=0) as worker:
        (lease,) = (await worker.next(1))["leases"]
        assert lease["url"] == "https://sdk.example/1"
        with pytest.raises(CrawlschedError) as refused:
            await worker.register([{"url": "https://sdk.example/2"}])
        assert refused.value.status_code == 403
    async with CrawlschedClient(base_url, retry_for_s=0) as anonymous:
        assert (await anonymous.healthz())["status"] == "ok"
        with pytest.raises(CrawlschedError) as refused:
            await anonymous.next(1)
        assert refused.value.status_code == 401


def test_anonymous_bodies_are_refused_unread(tmp_path: Path) -> None:
    # headers announcing a 20 MB body, then nothing: the 401 comes at once, without
    # waiting for (or parsing) the body
    with served(tmp_path, {"CRAWLSCHED_AUTH_TOKENS": "admin:a1"}) as server:
        port = int(server.base_url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=5.0) as sock:
            sock.sendall(
                b"POST /urls HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 20000000\r\n\r\n"
            )
            head = sock.recv(4096)
    assert head.startswith(b"HTTP/1.1 401"), head
    assert b"www-authenticate: Bearer" in head.lower().replace(b"bearer", b"Bearer")


def test_sdk_sends_its_token(tmp_path: Path) -> None:
    with served(tmp_path, {"CRAWLSCHED_AUTH_TOKENS": "admin:a1,worker:w1"}) as server:
        asyncio.run(_sdk_calls(server.base_url))


def test_token_file_allows_binding_every_interface(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("# Prometheus\nread:r1\nadmin:a1\n")
    env = {"CRAWLSCHED_AUTH_TOKENS_FILE": str(tokens)}
    with served(tmp_path, env, "--host", "0.0.0.0") as server:
        metrics = f"{server.base_url}/metrics"
        assert httpx.get(metrics).status_code == 401
        assert httpx.get(metrics, headers=bearer("r1")).status_code == 200
        assert (
            httpx.post(f"{server.base_url}/urls", json=BODY, headers=bearer("r1")).status_code
            == 403
        )
        assert (
            httpx.post(f"{server.base_url}/urls", json=BODY, headers=bearer("a1")).status_code
            == 200
        )
        assert "Uvicorn running on http://0.0.0.0:" in server.stderr()


def test_insecure_serves_an_open_api_beyond_loopback_and_says_so(tmp_path: Path) -> None:
    with served(tmp_path, {}, "--host", "0.0.0.0", "--insecure") as server:
        assert httpx.post(f"{server.base_url}/urls", json=BODY).status_code == 200
        log = server.stderr()
    assert "warning: serving on 0.0.0.0 without authentication (--insecure)" in log


def test_tls_with_uvicorn_options(tmp_path: Path) -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    key_file, cert_file = tmp_path / "key.pem", tmp_path / "cert.pem"
    cert.private_key_pem.write_to_path(str(key_file))
    cert_file.write_bytes(b"".join(blob.bytes() for blob in cert.cert_chain_pems))
    trust = ssl.create_default_context()
    ca.configure_trust(trust)
    args = ("--ssl-keyfile", str(key_file), "--ssl-certfile", str(cert_file))
    env = {"CRAWLSCHED_AUTH_TOKENS": "admin:a1"}
    with served(tmp_path, env, *args, scheme="https", verify=trust) as server:
        assert server.base_url.startswith("https://")
        with httpx.Client(verify=trust) as client:
            answer = client.post(f"{server.base_url}/urls", json=BODY, headers=bearer("a1"))
            assert answer.status_code == 200
        # the certificate is checked: an unknown CA is refused by the client
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            httpx.get(f"{server.base_url}/healthz")
        # and nothing is served in clear text on that port
        with pytest.raises(httpx.TransportError):
            httpx.get(server.base_url.replace("https://", "http://") + "/healthz")


def test_loadgen_sends_its_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    world_file = tmp_path / "world.json"
    world_file.write_text(json.dumps({"urls": 40, "hosts": 4, "duration_days": 10}))
    speed = 10 * DAY_S / 4.0  # the world in about 4 wall seconds
    env = {
        "CRAWLSCHED_AUTH_TOKENS": "admin:a1,worker:w1",
        "CRAWLSCHED_CLOCK": "accelerated",
        "CRAWLSCHED_CLOCK_SPEED": repr(speed),
        "CRAWLSCHED_LEASE_TTL_S": repr(30 * speed),
        "CRAWLSCHED_MAX_REVISIT_S": repr(10 * DAY_S),
    }
    for name in list(os.environ):
        if name.upper().startswith("CRAWLSCHED_"):
            monkeypatch.delenv(name)
    with served(tmp_path, env) as server:
        args = ["loadgen", "--url", server.base_url, "--world", str(world_file), "--workers", "2"]
        # a worker token cannot register the world's URLs: one line, exit code 1
        monkeypatch.setenv("CRAWLSCHED_TOKEN", "w1")
        assert main(args) == 1
        err = capsys.readouterr().err
        assert "HTTP 403" in err and "--token" in err
        monkeypatch.delenv("CRAWLSCHED_TOKEN")
        report = tmp_path / "report.json"
        assert main([*args, "--token", "a1", "--json", str(report), "--seed", "5"]) == 0
    result = json.loads(report.read_text())
    assert result["crawls"] > 0 and result["clicks"] > 0
