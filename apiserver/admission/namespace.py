"""Namespace lifecycle admission: no object is created in a namespace the cluster does not have, nor
new content in one being terminated (k8s.io/apiserver's NamespaceLifecycle plugin, which every
aggregated API server built on it runs).

Namespaces are read from the cluster through an informer. A namespace missing from it is waited for
briefly (a namespace created just before is often still on its way) and then looked up live, so a
slow watch never refuses a namespace that exists. Standalone, there is no cluster and every
namespace exists implicitly: the plugin is simply not installed.
"""

from __future__ import annotations

import asyncio

from apiserver.cluster.reflector import ClusterReader, NotFound, Reflector
from apiserver.machinery.errors import GroupResource, StatusError, forbidden_error, not_found_error
from apiserver.machinery.types import JSON
from apiserver.machinery.user import UserInfo
from apiserver.resources.base import Admission

NAMESPACES_PATH = "/api/v1/namespaces"
NAMESPACES = GroupResource("", "namespaces")
# How long a create waits for the informer to catch up with a namespace it does not have yet.
MISSING_NAMESPACE_WAIT = 0.05
# How long a request waits for the informer's first list before it is refused.
READY_WAIT = 10.0


def namespace_phase(obj: JSON) -> str:
    return str((obj.get("status") or {}).get("phase") or "Active")


def namespace_object(obj: JSON) -> JSON:
    """What is kept of a Namespace: what admission policies see of it as `namespaceObject` (its
    metadata without managedFields or ownerReferences, spec and status), upstream's
    CreateNamespaceObject."""
    meta = obj.get("metadata") or {}
    kept = {key: value for key, value in meta.items() if key not in ("managedFields", "ownerReferences")}
    return {"metadata": kept, "spec": obj.get("spec") or {}, "status": obj.get("status") or {}}


class NamespaceLifecycle:
    """The admission check over an informer of the cluster's namespaces."""

    def __init__(self, namespaces: Reflector[JSON]) -> None:
        self.namespaces = namespaces

    @classmethod
    def over(cls, reader: ClusterReader) -> NamespaceLifecycle:
        """A plugin whose informer keeps each of the cluster's namespaces (`namespace_object`)."""
        return cls(Reflector(reader, NAMESPACES_PATH, namespace_object))

    def start(self) -> None:
        self.namespaces.start()

    async def stop(self) -> None:
        await self.namespaces.stop()
        await self.namespaces.reader.close()

    def admission(self, resource: GroupResource) -> Admission:
        """The check for writes of `resource` (creates and updates; deletes are never refused)."""

        async def admit(user: UserInfo | None, namespace: str, obj: JSON, old: JSON | None) -> None:
            if not namespace:
                return
            phase = await self.phase(namespace, creating=old is None)
            if old is None and phase == "Terminating":
                raise _terminating(resource, obj, namespace)

        return admit

    async def phase(self, namespace: str, *, creating: bool) -> str:
        """The namespace's phase; 404 NotFound (as the cluster words it) when it does not exist."""
        obj = await self.namespace(namespace, creating=creating)
        if obj is None:
            raise not_found_error(NAMESPACES, namespace)
        return namespace_phase(obj)

    async def namespace(self, namespace: str, *, creating: bool = False) -> JSON | None:
        """The namespace as kept (`namespace_object`); None when the cluster has none."""
        await self._ready()
        if (obj := self.namespaces.items.get(("", namespace))) is not None:
            return obj
        if creating:
            await asyncio.sleep(MISSING_NAMESPACE_WAIT)
            if (obj := self.namespaces.items.get(("", namespace))) is not None:
                return obj
        return await self._live(namespace)

    async def _ready(self) -> None:
        try:
            async with asyncio.timeout(READY_WAIT):
                await self.namespaces.synced.wait()
        except TimeoutError:
            raise StatusError(403, "Forbidden", "forbidden: not yet ready to handle request") from None

    async def _live(self, namespace: str) -> JSON | None:
        try:
            obj = await self.namespaces.reader.get_json(f"{NAMESPACES_PATH}/{namespace}")
        except NotFound:
            return None
        except (OSError, TimeoutError, ValueError) as exc:
            raise StatusError(500, "InternalError", f"Internal error occurred: {exc}") from exc
        return namespace_object(obj)


def _terminating(resource: GroupResource, obj: JSON, namespace: str) -> StatusError:
    name = str((obj.get("metadata") or {}).get("name") or "")
    why = f"unable to create new content in namespace {namespace} because it is being terminated"
    error = forbidden_error(resource, name, why)
    assert error.details is not None
    error.details["causes"] = [
        {
            "reason": "NamespaceTerminating",
            "message": f"namespace {namespace} is being terminated",
            "field": "metadata.namespace",
        }
    ]
    return error
