"""Discovery documents, generated from the served kinds: legacy (/apis, /apis/<g>, /apis/<g>/<v>)
and aggregated (apidiscovery.k8s.io/v2 and v2beta1 APIGroupDiscoveryList)."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from apiserver.machinery.types import JSON
from apiserver.resources.base import ResourceKind

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def storage_version_hash(kind: ResourceKind) -> str:
    """Upstream: base64 of the first 8 bytes of sha256("<group>/<version>/<Kind>")."""
    digest = hashlib.sha256(f"{kind.group}/{kind.version}/{kind.kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


def _group_versions(kinds: Sequence[ResourceKind]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for kind in kinds:
        versions = groups.setdefault(kind.group, [])
        if kind.version not in versions:
            versions.append(kind.version)
    return groups


@dataclass(frozen=True)
class Discovery:
    kinds: tuple[ResourceKind, ...]

    def group_versions(self) -> dict[str, list[str]]:
        return _group_versions(self.kinds)

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

    def resource_list(self, group: str, version: str) -> JSON | None:
        kinds = [k for k in self.kinds if k.group == group and k.version == version]
        if not kinds:
            return None
        resources: list[JSON] = []
        for kind in kinds:
            resource: JSON = {
                "name": kind.plural,
                "singularName": kind.singular,
                "namespaced": kind.namespaced,
                "kind": kind.kind,
                "verbs": VERBS,
            }
            if kind.short_names:
                resource["shortNames"] = list(kind.short_names)
            if kind.categories:
                resource["categories"] = list(kind.categories)
            resource["storageVersionHash"] = storage_version_hash(kind)
            resources.append(resource)
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}",
            "resources": resources,
        }

    def aggregated(self, api_version: str) -> JSON:
        """APIGroupDiscoveryList for /apis (api_version apidiscovery.k8s.io/v2 or v2beta1)."""
        items: list[JSON] = []
        for group, versions in self.group_versions().items():
            version_entries: list[JSON] = []
            for version in versions:
                resources: list[JSON] = []
                for kind in self.kinds:
                    if kind.group != group or kind.version != version:
                        continue
                    resource: JSON = {
                        "resource": kind.plural,
                        "responseKind": {"group": "", "version": "", "kind": kind.kind},
                        "scope": "Namespaced" if kind.namespaced else "Cluster",
                        "singularResource": kind.singular,
                        "verbs": VERBS,
                    }
                    if kind.short_names:
                        resource["shortNames"] = list(kind.short_names)
                    if kind.categories:
                        resource["categories"] = list(kind.categories)
                    resources.append(resource)
                version_entries.append({"version": version, "resources": resources, "freshness": "Current"})
            items.append(
                {"metadata": {"name": group, "creationTimestamp": None}, "versions": version_entries}
            )
        return {"kind": "APIGroupDiscoveryList", "apiVersion": api_version, "metadata": {}, "items": items}


def etag(document: JSON) -> str:
    """A strong ETag of a discovery document, as upstream's aggregated discovery sends."""
    digest = hashlib.sha512(json.dumps(document, sort_keys=True).encode()).hexdigest()
    return f'"{digest}"'
