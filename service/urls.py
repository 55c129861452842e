"""URL canonicalisation: one spelling per URL, and the host it belongs to."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

__all__ = ["MAX_URL_LENGTH", "canonical_url", "host_of"]

#: Longest URL accepted, characters (the de-facto limit of browsers and sitemaps).
MAX_URL_LENGTH = 2048

_DEFAULT_PORTS = {"http": 80, "https": 443}


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
    if any(c.isspace() for c in raw):
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
    return urlsplit(url).netloc
