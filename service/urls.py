"""URL canonicalisation: one spelling per URL, and the host it belongs to.

The URLs the service accepts are exactly those that match :data:`URL_PATTERN` (the
pattern the OpenAPI schema publishes) and are at most :data:`MAX_URL_LENGTH`
characters long.  Their canonical form has a lower-case scheme, an ASCII host (an
internationalised host is written in punycode, ``xn--``), no default port, no user
information, no fragment and a path of at least ``/``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import idna

__all__ = [
    "MAX_URL_LENGTH",
    "URL_PATTERN",
    "all_canonical",
    "canonical_host",
    "canonical_url",
    "host_of",
]

#: Longest URL accepted, characters (the de-facto limit of browsers and sitemaps).
MAX_URL_LENGTH = 2048

_DEFAULT_PORTS = {"http": 80, "https": 443}
#: Characters no URL may hold anywhere: controls, space and DEL (RFC 3986, section 2).
_EXCLUDED = r"\x00-\x20\x7f"
#: A host: RFC 3986 reg-name characters without percent-encoding, or any non-ASCII
#: character (an internationalised name).  IP literals (``[…]``) are not accepted.
_HOST = r"(?:[A-Za-z0-9._~!$&'()*+,;=-]|[^\x00-\x7f])+"
#: A port in 1–65535, leading zeros allowed; empty means the default.
_PORT = (
    r"0*(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])"
)
#: The URLs the service accepts (ECMA-262 and Python syntax alike): scheme http or
#: https in any case, optional user information, a host, an optional port, then a
#: path, query and fragment without controls or spaces.
URL_PATTERN = (
    rf"^[Hh][Tt][Tt][Pp][Ss]?://(?:[^{_EXCLUDED}/?#@\\]*@)?{_HOST}(?::(?:{_PORT})?)?"
    rf"(?:[/?#][^{_EXCLUDED}]*)?$"
)
_URL = re.compile(
    rf"(?P<scheme>[Hh][Tt][Tt][Pp][Ss]?)://(?:[^{_EXCLUDED}/?#@\\]*@)?(?P<host>{_HOST})"
    rf"(?::(?P<port>{_PORT})?)?(?P<rest>(?:[/?#][^{_EXCLUDED}]*)?)"
)
#: Already canonical (the fast path of canonical_url, for ASCII strings): lower-case
#: scheme and host, no port or a non-default one without leading zeros, a path, no
#: fragment, no empty trailing query.
_CANONICAL = re.compile(
    rf"(https?)://[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?(?::([1-9][0-9]{{0,4}}))?/[^{_EXCLUDED}#]*(?<!\?)"
)
#: Canonical without a port, for :func:`all_canonical`: a line break (excluded from
#: URLs) separates the URLs of a batch checked in one match.
_PLAIN = rf"https?://[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?/[^{_EXCLUDED}#]*(?<!\?)"
_ALL_PLAIN = re.compile(rf"{_PLAIN}(?:\n{_PLAIN})*")
_BAD_CHARACTER = re.compile(rf"[{_EXCLUDED}]")
_SCHEME = re.compile(r"[Hh][Tt][Tt][Pp][Ss]?://")
#: Full stops that IDNA reads as label separators (UTS #46, section 4).
_DOTS = str.maketrans({"\u3002": ".", "\uff0e": ".", "\uff61": "."})


def canonical_url(raw: str) -> str:
    """Return the canonical form of an http(s) URL.

    Lower-cases scheme and host, writes an internationalised host in punycode
    (:func:`canonical_host`), drops a default port, user information and the
    fragment, and writes an empty path as ``/``.

    Raises
    ------
    ValueError
        If the URL is longer than :data:`MAX_URL_LENGTH`, is not valid Unicode, or
        does not match :data:`URL_PATTERN` (the reason names the first part at fault).

    Examples
    --------
    >>> canonical_url("HTTPS://Example.COM:443#top")
    'https://example.com/'
    >>> canonical_url("http://a.example:8080/p?q=1")
    'http://a.example:8080/p?q=1'
    >>> canonical_url("https://Bücher.example/")
    'https://xn--bcher-kva.example/'
    """
    if len(raw) > MAX_URL_LENGTH:
        raise ValueError(f"URL longer than {MAX_URL_LENGTH} characters")
    fast = _CANONICAL.fullmatch(raw) if raw.isascii() else None
    if fast is not None and _port_is_canonical(fast.group(1), fast.group(2)):
        return raw
    return _canonicalise(raw)


def all_canonical(urls: Sequence[str]) -> bool:
    """True when :func:`canonical_url` would return every one of ``urls`` unchanged
    because each is already canonical, without a port and at most
    :data:`MAX_URL_LENGTH` long (one match over the batch); False says nothing about
    the others (check them one by one).

    Examples
    --------
    >>> all_canonical(["https://a.example/x", "http://b.example/?q=1"])
    True
    >>> all_canonical(["https://a.example/x", "https://A.example/"])
    False
    >>> all_canonical(["https://a.example/x\\nhttps://b.example/"])
    False
    """
    if not urls or max(map(len, urls)) > MAX_URL_LENGTH:
        return not urls
    joined = "\n".join(urls)
    if not joined.isascii() or joined.count("\n") != len(urls) - 1:  # a URL holds one
        return False
    return _ALL_PLAIN.fullmatch(joined) is not None


def _port_is_canonical(scheme: str, port: str | None) -> bool:
    return port is None or _DEFAULT_PORTS[scheme] != int(port) <= 65535


def _canonicalise(raw: str) -> str:
    """The general path of :func:`canonical_url`."""
    match = _URL.fullmatch(raw)
    if match is None:
        raise ValueError(_why_not(raw))
    _check_unicode(raw)
    scheme = match["scheme"].lower()
    host = canonical_host(match["host"])
    port = match["port"]
    netloc = host if not port or int(port) == _DEFAULT_PORTS[scheme] else f"{host}:{int(port)}"
    rest = match["rest"].split("#", 1)[0]
    path, _, query = rest.partition("?")
    if not path.startswith("/"):
        path = "/" + path
    return f"{scheme}://{netloc}{path}?{query}" if query else f"{scheme}://{netloc}{path}"


def _why_not(raw: str) -> str:
    """The reason a string does not match :data:`URL_PATTERN`, for a person."""
    if _BAD_CHARACTER.search(raw):
        return "URL contains white space or a control character"
    if _SCHEME.match(raw) is None:
        return "URL scheme must be http or https (followed by ://)"
    return "URL has no valid host (letters, digits, -._~!$&'()*+,;= or non-ASCII) or port (1-65535)"


def _check_unicode(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("URL is not valid Unicode (lone surrogate)") from None


def canonical_host(raw: str) -> str:
    """The canonical spelling of a host name: lower case, ASCII.

    An internationalised name is converted by IDNA 2008 with the UTS #46 mapping
    (non-transitional, as browsers do), so ``bücher.example`` and
    ``xn--bcher-kva.example`` are one host.  A name IDNA refuses (symbols, emoji,
    characters the web still carries) is lower-cased and each non-ASCII label written
    in punycode as it stands, so every accepted name has one ASCII form, and that form
    is its own canonical form.

    Raises
    ------
    ValueError
        If the name is not valid Unicode (a lone surrogate).

    References
    ----------
    RFC 5891 (IDNA 2008, section 4); Unicode Technical Standard #46 (section 4,
    "Processing"); RFC 3492 (punycode).

    Examples
    --------
    >>> canonical_host("BÜCHER.example")
    'xn--bcher-kva.example'
    >>> canonical_host("Shop.Example")
    'shop.example'
    """
    if raw.isascii():
        return raw.lower()
    _check_unicode(raw)
    name = raw.translate(_DOTS)
    try:
        return idna.encode(name, uts46=True).decode("ascii")
    except (idna.IDNAError, UnicodeError):
        pass
    return ".".join(
        label.lower() if label.isascii() else "xn--" + label.lower().encode("punycode").decode()
        for label in name.split(".")
    )


def host_of(url: str) -> str:
    """The politeness unit of a canonical URL: ``host[:port]``.

    Examples
    --------
    >>> host_of("https://shop.example:8443/a")
    'shop.example:8443'
    """
    return url.split("/", 3)[2]
