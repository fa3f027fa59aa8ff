"""Settings of one server process (what the command line sets)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "coreio"


@dataclass
class Settings:
    data_dir: Path = field(default_factory=default_data_dir)
    bind_address: str = "127.0.0.1"
    secure_port: int = 8443
    # Empty: embedded SQLite under data_dir. Otherwise etcd endpoints (http(s)://host:port).
    etcd_servers: list[str] = field(default_factory=list)
    etcd_prefix: str = ""
    etcd_cafile: str = ""
    etcd_certfile: str = ""
    etcd_keyfile: str = ""
    # Serving certificate; empty: created in data_dir/pki.
    tls_cert_file: str = ""
    tls_private_key_file: str = ""
    client_ca_file: str = ""
    token_auth_file: str = ""
    # How long Events live (kube-apiserver's --event-ttl).
    event_ttl_seconds: int = 3600
    # Watches without timeoutSeconds end after a random time in [min, 2*min) (kube-apiserver's
    # --min-request-timeout).
    min_request_timeout: float = 1800.0
    watch_bookmark_interval: float = 60.0
    # How often history is compacted (kube-apiserver: every 5 minutes).
    compaction_interval: float = 300.0

    @property
    def standalone(self) -> bool:
        return not self.tls_cert_file
