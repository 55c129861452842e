"""URLFrontier messages to and from crawlsched's terms.

A URLFrontier queue is a crawlsched host: the queue key of every URL is its host,
whatever key the client sent.  Metadata travels as ``map<string, StringList>``;
crawlsched reads a few well-known keys from a crawler's metadata (StormCrawler's
names first) and writes its own under ``crawlsched.``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from service.grpc import urlfrontier_pb2 as pb
from service.store.base import UrlState

__all__ = [
    "DEFAULT_CRAWL",
    "LEASE_KEY",
    "Metadata",
    "fetch_status",
    "lease_of",
    "metadata_of",
    "redirect_of",
    "retry_after_of",
    "signature_of",
    "url_info",
    "url_item",
]

#: The crawl id URLFrontier clients send for the default crawl ("" means it too).
DEFAULT_CRAWL = "DEFAULT"
#: Metadata key of the lease a URL was handed out under (GetURLs writes it; a crawler
#: that sends it back with the KnownURLItem settles that lease).
LEASE_KEY = "crawlsched.lease_id"
#: Metadata keys of the HTTP status of a fetch, first found wins.
STATUS_KEYS = ("fetch.statusCode", "status", "http.status")
#: Metadata keys of a content signature: a digest of the body or the ETag (lower case;
#: matched case-insensitively), first found wins.
SIGNATURE_KEYS = ("signature", "content.signature", "etag", "protocol.etag", "http.etag")

#: Metadata keys of the answer's Retry-After header (seconds).
RETRY_AFTER_KEYS = ("protocol.retry-after", "retry-after")
#: Metadata keys of a redirect's target.
REDIRECT_KEYS = ("_redirTo", "redirect_to")

Metadata = dict[str, list[str]]


def metadata_of(info: pb.URLInfo) -> Metadata:
    """The metadata of a URLInfo as a plain dict of lists."""
    return {key: list(values.values) for key, values in info.metadata.items()}


def _first(meta: Mapping[str, Sequence[str]], keys: Sequence[str]) -> str | None:
    lowered = {k.lower(): v for k, v in meta.items()}
    for key in keys:
        values = lowered.get(key.lower())
        if values and values[0].strip():
            return values[0].strip()
    return None


def fetch_status(meta: Mapping[str, Sequence[str]]) -> int | None:
    """The HTTP status a crawler reported (``fetch.statusCode``), or None.

    Examples
    --------
    >>> fetch_status({"fetch.statusCode": ["304"]})
    304
    >>> fetch_status({"fetch.statusCode": ["n/a"]}) is None
    True
    """
    raw = _first(meta, STATUS_KEYS)
    if raw is None or not raw.isascii() or not raw.isdigit() or len(raw) > 3:
        return None
    return int(raw)


def signature_of(meta: Mapping[str, Sequence[str]]) -> str | None:
    """The content signature a crawler reported (a body digest or an ETag), or None.

    Examples
    --------
    >>> signature_of({"protocol.ETag": ['"abc"']})
    '"abc"'
    """
    return _first(meta, SIGNATURE_KEYS)


def retry_after_of(meta: Mapping[str, Sequence[str]]) -> float | None:
    """The answer's Retry-After in seconds (StormCrawler keeps response headers as
    ``protocol.<name>``), or None (absent, or an HTTP date: not read).

    Examples
    --------
    >>> retry_after_of({"protocol.Retry-After": ["120"]})
    120.0
    """
    raw = _first(meta, RETRY_AFTER_KEYS)
    return float(raw) if raw is not None and raw.isascii() and raw.isdigit() else None


def redirect_of(meta: Mapping[str, Sequence[str]]) -> str | None:
    """Where the fetched URL redirects (StormCrawler's ``_redirTo``), or None."""
    return _first(meta, REDIRECT_KEYS)


def lease_of(meta: Mapping[str, Sequence[str]]) -> str | None:
    """The lease id GetURLs handed out with the URL, if the crawler sent it back."""
    return _first(meta, (LEASE_KEY,))


def url_info(
    url: str, host: str, lease_id: str | None, extra: Metadata | None = None
) -> pb.URLInfo:
    """A URLInfo of the default crawl: the URL, its host as queue key, the lease id."""
    info = pb.URLInfo(url=url, key=host, crawlID=DEFAULT_CRAWL)
    if lease_id is not None:
        info.metadata[LEASE_KEY].values.append(lease_id)
    for key, values in (extra or {}).items():
        info.metadata[key].values.extend(values)
    return info


def _seconds(t: float | None) -> int:
    return 0 if t is None or not math.isfinite(t) or t < 0 else int(t)


def url_item(state: UrlState) -> pb.URLItem:
    """What GetURLStatus and ListURLs answer for a URL: a DiscoveredURLItem if it was
    never fetched, else a KnownURLItem whose ``refetchable_from_date`` is its due time
    (Unix s, whole seconds rounded down; 0 once it is retired); ``creation_date`` is its
    registration time.
    The metadata say what crawlsched knows (``crawlsched.*``: due time, last fetch,
    crawls, changes seen, lease deadline)."""
    extra: Metadata = {
        "crawlsched.due_at": [repr(state.due_at)],
        "crawlsched.crawls": [str(state.crawls)],
        "crawlsched.changes": [str(state.changes)],
    }
    if state.last_crawl_at is not None:
        extra["crawlsched.last_crawl_at"] = [repr(state.last_crawl_at)]
    if state.lease_deadline is not None:
        extra["crawlsched.lease_deadline"] = [repr(state.lease_deadline)]
    if state.refetch_after is not None:
        extra["crawlsched.refetch_after"] = [repr(state.refetch_after)]
    if state.retire_reason is not None:
        extra["crawlsched.retired"] = [str(state.retire_reason)]
    info = url_info(state.url, state.host, None, extra)
    item = pb.URLItem(ID=state.url, creation_date=_seconds(state.registered_at))
    if state.last_crawl_at is None:
        item.discovered.info.CopyFrom(info)
    else:
        item.known.info.CopyFrom(info)
        if state.retired_at is None:
            item.known.refetchable_from_date = max(_seconds(state.due_at), 1)
    return item
