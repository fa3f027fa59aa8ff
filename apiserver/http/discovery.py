"""Discovery documents, generated from the served kinds: legacy (/apis, /apis/<g>, /apis/<g>/<v>)
and aggregated (apidiscovery.k8s.io/v2 and v2beta1 APIGroupDiscoveryList)."""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass

from apiserver.machinery.types import JSON
from apiserver.resources.base import ResourceKind

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
STATUS_VERBS = ["get", "patch", "update"]


def storage_version_hash(kind: ResourceKind) -> str:
    """Upstream: base64 of the first 8 bytes of sha256("<group>/<version>/<Kind>")."""
    digest = hashlib.sha256(f"{kind.group}/{kind.version}/{kind.kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


@dataclass(frozen=True)
class Resource:
    """One resource as discovery lists it."""

    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    verbs: tuple[str, ...]
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    # Upstream lists one for stored kinds only (none for the create-only reviews).
    storage_version_hash: str = ""
    # Whether it serves a /status subresource.
    status: bool = False

    @classmethod
    def of(cls, kind: ResourceKind) -> Resource:
        """A served kind: every verb, and its storage version hash."""
        return cls(
            kind.group,
            kind.version,
            kind.plural,
            kind.singular,
            kind.kind,
            kind.namespaced,
            tuple(VERBS),
            tuple(kind.short_names),
            tuple(kind.categories),
            storage_version_hash(kind),
            kind.status_subresource,
        )

    @classmethod
    def create_only(cls, group: str, plural: str, kind: str, *, namespaced: bool = False) -> Resource:
        """A kind that is only ever created (a review), version v1."""
        return cls(group, "v1", plural, plural.removesuffix("s"), kind, namespaced, ("create",))

    def legacy(self) -> JSON:
        """Its entry of an APIResourceList."""
        entry: JSON = {
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": list(self.verbs),
        }
        if self.short_names:
            entry["shortNames"] = list(self.short_names)
        if self.categories:
            entry["categories"] = list(self.categories)
        if self.storage_version_hash:
            entry["storageVersionHash"] = self.storage_version_hash
        return entry

    def aggregated(self) -> JSON:
        """Its entry of an aggregated discovery version."""
        entry: JSON = {
            "resource": self.plural,
            "responseKind": {"group": "", "version": "", "kind": self.kind},
            "scope": "Namespaced" if self.namespaced else "Cluster",
            "singularResource": self.singular,
            "verbs": list(self.verbs),
        }
        if self.short_names:
            entry["shortNames"] = list(self.short_names)
        if self.categories:
            entry["categories"] = list(self.categories)
        if self.status:
            entry["subresources"] = [
                {
                    "subresource": "status",
                    "responseKind": {"group": "", "version": "", "kind": self.kind},
                    "verbs": STATUS_VERBS,
                }
            ]
        return entry

    def legacy_subresources(self) -> list[JSON]:
        """The entries of its subresources in an APIResourceList, after its own."""
        if not self.status:
            return []
        entry = {"name": f"{self.plural}/status", "singularName": "", "namespaced": self.namespaced}
        return [{**entry, "kind": self.kind, "verbs": STATUS_VERBS}]


@dataclass(frozen=True)
class Discovery:
    kinds: tuple[ResourceKind, ...]
    # Resources served besides the kinds (standalone: the self reviews).
    extra: tuple[Resource, ...] = ()

    @property
    def resources(self) -> tuple[Resource, ...]:
        return (*(Resource.of(kind) for kind in self.kinds), *self.extra)

    def group_versions(self) -> dict[str, list[str]]:
        groups: dict[str, list[str]] = {}
        for resource in self.resources:
            versions = groups.setdefault(resource.group, [])
            if resource.version not in versions:
                versions.append(resource.version)
        return groups

    def api_versions(self) -> JSON:
        """/api: an extension server serves no legacy core group."""
        return {"kind": "APIVersions", "versions": [], "serverAddressByClientCIDRs": None}

    def _group(self, group: str, versions: list[str]) -> JSON:
        listed = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"name": group, "versions": listed, "preferredVersion": listed[0]}

    def group_list(self) -> JSON:
        groups = [self._group(g, vs) for g, vs in self.group_versions().items()]
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def group(self, group: str) -> JSON | None:
        versions = self.group_versions().get(group)
        if versions is None:
            return None
        return {"kind": "APIGroup", "apiVersion": "v1", **self._group(group, versions)}

    def _served(self, group: str, version: str) -> list[Resource]:
        return [r for r in self.resources if r.group == group and r.version == version]

    def resource_list(self, group: str, version: str) -> JSON | None:
        served = self._served(group, version)
        if not served:
            return None
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}",
            "resources": [entry for r in served for entry in (r.legacy(), *r.legacy_subresources())],
        }

    def aggregated(self, api_version: str) -> JSON:
        """APIGroupDiscoveryList for /apis (api_version apidiscovery.k8s.io/v2 or v2beta1)."""
        items: list[JSON] = []
        for group, versions in self.group_versions().items():
            version_entries = [
                {
                    "version": version,
                    "resources": [resource.aggregated() for resource in self._served(group, version)],
                    "freshness": "Current",
                }
                for version in versions
            ]
            items.append(
                {"metadata": {"name": group, "creationTimestamp": None}, "versions": version_entries}
            )
        return {"kind": "APIGroupDiscoveryList", "apiVersion": api_version, "metadata": {}, "items": items}


def etag(document: JSON) -> str:
    """A strong ETag of a discovery document, as upstream's aggregated discovery sends."""
    digest = hashlib.sha512(json.dumps(document, sort_keys=True).encode()).hexdigest()
    return f'"{digest}"'
