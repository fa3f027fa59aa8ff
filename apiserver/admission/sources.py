"""Where the admission configuration comes from: the cluster (informers over
admissionregistration.k8s.io/v1, as every aggregated server built on k8s.io/apiserver reads it) or,
standalone, a manifest file (`--admission-config-file`)."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from apiserver.admission import objects as kinds
from apiserver.admission.namespace import NamespaceLifecycle, namespace_object
from apiserver.admission.objects import AdmissionObjects
from apiserver.cluster.reflector import ClusterReader, NotFound, Reflector
from apiserver.machinery.manifest import ManifestError, manifest_items
from apiserver.machinery.selectors import label_selector_matches
from apiserver.machinery.types import JSON

ADMISSION_API_VERSION = f"{kinds.GROUP}/{kinds.VERSION}"
_FIELDS = ("policies", "bindings", "validating_webhooks", "mutating_webhooks")
_FIELD_OF_KIND = dict(zip(kinds.PLURALS, _FIELDS, strict=True))


def _name(obj: JSON) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _labels(obj: JSON) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _selected(items: Iterable[JSON], name: str, selector: JSON | None) -> list[JSON]:
    if name:
        return [obj for obj in items if _name(obj) == name]
    return [obj for obj in items if label_selector_matches(selector or {}, _labels(obj))]


class ManifestSource:
    """The configuration objects of a manifest file, read once at start. Any other object in it
    (ConfigMaps, a policy's param kind, Namespaces with labels) is what params and namespaces are
    looked up in; a namespace the file does not describe exists, labelled with its name only (as
    every namespace exists implicitly standalone)."""

    def __init__(self, items: Iterable[JSON]) -> None:
        grouped: dict[str, dict[str, JSON]] = {field: {} for field in _FIELDS}
        self.others: list[JSON] = []
        for obj in items:
            field = _FIELD_OF_KIND.get(str(obj.get("kind")))
            if field is not None and obj.get("apiVersion") == ADMISSION_API_VERSION:
                grouped[field][_name(obj)] = obj
            else:
                self.others.append(obj)
        self._objects = AdmissionObjects(**grouped, generation=1)

    @classmethod
    def from_file(cls, path: Path) -> ManifestSource:
        """Raises ManifestError naming the file and the item at fault."""
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ManifestError(f"{path}: {exc.strerror or exc}") from exc
        items = manifest_items(text, str(path))
        for index, item in enumerate(items):
            if not isinstance(item, dict) or not item.get("kind") or not item.get("apiVersion"):
                raise ManifestError(f"{path}: item {index}: expected an object with apiVersion and kind")
            if not _name(item):
                raise ManifestError(f"{path}: item {index}: metadata.name is required")
        return cls(items)

    def objects(self) -> AdmissionObjects:
        return self._objects

    async def ready(self) -> None:
        return None

    async def namespace(self, name: str) -> JSON | None:
        for obj in self.others:
            if obj.get("kind") == "Namespace" and obj.get("apiVersion") == "v1" and _name(obj) == name:
                return namespace_object(obj)
        labels = {"kubernetes.io/metadata.name": name}
        return {"metadata": {"name": name, "labels": labels}, "spec": {}, "status": {"phase": "Active"}}

    async def namespaced(self, api_version: str, kind: str) -> bool | None:
        found = self._of_kind(api_version, kind)
        if not found:
            return None
        return any((obj.get("metadata") or {}).get("namespace") for obj in found)

    async def params(
        self, api_version: str, kind: str, namespace: str, name: str, selector: JSON | None
    ) -> list[JSON]:
        candidates = [
            obj
            for obj in self._of_kind(api_version, kind)
            if str((obj.get("metadata") or {}).get("namespace") or "") == namespace
        ]
        return _selected(candidates, name, selector)

    def _of_kind(self, api_version: str, kind: str) -> list[JSON]:
        return [
            obj for obj in self.others if obj.get("apiVersion") == api_version and obj.get("kind") == kind
        ]


class ClusterSource:
    """The cluster's configuration objects through one informer per kind, its namespaces through
    the namespace lifecycle's informer; params looked up live (discovery names the resource)."""

    def __init__(self, reader: ClusterReader, namespaces: NamespaceLifecycle) -> None:
        self.reader = reader
        self.namespaces = namespaces
        self.informers = {
            kind: Reflector(reader, f"/apis/{ADMISSION_API_VERSION}/{plural}", _identity)
            for kind, plural in kinds.PLURALS.items()
        }
        self._generation = 0
        self._snapshot = AdmissionObjects()
        self._resources: dict[tuple[str, str], tuple[str, bool] | None] = {}
        for informer in self.informers.values():
            informer.on_change.append(self._changed)

    def start(self) -> None:
        """The informers, and the namespaces' (shared with namespace lifecycle, if that is on)."""
        for informer in self.informers.values():
            informer.start()
        self.namespaces.start()

    async def stop(self) -> None:
        for informer in self.informers.values():
            await informer.stop()
        await self.reader.close()
        await self.namespaces.stop()

    def _changed(self) -> None:
        self._generation += 1
        grouped = {
            _FIELD_OF_KIND[kind]: {name: obj for (_, name), obj in informer.items.items()}
            for kind, informer in self.informers.items()
        }
        self._snapshot = AdmissionObjects(**grouped, generation=self._generation)

    def objects(self) -> AdmissionObjects:
        return self._snapshot

    async def ready(self) -> None:
        for informer in self.informers.values():
            await informer.synced.wait()

    async def namespace(self, name: str) -> JSON | None:
        return await self.namespaces.namespace(name)

    async def namespaced(self, api_version: str, kind: str) -> bool | None:
        found = await self._resource(api_version, kind)
        return None if found is None else found[1]

    async def params(
        self, api_version: str, kind: str, namespace: str, name: str, selector: JSON | None
    ) -> list[JSON]:
        found = await self._resource(api_version, kind)
        if found is None:
            return []
        base = _api_path(api_version)
        where = f"{base}/namespaces/{urllib.parse.quote(namespace)}" if namespace else base
        if name:
            try:
                return [await self.reader.get_json(f"{where}/{found[0]}/{urllib.parse.quote(name)}")]
            except NotFound:
                return []
        listed = await self.reader.get_json(f"{where}/{found[0]}", {"labelSelector": selector_text(selector)})
        return [item for item in listed.get("items") or [] if isinstance(item, dict)]

    async def _resource(self, api_version: str, kind: str) -> tuple[str, bool] | None:
        """The plural and scope of the kind, from the cluster's discovery (kept once found)."""
        key = (api_version, kind)
        if key not in self._resources:
            try:
                listing = await self.reader.get_json(_api_path(api_version))
            except NotFound:
                return None
            self._resources[key] = next(
                (
                    (str(r.get("name")), bool(r.get("namespaced")))
                    for r in listing.get("resources") or []
                    if r.get("kind") == kind and "/" not in str(r.get("name"))
                ),
                None,
            )
        return self._resources[key]


def _api_path(api_version: str) -> str:
    """The discovery path of a group version (the core group's under /api)."""
    return f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"


def _identity(obj: JSON) -> JSON:
    return obj


def selector_text(selector: JSON | None) -> str:
    """A LabelSelector object as the query's labelSelector string."""
    parts: list[str] = [
        f"{key}={value}" for key, value in ((selector or {}).get("matchLabels") or {}).items()
    ]
    for expression in (selector or {}).get("matchExpressions") or []:
        key, operator = expression.get("key", ""), expression.get("operator")
        values: list[Any] = expression.get("values") or []
        if operator in ("In", "NotIn"):
            parts.append(f"{key} {operator.lower()} ({','.join(str(v) for v in values)})")
        elif operator == "Exists":
            parts.append(str(key))
        elif operator == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)
