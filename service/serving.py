"""What ``crawlsched serve`` checks before it starts uvicorn: where it may listen
without tokens, and that the TLS files load.

The settings are built (and refused, with a one-line message) by the CLI first;
the app it then hands to uvicorn is built from those same settings.
"""

from __future__ import annotations

import ipaddress
import ssl
from pathlib import Path

from service.errors import ConfigError
from service.settings import Settings

__all__ = ["check_bind", "check_tls", "is_loopback"]


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` listens on the loopback interface only.

    ``localhost``, ``127.0.0.0/8`` and ``::1`` (also written ``[::1]``) are;
    every other name or address, ``0.0.0.0`` and ``::`` included, is not.
    """
    name = host.strip().removeprefix("[").removesuffix("]")
    if name.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:  # a host name: it may resolve to any interface
        return False


def check_bind(host: str, settings: Settings, *, insecure: bool) -> bool:
    """Refuse to serve an open API beyond loopback.

    Parameters
    ----------
    host : str
        The interface to bind.
    settings : Settings
        Authentication is on when they hold at least one token.
    insecure : bool
        ``--insecure``: serve without tokens on any interface anyway.

    Returns
    -------
    bool
        True if the API will be reachable beyond loopback without authentication
        (allowed by ``insecure``): the caller should say so.

    Raises
    ------
    ConfigError
        If no token is configured, ``host`` is not loopback and ``insecure`` is off.
    """
    if settings.auth_pairs() or is_loopback(host):
        return False
    if insecure:
        return True
    raise ConfigError(
        f"refusing to bind {host} without authentication: set CRAWLSCHED_AUTH_TOKENS "
        "or CRAWLSCHED_AUTH_TOKENS_FILE, bind 127.0.0.1, or pass --insecure"
    )


def check_tls(keyfile: Path | None, certfile: Path | None) -> None:
    """Check that the TLS key and certificate are given together and load.

    Raises
    ------
    ConfigError
        If only one is given, or they do not load as a PEM key and its certificate.
    """
    if keyfile is None and certfile is None:
        return
    if keyfile is None or certfile is None:
        raise ConfigError("--ssl-keyfile and --ssl-certfile go together")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(certfile, keyfile)
    except OSError as exc:  # ssl.SSLError included
        reason = getattr(exc, "reason", None) or exc.strerror or str(exc)
        raise ConfigError(
            f"cannot load the TLS certificate {certfile} with key {keyfile}: {reason}"
        ) from None
