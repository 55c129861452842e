"""URLFrontier's protocol for Python clients: its messages (``pb``) and the client
stub, generated from the ``urlfrontier.proto`` that ``crawlsched serve --grpc-port``
serves (crawler-commons/url-frontier 2.x, package ``urlfrontier``).

Examples
--------
>>> from crawlsched.urlfrontier import pb
>>> pb.GetParams(max_queues=10, delay_requestable=60).delay_requestable
60
"""

from service.grpc import urlfrontier_pb2 as pb
from service.grpc.urlfrontier_pb2_grpc import URLFrontierStub

__all__ = ["URLFrontierStub", "pb"]
