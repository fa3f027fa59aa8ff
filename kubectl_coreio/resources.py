"""What `TYPE[/NAME]` names, as kubectl resolves it: a resource by its plural, singular, short name
or kind, optionally qualified by its group (`events.events.core.io`), found in the server's
aggregated discovery. An unqualified name of one of coreio's resources means coreio's (a cluster
also has core `events`); a type no server lists is kept as given, with kubectl's warning.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kubectl_coreio.connection import Connection

AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
COREIO_GROUPS = ("rbac.authorization.core.io", "events.core.io")


@dataclass(frozen=True)
class Target:
    """What a command asks about: a resource of a group (and a subresource and name), or a
    non-resource URL such as /healthz (`url`), as `kubectl auth can-i` takes them."""

    group: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    url: str = ""

    def spec(self, verb: str) -> dict[str, dict[str, str]]:
        """As a review's `spec.resourceAttributes` or `spec.nonResourceAttributes`."""
        if self.url:
            return {"nonResourceAttributes": {"path": self.url, "verb": verb}}
        given = {"verb": verb, "group": self.group, "resource": self.resource}
        given.update({"subresource": self.subresource, "name": self.name})
        return {"resourceAttributes": {key: value for key, value in given.items() if value or key == "group"}}

    def __str__(self) -> str:
        if self.url:
            return self.url
        shown = f"{self.resource}.{self.group}" if self.group else self.resource
        if self.subresource:
            shown += f"/{self.subresource}"
        return shown


@dataclass(frozen=True)
class Listed:
    group: str
    resource: str
    names: frozenset[str]
    subresources: frozenset[str]


def listed(connection: Connection) -> list[Listed]:
    """Every resource the server discovers, coreio's groups first, then the core group, then the rest
    in the server's order."""
    found: list[Listed] = []
    for path in ("/api", "/apis"):
        body = connection.get(path, accept=AGGREGATED)
        if isinstance(body, dict) and body.get("kind") == "APIGroupDiscoveryList":
            found += _from_aggregated(body)
    return sorted(found, key=lambda r: 0 if r.group in COREIO_GROUPS else 1)


def _from_aggregated(body: dict[str, Any]) -> Iterator[Listed]:
    for item in body.get("items") or []:
        group = (item.get("metadata") or {}).get("name", "")
        for version in (item.get("versions") or [])[:1]:  # the preferred version comes first
            for entry in version.get("resources") or []:
                kind = ((entry.get("responseKind") or {}).get("kind") or "").lower()
                names = {entry.get("resource", ""), entry.get("singularResource", ""), kind}
                names |= set(entry.get("shortNames") or [])
                subresources = {s.get("subresource", "") for s in entry.get("subresources") or []}
                yield Listed(
                    group, entry.get("resource", ""), frozenset(names - {""}), frozenset(subresources)
                )


def resolve(connection: Connection, given: str, subresource: str = "") -> tuple[Target, str]:
    """The target `TYPE[/NAME]` (or a URL) names, and a warning when no server lists that type."""
    if given.startswith("/"):
        return Target(url=given), ""
    kind, _, name = given.partition("/")
    resource, _, group = kind.lower().partition(".")
    for entry in listed(connection):
        if resource in entry.names and (not group or group == entry.group):
            return Target(entry.group, entry.resource, subresource, name), ""
    warning = f"the server doesn't have a resource type '{kind}'"
    return Target(group, resource, subresource, name), warning
