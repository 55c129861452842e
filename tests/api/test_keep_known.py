"""``POST /urls`` with ``keep_known``: discovered links never overwrite what is registered."""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.anyio
DAY = 86_400.0


async def test_known_urls_are_left_alone_and_new_ones_created(api: httpx.AsyncClient) -> None:
    first = {"url": "https://shop.example/p/1", "weight": 3 / DAY, "label": "shoes", "fixed": True}
    answer = await api.post("/urls", json={"urls": [first]})
    assert answer.json() == {"created": 1, "updated": 0}
    before = (await api.get("/urls/https://shop.example/p/1")).json()

    discovered = [
        {"url": "https://shop.example/p/1", "crawl_delay_s": 7.0},
        {"url": "https://shop.example/p/2"},
    ]
    answer = await api.post("/urls", json={"urls": discovered, "keep_known": True})
    assert answer.status_code == 200
    assert answer.json() == {"created": 1, "updated": 0, "kept": 1}

    after = (await api.get("/urls/https://shop.example/p/1")).json()
    for field in ("weight", "change_rate", "threshold_s", "due_at", "registered_at"):
        assert after[field] == before[field], field
    assert after["learning"]["fixed"] and after["learning"]["label"] == "shoes"
    host = (await api.get("/hosts/shop.example")).json()
    assert host["crawl_delay_s"] == 7.0 and host["urls"] == 2

    # without keep_known the bare registration replaces the priors (the old behaviour)
    answer = await api.post("/urls", json={"urls": [{"url": "https://shop.example/p/1"}]})
    assert answer.json() == {"created": 0, "updated": 1}
    replaced = (await api.get("/urls/https://shop.example/p/1")).json()
    assert not replaced["learning"]["fixed"] and replaced["learning"]["label"] is None


async def test_keep_known_must_be_a_boolean(api: httpx.AsyncClient) -> None:
    body = {"urls": [{"url": "https://shop.example/p/1"}], "keep_known": "sometimes"}
    answer = await api.post("/urls", json=body)
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["loc"] == ["body", "keep_known"]
    assert (await api.get("/urls/https://shop.example/p/1")).status_code == 404
