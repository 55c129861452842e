"""Clocks and URL canonicalisation."""

from __future__ import annotations

import time

import numpy as np
import pytest

from service.clock import AcceleratedClock, ManualClock, SystemClock
from service.urls import canonical_url, host_of


def test_manual_clock_only_moves_forward() -> None:
    c = ManualClock(10.0)
    c.advance(2.5)
    assert c.now() == 12.5
    with pytest.raises(ValueError, match="earlier"):
        c.set(1.0)


def test_accelerated_clock_runs_fast() -> None:
    c = AcceleratedClock(speed=1000.0, start=0.0)
    t0 = c.now()
    time.sleep(0.02)
    assert c.now() - t0 >= 1000.0 * 0.02 * 0.99
    assert c.rate == 1000.0
    with pytest.raises(ValueError, match="speed"):
        AcceleratedClock(speed=0.0)


def test_system_clock_reads_the_wall() -> None:
    assert abs(SystemClock().now() - time.time()) < 1.0


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("https://Example.com", "https://example.com/"),
        ("http://example.com:80/a?b=1#frag", "http://example.com/a?b=1"),
        ("https://example.com:8443/", "https://example.com:8443/"),
    ],
)
def test_canonical_url(raw: str, canonical: str) -> None:
    assert canonical_url(raw) == canonical


@pytest.mark.parametrize(
    "raw", ["ftp://x.example/", "https://", "https://a b.example/", "https://x:99999/", "x" * 3000]
)
def test_canonical_url_rejects(raw: str) -> None:
    with pytest.raises(ValueError):
        canonical_url(raw)


def test_host_of() -> None:
    assert host_of("https://a.example:81/x") == "a.example:81"


def test_accelerated_clocks_with_one_epoch_agree() -> None:
    epoch = time.time() - 10.0
    a = AcceleratedClock(100.0, start=5_000.0, epoch=epoch)
    b = AcceleratedClock(100.0, start=5_000.0, epoch=epoch)
    ta, tb = a.now(), b.now()
    assert 5_000.0 + 1_000.0 <= ta <= tb <= ta + 100.0 * 1.0  # one wall second of slack


def test_fast_path_of_canonical_url_agrees_with_the_general_one() -> None:
    from service.urls import _canonicalise

    rng = np.random.default_rng(7)
    pieces = {
        "scheme": ["http", "https", "HTTP", "ftp"],
        "host": ["a.example", "A.example", "x-1.example", "-bad.example", "a.example.", "[::1]"],
        "port": ["", ":80", ":443", ":8080", ":0", ":080", ":99999", ":"],
        "path": ["/", "", "/p", "/p?q=1", "/p?", "//x", "/a b", "/p#f", "/%41?x=%20", "/\x01"],
    }
    for _ in range(3000):
        parts = {k: v[rng.integers(len(v))] for k, v in pieces.items()}
        url = f"{parts['scheme']}://{parts['host']}{parts['port']}{parts['path']}"
        try:
            expected: str | None = _canonicalise(url)
        except ValueError:
            expected = None
        try:
            got: str | None = canonical_url(url)
        except ValueError:
            got = None
        assert got == expected, url
