"""Every Redis key name of the store, and the compact URL key.

All keys of shard ``n`` carry the hash tag ``{s<n>}``, so every script runs on one
slot, on a single Redis and on a Redis Cluster alike; the global keys carry ``{g}``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FOLD_GROUP", "GlobalKeys", "ShardKeys", "expand_url", "url_key"]

#: The consumer group of the folders on every shard's event stream.
FOLD_GROUP = "fold"


@dataclass(frozen=True, slots=True)
class ShardKeys:
    """The keys of one shard, in the order the scripts take them (``lib.lua``)."""

    shard: int
    prefix: str = "cs"

    @property
    def tag(self) -> str:
        return f"{self.prefix}:{{s{self.shard}}}:"

    @property
    def all(self) -> tuple[bytes, ...]:
        """KEYS of every shard script: meta, hosts, ready, leases, deadlines, finished,
        then the prefixes of the per-host queue and URL keys, then a spare name no script
        reads or writes (it keeps the optional keys after these at KEYS[10] on); encoded
        once."""
        t = self.tag
        names = (
            "meta", "hosts", "ready", "leases", "deadlines", "finished", "queue:", "urls:", "spare",
        )  # fmt: skip
        return tuple(f"{t}{name}".encode() for name in names)

    @property
    def meta(self) -> str:
        """The shard's counters and the controls its scripts read (lib.lua ctl)."""
        return f"{self.tag}meta"

    @property
    def hosts(self) -> str:
        return f"{self.tag}hosts"

    @property
    def ready(self) -> str:
        """The shard's hosts by readiness (lib.lua ``host_ready``)."""
        return f"{self.tag}ready"

    @property
    def deadlines(self) -> str:
        """The shard's active leases by deadline."""
        return f"{self.tag}deadlines"

    def queue(self, host: str) -> str:
        """Zset of the host's unleased URL keys by due time."""
        return f"{self.tag}queue:{host}"

    def urls(self, host: str) -> str:
        """Hash of the host's URL key -> stored URL entry: the packed URL record without
        its parts that hold only defaults, then the URL's estimator state
        (``records.unpack_entry``; ``lua/lib.lua``)."""
        return f"{self.tag}urls:{host}"

    def once(self, digest: str) -> bytes:
        """String: the answer this shard gave the event batch ``digest`` names (an
        idempotency key's record, expiring), one status digit per event."""
        return f"{self.tag}once:{digest}".encode()

    def signatures(self, host: str) -> str:
        """Hash of the host's URL key -> the content signature (ETag or body digest) of
        its last fetch that sent one (``signatures.lua``)."""
        return f"{self.tag}sig:{host}"

    def stale(self, host: str) -> str:
        """Hash of the host's URL key -> how many of its signals the fold found stale
        (within ``signal_discard_s`` of a crawl; ``fold.lua``); a URL with none has no
        field."""
        return f"{self.tag}stale:{host}"

    @property
    def events(self) -> str:
        """Stream: the shard's appended signal and click batches not yet folded, one
        entry of packed columns per batch (``append.lua``; read by the consumer group
        :data:`FOLD_GROUP`, deleted as ``fold.lua`` applies them)."""
        return f"{self.tag}events"


@dataclass(frozen=True, slots=True)
class GlobalKeys:
    """Keys shared by all shards."""

    prefix: str = "cs"

    @property
    def multiplier(self) -> str:
        """Hash: ``mean`` (ln λ₀), ``count`` and ``var`` of the global budget multiplier."""
        return f"{self.prefix}:{{g}}:lambda0"

    @property
    def meta(self) -> str:
        """Hash: ``shards``, the shard count the data was written with; ``layout``, the
        version of the stored records' layout (``records.LAYOUT``)."""
        return f"{self.prefix}:{{g}}:meta"

    @property
    def clock_epoch(self) -> str:
        """String: wall time (Unix s) the API processes' accelerated clocks count from."""
        return f"{self.prefix}:{{g}}:clock-epoch"

    @property
    def groups(self) -> str:
        """Hash: group key (``host:<name>``, ``label:<name>``, ``global``) -> the group's
        statistics as packed little-endian doubles (any count)."""
        return f"{self.prefix}:{{g}}:groups"

    @property
    def worker(self) -> str:
        """String: the id of the last ``crawlsched worker`` to beat, expiring with its
        heartbeat's TTL (absent: no live worker)."""
        return f"{self.prefix}:{{g}}:worker"

    @property
    def backlog(self) -> str:
        """Hash: folder id -> ``"<oldest> <until>"``, Redis-clock s: the append time of
        the oldest event it folded whose URL waits for re-estimation, and the end of the
        report (fields past their end are ignored and dropped)."""
        return f"{self.prefix}:{{g}}:backlog"

    def leader(self, role: str) -> str:
        """String: the API process that holds ``role`` (e.g. the rescorer), with a TTL."""
        return f"{self.prefix}:{{g}}:lead:{role}"


def url_key(url: str, host: str) -> str:
    """The URL as stored under its host: the path part of an ``https://host/…`` URL
    (a third of a typical URL's bytes), the whole URL otherwise.

    Examples
    --------
    >>> url_key("https://a.example/p?q=1", "a.example")
    '/p?q=1'
    >>> url_key("http://a.example/p", "a.example")
    'http://a.example/p'
    """
    head = f"https://{host}/"
    return url[len(head) - 1 :] if url.startswith(head) else url


def expand_url(key: str, host: str) -> str:
    """Inverse of :func:`url_key`.

    Examples
    --------
    >>> expand_url("/p?q=1", "a.example")
    'https://a.example/p?q=1'
    """
    return f"https://{host}{key}" if key.startswith("/") else key
