"""The published OpenAPI document, with the limits of the app's own settings.

Limits that are settings (``max_next``, ``max_batch``) are marked in the schemas with
:func:`bound_by`; :func:`install_openapi` writes each one's value for the app's
settings into the document when it is first asked for, so the schema states the
limits the running service enforces.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from service.settings import Settings

__all__ = ["bound_by", "install_openapi"]

#: Schema key that names the setting bounding an array's length or an integer.
_LIMIT_KEY = "x-crawlsched-limit"


def bound_by(setting: str) -> dict[str, Any]:
    """``json_schema_extra`` for a field or parameter bounded by ``setting``: an
    array's ``maxItems``, a number's ``maximum``.

    Raises
    ------
    ValueError
        If :class:`~service.settings.Settings` has no integer field ``setting``.
    """
    field = Settings.model_fields.get(setting)
    if field is None or field.annotation is not int:
        raise ValueError(f"no integer setting {setting!r}")
    return {_LIMIT_KEY: setting}


def install_openapi(app: FastAPI, settings: Settings) -> None:
    """Make ``app.openapi()`` publish the limits of ``settings``."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title, version=app.version, openapi_version=app.openapi_version,
                description=app.description, routes=app.routes, tags=app.openapi_tags,
                servers=app.servers,
            )  # fmt: skip
            _bind_limits(schema, settings)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _bind_limits(node: Any, settings: Settings) -> None:
    if isinstance(node, dict):
        setting = node.pop(_LIMIT_KEY, None)
        if setting is not None:
            key = "maxItems" if node.get("type") == "array" else "maximum"
            node[key] = getattr(settings, setting)
        for value in node.values():
            _bind_limits(value, settings)
    elif isinstance(node, list):
        for value in node:
            _bind_limits(value, settings)
