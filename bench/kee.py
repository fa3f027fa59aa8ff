"""kubernetes-event-exporter (github.com/resmoio/kubernetes-event-exporter), the exporter issue 25
names, beside coreio-export in bench.export: run from a binary the user gives
(`--kubernetes-event-exporter PATH`), since its module is not served by the Go module proxy this
project reaches and this project neither builds nor ships it.

It watches only the core/v1 Events of a kube-apiserver (not configurable), so its Events are
written to the bench's own kube-apiserver (tests.support.controlplane) as events.k8s.io/v1, the
same body coreio-export's are written with, and it sends them with its webhook receiver, one POST
of the Event's JSON each, to a receiving end of the bench's that stamps each Event name when it
first arrives. Its settings are its defaults (maxEventAgeSeconds 5: an Event older than that at
its start is not sent), except `omitLookup: true`: by default it reads the regarded object of
every Event from the API, 5 requests a second, which the bench's Events (of a Pod that does not
exist) would only slow down.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson

from bench.receiving import ReceivingProcess
from bench.sinks import ExporterEnd, Stamped
from tests.support.server import free_port
from tests.support.waiting import wait_until

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


class EventReceiver(Stamped):
    """Takes kubernetes-event-exporter's webhook POSTs (an Event's JSON each), every one kept (the
    same Event twice is a duplicate), in a process of its own (bench/receiving.py), the end
    coreio-export's webhook sink meets too."""

    def __init__(self, directory: Path) -> None:
        super().__init__()
        self._receiver = ReceivingProcess(directory / "requests", self._take_request)
        self._receiver.start()

    @property
    def url(self) -> str:
        return self._receiver.url

    def names(self) -> list[str]:
        """The name of every Event received, once per receipt."""
        return [record["event"]["metadata"]["name"] for record in self.records()]

    def stop(self) -> None:
        self._receiver.stop()

    def _take_request(self, at: float, kind: str, body: bytes) -> None:
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
