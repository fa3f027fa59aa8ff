"""Keeps an exporter deployed for each EventExport (`exporters` renders them): the EventExports of
the namespaces the operator manages are listed and watched through the aggregation layer (a
Reflector each), and on every change, and every `resync` seconds besides (drift repaired, leftovers
pruned), the children of the exports there are applied and those of exports gone are deleted.

An export whose children cannot be written (a namespace it exports that the operator does not
manage, say) is logged once; its exporter, refused, says why in its log.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

from apiserver.cluster.reflector import ClusterReader, Reflector
from apiserver.machinery.types import JSON
from apiserver.resources import eventexport
from apiserver_operator import exporters
from apiserver_operator.children import OWNER_ANNOTATION, Installation
from apiserver_operator.exporters import Export
from apiserver_operator.kube import ApiError, KubeClient, resource_path
from apiserver_operator.reconcile import path_of

log = logging.getLogger(__name__)

# Where an exporter's namespaced children are listed, to find them by label (the ClusterRole and
# its cluster-wide binding have fixed names).
LISTED = (
    ("v1", "serviceaccounts"),
    ("coordination.k8s.io/v1", "leases"),
    (exporters.RBAC_VERSION, "roles"),
    (exporters.RBAC_VERSION, "rolebindings"),
    ("apps/v1", "deployments"),
)
REFUSALS = (403, 404, 409, 422)  # an object the cluster will not take: logged, the others go on


def _parse(obj: JSON) -> Export | None:
    export = Export.of(obj)
    return export if export.name and export.namespace else None


class Keeper:
    """The exporters of one Installation, for the namespaces `namespaces` (none: every one)."""

    def __init__(self, client: KubeClient, namespaces: Sequence[str], resync: float = 30.0) -> None:
        self.client = client
        self.namespaces = tuple(namespaces)
        self.resync = resync
        self.reader = ClusterReader(client.connection)
        self.reflectors = [
            Reflector(
                self.reader,
                resource_path(f"{eventexport.GROUP}/{eventexport.VERSION}", "eventexports", ns),
                _parse,
            )
            for ns in self.namespaces or ("",)
        ]
        self.changed = asyncio.Event()  # set by any change of the exports
        for reflector in self.reflectors:
            reflector.on_change.append(self._seen_change)
        self._seen: list[Export] = []
        self.applied: dict[str, JSON] = {}
        self.removed = False  # every child deleted since the exporters were last deployed
        self._full_due = 0.0
        self._logged: set[str] = set()

    def _seen_change(self) -> None:
        # What an exporter is made of changed; its status moving on (every few seconds) did not.
        if (exports := self.exports()) != self._seen:
            self._seen = exports
            self.changed.set()

    def manages(self, namespace: str) -> bool:
        return not self.namespaces or namespace in self.namespaces

    def exports(self) -> list[Export]:
        found = [export for reflector in self.reflectors for export in reflector.items.values()]
        return sorted(found, key=lambda export: (export.namespace, export.name))

    def start(self) -> None:
        for reflector in self.reflectors:
            reflector.start()

    async def stop(self) -> None:
        """Stops watching; what was seen is forgotten, so that a start lists afresh."""
        for reflector in self.reflectors:
            await reflector.stop()
            reflector.synced.clear()
            reflector.items = {}
        self._seen = []
        await self.reader.close()

    @property
    def synced(self) -> bool:
        return all(reflector.synced.is_set() for reflector in self.reflectors)

    async def step(self, inst: Installation) -> None:
        """One pass: the exporters kept as `inst` says (deployed, or all removed once)."""
        self.changed.clear()
        settings = inst.spec.event_export
        if not (settings.enabled and settings.exporters.deploy):
            await self.stop()
            if not self.removed:
                for path in await self.remove(inst):
                    log.info("deleted %s: exporters are not deployed", path)
                self.removed = True
            return
        self.removed = False
        self.start()
        if self.synced:
            await self.sync(inst)

    async def sync(self, inst: Installation) -> None:
        """Applies what the exports want (all of it once every `resync`, else what changed) and
        deletes the exporter children no export wants."""
        full = time.monotonic() >= self._full_due
        if full:
            self.applied.clear()
            self._full_due = time.monotonic() + self.resync
        exports = self.exports()
        wanted = self._wanted(inst, exports)
        for path, obj in wanted.items():
            if self.applied.get(path) != obj:
                await self._apply(path, obj)
        stale = [path for path in await existing(self.client, self.namespaces, inst) if path not in wanted]
        for path in stale:
            await self.client.delete(path)
            self.applied.pop(path, None)
            log.info("deleted %s: its EventExport is gone", path)

    def _wanted(self, inst: Installation, exports: list[Export]) -> dict[str, JSON]:
        wanted: dict[str, JSON] = {}
        for export in exports:
            if len(export.exported) > 1:
                self._once(
                    f"EventExport {export.namespace}/{export.name} exports several namespaces: its "
                    "exporter watches every namespace (docs/event-export.md), which the operator "
                    "grants only to an export of every namespace (*)"
                )
            for obj in exporters.objects(inst, export):
                namespace = obj["metadata"]["namespace"]
                if self.manages(namespace):
                    wanted[path_of(obj)] = obj
                else:
                    self._once(
                        f"EventExport {export.namespace}/{export.name} exports the namespace "
                        f"{namespace}, which this operator does not manage: its exporter may not "
                        "read the Events there"
                    )
        if exports:
            reader = exporters.events_reader(inst)
            wanted[path_of(reader)] = reader
        if any("" in export.exported for export in exports):
            binding = exporters.all_namespaces_binding(inst, exports)
            wanted[path_of(binding)] = binding
        return wanted

    async def _apply(self, path: str, obj: JSON) -> None:
        try:
            await self.client.apply(path, obj)
        except ApiError as exc:
            if exc.status not in REFUSALS:
                raise
            self._once(f"cannot write {path}: {exc}")
            return
        self.applied[path] = obj

    async def remove(self, inst: Installation) -> list[str]:
        """Deletes every exporter child of `inst` (the exporters no longer deployed)."""
        self.applied.clear()
        return await remove(self.client, self.namespaces, inst)

    def _once(self, message: str) -> None:
        if message not in self._logged:
            self._logged.add(message)
            log.warning("%s", message)


async def existing(client: KubeClient, namespaces: Sequence[str], inst: Installation) -> list[str]:
    """The paths of every exporter child of `inst` in `namespaces` (none: every one) and the
    cluster."""
    paths = []
    query = {"labelSelector": exporters.selector(inst)}
    for version, plural in LISTED:
        for namespace in namespaces or ("",):
            listed = await client.get(resource_path(version, plural, namespace), query)
            items = [item for item in listed.get("items") or [] if _owned_by(item, inst)]
            paths += [_item_path(version, plural, item) for item in items]
    for fixed in (exporters.events_reader(inst), exporters.all_namespaces_binding(inst, [])):
        found = await client.get_or_none(path_of(fixed))
        if found is not None and _owned_by(found, inst):
            paths.append(path_of(fixed))
    return paths


async def remove(client: KubeClient, namespaces: Sequence[str], inst: Installation) -> list[str]:
    """Deletes every exporter child of `inst` (in `namespaces`, none: every one); what it deleted."""
    removed = await existing(client, namespaces, inst)
    for path in removed:
        await client.delete(path)
    return removed


def _item_path(version: str, plural: str, item: JSON) -> str:
    meta = item.get("metadata") or {}
    return resource_path(version, plural, str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def _owned_by(obj: JSON, inst: Installation) -> bool:
    return bool((obj.get("metadata") or {}).get("annotations", {}).get(OWNER_ANNOTATION) == inst.owner)
