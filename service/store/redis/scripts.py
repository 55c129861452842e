"""The Lua scripts: loaded from ``lua/`` once, registered on every node, called by SHA.

Each script is ``lib.lua`` (records, due time, ready set, leases) followed by one
operation.  Calls go out in pipelines (concurrently on a cluster); a ``NOSCRIPT``
answer (a restarted or new node has an empty script cache) registers the scripts
again and re-sends just those calls.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import NoScriptError, ResponseError

__all__ = ["Call", "Client", "ScriptSet"]

Client = Redis | RedisCluster

NAMES = (
    "upsert", "remove", "get", "host_urls", "host", "set_thresholds", "set_params", "signals",
    "clicks", "lease", "lease_status", "settle", "observe", "lambda0", "stats",
    "stale_hosts", "host_ctl", "hosts", "delete_host", "purge", "signatures", "append", "fold",
    "rescore_read", "set_rescored",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Call:
    """One script call: script name, KEYS, ARGV."""

    script: str
    keys: Sequence[str | bytes]
    args: Sequence[str | bytes | int | float]
    #: Redis Cluster: the node to send it to (a call whose keys span several slots of
    #: one node); None: the node of its keys' slot.
    node: Any = None


def _source(lib: str, op: str) -> str:
    """``lib.lua`` then the operation; a shebang line (``#!lua flags=...``, Redis 7
    script flags) of the operation stays the first line."""
    if op.startswith("#!"):
        shebang, _, body = op.partition("\n")
        return f"{shebang}\n{lib}\n{body}"
    return f"{lib}\n{op}"


class ScriptSet:
    """The store's scripts, by name, with their SHA1."""

    def __init__(self) -> None:
        folder = resources.files(__package__ or "service.store.redis") / "lua"
        lib = (folder / "lib.lua").read_text()
        self.sources = {n: _source(lib, (folder / f"{n}.lua").read_text()) for n in NAMES}
        self.sha = {n: hashlib.sha1(src.encode()).hexdigest() for n, src in self.sources.items()}

    async def register(self, client: Client) -> None:
        """SCRIPT LOAD every script (a cluster client sends it to every primary)."""
        for src in self.sources.values():
            await client.script_load(src)

    async def loaded(self, client: Client) -> bool:
        """True when every script is in the script cache (of every primary)."""
        answers = await client.script_exists(*self.sha.values())
        return all(bool(a) for a in answers)

    async def run(self, client: Client, calls: Sequence[Call]) -> list[Any]:
        """Run ``calls`` in one pipeline; their answers in order.

        Raises
        ------
        redis.exceptions.RedisError
            The first error any call answered (after one NOSCRIPT reload).
        """
        results: list[Any] = [None] * len(calls)
        todo = list(range(len(calls)))
        for attempt in (0, 1):
            answers = await self._send(client, [calls[i] for i in todo])
            missing = []
            for i, answer in zip(todo, answers, strict=True):
                if isinstance(answer, NoScriptError) and attempt == 0:
                    missing.append(i)
                elif isinstance(answer, Exception):
                    raise answer
                else:
                    results[i] = answer
            if not missing:
                break
            await self.register(client)
            todo = missing
        return results

    async def _send(self, client: Client, calls: Sequence[Call]) -> list[Any]:
        """One pipeline on a single Redis; concurrent calls on a cluster (redis-py does
        not pipeline EVALSHA there), each routed to its slot's primary."""
        if isinstance(client, RedisCluster):
            return await asyncio.gather(
                *(
                    client.evalsha(self.sha[c.script], len(c.keys), *c.keys, *c.args)
                    if c.node is None
                    else client.execute_command(
                        "EVALSHA",
                        self.sha[c.script],
                        len(c.keys),
                        *c.keys,
                        *c.args,
                        target_nodes=c.node,
                    )  # fmt: skip
                    for c in calls
                ),
                return_exceptions=True,
            )
        if len(calls) == 1:  # one call: no pipeline object (~20 µs of redis-py less)
            c = calls[0]
            try:
                return [await client.evalsha(self.sha[c.script], len(c.keys), *c.keys, *c.args)]
            except ResponseError as e:  # answered by the script or server, as a pipeline
                return [e]
        pipe = client.pipeline(transaction=False)
        for c in calls:
            pipe.evalsha(self.sha[c.script], len(c.keys), *c.keys, *c.args)
        return list(await pipe.execute(raise_on_error=False))
