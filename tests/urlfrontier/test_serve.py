"""``crawlsched serve --grpc-port``: a client generated from the proto runs a crawl
cycle against the command as users start it (HTTP and gRPC in one process)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest

from service.grpc import urlfrontier_pb2 as pb
from service.grpc import urlfrontier_pb2_grpc
from service.ports import free_port
from service.subprocesses import served_process

pytestmark = pytest.mark.slow
ADMIN = (("authorization", "Bearer adm-7"),)


def test_a_crawl_cycle_against_crawlsched_serve() -> None:
    http_port, grpc_port = free_port(), free_port()
    cmd = [
        sys.executable, "-m", "service", "serve", "--port", str(http_port),
        "--grpc-port", str(grpc_port), "--log-level", "warning",
    ]  # fmt: skip
    env = {**os.environ, "CRAWLSCHED_STORE": "memory", "CRAWLSCHED_AUTH_TOKENS": "admin:adm-7"}
    base = f"http://127.0.0.1:{http_port}"
    with (
        served_process(cmd, env, f"{base}/healthz", name="serve", startup_timeout_s=60),
        grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel,
    ):
        stub = urlfrontier_pb2_grpc.URLFrontierStub(channel)
        with pytest.raises(grpc.RpcError) as err:
            stub.GetStats(pb.QueueWithinCrawlParams(), timeout=10)
        assert err.value.code() is grpc.StatusCode.UNAUTHENTICATED  # type: ignore[attr-defined]

        urls = [f"https://h{i}.example/page" for i in range(3)]

        def discovered() -> Iterator[pb.URLItem]:
            for u in urls:
                yield pb.URLItem(discovered=pb.DiscoveredURLItem(info=pb.URLInfo(url=u)))

        acks = list(stub.PutURLs(discovered(), metadata=ADMIN, timeout=30))
        assert [(a.ID, a.status) for a in acks] == [(u, pb.AckMessage.OK) for u in urls]

        got = list(stub.GetURLs(pb.GetParams(delay_requestable=60), metadata=ADMIN, timeout=30))
        assert sorted(i.url for i in got) == urls

        def fetched() -> Iterator[pb.URLItem]:
            for info in got:
                sent = pb.URLInfo(url=info.url, key=info.key)
                sent.metadata.MergeFrom(info.metadata)
                sent.metadata["signature"].values.append("sha1:0f0f")
                sent.metadata["fetch.statusCode"].values.append("200")
                yield pb.URLItem(known=pb.KnownURLItem(info=sent, refetchable_from_date=1))

        acks = list(stub.PutURLs(fetched(), metadata=ADMIN, timeout=30))
        assert [a.status for a in acks] == [pb.AckMessage.OK] * 3

        stats = stub.GetStats(pb.QueueWithinCrawlParams(), metadata=ADMIN, timeout=10)
        assert (stats.size, stats.inProcess, stats.numberOfQueues) == (3, 0, 3)
        assert stats.counts["urls"] == 3
        # the same frontier over HTTP
        explained = httpx.get(
            f"{base}/urls/{urls[0]}", headers={"Authorization": "Bearer adm-7"}, timeout=10
        ).json()
        assert explained["crawls"] == 1


def test_the_readme_client_example_runs_as_written() -> None:
    http_port, grpc_port = free_port(), free_port()
    cmd = [
        sys.executable, "-m", "service", "serve", "--port", str(http_port),
        "--grpc-port", str(grpc_port), "--log-level", "warning",
    ]  # fmt: skip
    env = {**os.environ, "CRAWLSCHED_STORE": "memory"}
    example = Path(__file__).parents[2] / "docs" / "examples" / "urlfrontier_client.py"
    with served_process(
        cmd, env, f"http://127.0.0.1:{http_port}/healthz", name="serve", startup_timeout_s=60
    ):
        done = subprocess.run(
            [sys.executable, str(example), f"127.0.0.1:{grpc_port}"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[0]", "['https://example.com/']", "[0]", "1"]
