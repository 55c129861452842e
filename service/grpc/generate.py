"""Regenerate the URLFrontier message and stub modules from ``urlfrontier.proto``.

Run from the repository root (grpcio-tools is a development dependency)::

    python -m service.grpc.generate

It writes ``urlfrontier_pb2.py`` (messages), ``urlfrontier_pb2.pyi`` (their types)
and ``urlfrontier_pb2_grpc.py`` (the servicer registration and the client stub)
beside the proto; they are committed, so neither installing nor serving needs
grpcio-tools.  ``tests/urlfrontier/test_stubs.py`` fails when they are stale; the
development extra pins grpcio-tools to the version that generated them, which the stub
module writes into its check of the installed grpcio.
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path

__all__ = ["PROTO", "generate", "main"]

#: The proto, relative to the repository root (its path names the modules' package).
PROTO = Path("service/grpc/urlfrontier.proto")


def generate(root: Path, out: Path) -> None:
    """Compile ``root / PROTO`` into ``out`` (which gets the ``service/grpc/`` folders).

    Raises
    ------
    RuntimeError
        If protoc reports an error (its message is printed on stderr).
    """
    from grpc_tools import protoc  # development dependency

    include = resources.files("grpc_tools") / "_proto"
    out.joinpath(PROTO.parent).mkdir(parents=True, exist_ok=True)
    code = protoc.main(
        [
            "grpc_tools.protoc",
            f"-I{root}",
            f"-I{include}",
            f"--python_out={out}",
            f"--pyi_out={out}",
            f"--grpc_python_out={out}",
            str(root / PROTO),
        ]
    )
    if code != 0:
        raise RuntimeError(f"protoc failed on {root / PROTO} (exit status {code})")


def main() -> None:
    """Regenerate in place (the current directory is the repository root)."""
    root = Path.cwd()
    if not (root / PROTO).is_file():
        sys.exit(f"run from the repository root: {PROTO} not found")
    generate(root, root)


if __name__ == "__main__":
    main()
