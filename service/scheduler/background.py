"""Background passes run by one API process of several (the store's leader)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Awaitable, Callable

from service.errors import StoreUnavailable
from service.scheduler.context import Context

__all__ = ["run_leading"]

log = logging.getLogger(__name__)


async def run_leading(
    ctx: Context,
    role: str | None,
    interval_s: float,
    step: Callable[[Context], Awaitable[object]],
    stop: asyncio.Event | None = None,
    name: str | None = None,
) -> None:
    """Run ``step`` every ``interval_s`` wall seconds until ``stop`` is set or the task
    is cancelled, while this process holds the store's ``role`` (every process runs
    it when ``role`` is None).

    The role lapses after a few intervals without renewal, so another process takes
    over when its holder dies.  A failing pass is logged (as ``name``, default the
    role) and retried next time.
    """
    owner = secrets.token_hex(8)
    label = name or role or "background"
    store_down = False
    while stop is None or not stop.is_set():
        try:
            if role is None or await ctx.store.try_lead(role, owner, max(5.0, 8 * interval_s)):
                await step(ctx)
            store_down = False
        except asyncio.CancelledError:
            raise
        except StoreUnavailable as exc:
            if not store_down:
                log.warning("%s paused: %s", label, exc)
            store_down = True
        except Exception:  # keep the loop alive; the next pass retries
            log.exception("%s pass failed", label)
        if stop is None:
            await asyncio.sleep(interval_s)
        else:  # a stop ends the wait at once (also when a store call swallowed a cancel)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval_s)
