"""One kind's objects as the storage holds them: under `/registry/<group>/<plural>/<namespace>/<name>`,
as their JSON without `metadata.resourceVersion` (the storage revision is the version, set on read)."""

from __future__ import annotations

import json

from apiserver.machinery import fastjson, objectmeta
from apiserver.machinery.jsonsyntax import syntax_error
from apiserver.machinery.types import JSON
from apiserver.resources.base import ResourceKind
from apiserver.storage.interface import KeyValue, Storage, StorageError
from apiserver.storage.update import UpdateFn, guaranteed_update

# How often a write that lost a compare-and-swap decides again before giving up (upstream retries
# without bound inside GuaranteedUpdate; a bound keeps a hot key from pinning a request forever).
MAX_UPDATE_ATTEMPTS = 32


class CorruptObjectError(StorageError):
    """A stored value that no longer decodes into an object (upstream's corrupt object: the data
    under `key` at `revision` is not decodable). `reason` is the decoder's own error."""

    def __init__(self, key: str, revision: int, reason: str) -> None:
        self.key = key
        self.revision = revision
        self.reason = reason
        super().__init__(self.storage_message())

    def decode_message(self) -> str:
        """The error as upstream's etcd3 store words an undecodable value."""
        return f"object not decodable revision={self.revision}: {self.reason}"

    def storage_message(self) -> str:
        """The error as upstream's storage.StorageError of code ErrCodeCorruptObj (7) prints it."""
        return (
            f"StorageError: corrupt object, Code: 7, Key: {self.key}, ResourceVersion: 0, "
            f"AdditionalErrorMsg: {self.decode_message()}"
        )


def _undecodable(value: bytes) -> str | None:
    """Why `value` is no stored object, worded as upstream's JSON serializer words it; None when
    it is one."""
    problem = syntax_error(value)
    if problem is not None:
        return f"couldn't get version/kind; json parse error: {problem}"
    try:
        obj = json.loads(value)
    except (UnicodeDecodeError, ValueError) as exc:
        return f"couldn't get version/kind; json parse error: {exc}"
    if obj is None:
        return "Object 'Kind' is missing in 'null'"
    if not isinstance(obj, dict):
        kind = {list: "array", str: "string", bool: "bool"}.get(type(obj), "number")
        return (
            f"couldn't get version/kind; json parse error: json: cannot unmarshal {kind} into Go "
            'value of type struct { APIVersion string "json:\\"apiVersion,omitempty\\""; '
            'Kind string "json:\\"kind,omitempty\\"" }'
        )
    if not isinstance(obj.get("metadata", {}), dict):
        return "json: cannot unmarshal into Go struct field .metadata of type v1.ObjectMeta"
    return None


def typed(kind: ResourceKind, obj: JSON) -> JSON:
    """`obj` with the kind's apiVersion and kind, first, as Go's encoder writes them."""
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    return {"kind": kind.kind, "apiVersion": kind.api_version, **body}


def storage_root(kind: ResourceKind) -> str:
    """The key prefix of every object of `kind`."""
    return f"/registry/{kind.group}/{kind.plural}/"


class StoredObjects:
    """The keys and the stored form of one kind's objects in one storage; writes made with a TTL
    (`ttl_seconds` > 0) expire."""

    def __init__(self, kind: ResourceKind, storage: Storage, ttl_seconds: int = 0) -> None:
        self.kind = kind
        self.storage = storage
        self.ttl_seconds = ttl_seconds
        self._root = storage_root(kind)

    def key(self, namespace: str, name: str) -> str:
        return f"{self._root}{namespace}/{name}"

    def prefix(self, namespace: str | None) -> str:
        return f"{self._root}{namespace}/" if namespace else self._root

    @staticmethod
    def decode(value: bytes, revision: int, key: str = "") -> JSON:
        """The object stored as `value` at `revision`; CorruptObjectError when it does not decode."""
        try:
            obj = fastjson.loads(value)
        except (UnicodeDecodeError, ValueError):
            obj = None
        if not isinstance(obj, dict) or not isinstance(obj.get("metadata", {}), dict):
            raise CorruptObjectError(key, revision, _undecodable(value) or "not an object")
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
        return self.decode(kv.value, kv.mod_revision, kv.key)

    @staticmethod
    def encode(obj: JSON) -> bytes:
        stored = dict(obj)
        meta = dict(stored.get("metadata") or {})
        meta.pop("resourceVersion", None)
        meta.pop("selfLink", None)
        stored["metadata"] = meta
        return fastjson.dumps(stored)

    def typed(self, obj: JSON) -> JSON:
        return typed(self.kind, obj)
