"""The store's check of the server's listpack settings at start, against real servers
(tuning.py): a warning naming the low ones, nothing when they are as the store wants,
and the server's configuration left as it was."""

from __future__ import annotations

import logging

import pytest
import redis

from service.store.redis import RedisStore
from service.store.redis.local import LocalRedis
from service.store.redis.tuning import LISTPACK_SETTINGS

pytestmark = [pytest.mark.anyio, pytest.mark.redis]


def _listpack_config(port: int) -> dict[str, str]:
    with redis.Redis(port=port, decode_responses=True) as raw:
        return {k: str(v) for k, v in raw.config_get("*-max-listpack-value").items()}


async def test_low_settings_are_warned_of_and_left_alone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with LocalRedis(settings={"zset-max-listpack-value": 300}) as server:  # hash: default 64
        before = _listpack_config(server.port)
        with caplog.at_level(logging.WARNING, logger="service.store.redis.tuning"):
            store = await RedisStore.connect(server.url, shards=2)
            await store.close()
        (record,) = [r for r in caplog.records if r.name == "service.store.redis.tuning"]
        assert record.levelno == logging.WARNING
        message = record.getMessage()
        assert "hash-max-listpack-value 64" in message and "hash-max-listpack-value 256" in message
        assert "zset-max-listpack-value" not in message  # 300 is enough
        assert _listpack_config(server.port) == before  # the server is not reconfigured


async def test_the_stores_settings_draw_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    with LocalRedis() as server:
        config = _listpack_config(server.port)
        assert {name: int(config[name]) for name in LISTPACK_SETTINGS} == LISTPACK_SETTINGS
        with caplog.at_level(logging.INFO, logger="service.store.redis.tuning"):
            store = await RedisStore.connect(server.url, shards=2)
            await store.close()
        assert not [r for r in caplog.records if r.name == "service.store.redis.tuning"]


async def test_a_refused_config_get_is_not_judged(caplog: pytest.LogCaptureFixture) -> None:
    """Managed services deny CONFIG: the store starts, and says it could not check."""
    with LocalRedis(settings={}) as server:
        with redis.Redis(port=server.port) as raw:
            raw.acl_setuser(
                "crawler", enabled=True, passwords=["+secret"], keys=["~*"], channels=["&*"],
                commands=["+@all", "-config"],
            )  # fmt: skip
        url = f"redis://crawler:secret@127.0.0.1:{server.port}/0"
        with caplog.at_level(logging.INFO, logger="service.store.redis.tuning"):
            store = await RedisStore.connect(url, shards=2)
            try:
                await store.upsert_urls([], 0.0)
            finally:
                await store.close()
        (record,) = [r for r in caplog.records if r.name == "service.store.redis.tuning"]
        assert record.levelno == logging.INFO and "not checked" in record.getMessage()
