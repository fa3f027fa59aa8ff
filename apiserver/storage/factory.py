"""Opening the storage a server was configured with: etcd when endpoints are given, else SQLite.

It takes plain values, not the server's Settings, so that storage imports nothing above it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from apiserver.storage.cacher import CachedStorage
from apiserver.storage.cacher.handoff import FirstFill
from apiserver.storage.holds import HistoryHold
from apiserver.storage.interface import Storage
from apiserver.storage.sqlite.doorbell import Doorbell


@dataclass(frozen=True)
class StorageOptions:
    """Where objects live: an etcd cluster (endpoints and TLS files, empty for none), or else the
    SQLite database at `sqlite_path`; and the background work of either."""

    sqlite_path: Path
    # Other processes (the server's other workers) use the SQLite file too.
    sqlite_shared: bool = False
    etcd_servers: Sequence[str] = ()
    etcd_prefix: str = ""
    etcd_ca_file: str = ""
    etcd_cert_file: str = ""
    etcd_key_file: str = ""
    # Seconds between compactions (0: never) and between progress notices to idle watches.
    compaction_interval: float = 300.0
    progress_interval: float = 5.0
    # The key prefixes served from a watch cache (none: no cache), and its window of changes.
    cache_roots: Sequence[str] = ()
    watch_cache_size: int = 10_000
    # The history kept for consumers (EventExports): compaction and the watch cache respect it.
    hold: HistoryHold = field(default_factory=HistoryHold)
    # This worker's part in the first fill of the caches of a server of several (handoff.py).
    first_fill: FirstFill | None = None
    # The pipes a server's workers ring each other by after a SQLite commit (sqlite/doorbell.py).
    doorbell: Doorbell | None = None


def open_storage(options: StorageOptions) -> tuple[Storage, str]:
    """The storage, not started yet, and a short description of it for the log."""
    backend, described = _open_backend(options)
    if not options.cache_roots:
        return backend, described
    cached = CachedStorage(
        backend,
        options.cache_roots,
        window_size=options.watch_cache_size,
        progress_interval=options.progress_interval,
        hold=options.hold,
        first_fill=options.first_fill,
        # etcd's revision read crosses the network: a GET starts it as it arrives.
        read_ahead=bool(options.etcd_servers),
    )
    return cached, f"{described}, watch cache on"


def preload(etcd: bool) -> None:
    """The backend's modules imported before a server's workers fork, so that no worker imports
    them on its way to its first fill (etcd's client and gRPC: about 60 ms). An import makes no
    gRPC object and starts no thread, so forking after it is safe (gRPC's fork support asks only
    that its objects be made after the fork)."""
    if etcd:
        import apiserver.storage.etcd  # noqa: F401


def _open_backend(options: StorageOptions) -> tuple[Storage, str]:
    if options.etcd_servers:
        # Imported here: a SQLite server does not load the etcd client.
        from apiserver.storage.etcd import EtcdStorage

        storage: Storage = EtcdStorage(
            options.etcd_servers,
            prefix=options.etcd_prefix,
            ca_file=options.etcd_ca_file or None,
            cert_file=options.etcd_cert_file or None,
            key_file=options.etcd_key_file or None,
            compaction_interval=options.compaction_interval,
            progress_interval=options.progress_interval,
            hold=options.hold,
        )
        return storage, f"etcd {','.join(options.etcd_servers)}"
    from apiserver.storage.sqlite.backend import SQLiteStorage

    storage = SQLiteStorage(
        str(options.sqlite_path),
        compaction_interval=options.compaction_interval,
        progress_interval=options.progress_interval,
        shared=options.sqlite_shared,
        hold=options.hold,
        doorbell=options.doorbell,
    )
    return storage, f"sqlite {options.sqlite_path}"
