"""A real Grafana Loki (tests.support.loki_build) on loopback: one process with every component, its
chunks and index on local files, its usage reporting off (nothing leaves the machine), read back
through its query API."""

from __future__ import annotations

import json
import subprocess
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.loki_build import ensure_loki
from tests.support.server import free_port
from tests.support.waiting import stopped, wait_until

CONFIG = """\
auth_enabled: false
server:
  http_listen_address: 127.0.0.1
  http_listen_port: {http}
  grpc_listen_address: 127.0.0.1
  grpc_listen_port: {grpc}
  log_level: warn
common:
  instance_addr: 127.0.0.1
  path_prefix: {data}
  storage:
    filesystem:
      chunks_directory: {data}/chunks
      rules_directory: {data}/rules
  replication_factor: 1
  ring:
    kvstore:
      store: inmemory
schema_config:
  configs:
    - from: 2024-01-01
      store: tsdb
      object_store: filesystem
      schema: v13
      index:
        prefix: index_
        period: 24h
limits_config:
  allow_structured_metadata: true
  # Lines longer are refused with a 400 (the tests' way to a batch refused for good).
  max_line_size: 8KB
ingester:
  lifecycler:
    min_ready_duration: 0s
    final_sleep: 0s
analytics:
  reporting_enabled: false
tracing:
  enabled: false
"""


@dataclass
class LokiServer:
    directory: Path
    port: int = field(default_factory=free_port)
    grpc_port: int = field(default_factory=free_port)
    _process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.directory / "loki.log"

    def start(self) -> None:
        config = self.directory / "loki.yaml"
        data = self.directory / "loki-data"
        config.write_text(CONFIG.format(http=self.port, grpc=self.grpc_port, data=data))
        with self.log.open("ab") as log:
            self._process = subprocess.Popen(
                [str(ensure_loki()), f"-config.file={config}"], stdout=log, stderr=log
            )
        wait_until(self._ready, timeout=120, message=self._failed)

    def _ready(self) -> bool:
        assert self._process is not None
        if self._process.poll() is not None:
            raise AssertionError(self._failed())
        try:
            with urllib.request.urlopen(f"{self.url}/ready", timeout=5) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    def _failed(self) -> str:
        return "Loki ready; its log:\n" + self.log.read_text()[-3000:]

    def entries(self, selector: str, start_ns: int, end_ns: int) -> list[tuple[dict[str, str], int, str]]:
        """(stream labels, time, line) of every entry `selector` finds in the range, oldest first
        (structured metadata comes back among the labels)."""
        query = urllib.parse.urlencode(
            {"query": selector, "start": start_ns, "end": end_ns, "limit": 5000, "direction": "forward"}
        )
        with urllib.request.urlopen(f"{self.url}/loki/api/v1/query_range?{query}", timeout=30) as answer:
            body: dict[str, Any] = json.loads(answer.read())
        found = [
            (stream["stream"], int(stamp), line)
            for stream in body["data"]["result"]
            for stamp, line, *_ in stream["values"]
        ]
        return sorted(found, key=lambda entry: entry[1])

    def stop(self) -> None:
        stopped(self._process)
