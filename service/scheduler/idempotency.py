"""Idempotency keys of event batches: what names a batch for the store.

A client sends one ``Idempotency-Key`` per logical batch and the same one with every
retry of it.  The store remembers the answer under a digest of the route, the key and
the batch itself, so a retry gets the first answer and changes nothing, while the same
key sent with another batch (a client reusing keys) names another batch and is applied
as one: a key is never taken to mean a batch it did not come with.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import msgspec
from pydantic import BaseModel

from service.scheduler.context import Context
from service.store.base import IdempotencyKey

__all__ = ["batch_key"]


def batch_key(
    ctx: Context, route: str, key: str | None, items: Sequence[BaseModel | msgspec.Struct]
) -> IdempotencyKey | None:
    """The store's name for a batch of ``items`` sent to ``route`` under ``key`` (None
    without a key), remembered for ``idempotency_s`` wall seconds.  ``items``: pydantic
    models, or msgspec structs with the same fields in the same order (the same digest).

    Examples
    --------
    A digest is 32 hexadecimal digits and depends on route, key and batch alike:

    >>> from service.metrics import Metrics
    >>> from service.clock import ManualClock
    >>> from service.schemas import ClickIn
    >>> from service.settings import Settings
    >>> from service.store.memory import MemoryStore
    >>> ctx = Context(MemoryStore(), ManualClock(), Settings(), Metrics())
    >>> a = [ClickIn(url="https://a.example/", time=1.0)]
    >>> b = [ClickIn(url="https://a.example/", time=2.0)]
    >>> k = batch_key(ctx, "click", "k1", a)
    >>> len(k.digest), k.ttl_s
    (32, 86400.0)
    >>> k == batch_key(ctx, "click", "k1", a)
    True
    >>> len({k, batch_key(ctx, "click", "k1", b), batch_key(ctx, "signal", "k1", a)})
    3
    >>> batch_key(ctx, "click", None, a) is None
    True
    """
    if key is None:
        return None
    h = hashlib.blake2b(digest_size=16)
    for part in (route, key):
        h.update(part.encode("utf-8", "surrogateescape"))
        h.update(b"\0")
    rows = [
        msgspec.structs.astuple(item)
        if isinstance(item, msgspec.Struct)
        else tuple(getattr(item, name) for name in type(item).model_fields)
        for item in items
    ]
    h.update(repr(rows).encode("utf-8", "surrogateescape"))
    return IdempotencyKey(h.hexdigest(), ctx.settings.idempotency_s)
