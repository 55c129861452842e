"""What the farm's hosts serve: pages, host index pages, robots.txt and sitemaps.

Bodies are deterministic functions of (page, version): a page's content changes
exactly when the world says it does, so a content hash is as good a change
detector as its ETag.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime
from html import escape
from xml.sax.saxutils import escape as xml_escape

__all__ = [
    "etag",
    "etag_matches",
    "http_date",
    "index_html",
    "page_html",
    "parse_http_date",
    "robots_txt",
    "sitemap_xml",
]


def http_date(t: float) -> str:
    """RFC 9110 IMF-fixdate of Unix time ``t`` (s), truncated to the second."""
    return format_datetime(datetime.fromtimestamp(math.floor(t), UTC), usegmt=True)


def parse_http_date(text: str) -> float | None:
    """Unix s of an HTTP date, or None if it does not parse."""
    try:
        parsed = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def etag(page: int, version: int) -> str:
    """The strong entity tag of a page's version (quoted)."""
    return f'"p{page}v{version}"'


def etag_matches(header: str, current: str) -> bool:
    """Whether an ``If-None-Match`` header names ``current`` (weak comparison, RFC 9110
    §13.1.2) or is ``*``."""
    tags = [t.strip() for t in header.split(",")]
    return "*" in tags or any(t.removeprefix("W/") == current for t in tags)


def page_html(title: str, version: int, changed_at: str, links: Sequence[tuple[str, str]]) -> bytes:
    """A page: its title, version, a paragraph that depends on both, and its links
    (``(href, text)`` pairs)."""
    digest = hashlib.sha256(f"{title}|{version}".encode()).hexdigest()
    items = "".join(f'<li><a href="{escape(h)}">{escape(t)}</a></li>' for h, t in links)
    return (
        '<!doctype html>\n<html><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title></head><body>\n"
        f"<h1>{escape(title)}</h1>\n<p>version {version}, last changed {changed_at}</p>\n"
        f"<p>{digest}</p>\n<ul>{items}</ul>\n</body></html>\n"
    ).encode()


def index_html(host: str, links: Sequence[str]) -> bytes:
    """A host's ``/``: links to all its pages."""
    items = "".join(f'<li><a href="{escape(h)}">{escape(h)}</a></li>' for h in links)
    return (
        '<!doctype html>\n<html><head><meta charset="utf-8">'
        f"<title>{escape(host)}</title></head><body>\n<ul>{items}</ul>\n</body></html>\n"
    ).encode()


def robots_txt(host: str, crawl_delay_s: float) -> bytes:
    """``User-agent: *``, the host's ``Crawl-delay`` (clock s) and its sitemap."""
    lines = ["User-agent: *", "Allow: /"]
    if crawl_delay_s > 0:
        lines.append(f"Crawl-delay: {crawl_delay_s:g}")
    lines.append(f"Sitemap: http://{host}/sitemap.xml")
    return ("\n".join(lines) + "\n").encode()


def sitemap_xml(entries: Sequence[tuple[str, float | None]]) -> bytes:
    """A sitemaps.org ``urlset``: ``(loc, lastmod Unix s or None)`` per URL."""
    rows = []
    for loc, lastmod in entries:
        when = ""
        if lastmod is not None:
            stamp = datetime.fromtimestamp(lastmod, UTC).isoformat(timespec="milliseconds")
            when = f"<lastmod>{stamp}</lastmod>"
        rows.append(f"<url><loc>{xml_escape(loc)}</loc>{when}</url>")
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
        + "\n".join(rows)
        + "\n</urlset>\n"
    ).encode()
