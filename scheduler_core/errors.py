"""Exceptions of :mod:`scheduler_core`.

The tree::

    CoreError                 root of every error the core raises
    └── ParameterError        an argument is out of its domain (also a ValueError)
"""

from __future__ import annotations

__all__ = ["CoreError", "ParameterError"]


class CoreError(Exception):
    """Root of every error raised by :mod:`scheduler_core`."""


class ParameterError(CoreError, ValueError):
    """An argument lies outside its domain; the message names the argument."""
