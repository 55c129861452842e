"""Bounded input over real sockets: 413 before the body is read, 408 for a body that
stalls, and connections that close when idle or when their headers stall."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from urllib.parse import urlsplit

import httpx
import pytest

from service.app import create_app
from service.http_timeouts import uvicorn_options
from service.settings import Settings

Serve = Callable[..., AbstractContextManager[str]]
URL_BODY = b'{"urls":[{"url":"https://a.example/"}]}'


def _connect(base_url: str, timeout_s: float = 10.0) -> socket.socket:
    parts = urlsplit(base_url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=timeout_s)
    return sock


def _head(
    path: str, length: int | None = None, chunked: bool = False, method: str = "POST"
) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: crawlsched", "Content-Type: application/json"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    if chunked:
        lines.append("Transfer-Encoding: chunked")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 response with a Content-Length, read off ``sock``."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before a response: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, v in (h.split(":", 1) for h in header_lines)}
    while len(body) < int(headers["content-length"]):
        chunk = sock.recv(65536)
        assert chunk, "connection closed inside the response body"
        body += chunk
    return int(status_line.split()[1]), headers, body


def _closed_by_server(sock: socket.socket) -> bool:
    """True if the server closed (or reset) the connection before the socket timeout."""
    try:
        return sock.recv(65536) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def _app(**overrides: float) -> object:
    return create_app(Settings(**overrides))  # type: ignore[arg-type]


def test_declared_oversize_body_is_refused_before_a_byte_is_sent(serve: Serve) -> None:
    with serve(_app(max_body_bytes=65_536, body_timeout_s=60.0)) as base:
        sock = _connect(base)
        with sock:
            sock.sendall(_head("/urls", length=20_000_000))  # and not one byte of body
            status, headers, body = _read_response(sock)
            assert status == 413 and headers["connection"] == "close"
            assert json.loads(body) == {"detail": "request body larger than 65536 bytes"}
            assert _closed_by_server(sock)


@pytest.mark.parametrize(
    ("method", "path", "status"), [("POST", "/nowhere", 404), ("GET", "/healthz", 200)]
)
def test_an_answer_given_without_reading_the_body_stands_and_closes(
    serve: Serve, method: str, path: str, status: int
) -> None:
    """A layer that answers before reading (routing here, authentication in front of
    the routes) keeps its answer; the unread oversized body is not drained."""
    with serve(_app(max_body_bytes=65_536, body_timeout_s=60.0)) as base:
        sock = _connect(base)
        with sock:
            sock.sendall(_head(path, length=20_000_000, method=method))
            answer, headers, _ = _read_response(sock)
            assert answer == status and headers["connection"] == "close"
            assert _closed_by_server(sock)


def test_streamed_body_is_not_read_past_the_limit(serve: Serve) -> None:
    limit = 65_536
    with serve(_app(max_body_bytes=limit, body_timeout_s=60.0)) as base:
        sock = _connect(base)
        with sock:
            sock.sendall(_head("/urls", chunked=True))
            piece = b"x" * 4096
            for _ in range(limit // len(piece) + 1):  # one piece past the limit, then silence
                sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
            # the answer comes without the rest of the body (no final chunk is ever sent)
            # and long before the 60 s body deadline
            status, headers, _ = _read_response(sock)
            assert status == 413 and headers["connection"] == "close"
            assert _closed_by_server(sock)


def test_body_at_the_limit_is_read_and_one_byte_more_is_not(serve: Serve) -> None:
    limit = 1024
    exact = URL_BODY + b" " * (limit - len(URL_BODY))
    with serve(_app(max_body_bytes=limit)) as base, httpx.Client(base_url=base) as client:
        headers = {"content-type": "application/json"}
        assert client.post("/urls", content=exact, headers=headers).status_code == 200
        over = client.post("/urls", content=exact + b" ", headers=headers)
        assert over.status_code == 413
        streamed = client.post("/urls", content=iter([exact, b" "]), headers=headers)
        assert streamed.status_code == 413
        assert client.get("/healthz").status_code == 200


def test_twenty_megabytes_get_413_and_the_service_stays_responsive(serve: Serve) -> None:
    body = json.dumps(
        {"urls": [{"url": f"https://h{i % 997}.example/p/{i}"} for i in range(700_000)]}
    ).encode()
    assert len(body) > 20_000_000
    with serve(_app()) as base, httpx.Client(base_url=base, timeout=30.0) as client:
        headers = {"content-type": "application/json"}
        started = time.perf_counter()
        declared = client.post("/urls", content=body, headers=headers)
        took_s = time.perf_counter() - started
        streamed = client.post("/urls", content=iter([body[: 1 << 20]] * 20), headers=headers)
        assert (declared.status_code, streamed.status_code) == (413, 413)
        assert declared.json() == {"detail": "request body larger than 8388608 bytes"}
        assert client.get("/healthz").status_code == 200
        assert client.get("/metrics").text.count("crawlsched_urls 0.0") == 1  # nothing parsed
        print(f"20 MB body: 413 after {took_s * 1e3:.1f} ms")


def test_stalled_body_gets_408_and_the_connection_closes(serve: Serve) -> None:
    with serve(_app(body_timeout_s=0.5)) as base:
        sock = _connect(base)
        with sock:
            sock.sendall(_head("/urls", length=len(URL_BODY)) + URL_BODY[:10])
            status, headers, body = _read_response(sock)
            assert status == 408 and headers["connection"] == "close"
            assert json.loads(body) == {"detail": "request body did not arrive within 0.5 s"}
            assert _closed_by_server(sock)


@pytest.mark.parametrize(
    "sent",
    [b"", b"GET /healthz HTTP/1.1\r\nHost: crawl"],
    ids=["nothing", "half the headers"],
)
def test_connection_whose_headers_stall_is_closed(serve: Serve, sent: bytes) -> None:
    settings = Settings(header_timeout_s=0.5, keep_alive_s=0.5)
    with serve(create_app(settings), **uvicorn_options(settings)) as base:
        sock = _connect(base)
        with sock:
            sock.sendall(sent)
            assert _closed_by_server(sock)


def test_idle_keep_alive_connection_is_closed_and_busy_ones_are_not(serve: Serve) -> None:
    settings = Settings(header_timeout_s=1.0, keep_alive_s=0.5)
    with serve(create_app(settings), **uvicorn_options(settings)) as base:
        sock = _connect(base)
        with sock:
            request = b"GET /healthz HTTP/1.1\r\nHost: crawlsched\r\n\r\n"
            sock.sendall(request[:20])
            time.sleep(0.3)  # slow headers, complete within their deadline
            sock.sendall(request[20:])
            assert _read_response(sock)[0] == 200
            sock.sendall(request)  # the connection is kept alive between requests
            assert _read_response(sock)[0] == 200
            assert _closed_by_server(sock)  # then closed when idle
