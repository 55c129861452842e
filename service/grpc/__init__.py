"""URLFrontier's gRPC protocol (``urlfrontier.URLFrontier``), served beside the HTTP
API in the same process and event loop, on the same store.

``urlfrontier.proto`` is the protocol; ``urlfrontier_pb2*.py`` are generated from it
(:mod:`service.grpc.generate`).  :mod:`~service.grpc.servicer` answers the calls,
:mod:`~service.grpc.frontier` turns URLFrontier items into crawlsched's use cases,
:mod:`~service.grpc.mapping` converts the messages, :mod:`~service.grpc.auth` checks
the bearer tokens and :mod:`~service.grpc.server` runs the server.
"""
