"""kubernetes-event-exporter (github.com/resmoio/kubernetes-event-exporter), the exporter issue 25
names, beside coreio-export in bench.export: v1.6.1, the newest release the Go module proxy here
serves (v1.7.0 and the module's version list are refused, 403), built from Go modules at its first
run and cached (tests.support.gobuild: a throwaway module requiring it, its main package built);
about 2.5 minutes cold on 2 cores. `--kubernetes-event-exporter PATH` (or `KEE_BIN`) runs a binary
of one's own instead.

It watches only the core/v1 Events of a kube-apiserver (not configurable), so its Events are
written to the bench's own kube-apiserver (tests.support.controlplane) as events.k8s.io/v1, the
same body coreio-export's are written with, and it sends them with its webhook receiver, one POST
of the Event's JSON each, to the receiving process coreio-export's webhook sink meets
(bench/receiving.py), which stamps each Event name when it first arrives. Its settings are its
defaults (maxEventAgeSeconds 5: an Event older than that at its start is not sent), except
`omitLookup: true`: by default it reads the regarded object of every Event from the API, 5
requests a second, which the bench's Events (of a Pod that does not exist) would only slow down.

    python -m bench.kee [--force]     # builds it, prints the binary's path
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import orjson

from bench.sinks import ExporterEnd, ReceivedEnd
from tests.support import gobuild
from tests.support.server import free_port
from tests.support.waiting import wait_until

VERSION = "v1.6.1"
MODULE = "github.com/resmoio/kubernetes-event-exporter"
BINARY = "kubernetes-event-exporter"
CONFIG = """\
logLevel: info
logFormat: json
clusterName: bench
namespace: {namespace}
omitLookup: true
leaderElection:
  enabled: false
route:
  routes:
    - match:
        - receiver: hook
receivers:
  - name: hook
    webhook:
      endpoint: {url}
"""


class EventReceiver(ReceivedEnd):
    """Takes kubernetes-event-exporter's webhook POSTs (an Event's JSON each), every one kept (the
    same Event twice is a duplicate), at the receiving process coreio-export's webhook sink meets
    too; serving once made."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        super().start()

    @property
    def url(self) -> str:
        return self.receiver.url

    def names(self) -> list[str]:
        """The name of every Event received, once per receipt."""
        return [record["event"]["metadata"]["name"] for record in self.records()]

    def take_request(self, at: float, kind: str, body: bytes) -> None:
        self.take({"event": orjson.loads(body)}, at)


class KeeEnd(ExporterEnd):
    """The exporter process, watching the Events of one namespace of the kube-apiserver whose
    admin kubeconfig is `kubeconfig`, and its receiving end."""

    receiver: EventReceiver

    def __init__(self, binary: Path, kubeconfig: Path, namespace: str, directory: Path) -> None:
        self.binary, self.kubeconfig, self.namespace = binary, kubeconfig, namespace
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.receiver = EventReceiver(directory / "receiver")
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> Path:
        return self.directory / "kubernetes-event-exporter.log"

    def start(self) -> None:
        config = self.directory / "config.yaml"
        config.write_text(CONFIG.format(namespace=self.namespace, url=self.receiver.url))
        metrics = f"127.0.0.1:{free_port()}"  # its default, :2112, listens on every address
        command = [str(self.binary), "-conf", str(config), "-kubeconfig", str(self.kubeconfig)]
        with self.log.open("ab") as log:
            self._process = subprocess.Popen([*command, "-metrics-address", metrics], stdout=log, stderr=log)

    def wait_sent(self, name: str, limit: float = 60.0) -> None:
        """Until the Event `name` has reached the receiver (its watch is up)."""
        assert self._process is not None

        def sent() -> bool:
            assert self._process is not None
            if self._process.poll() is not None:
                raise AssertionError("kubernetes-event-exporter exited: " + self.log.read_text()[-3000:])
            return name in self.receiver.received_at()

        wait_until(sent, timeout=limit, message=lambda: self.log.read_text()[-3000:])

    def received_at(self) -> dict[str, float]:
        return self.receiver.received_at()


def _build(work: Path, out: Path) -> None:
    # Not `go install MODULE@VERSION`: that reads the module's version list, which the proxy refuses.
    (work / "go.mod").write_text(
        f"module coreio.invalid/kee-build\n\ngo 1.24\n\nrequire {MODULE} {VERSION}\n"
    )
    gobuild.run_go(["build", "-trimpath", "-ldflags", "-s -w", "-o", str(out / BINARY), MODULE], work)


def recipe() -> gobuild.Recipe:
    return gobuild.Recipe(
        binary=BINARY, version=VERSION, directory=f"{BINARY}-{VERSION}", build=_build, override="KEE_BIN"
    )


def ensure_binary(given: Path | None = None) -> Path:
    """`given`, else `KEE_BIN`, else the cached build (built first if this machine has none)."""
    if given is not None:
        return given
    if named := os.environ.get("KEE_BIN"):
        return Path(named)
    return gobuild.ensure(recipe()).path


def main(argv: list[str] | None = None) -> int:
    description = (__doc__ or "").split("\n\n")[0]
    return gobuild.main(argv, prog="python -m bench.kee", description=description, recipe=recipe)


if __name__ == "__main__":
    raise SystemExit(main())
