"""Every file the server makes is 0600 and every directory 0700, whatever the umask it was started
with (issue 20, item 6): upstream writes its audit log 0600; a database, its journal and the audit
log readable by every local user would leak every object and every request."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from apiserver import standalone
from tests.support.api import Api, ev_path, event
from tests.support.server import ServerProcess, free_port


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def loose_umask() -> Iterator[None]:
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def test_files_are_private_in_an_existing_open_directory(tmp_path: Path, loose_umask: None) -> None:
    """The report's case: an existing 0755 data directory and a certificate of one's own, so no
    standalone bootstrap runs; the database, its WAL and the audit log are still 0600."""
    certificates = standalone.bootstrap(tmp_path / "elsewhere", port=6443)
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o755)
    data_dir.chmod(0o755)
    shutil.copytree(certificates.pki_dir, data_dir / "pki")  # where the test client finds the CA
    audit = tmp_path / "logs" / "audit.log"
    audit.parent.mkdir(mode=0o755)
    args = [
        f"--tls-cert-file={certificates.serving_cert}",
        f"--tls-private-key-file={certificates.serving_key}",
        f"--client-ca-file={certificates.ca_cert}",
        f"--audit-log-path={audit}",
    ]
    server = ServerProcess(data_dir=data_dir, port=free_port(), extra_args=args)
    server.start()
    try:
        assert Api(server).post(ev_path("team-a"), event("one", "team-a")).status == 201
        made = [p for p in data_dir.iterdir() if p.name.startswith("coreio.db")] + [audit]
        assert {p.name for p in made} >= {"coreio.db", "audit.log"}
        for path in made:
            assert _mode(path) == 0o600, (path, oct(_mode(path)))
    finally:
        server.stop()


def test_a_fresh_data_directory_is_private(tmp_path: Path, loose_umask: None) -> None:
    server = ServerProcess(data_dir=tmp_path / "fresh", port=free_port(), extra_args=[])
    server.start()
    try:
        assert Api(server).post(ev_path("team-a"), event("one", "team-a")).status == 201
        for path in [server.data_dir, *server.data_dir.rglob("*")]:
            if path.name == "server.log":
                continue  # the test's own capture of the server's output, not the server's file
            expected = 0o700 if path.is_dir() else 0o600
            assert _mode(path) == expected, (path, oct(_mode(path)))
    finally:
        server.stop()
