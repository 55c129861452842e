"""Bodies of the host-control routes: ``PATCH /hosts/{host}``, ``GET /hosts``,
``DELETE /hosts/{host}`` and ``POST /urls/purge`` (docs/operations.md, "Frontier
controls")."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from service import examples
from service.schemas import MAX_CRAWL_DELAY_S, MAX_TIMESTAMP, HostOut, _In, _whole

__all__ = ["HostChangeIn", "HostDeletedOut", "HostsOut", "PurgeOut"]

#: Most concurrent leases a host may be given (the Redis record keeps 16 bits).
MAX_IN_FLIGHT = 65_535


class HostChangeIn(_In):
    """An operator's change to a host; fields left out (or null) stay as they are (an
    empty change answers the host as it is)."""

    model_config = ConfigDict(json_schema_extra={"examples": [examples.HOST_CHANGE_IN]})

    crawl_delay_s: Annotated[
        float | None,
        Field(
            None, gt=0, le=MAX_CRAWL_DELAY_S, allow_inf_nan=False,
            description="s between fetch starts (robots.txt Crawl-delay)",
        ),
    ]  # fmt: skip
    max_in_flight: Annotated[
        int | None,
        Field(None, ge=1, le=MAX_IN_FLIGHT, description="concurrent leases (default 1)"),
        BeforeValidator(_whole),  # JSON Schema's integers include 2.0
    ]
    blocked_until: Annotated[
        float | None,
        Field(
            None, ge=0, le=MAX_TIMESTAMP, allow_inf_nan=False,
            description="Unix s: no URL of the host is leased before then; 0 unblocks "
            "(and forgets the back-off)",
        ),
    ]  # fmt: skip
    paused: bool | None = Field(None, description="true: out of /next until false")


class HostsOut(BaseModel):
    """A page of hosts; ``cursor`` fetches the next (null: the last page)."""

    model_config = ConfigDict(json_schema_extra={"examples": [examples.HOSTS_OUT]})

    hosts: list[HostOut]
    cursor: str | None


class HostDeletedOut(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [examples.HOST_DELETED_OUT]})

    host: str
    removed: int = Field(description="URLs removed with the host")


class PurgeOut(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [examples.PURGE_OUT]})

    removed: int = Field(description="retired URLs deleted")
