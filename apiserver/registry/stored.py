"""One kind's objects as the storage holds them: under `/registry/<group>/<plural>/<namespace>/<name>`,
as their JSON without `metadata.resourceVersion` (the storage revision is the version, set on read)."""

from __future__ import annotations

import json

from apiserver.machinery import objectmeta
from apiserver.machinery.types import JSON
from apiserver.resources.base import ResourceKind
from apiserver.storage.interface import KeyValue, Storage
from apiserver.storage.update import UpdateFn, guaranteed_update

# How often a write that lost a compare-and-swap decides again before giving up (upstream retries
# without bound inside GuaranteedUpdate; a bound keeps a hot key from pinning a request forever).
MAX_UPDATE_ATTEMPTS = 32


def typed(kind: ResourceKind, obj: JSON) -> JSON:
    """`obj` with the kind's apiVersion and kind, first, as Go's encoder writes them."""
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    return {"kind": kind.kind, "apiVersion": kind.api_version, **body}


class StoredObjects:
    """The keys and the stored form of one kind's objects in one storage; writes made with a TTL
    (`ttl_seconds` > 0) expire."""

    def __init__(self, kind: ResourceKind, storage: Storage, ttl_seconds: int = 0) -> None:
        self.kind = kind
        self.storage = storage
        self.ttl_seconds = ttl_seconds
        self._root = f"/registry/{kind.group}/{kind.plural}/"

    def key(self, namespace: str, name: str) -> str:
        return f"{self._root}{namespace}/{name}"

    def prefix(self, namespace: str | None) -> str:
        return f"{self._root}{namespace}/" if namespace else self._root

    @staticmethod
    def decode(value: bytes, revision: int) -> JSON:
        obj: JSON = json.loads(value)
        objectmeta.metadata(obj)["resourceVersion"] = str(revision)
        return obj

    async def guaranteed_update(
        self, namespace: str, name: str, decide: UpdateFn, *, create_if_missing: bool = False
    ) -> KeyValue | None:
        """The one read-modify-write loop every write of an existing object goes through, with
        this kind's TTL; storage errors are the caller's to map."""
        return await guaranteed_update(
            self.storage,
            self.key(namespace, name),
            decide,
            create_if_missing=create_if_missing,
            ttl=self.ttl_seconds,
            max_attempts=MAX_UPDATE_ATTEMPTS,
        )

    def from_kv(self, kv: KeyValue) -> JSON:
        return self.decode(kv.value, kv.mod_revision)

    @staticmethod
    def encode(obj: JSON) -> bytes:
        stored = dict(obj)
        meta = dict(stored.get("metadata") or {})
        meta.pop("resourceVersion", None)
        meta.pop("selfLink", None)
        stored["metadata"] = meta
        return json.dumps(stored, separators=(",", ":"), ensure_ascii=False).encode()

    def typed(self, obj: JSON) -> JSON:
        return typed(self.kind, obj)
