"""URL canonicalisation: one spelling per URL, and the host it belongs to."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

__all__ = ["MAX_URL_LENGTH", "canonical_url", "host_of"]

#: Longest URL accepted, characters (the de-facto limit of browsers and sitemaps).
MAX_URL_LENGTH = 2048

_DEFAULT_PORTS = {"http": 80, "https": 443}
_WHITE_SPACE = re.compile(r"\s")
#: Already canonical: lower-case scheme and host, no port or a non-default one, a path,
#: no fragment, no white space, no empty trailing query (the fast path of canonical_url).
_CANONICAL = re.compile(
    r"(https?)://[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?(?::([1-9][0-9]{0,4}))?/[^\s#]*(?<!\?)"
)


def canonical_url(raw: str) -> str:
    """Return the canonical form of an http(s) URL.

    Lower-cases scheme and host, drops a default port and the fragment, and
    writes an empty path as ``/``.

    Raises
    ------
    ValueError
        If the URL is longer than :data:`MAX_URL_LENGTH`, contains white space,
        is not http(s), or has no host.

    Examples
    --------
    >>> canonical_url("HTTPS://Example.COM:443#top")
    'https://example.com/'
    >>> canonical_url("http://a.example:8080/p?q=1")
    'http://a.example:8080/p?q=1'
    """
    if len(raw) > MAX_URL_LENGTH:
        raise ValueError(f"URL longer than {MAX_URL_LENGTH} characters")
    fast = _CANONICAL.fullmatch(raw)
    if fast is not None and _port_is_canonical(fast.group(1), fast.group(2)):
        return raw
    return _canonicalise(raw)


def _port_is_canonical(scheme: str, port: str | None) -> bool:
    return port is None or _DEFAULT_PORTS[scheme] != int(port) <= 65535


def _canonicalise(raw: str) -> str:
    """The general path of :func:`canonical_url` (``urllib.parse``)."""
    if _WHITE_SPACE.search(raw):
        raise ValueError("URL contains white space")
    try:
        parts = urlsplit(raw)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"not a valid URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise ValueError("URL scheme must be http or https")
    hostname = (parts.hostname or "").lower()
    if not hostname:
        raise ValueError("URL has no host")
    netloc = hostname if port in (None, _DEFAULT_PORTS[scheme]) else f"{hostname}:{port}"
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))


def host_of(url: str) -> str:
    """The politeness unit of a canonical URL: ``host[:port]``.

    Examples
    --------
    >>> host_of("https://shop.example:8443/a")
    'shop.example:8443'
    """
    return url.split("/", 3)[2]
