"""`StaticRoleSource` (standalone): the roles of a roles file (YAML or JSON) on top of the default
policy, aggregated together."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from apiserver.machinery.manifest import ManifestError, manifest_items
from apiserver.rbac.roles.aggregation import aggregate_cluster_roles
from apiserver.rbac.roles.model import CLUSTER_ROLE_KIND, RBAC_API_VERSION, Role, RoleFormatError
from apiserver.rbac.roles.policy import default_cluster_roles
from apiserver.resources import KINDS
from apiserver.resources.base import ResourceKind


def _documents(text: str, where: str) -> list[Any]:
    try:
        return manifest_items(text, where)
    except ManifestError as exc:
        raise RoleFormatError(str(exc)) from exc


def parse_roles(text: str, where: str = "roles") -> list[Role]:
    """Roles and ClusterRoles from YAML or JSON: single objects, `---`-separated documents, a plain
    list, or a List (kind List, RoleList, ClusterRoleList) with items. Each must be
    rbac.authorization.k8s.io/v1; names must be unique per kind and namespace."""
    roles: list[Role] = []
    seen: set[tuple[str, str, str]] = set()
    for index, item in enumerate(_documents(text, where)):
        here = f"{where}: item {index}"
        if not isinstance(item, dict):
            raise RoleFormatError(f"{here}: expected an object")
        if item.get("apiVersion") != RBAC_API_VERSION:
            raise RoleFormatError(
                f"{here}: apiVersion must be {RBAC_API_VERSION}, not {item.get('apiVersion')!r}"
            )
        role = Role.from_object(item, here)
        key = (role.kind, role.namespace, role.name)
        if key in seen:
            raise RoleFormatError(
                f"{here}: duplicate {role.kind} {role.namespace + '/' if role.namespace else ''}{role.name}"
            )
        seen.add(key)
        roles.append(role)
    return roles


def load_roles_file(path: Path) -> list[Role]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RoleFormatError(f"{path}: {exc.strerror or exc}") from exc
    return parse_roles(text, str(path))


class StaticRoleSource:
    """Fixed roles (a roles file) on top of the defaults; a role of the file replaces a default of
    the same name. ClusterRole aggregation is applied across both, so a file's ClusterRole labelled
    `rbac.authorization.k8s.io/aggregate-to-view: "true"` extends view (and so edit and admin)."""

    def __init__(
        self, roles: Iterable[Role] = (), *, defaults: bool = True, kinds: Iterable[ResourceKind] = KINDS
    ) -> None:
        cluster: dict[str, Role] = {}
        if defaults:
            # The defaults' own aggregation inputs, so that a file can extend admin/edit/view.
            for role in default_cluster_roles(kinds):
                cluster[role.name] = role
        self._roles: dict[tuple[str, str], Role] = {}
        for role in roles:
            if role.kind == CLUSTER_ROLE_KIND:
                cluster[role.name] = role
            else:
                self._roles[(role.namespace, role.name)] = role
        self._cluster_roles = aggregate_cluster_roles(cluster)

    @classmethod
    def from_file(
        cls, path: Path | None, *, defaults: bool = True, kinds: Iterable[ResourceKind] = KINDS
    ) -> StaticRoleSource:
        return cls(load_roles_file(path) if path is not None else (), defaults=defaults, kinds=kinds)

    @property
    def ready(self) -> bool:
        return True

    def get_role(self, namespace: str, name: str) -> Role | None:
        return self._roles.get((namespace, name))

    def get_cluster_role(self, name: str) -> Role | None:
        return self._cluster_roles.get(name)

    def cluster_roles(self) -> list[Role]:
        return list(self._cluster_roles.values())
