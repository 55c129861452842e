"""With the HTTP API's TLS files, the gRPC port speaks TLS with the same certificate."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
import trustme

from service.app import create_app
from service.clock import ManualClock
from service.grpc import urlfrontier_pb2 as pb
from service.grpc import urlfrontier_pb2_grpc
from service.settings import Settings
from urlfrontier.conftest import T0

pytestmark = pytest.mark.anyio


async def test_the_grpc_port_speaks_tls_with_the_given_certificate(tmp_path: Path) -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    key_file, cert_file = tmp_path / "key.pem", tmp_path / "cert.pem"
    cert.private_key_pem.write_to_path(str(key_file))
    cert_file.write_bytes(b"".join(blob.bytes() for blob in cert.cert_chain_pems))
    app = create_app(Settings(), clock=ManualClock(T0), grpc_port=0, grpc_tls=(key_file, cert_file))
    async with app.router.lifespan_context(app):
        address = f"127.0.0.1:{app.state.grpc_port}"
        trusted = grpc.ssl_channel_credentials(root_certificates=ca.cert_pem.bytes())
        async with grpc.aio.secure_channel(address, trusted) as channel:
            stub = urlfrontier_pb2_grpc.URLFrontierStub(channel)
            assert (await stub.GetActive(pb.Local(), timeout=10)).state is True
        # a client that does not trust the certificate's CA is refused
        untrusted = grpc.ssl_channel_credentials(root_certificates=trustme.CA().cert_pem.bytes())
        async with grpc.aio.secure_channel(address, untrusted) as channel:
            stub = urlfrontier_pb2_grpc.URLFrontierStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.GetActive(pb.Local(), timeout=10)
            assert err.value.code() is grpc.StatusCode.UNAVAILABLE
        # and nothing is served in clear text
        async with grpc.aio.insecure_channel(address) as channel:
            stub = urlfrontier_pb2_grpc.URLFrontierStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.GetActive(pb.Local(), timeout=10)
            assert err.value.code() is grpc.StatusCode.UNAVAILABLE
