"""Private ``redis-server`` processes on free ports: for the tests, the benchmarks and
local runs (never a shared server, never a mock).

Raises :class:`RuntimeError` when the binaries are missing: a test that needs Redis
fails loudly instead of skipping.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import redis
from service.ports import free_port
from service.store.redis.tuning import LISTPACK_SETTINGS

__all__ = ["LocalCluster", "LocalRedis"]


def _binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(f"{name} not found on PATH: install the Redis server package")
    return path


class LocalRedis:
    """One ``redis-server`` in a directory of its own, by default with the listpack
    settings the store assumes (:data:`~service.store.redis.tuning.LISTPACK_SETTINGS`).

    Parameters
    ----------
    aof : bool
        Append-only file with ``appendfsync always`` (every acknowledged write is on
        disk); otherwise nothing is persisted.
    cluster : bool
        Start in cluster mode (a node to join with :class:`LocalCluster`).
    directory : Path, optional
        Data directory (kept across :meth:`kill` / :meth:`start`); a temporary one
        by default.
    settings : Mapping[str, int], optional
        Server settings given on the command line (name without ``--``: value);
        :data:`~service.store.redis.tuning.LISTPACK_SETTINGS` by default, ``{}`` for
        Redis's own defaults.
    wrapper : Sequence[str], optional
        A command the server runs under (``valgrind --tool=callgrind …`` for a
        benchmark that counts instructions); none by default.
    """

    def __init__(
        self,
        *,
        aof: bool = False,
        cluster: bool = False,
        directory: Path | None = None,
        settings: Mapping[str, int] = LISTPACK_SETTINGS,
        wrapper: Sequence[str] = (),
    ) -> None:
        self.port = free_port()
        self._tmp = None if directory else tempfile.TemporaryDirectory(prefix="crawlsched-redis-")
        self.directory = directory or Path(self._tmp.name)  # type: ignore[union-attr]
        self.aof = aof
        self.cluster = cluster
        self.bus_port = free_port() if cluster else None
        self.settings = dict(settings)
        self.wrapper = list(wrapper)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def command(self) -> list[str]:
        """The ``redis-server`` command line."""
        args = [
            *self.wrapper, _binary("redis-server"), "--port", str(self.port), "--bind", "127.0.0.1",
            "--dir", str(self.directory), "--save", "", "--daemonize", "no",
            "--logfile", str(self.directory / "redis.log"),
            "--appendonly", "yes" if self.aof else "no",
        ]  # fmt: skip
        for name, value in self.settings.items():
            args += [f"--{name}", str(value)]
        if self.aof:
            args += ["--appendfsync", "always"]
        if self.cluster:
            args += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
            args += ["--cluster-port", str(self.bus_port)]
        return args

    def start(self, timeout_s: float | None = None) -> LocalRedis:
        """Start the server and wait until it answers PING, at most ``timeout_s`` (10 s,
        or 120 s under a ``wrapper``).

        Raises
        ------
        RuntimeError
            If the binary is missing or the server does not come up in time.
        """
        if timeout_s is None:
            timeout_s = 120.0 if self.wrapper else 10.0
        self.process = subprocess.Popen(self.command(), stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout_s
        client = redis.Redis(port=self.port, socket_connect_timeout=0.2)
        try:
            while True:
                with contextlib.suppress(redis.ConnectionError, redis.BusyLoadingError):
                    if client.ping():
                        return self
                if self.process.poll() is not None or time.monotonic() > deadline:
                    log = (self.directory / "redis.log").read_text(errors="replace")[-2000:]
                    self.stop()
                    raise RuntimeError(f"redis-server on port {self.port} did not start:\n{log}")
                time.sleep(0.02)
        finally:
            client.close()

    def kill(self) -> None:
        """``kill -9``: no shutdown, no final save."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        """Stop the server and remove its temporary directory."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> LocalRedis:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


class LocalCluster:
    """A Redis Cluster of ``masters`` nodes (no replicas) created with ``redis-cli``."""

    def __init__(self, masters: int = 3) -> None:
        self.nodes = [LocalRedis(cluster=True) for _ in range(masters)]

    @property
    def url(self) -> str:
        """Any node's URL: cluster clients discover the others."""
        return self.nodes[0].url

    def start(self, timeout_s: float = 30.0) -> LocalCluster:
        """Start the nodes, create the cluster, wait for ``cluster_state:ok``.

        Raises
        ------
        RuntimeError
            If a binary is missing or the cluster does not form in time.
        """
        try:
            self._form(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def _form(self, timeout_s: float) -> None:
        for node in self.nodes:
            node.start()
        addresses = [f"127.0.0.1:{n.port}" for n in self.nodes]
        cmd = [_binary("redis-cli"), "--cluster", "create", *addresses]
        done = subprocess.run(
            [*cmd, "--cluster-replicas", "0", "--cluster-yes"],
            capture_output=True, text=True, timeout=timeout_s, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed:\n{done.stdout}{done.stderr}")
        deadline = time.monotonic() + timeout_s
        for node in self.nodes:
            client = redis.Redis(port=node.port)
            try:
                while client.cluster("info").get("cluster_state") != "ok":
                    if time.monotonic() > deadline:
                        raise RuntimeError("the cluster did not reach cluster_state:ok")
                    time.sleep(0.05)
            finally:
                client.close()

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()
