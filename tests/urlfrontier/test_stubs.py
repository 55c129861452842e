"""The committed URLFrontier modules are what the proto generates today."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.grpc import urlfrontier_pb2 as pb
from service.grpc.generate import PROTO, generate

ROOT = Path(__file__).resolve().parents[2]
GENERATED = ("urlfrontier_pb2.py", "urlfrontier_pb2.pyi", "urlfrontier_pb2_grpc.py")


@pytest.mark.parametrize("name", GENERATED)
def test_committed_stubs_match_the_proto(tmp_path: Path, name: str) -> None:
    generate(ROOT, tmp_path)
    fresh = (tmp_path / PROTO.parent / name).read_text()
    committed = (ROOT / PROTO.parent / name).read_text()
    assert committed == fresh, f"{name} is stale: run `python -m service.grpc.generate`"


def test_the_service_and_its_messages_carry_the_published_names() -> None:
    service = pb.DESCRIPTOR.services_by_name["URLFrontier"]
    assert service.full_name == "urlfrontier.URLFrontier"
    assert {m.name for m in service.methods} >= {
        "GetURLs", "PutURLs", "PutDiscovered", "GetStats", "ListQueues", "DeleteQueue",
        "BlockQueueUntil", "SetDelay", "SetActive", "GetActive", "GetURLStatus", "ListURLs",
        "CountURLs",
    }  # fmt: skip
    known = pb.KnownURLItem.DESCRIPTOR.fields_by_name["refetchable_from_date"]
    assert (known.number, known.type) == (2, known.TYPE_UINT64)
    get = pb.GetParams.DESCRIPTOR
    assert [(f.name, f.number) for f in get.fields] == [
        ("max_urls_per_queue", 1), ("max_queues", 2), ("key", 3), ("delay_requestable", 4),
        ("anyCrawlID", 5), ("crawlID", 6),
    ]  # fmt: skip
