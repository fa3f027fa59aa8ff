"""A network namespace of the test's own, joined to this machine by one veth pair, and the
processes that run in it.

The real node lives in it: its address, its pod bridge, kube-proxy's rules and every listener
(etcd, kube-apiserver, kubelet, containerd's streaming server). It has no default route, so
nothing started in it can reach another address; the host reaches the node's address through the
veth pair and nothing more (no route to the pods is added to the host).

Processes join only the network namespace (`nsenter --net`): `ip netns exec` would also remount
/sys, hiding the cgroup hierarchy the kubelet, containerd and runc need."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


class AddressTaken(RuntimeError):
    """The host's end of the pair has its address on another link already."""


@dataclass
class NetworkNamespace:
    """`name` with `eth0` at `node_address`/30 inside, and the host's end of the pair at
    `host_address`/30, named `host_link`."""

    name: str
    host_address: str
    node_address: str
    host_link: str
    sysctls: dict[str, str] = field(default_factory=dict)
    created: bool = False

    @property
    def path(self) -> str:
        return f"/run/netns/{self.name}"

    def create(self) -> None:
        taken = subprocess.run(
            ["ip", "-o", "addr", "show", "to", self.host_address], capture_output=True, text=True, check=False
        ).stdout.split()
        if taken:  # a node runs here already (a test's, or scripts/dev-cluster), or was killed
            raise AddressTaken(
                f"{self.host_address} is taken by link {taken[1]}: another node runs here"
                f" (if it was killed, `ip link del {taken[1]}` frees it)"
            )
        self._remove()  # a namespace of this name left by a run that was killed
        self.created = True
        _ip("netns", "add", self.name)
        _ip("link", "add", self.host_link, "type", "veth", "peer", "name", "eth0", "netns", self.name)
        _ip("addr", "add", f"{self.host_address}/30", "dev", self.host_link)
        _ip("link", "set", self.host_link, "up")
        _ip("-n", self.name, "addr", "add", f"{self.node_address}/30", "dev", "eth0")
        _ip("-n", self.name, "link", "set", "eth0", "up")
        _ip("-n", self.name, "link", "set", "lo", "up")
        for key, value in self.sysctls.items():  # /proc/sys/net is the reader's namespace's
            self.run(["sysctl", "-q", "-w", f"{key}={value}"])

    def wrap(self, argv: Sequence[str]) -> list[str]:
        return ["nsenter", f"--net={self.path}", "--", *argv]

    def run(self, argv: Sequence[str], *, timeout: float = 60, check: bool = True) -> str:
        done = subprocess.run(self.wrap(argv), capture_output=True, text=True, timeout=timeout, check=False)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} in {self.name}: {done.stderr.strip()[-2000:]}")
        return done.stdout

    def delete(self) -> None:
        """Removes what `create` made (nothing, when it failed: the addresses were another's)."""
        if self.created:
            self._remove()
            self.created = False

    def _remove(self) -> None:
        subprocess.run(["ip", "link", "del", self.host_link], capture_output=True, check=False)
        if Path(self.path).exists():
            subprocess.run(["ip", "netns", "del", self.name], capture_output=True, check=False)


class Daemon:
    """One long-running process in the namespace, its output in `log`, stopped with its group."""

    def __init__(self, netns: NetworkNamespace, name: str, argv: Sequence[str], log_dir: Path) -> None:
        self.netns = netns
        self.name = name
        self.argv = list(argv)
        self.log = log_dir / f"{name}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Daemon:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                self.netns.wrap(self.argv),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        return self

    def check_running(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError(f"{self.name} exited with {self.process.returncode}:\n{self.log_tail()}")

    def log_tail(self, size: int = 3000) -> str:
        with contextlib.suppress(OSError):
            return self.log.read_text(errors="replace")[-size:]
        return ""

    def stop(self, timeout: float = 20) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while self.process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
