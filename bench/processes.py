"""The processes under test: one etcd, a kube-apiserver and two coreio servers (etcd and SQLite).

Each server is a `Target`: where it listens, which Event path it serves, and its pid. Every server
accepts the same static bearer token (a `--token-auth-file` of a `system:masters` user), which is
what wrk and the Python clients send. Time to ready is measured from the process's start to the
first `/readyz` answering 200.
"""

from __future__ import annotations

import functools
import os
import secrets
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.controlplane import ControlPlane
from tests.support.controlplane_build import kube_apiserver_path
from tests.support.etcd import EtcdProcess
from tests.support.server import children, free_port

COREIO_EVENTS = "/apis/events.core.io/v1"
KUBE_EVENTS = "/apis/events.k8s.io/v1"
COREIO_GROUP = "events.core.io/v1"
KUBE_GROUP = "events.k8s.io/v1"
COREIO_ETCD_PREFIX = "/coreio-bench"
READY_TIMEOUT = 120.0
# The server's package in the source tree the benchmark runs (see `installed_like`).
SOURCE = Path(__file__).resolve().parent.parent / "apiserver"


def insecure_context() -> ssl.SSLContext:
    """TLS without verification: the benchmark talks to its own loopback servers only."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


@dataclass
class Target:
    """One API server under load."""

    name: str
    url: str
    api: str  # the Event group/version path, e.g. /apis/events.k8s.io/v1
    group_version: str
    token: str
    process: subprocess.Popen[bytes]
    ready_seconds: float = 0.0
    restart_ready_seconds: float | None = None
    log: Path | None = None
    command: list[str] = field(default_factory=list)
    env: dict[str, str] | None = None  # None: this process's

    @property
    def pid(self) -> int:
        return self.process.pid

    def events_path(self, namespace: str | None) -> str:
        return f"{self.api}/namespaces/{namespace}/events" if namespace else f"{self.api}/events"

    def stop(self) -> None:
        stop_process(self.process)


def stop_process(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def write_token_file(directory: Path) -> tuple[Path, str]:
    """kube-apiserver's `--token-auth-file` format: token,user,uid,"group1,group2"."""
    token = secrets.token_hex(24)
    path = directory / "tokens.csv"
    path.write_text(f'{token},bench,bench-uid,"system:masters"\n')
    path.chmod(0o600)
    return path, token


def readyz_status(url: str, token: str) -> int:
    request = urllib.request.Request(f"{url}/readyz", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, context=insecure_context(), timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except OSError:
        return 0


def wait_ready(process: subprocess.Popen[bytes], url: str, token: str, began: float, log: Path) -> float:
    """Seconds from `began` to the first /readyz 200 (polled every 20 ms)."""
    deadline = began + READY_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"{url}: process exited with {process.returncode}:\n{tail}")
        if readyz_status(url, token) == 200:
            return time.monotonic() - began
        time.sleep(0.02)
    raise TimeoutError(f"{url} not ready after {READY_TIMEOUT} s; see {log}")


def launch(
    command: list[str], log: Path, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], float]:
    with log.open("ab") as out:
        began = time.monotonic()
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        )
    return process, began


def coreio_command(data_dir: Path, port: int, token_file: Path, storage: list[str]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "apiserver",
        "--data-dir",
        str(data_dir),
        "--secure-port",
        str(port),
        "--token-auth-file",
        str(token_file),
        *storage,
    ]


