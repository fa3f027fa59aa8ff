"""Starts the real `coreio-apiserver` as a separate process for integration tests.

The server bootstraps its own data directory (CA, serving certificate, admin credentials,
kubeconfig) exactly as a user's first start does; tests talk to it over real TLS with the
credentials it wrote.
"""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.support.etcd import EtcdProcess
from tests.support.waiting import wait_until


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ServerProcess:
    data_dir: Path
    port: int
    extra_args: list[str]
    process: subprocess.Popen[bytes] | None = None
    # The program run with `python -m`: coreio-apiserver, or one serving more kinds.
    module: str = "apiserver"

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def kubeconfig(self) -> Path:
        return self.data_dir / "kubeconfig"

    @property
    def ca_file(self) -> Path:
        return self.data_dir / "pki" / "ca.crt"

    @property
    def admin_cert(self) -> tuple[Path, Path]:
        return self.data_dir / "pki" / "admin.crt", self.data_dir / "pki" / "admin.key"

    @property
    def log_file(self) -> Path:
        return self.data_dir / "server.log"

    def user_kubeconfig(self, name: str, user: dict[str, str]) -> Path:
        """`<data-dir>/<name>.kubeconfig`: the server's kubeconfig with its admin credentials
        replaced by `user`'s (a kubeconfig user entry: a token, or certificate files)."""
        config = yaml.safe_load(self.kubeconfig.read_text())
        for entry in config["users"]:
            entry["user"] = user
        path = self.data_dir / f"{name}.kubeconfig"
        path.write_text(yaml.safe_dump(config))
        return path

    def ssl_context(self, *, client_cert: bool = True) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca_file))
        if client_cert:
            cert, key = self.admin_cert
            context.load_cert_chain(str(cert), str(key))
        return context

    def start(self, ready_timeout: float = 30.0) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = [
            sys.executable,
            "-m",
            self.module,
            "--data-dir",
            str(self.data_dir),
            "--secure-port",
            str(self.port),
            *self.extra_args,
        ]
        log = self.log_file.open("ab")
        self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ))
        try:
            wait_until(
                self._ready,
                timeout=ready_timeout,
                interval=0.1,
                message=lambda: f"coreio-apiserver to become ready: {self.log_file.read_text()}",
                ignoring=(OSError,),
            )
        except AssertionError:
            self.stop()
            raise

    def _ready(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise RuntimeError(f"coreio-apiserver exited: {self.log_file.read_text()}")
        if not self.ca_file.exists():
            return False
        context = self.ssl_context(client_cert=False)
        with urllib.request.urlopen(f"{self.url}/readyz", context=context, timeout=2) as response:
            return bool(response.status == 200)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_server(
    data_dir: Path, extra_args: list[str] | None = None, *, ready_timeout: float = 30.0
) -> ServerProcess:
    """The server on `data_dir`, once its /readyz answers 200 (within `ready_timeout` seconds: a
    server starting on many objects loads them all into its watch cache first)."""
    server = ServerProcess(data_dir=data_dir, port=free_port(), extra_args=list(extra_args or []))
    server.start(ready_timeout)
    return server


# The storages the API tests run on; COREIO_TEST_BACKENDS narrows them (test_compiled runs the API
# tests against the compiled modules on SQLite alone: no compiled module is a storage's).
BACKENDS = os.environ.get("COREIO_TEST_BACKENDS", "sqlite,etcd").split(",")


def backend_args(request: pytest.FixtureRequest, backend: str) -> list[str]:
    """Flags selecting the storage: nothing for the embedded SQLite default; for etcd, the shared
    test etcd under a key prefix of this server's own."""
    if backend == "sqlite":
        return []
    endpoint = request.getfixturevalue("etcd_endpoint")
    return ["--etcd-servers", endpoint, "--etcd-prefix", f"/test-{uuid.uuid4().hex[:12]}"]


@pytest.fixture(scope="module", params=BACKENDS)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A fresh standalone server per test module, once on SQLite (the embedded default) and once
    on a real etcd."""
    process = start_server(
        tmp_path_factory.mktemp(f"coreio-{request.param}"), backend_args(request, request.param)
    )
    try:
        yield process
    finally:
        process.stop()


def module_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, name: str, args: list[str]
) -> Iterator[ServerProcess]:
    """For a module fixture parametrized by BACKENDS: a server on the parameter's storage (the
    shared test etcd under a prefix of its own) with `args`, stopped after the module."""
    process = start_server(
        tmp_path_factory.mktemp(f"{name}-{request.param}"), [*backend_args(request, request.param), *args]
    )
    try:
        yield process
    finally:
        process.stop()


@contextmanager
def own_storage_server(backend: str, data_dir: Path, args: list[str]) -> Iterator[ServerProcess]:
    """A server with a storage of its own: SQLite, or an etcd started for it alone (a compaction is
    the whole etcd's, so a test that compacts must not share one)."""
    etcd = EtcdProcess() if backend == "etcd" else None
    flags = [*args, "--etcd-servers", etcd.start()] if etcd is not None else args
    try:
        process = start_server(data_dir, flags)
        try:
            yield process
        finally:
            process.stop()
    finally:
        if etcd is not None:
            etcd.stop()


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (a server's workers), read from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found
