"""The Redis store (single Redis or Redis Cluster)."""

from service.store.redis.store import RedisStore, open_client

__all__ = ["RedisStore", "open_client"]
