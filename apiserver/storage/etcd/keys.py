"""Keys under the storage's prefix: the protocol's keys as etcd's, and etcd's key-values and watch
events as the protocol's (upstream: etcd3/event.go)."""

from __future__ import annotations

from typing import Any

from aetcd import rpc

from apiserver.storage.interface import EventType, KeyValue, WatchEvent


def range_end(prefix: bytes) -> bytes:
    """etcd's range end covering every key that starts with `prefix`."""
    end = bytearray(prefix)
    while end:
        if end[-1] < 0xFF:
            end[-1] += 1
            return bytes(end)
        end.pop()
    return b"\0"  # every key


class Keys:
    """`prefix` is prepended to every key sent to etcd and stripped from every key it returns."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.strip = len(prefix.encode())  # the bytes taken off each key etcd returns

    def key(self, key: str) -> bytes:
        return (self.prefix + key).encode()

    def probe(self) -> bytes:
        """A key to read revisions with (count only): the prefix itself, or `/` without one."""
        return self.key("") or b"/"

    def key_value(self, kv: Any) -> KeyValue:
        return KeyValue(
            kv.key.decode()[len(self.prefix) :],
            bytes(kv.value),
            int(kv.mod_revision),
            int(kv.create_revision),
        )

    def event(self, raw: Any) -> WatchEvent:
        kv = raw.kv
        key = kv.key.decode()[len(self.prefix) :]
        previous = raw.prev_kv if raw.HasField("prev_kv") else None
        prev_value = bytes(previous.value) if previous is not None else None
        if raw.type == rpc.Event.DELETE:
            create_revision = previous.create_revision if previous is not None else 0
            return WatchEvent(EventType.DELETE, key, kv.mod_revision, None, prev_value, create_revision)
        return WatchEvent(
            EventType.PUT, key, kv.mod_revision, bytes(kv.value), prev_value, kv.create_revision
        )
