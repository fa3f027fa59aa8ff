"""etcd's gRPC errors as storage errors (upstream: etcd3/errors.go)."""

from __future__ import annotations

from typing import Protocol

import grpc

from apiserver.storage.interface import StorageError, StorageUnavailableError

UNAVAILABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED}


class OutOfRange(StorageError):
    """etcd's OUT_OF_RANGE: a revision is compacted or in the future; callers add the numbers."""


class LeaseNotFound(StorageError):
    """A cached lease vanished (revoked, or expired earlier than expected)."""


class RpcFailure(Protocol):
    """A failed call: grpcio's AioRpcError, or native.py's NativeRpcError."""

    def code(self) -> grpc.StatusCode: ...

    def details(self) -> str | None: ...


def translate(error: RpcFailure, target: str) -> StorageError:
    """The storage error for a failed call to `target`; unavailable for anything a retry elsewhere
    may cure."""
    code, details = error.code(), error.details() or ""
    if code in UNAVAILABLE:
        return StorageUnavailableError(f"etcd {target}: {code.name}: {details}")
    if code == grpc.StatusCode.OUT_OF_RANGE:
        return OutOfRange(details)
    if code == grpc.StatusCode.NOT_FOUND and "lease" in details:
        return LeaseNotFound(details)
    return StorageError(f"etcd {target}: {code.name}: {details}")