def installed_like() -> dict[str, str]:
    """The environment the coreio servers run in: as an installed coreio, each module's bytecode
    read from its `__pycache__` (pip compiles the wheel's modules when it installs it, and the image
    holds them), not compiled from source at every start, as PYTHONDONTWRITEBYTECODE (set on some
    machines) would have the source tree do: that costs a start 0.1-0.15 s no user pays. The
    source tree's modules are compiled before the first start, as pip does; the standard library's
    and the installed packages' have their bytecode already."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    _compile_once(tuple(env.items()))
    return env


@functools.cache
def _compile_once(env: tuple[tuple[str, str], ...]) -> None:
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-j0", str(SOURCE)], env=dict(env), check=True)


def start_coreio(name: str, directory: Path, token_file: Path, token: str, storage: list[str]) -> Target:
    """coreio as `python -m apiserver` (what `coreio-apiserver` runs) on a fresh data directory."""
    data_dir = directory / name
    data_dir.mkdir(parents=True)
    port = free_port()
    command = coreio_command(data_dir, port, token_file, storage)
    log = directory / f"{name}.log"
    env = installed_like()
    process, began = launch(command, log, env)
    url = f"https://127.0.0.1:{port}"
    ready = wait_ready(process, url, token, began, log)
    return Target(name, url, COREIO_EVENTS, COREIO_GROUP, token, process, ready, None, log, command, env)


def restart(target: Target) -> float:
    """Stops `target` and starts it again on the same data; seconds until it is ready."""
    target.stop()
    assert target.log is not None
    target.process, began = launch(target.command, target.log, target.env)
    target.restart_ready_seconds = wait_ready(target.process, target.url, target.token, began, target.log)
    return target.restart_ready_seconds


def start_kube_apiserver(directory: Path, etcd: EtcdProcess, token_file: Path, token: str) -> Target:
    """The kube-apiserver the e2e tests build (tests.support), on the shared etcd, with the token
    file; its flags are the e2e control plane's."""
    plane = ControlPlane(
        directory / "kube",
        kube_apiserver=kube_apiserver_path(),
        kubectl_binary=Path("kubectl"),
        extra_flags=[f"--token-auth-file={token_file}"],
    )
    plane.directory.mkdir(parents=True)
    plane.pki.create()
    plane.etcd = etcd
    plane.port = free_port()
    command = [str(plane.kube_apiserver), *plane.flags()]
    process, began = launch(command, plane.log_file)
    ready = wait_ready(process, plane.url, token, began, plane.log_file)
    target = Target("kube-apiserver", plane.url, KUBE_EVENTS, KUBE_GROUP, token, process, ready)
    target.log, target.command = plane.log_file, command
    return target


@dataclass
class Stack:
    """Everything one run starts; `stop` ends it all."""

    etcd: EtcdProcess
    kube: Target
    coreio_etcd: Target
    coreio_sqlite: Target

    @property
    def targets(self) -> list[Target]:
        return [self.coreio_etcd, self.kube, self.coreio_sqlite]

    def stop(self) -> None:
        for target in self.targets:
            target.stop()
        self.etcd.stop()


def start_stack(
    directory: Path, coreio_args: tuple[str, ...] = (), etcd_flags: tuple[str, ...] = ()
) -> Stack:
    token_file, token = write_token_file(directory)
    etcd = EtcdProcess()
    etcd.args = (*etcd.args, *etcd_flags)
    endpoint = etcd.start()
    started: list[Target] = []
    try:
        started.append(start_kube_apiserver(directory, etcd, token_file, token))
        etcd_args = ["--etcd-servers", endpoint, "--etcd-prefix", COREIO_ETCD_PREFIX, *coreio_args]
        started.append(start_coreio("coreio-etcd", directory, token_file, token, etcd_args))
        started.append(start_coreio("coreio-sqlite", directory, token_file, token, [*coreio_args]))
    except BaseException:
        for target in started:
            target.stop()
        etcd.stop()
        raise
    kube, coreio_etcd, coreio_sqlite = started
    return Stack(etcd, kube, coreio_etcd, coreio_sqlite)


def tree(pid: int) -> list[int]:
    """A process and its children (a coreio of several workers is a supervisor and its workers)."""
    return [pid, *children(pid)]


def rss_bytes(pid: int) -> int:
    """The memory a server holds: the proportional set size (Pss, from /proc/PID/smaps_rollup) of
    the process and its children summed, so that pages forked workers share count once."""
    total = 0
    for member in tree(pid):
        for line in Path(f"/proc/{member}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                total += int(line.split()[1]) * 1024
    return total


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process and its children so far."""
    total = 0
    for member in tree(pid):
        fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def settle(pids: list[int], *, idle: float = 0.15, limit: float = 60.0) -> None:
    """Waits until the processes are (nearly) idle: less than `idle` CPU over half a second, so the
    next measurement does not pay for work left over from the previous one."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        before = sum(cpu_seconds(pid) for pid in pids)
        time.sleep(0.5)
        if sum(cpu_seconds(pid) for pid in pids) - before < idle * 0.5:
            return


def stop_on_signals() -> None:
    """SIGTERM, and SIGINT even where a shell started us ignoring it, unwind: every process this
    run started is stopped on the way out."""

    def leave(number: int, _frame: object) -> None:
        raise SystemExit(128 + number)

    signal.signal(signal.SIGTERM, leave)
    signal.signal(signal.SIGINT, leave)
