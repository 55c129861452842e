"""A URLFrontier client against ``crawlsched serve --grpc-port``: add a URL, lease it,
report it fetched with a content signature, read the counts.

    python docs/examples/urlfrontier_client.py 127.0.0.1:7071
"""

import sys
from collections.abc import Iterator

import grpc

from crawlsched.urlfrontier import URLFrontierStub, pb


def fetched(infos: list[pb.URLInfo]) -> Iterator[pb.URLItem]:
    for info in infos:
        info.metadata["fetch.statusCode"].values.append("200")
        info.metadata["signature"].values.append("sha256:9f86d0")  # a digest of the body
        yield pb.URLItem(known=pb.KnownURLItem(info=info, refetchable_from_date=1))


with grpc.insecure_channel(sys.argv[1]) as channel:
    grpc.channel_ready_future(channel).result(timeout=30)  # the service may be starting
    frontier = URLFrontierStub(channel)
    new = pb.URLItem(discovered=pb.DiscoveredURLItem(info=pb.URLInfo(url="https://example.com/")))
    print([ack.status for ack in frontier.PutURLs(iter([new]))])  # [0]: OK
    leased = list(frontier.GetURLs(pb.GetParams(max_queues=10, delay_requestable=60)))
    print([info.url for info in leased])
    print([ack.status for ack in frontier.PutURLs(fetched(leased))])
    print(frontier.GetStats(pb.QueueWithinCrawlParams()).counts["urls"])
