"""The alternative bench.export measures coreio-export against: the OpenTelemetry Collector's
Kubernetes objects receiver (`k8sobjects`, contrib v0.148.0, the newest the Go module proxy here
serves), watching the same Events and sending each as an OTLP log record over OTLP/HTTP (JSON) to the bench's
own receiver (bench.sinks.OtlpHttpEnd, where coreio-export's `otlpHttp` rows send too), which
stamps each Event name when it first arrives.

kubernetes-event-exporter, which the issue names, is not served by the proxy (bench/export.py);
this receiver is the other exporter the issue lists that a user would run today. Like the others it
keeps no resourceVersion: each start lists the Events to learn the present and watches from there.

Its module is built from bench/k8sobjects/ (go.mod and go.sum) and the main of the tests' collector
(tests.support.otelcol_build) with this receiver in place of OTLP's, with tests.support.gobuild, and
cached. go.sum pins every module's hash: the checksum
database this machine reaches does not list contrib v0.148.0, so the hashes were taken from the
proxy once (`GOSUMDB=off go mod tidy`) and every build since checks the downloads against them.

    python -m bench.k8sobjects [--force]     # builds it, prints the binary's path
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from bench.sinks import ExporterEnd, OtlpHttpEnd
from tests.support import gobuild, otelcol_build
from tests.support.server import ServerProcess
from tests.support.waiting import wait_until

VERSION = "v0.148.0"
SOURCE = Path(__file__).resolve().parent / "k8sobjects"
FILES = ("go.mod", "go.sum")
RECEIVER = "github.com/open-telemetry/opentelemetry-collector-contrib/receiver/k8sobjectsreceiver"
MAIN = otelcol_build.main_go(RECEIVER, VERSION)
CONFIG = """\
receivers:
  k8sobjects:
    auth_type: kubeConfig
    objects:
      - name: events
        group: events.core.io
        mode: watch
        namespaces: [{namespace}]
exporters:
  otlphttp:
    logs_endpoint: {url}/v1/logs
    encoding: json
    compression: none
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    logs:
      receivers: [k8sobjects]
      exporters: [otlphttp]
"""


def _build(work: Path, out: Path) -> None:
    for name in FILES:
        shutil.copy(SOURCE / name, work / name)
    (work / "main.go").write_text(MAIN)
    proxy = {
        "GOPROXY": os.environ.get("COREIO_GOPROXY", "https://proxy.golang.org"),
        "GOFLAGS": "-mod=readonly",
    }
    binary = str(out / "otelcol-k8sobjects")
    gobuild.run_go(["build", "-trimpath", "-ldflags", "-s -w", "-o", binary, "."], work, extra_env=proxy)


def recipe() -> gobuild.Recipe:
    sources = b"".join((SOURCE / name).read_bytes() for name in FILES) + MAIN.encode()
    digest = hashlib.sha256(sources).hexdigest()[:12]
    return gobuild.Recipe(
        binary="otelcol-k8sobjects",
        version=VERSION,
        directory=f"otelcol-k8sobjects-{VERSION}-{digest}",
        build=_build,
        override="K8SOBJECTS_BIN",
    )


def ensure_binary() -> Path:
    if given := os.environ.get("K8SOBJECTS_BIN"):
        return Path(given)
    return gobuild.ensure(recipe()).path


class K8sObjectsEnd(ExporterEnd):
    """The collector process, watching the Events of one namespace, and its receiving end."""

    receiver: OtlpHttpEnd

    def __init__(self, server: ServerProcess, namespace: str, directory: Path) -> None:
        self.server = server
        self.namespace = namespace
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.receiver = OtlpHttpEnd(directory / "receiver")
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> Path:
        return self.directory / "otelcol.log"

    def start(self, *, wait: bool = True) -> None:
        """Starts the collector; with `wait`, returns once its watch has started (its log says)."""
        config = self.directory / "otelcol.yaml"
        config.write_text(CONFIG.format(namespace=self.namespace, url=self.receiver.url))
        marks = self.log.read_text().count("Started collecting") if self.log.exists() else 0
        env = dict(os.environ, KUBECONFIG=str(self.server.kubeconfig))
        with self.log.open("ab") as log:
            command = [str(ensure_binary()), "--config", f"file:{config}"]
            self._process = subprocess.Popen(command, stdout=log, stderr=log, env=env)
        if wait:
            wait_until(lambda: self._started(marks), timeout=60, message=lambda: self.log.read_text()[-3000:])

    def _started(self, marks: int) -> bool:
        assert self._process is not None
        if self._process.poll() is not None:
            raise AssertionError("the collector exited: " + self.log.read_text()[-3000:])
        return self.log.read_text().count("Started collecting") > marks

    def received_at(self) -> dict[str, float]:
        return self.receiver.received_at()

    def added(self) -> list[str]:
        """The names of the Events it delivered as ADDED, once per delivery."""
        return [name for kind, name in self.receiver.seen if kind == "ADDED"]


def main(argv: list[str] | None = None) -> int:
    description = (__doc__ or "").split("\n\n")[0]
    return gobuild.main(argv, prog="python -m bench.k8sobjects", description=description, recipe=recipe)


if __name__ == "__main__":
    sys.exit(main())
