"""The private Redis servers of the tests and benchmarks: a server started under a wrapper
command (as ``bench/scripts.py --meter instructions`` runs one under callgrind)."""

from __future__ import annotations

from pathlib import Path

import redis

from service.store.redis.local import LocalRedis


def test_a_server_runs_under_its_wrapper_command(tmp_path: Path) -> None:
    marker = tmp_path / "wrapped"
    # the wrapper notes that it ran, then becomes the server (sh -c: $0 is the marker)
    wrapper = ["sh", "-c", 'echo ran > "$0"; exec "$@"', str(marker)]
    server = LocalRedis(wrapper=wrapper)
    assert server.command()[: len(wrapper)] == wrapper
    with server:
        client = redis.Redis(port=server.port)
        try:
            assert client.ping()
        finally:
            client.close()
    assert marker.read_text() == "ran\n"
