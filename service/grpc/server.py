"""The gRPC server of URLFrontier's protocol: grpcio's asyncio server on the running
event loop (the HTTP API's), answering with :class:`~service.grpc.servicer.FrontierServicer`."""

from __future__ import annotations

from pathlib import Path

import grpc

from service.auth import TokenTable
from service.grpc import urlfrontier_pb2_grpc
from service.grpc.servicer import FrontierServicer
from service.scheduler.context import Context

__all__ = ["GRACE_S", "start_grpc"]

#: How long a stopping server lets calls in flight finish, s.
GRACE_S = 5.0


async def start_grpc(
    ctx: Context,
    tokens: TokenTable,
    host: str,
    port: int,
    tls: tuple[Path, Path] | None = None,
) -> tuple[grpc.aio.Server, int]:
    """Serve URLFrontier on ``host:port`` (port 0: any free port) on the running loop;
    with ``tls`` (private key, certificate chain: PEM files) over TLS.

    Returns
    -------
    (grpc.aio.Server, int)
        The started server (stop it with ``await server.stop(GRACE_S)``) and the port
        it listens on.

    Raises
    ------
    RuntimeError
        If the address cannot be bound (grpcio's error, naming it).
    OSError
        If a TLS file cannot be read.
    """
    server = grpc.aio.server()
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if tls is None:
        bound = server.add_insecure_port(address)
    else:
        key, chain = (path.read_bytes() for path in tls)
        bound = server.add_secure_port(address, grpc.ssl_server_credentials([(key, chain)]))
    servicer = FrontierServicer(ctx, tokens, f"{host}:{bound}")
    urlfrontier_pb2_grpc.add_URLFrontierServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]
    await server.start()
    return server, bound
