"""Where roleRefs resolve: the Roles and ClusterRoles (rbac.authorization.k8s.io/v1) the RBAC
authorizer reads rules from.

coreio stores RoleBindings only. Their roleRef (apiGroup rbac.authorization.core.io, kind Role or
ClusterRole) names a role of a role source:

- `StaticRoleSource` (standalone): the roles of a roles file plus upstream's default ClusterRoles
  cluster-admin, admin, edit and view, aggregated as upstream's clusterrole-aggregation controller
  does, with the served kinds added as each declares (`ResourceKind.role_verbs`; see
  `default_cluster_roles`).
- `ClusterRoleSource` (in a cluster): the cluster's own Roles and ClusterRoles, listed once and then
  watched (an informer's list+watch with resourceVersion, relisting on 410), never fetched per request.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from apiserver.cluster.connection import ClusterConnection
from apiserver.cluster.reflector import ClusterReader, Reflector
from apiserver.machinery.errors import go_quote
from apiserver.machinery.manifest import ManifestError, manifest_items
from apiserver.machinery.selectors import label_selector_matches
from apiserver.machinery.types import JSON
from apiserver.resources import KINDS
from apiserver.resources.base import (
    ADMIN_ROLE,
    EDIT_ROLE,
    READ_VERBS,
    VIEW_ROLE,
    WRITE_VERBS,
    ResourceKind,
)
from apiserver.resources.rolebinding import ACCESS_REVIEWS
from apiserver.resources.rolebinding import GROUP as ROLE_BINDING_GROUP

log = logging.getLogger(__name__)


RBAC_API_GROUP = "rbac.authorization.k8s.io"
RBAC_API_VERSION = f"{RBAC_API_GROUP}/v1"
ROLE_KIND = "Role"
CLUSTER_ROLE_KIND = "ClusterRole"
AGGREGATE_TO_ADMIN = "rbac.authorization.k8s.io/aggregate-to-admin"
AGGREGATE_TO_EDIT = "rbac.authorization.k8s.io/aggregate-to-edit"
AGGREGATE_TO_VIEW = "rbac.authorization.k8s.io/aggregate-to-view"
_AGGREGATE_TO = {ADMIN_ROLE: AGGREGATE_TO_ADMIN, EDIT_ROLE: AGGREGATE_TO_EDIT, VIEW_ROLE: AGGREGATE_TO_VIEW}

READ = READ_VERBS
WRITE = WRITE_VERBS
READ_WRITE = READ + WRITE


class RoleFormatError(ValueError):
    """A role object (or roles file) that is not a valid rbac.authorization.k8s.io/v1 role."""


# ----------------------------------------------------------------------------- rules and roles


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise RoleFormatError(f"{where}: expected a list of strings")
    return tuple(value)


def _go_strings(values: Sequence[str]) -> str:
    """Go's %q of a []string: `["a" "b"]`."""
    return "[" + " ".join(go_quote(value) for value in values) + "]"


@dataclass(frozen=True)
class PolicyRule:
    """One rule of a role (rbacv1.PolicyRule); `*` is the wildcard in every list."""

    verbs: tuple[str, ...] = ()
    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, value: Any, where: str = "rule") -> PolicyRule:
        if not isinstance(value, dict):
            raise RoleFormatError(f"{where}: expected an object")
        return cls(
            verbs=_strings(value.get("verbs"), f"{where}.verbs"),
            api_groups=_strings(value.get("apiGroups"), f"{where}.apiGroups"),
            resources=_strings(value.get("resources"), f"{where}.resources"),
            resource_names=_strings(value.get("resourceNames"), f"{where}.resourceNames"),
            non_resource_urls=_strings(value.get("nonResourceURLs"), f"{where}.nonResourceURLs"),
        )

    def to_json(self) -> JSON:
        """The rule as the API writes it (empty lists left out, as Go's omitempty)."""
        pairs = (
            ("verbs", self.verbs),
            ("apiGroups", self.api_groups),
            ("resources", self.resources),
            ("resourceNames", self.resource_names),
            ("nonResourceURLs", self.non_resource_urls),
        )
        return {key: list(values) for key, values in pairs if values or key == "verbs"}

    def compact_string(self) -> str:
        """How upstream's escalation message shows a rule:
        `{APIGroups:["apps"], Resources:["deployments"], Verbs:["get" "list"]}`."""
        parts = []
        for label, values in (
            ("APIGroups", self.api_groups),
            ("Resources", self.resources),
            ("NonResourceURLs", self.non_resource_urls),
            ("ResourceNames", self.resource_names),
            ("Verbs", self.verbs),
        ):
            if values:
                parts.append(f"{label}:{_go_strings(values)}")
        return "{" + ", ".join(parts) + "}"


def rule(
    verbs: Iterable[str],
    *,
    groups: Iterable[str] = (),
    resources: Iterable[str] = (),
    names: Iterable[str] = (),
    urls: Iterable[str] = (),
) -> PolicyRule:
    """A rule with every list sorted, as upstream's rule builder (NewRule(...).RuleOrDie()) makes them."""
    return PolicyRule(
        verbs=tuple(sorted(verbs)),
        api_groups=tuple(sorted(groups)),
        resources=tuple(sorted(resources)),
        resource_names=tuple(sorted(names)),
        non_resource_urls=tuple(sorted(urls)),
    )


@dataclass(frozen=True)
class Role:
    """A Role (namespaced) or ClusterRole (namespace ""), reduced to what authorization needs."""

    kind: str
    name: str
    namespace: str = ""
    rules: tuple[PolicyRule, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)
    # ClusterRoles with an aggregationRule: its clusterRoleSelectors (metav1.LabelSelector objects).
    aggregation_selectors: tuple[JSON, ...] | None = field(default=None, compare=False, hash=False)
    resource_version: str = ""

    @classmethod
    def from_object(cls, obj: Any, where: str = "role") -> Role:
        if not isinstance(obj, dict):
            raise RoleFormatError(f"{where}: expected an object")
        kind = obj.get("kind")
        if kind not in (ROLE_KIND, CLUSTER_ROLE_KIND):
            raise RoleFormatError(f"{where}: kind must be Role or ClusterRole, not {kind!r}")
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise RoleFormatError(f"{where}: metadata.name is required")
        namespace = meta.get("namespace") or ""
        if not isinstance(namespace, str):
            raise RoleFormatError(f"{where}: metadata.namespace must be a string")
        if kind == ROLE_KIND and not namespace:
            raise RoleFormatError(f"{where}: Role {name!r} needs metadata.namespace")
        if kind == CLUSTER_ROLE_KIND:
            namespace = ""
        labels = meta.get("labels") or {}
        if not isinstance(labels, dict):
            raise RoleFormatError(f"{where}: metadata.labels must be an object")
        raw_rules = obj.get("rules") or []
        if not isinstance(raw_rules, list):
            raise RoleFormatError(f"{where}: rules must be a list")
        selectors: tuple[JSON, ...] | None = None
        aggregation = obj.get("aggregationRule")
        if kind == CLUSTER_ROLE_KIND and isinstance(aggregation, dict):
            raw_selectors = aggregation.get("clusterRoleSelectors") or []
            if not isinstance(raw_selectors, list) or not all(isinstance(s, dict) for s in raw_selectors):
                raise RoleFormatError(
                    f"{where}: aggregationRule.clusterRoleSelectors must be a list of objects"
                )
            selectors = tuple(raw_selectors)
        return cls(
            kind=str(kind),
            name=name,
            namespace=namespace,
            rules=tuple(PolicyRule.from_json(r, f"{where}.rules[{i}]") for i, r in enumerate(raw_rules)),
            labels={str(k): str(v) for k, v in labels.items()},
            aggregation_selectors=selectors,
            resource_version=str(meta.get("resourceVersion") or ""),
        )

    def to_object(self) -> JSON:
        meta: JSON = {"name": self.name}
        if self.namespace:
            meta["namespace"] = self.namespace
        if self.labels:
            meta["labels"] = dict(self.labels)
        obj: JSON = {"apiVersion": RBAC_API_VERSION, "kind": self.kind, "metadata": meta}
        if self.aggregation_selectors is not None:
            obj["aggregationRule"] = {"clusterRoleSelectors": [dict(s) for s in self.aggregation_selectors]}
        obj["rules"] = [r.to_json() for r in self.rules]
        return obj


class RoleSource(Protocol):
    """What the RBAC authorizer resolves roleRefs with. Lookups are in memory and synchronous."""

    @property
    def ready(self) -> bool:
        """False until the source has its first complete view (lookups would wrongly miss)."""
        ...

    def get_role(self, namespace: str, name: str) -> Role | None: ...

    def get_cluster_role(self, name: str) -> Role | None: ...


def aggregate_cluster_roles(roles: Mapping[str, Role]) -> dict[str, Role]:
    """ClusterRoles with an aggregationRule get the rules of every ClusterRole their selectors match
    (selectors in order, matches by name, first occurrence of each rule), as upstream's
    clusterrole-aggregation controller keeps them; aggregated roles may themselves be aggregated."""
    resolved: dict[str, tuple[PolicyRule, ...]] = {}
    in_progress: set[str] = set()

    def rules_of(name: str) -> tuple[PolicyRule, ...]:
        role = roles[name]
        if role.aggregation_selectors is None:
            return role.rules
        if name in resolved:
            return resolved[name]
        if name in in_progress:  # a cycle: the controller would never settle; stop here
            return ()
        in_progress.add(name)
        collected: list[PolicyRule] = []
        for selector in role.aggregation_selectors:
            for other in sorted(roles):
                if other == name or not label_selector_matches(selector, roles[other].labels):
                    continue
                for candidate in rules_of(other):
                    if candidate not in collected:
                        collected.append(candidate)
        in_progress.discard(name)
        resolved[name] = tuple(collected)
        return resolved[name]

    result: dict[str, Role] = {}
    for name, role in roles.items():
        if role.aggregation_selectors is None:
            result[name] = role
        else:
            result[name] = Role(
                kind=role.kind,
                name=role.name,
                rules=rules_of(name),
                labels=role.labels,
                aggregation_selectors=role.aggregation_selectors,
                resource_version=role.resource_version,
            )
    return result


# ----------------------------------------------------------------------------- default roles


def _cluster_role(
    name: str,
    rules: Sequence[PolicyRule] = (),
    *,
    labels: Mapping[str, str] | None = None,
    aggregate: str = "",
) -> Role:
    selectors = ({"matchLabels": {aggregate: "true"}},) if aggregate else None
    return Role(
        CLUSTER_ROLE_KIND,
        name,
        rules=tuple(rules),
        labels=dict(labels or {}) | {"kubernetes.io/bootstrapping": "rbac-defaults"},
        aggregation_selectors=selectors,
    )


# fmt: off
# (verbs, group, resources) of system:aggregate-to-view and -edit: upstream's bootstrap policy as of
# v1.33 with default feature gates (no DynamicResourceAllocation).
_VIEW = (
    (READ, "", ("pods", "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
                "services", "services/status", "endpoints", "persistentvolumeclaims",
                "persistentvolumeclaims/status", "configmaps")),
    (READ, "", ("limitranges", "resourcequotas", "bindings", "events", "pods/status",
                "resourcequotas/status", "namespaces/status", "replicationcontrollers/status", "pods/log")),
    (READ, "", ("namespaces",)),
    (READ, "discovery.k8s.io", ("endpointslices",)),
    (READ, "apps", ("controllerrevisions", "statefulsets", "statefulsets/status", "statefulsets/scale",
                    "daemonsets", "daemonsets/status", "deployments", "deployments/status",
                    "deployments/scale", "replicasets", "replicasets/status", "replicasets/scale")),
    (READ, "autoscaling", ("horizontalpodautoscalers", "horizontalpodautoscalers/status")),
    (READ, "batch", ("jobs", "cronjobs", "cronjobs/status", "jobs/status")),
    (READ, "extensions", ("daemonsets", "daemonsets/status", "deployments", "deployments/scale",
                          "deployments/status", "ingresses", "ingresses/status", "replicasets",
                          "replicasets/scale", "replicasets/status", "replicationcontrollers/scale",
                          "networkpolicies")),
    (READ, "policy", ("poddisruptionbudgets", "poddisruptionbudgets/status")),
    (READ, "networking.k8s.io", ("networkpolicies", "ingresses", "ingresses/status")),
)
_EDIT = (
    (READ, "", ("pods/attach", "pods/proxy", "pods/exec", "pods/portforward", "secrets", "services/proxy")),
    (("impersonate",), "", ("serviceaccounts",)),
    (WRITE, "", ("pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward")),
    (("create",), "", ("pods/eviction",)),
    (WRITE, "", ("replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts", "services",
                 "services/proxy", "persistentvolumeclaims", "configmaps", "secrets", "events")),
    (("create",), "", ("serviceaccounts/token",)),
    (WRITE, "apps", ("statefulsets", "statefulsets/scale", "daemonsets", "deployments", "deployments/scale",
                     "deployments/rollback", "replicasets", "replicasets/scale")),
    (WRITE, "autoscaling", ("horizontalpodautoscalers",)),
    (WRITE, "batch", ("jobs", "cronjobs")),
    (WRITE, "extensions", ("daemonsets", "deployments", "deployments/scale", "deployments/rollback",
                           "ingresses", "replicasets", "replicasets/scale", "replicationcontrollers/scale",
                           "networkpolicies")),
    (WRITE, "policy", ("poddisruptionbudgets",)),
    (WRITE, "networking.k8s.io", ("networkpolicies", "ingresses")),
    (READ_WRITE, "coordination.k8s.io", ("leases",)),
)
_DISCOVERY_URLS = ("/livez", "/readyz", "/healthz", "/version", "/version/", "/openapi", "/openapi/*",
                   "/api", "/api/*", "/apis", "/apis/*")
# fmt: on


def _table_rules(table: Sequence[tuple[Sequence[str], str, Sequence[str]]]) -> list[PolicyRule]:
    return [rule(verbs, groups=[group], resources=resources) for verbs, group, resources in table]


def coreio_aggregated_roles(kinds: Iterable[ResourceKind] = KINDS) -> list[Role]:
    """The served kinds' additions to admin, edit and view (`ResourceKind.role_verbs`), as
    ClusterRoles coreio:aggregate-to-<role> carrying upstream's aggregation labels (in a cluster,
    the same roles installed there are aggregated by the cluster)."""
    kinds = tuple(kinds)
    return [
        _cluster_role(
            f"coreio:aggregate-to-{role}",
            [
                rule(kind.role_verbs[role], groups=[kind.group], resources=[kind.plural])
                for kind in kinds
                if kind.role_verbs.get(role)
            ],
            labels={_AGGREGATE_TO[role]: "true"},
        )
        for role in (ADMIN_ROLE, EDIT_ROLE, VIEW_ROLE)
    ]


def default_cluster_roles(kinds: Iterable[ResourceKind] = KINDS) -> list[Role]:
    """Upstream's cluster-admin, admin, edit and view (aggregated, as the cluster would hold them),
    their system:aggregate-to-* parts, and the served kinds' additions (`coreio_aggregated_roles`)."""
    roles = [
        _cluster_role(
            "cluster-admin",
            [rule(["*"], groups=["*"], resources=["*"]), rule(["*"], urls=["*"])],
        ),
        _cluster_role("admin", aggregate=AGGREGATE_TO_ADMIN),
        _cluster_role("edit", labels={AGGREGATE_TO_ADMIN: "true"}, aggregate=AGGREGATE_TO_EDIT),
        _cluster_role("view", labels={AGGREGATE_TO_EDIT: "true"}, aggregate=AGGREGATE_TO_VIEW),
        _cluster_role(
            "system:aggregate-to-admin",
            [
                rule(["create"], groups=["authorization.k8s.io"], resources=["localsubjectaccessreviews"]),
                rule(READ_WRITE, groups=[RBAC_API_GROUP], resources=["roles", "rolebindings"]),
            ],
            labels={AGGREGATE_TO_ADMIN: "true"},
        ),
        _cluster_role("system:aggregate-to-edit", _table_rules(_EDIT), labels={AGGREGATE_TO_EDIT: "true"}),
        _cluster_role("system:aggregate-to-view", _table_rules(_VIEW), labels={AGGREGATE_TO_VIEW: "true"}),
        *coreio_aggregated_roles(kinds),
    ]
    by_name = aggregate_cluster_roles({role.name: role for role in roles})
    return [by_name[role.name] for role in roles]


# The rules of upstream's system:discovery and system:public-info-viewer, which upstream binds to
# every authenticated user (and, for the latter, to unauthenticated ones) with ClusterRoleBindings.
DISCOVERY_RULES = (rule(["get"], urls=_DISCOVERY_URLS),)
PUBLIC_INFO_RULES = (rule(["get"], urls=["/livez", "/readyz", "/healthz", "/version", "/version/"]),)
# Upstream's system:basic-user, bound to every authenticated user: the self reviews.
BASIC_USER_RULES = (
    rule(
        ["create"],
        groups=["authorization.k8s.io"],
        resources=["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
    ),
    rule(["create"], groups=["authentication.k8s.io"], resources=["selfsubjectreviews"]),
)
# Upstream's system:service-account-issuer-discovery (bound to every service account).
ISSUER_DISCOVERY_RULES = (
    rule(
        ["get"],
        urls=[
            "/.well-known/openid-configuration",
            "/.well-known/openid-configuration/",
            "/openid/v1/jwks",
            "/openid/v1/jwks/",
        ],
    ),
)

# What coreio's ClusterRole ACCESS_REVIEWER holds: creating the access reviews (`kubectl coreio`).
ACCESS_REVIEWER_RULES = (
    rule(["create"], groups=[ROLE_BINDING_GROUP], resources=[plural for plural, _ in ACCESS_REVIEWS]),
)

# ----------------------------------------------------------------------------- static source


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


# ----------------------------------------------------------------------------- cluster source


def _role_parser(kind: str, path: str) -> Callable[[JSON], Role | None]:
    """Objects of a list or watch of `path` as Roles; a malformed one is logged and skipped."""

    def parse(obj: JSON) -> Role | None:
        meta = obj.get("metadata") or {}
        try:
            # Items of a list carry no kind; the path says what they are.
            return Role.from_object({"kind": kind, **obj}, f"{path} {meta.get('name', '')}")
        except RoleFormatError as exc:
            log.warning("ignoring %s", exc)
            return None

    return parse


class ClusterRoleSource:
    """The cluster's Roles and ClusterRoles, kept current by list+watch against its kube-apiserver.

    `start()` begins both reflectors; `ready` turns true once both have listed. The connection's
    user needs get/list/watch on roles and clusterroles in rbac.authorization.k8s.io (cluster-wide).
    `on_change` callbacks run (synchronously) after every change, e.g. to re-check RoleBindings.
    """

    ROLES_PATH = f"/apis/{RBAC_API_VERSION}/roles"
    CLUSTER_ROLES_PATH = f"/apis/{RBAC_API_VERSION}/clusterroles"

    def __init__(
        self,
        connection: ClusterConnection,
        *,
        page_size: int = 500,
        watch_timeout: float = 300.0,
        request_timeout: float = 30.0,
        min_backoff: float = 0.5,
        max_backoff: float = 30.0,
    ) -> None:
        self.reader = ClusterReader(connection, request_timeout=request_timeout)
        self.on_change: list[Callable[[], None]] = []

        def reflector(path: str, kind: str) -> Reflector[Role]:
            return Reflector(
                self.reader,
                path,
                _role_parser(kind, path),
                page_size=page_size,
                watch_timeout=watch_timeout,
                min_backoff=min_backoff,
                max_backoff=max_backoff,
            )

        self._roles = reflector(self.ROLES_PATH, ROLE_KIND)
        self._cluster_roles = reflector(self.CLUSTER_ROLES_PATH, CLUSTER_ROLE_KIND)
        for each in (self._roles, self._cluster_roles):
            each.on_change.append(self._changed)

    # -- RoleSource

    @property
    def ready(self) -> bool:
        return self._roles.synced.is_set() and self._cluster_roles.synced.is_set()

    def get_role(self, namespace: str, name: str) -> Role | None:
        return self._roles.items.get((namespace, name))

    def get_cluster_role(self, name: str) -> Role | None:
        return self._cluster_roles.items.get(("", name))

    # -- lifecycle

    def start(self) -> None:
        self._roles.start()
        self._cluster_roles.start()

    async def wait_ready(self) -> None:
        """Returns once both lists are in (bound it with `asyncio.timeout`)."""
        await asyncio.gather(self._roles.synced.wait(), self._cluster_roles.synced.wait())

    async def close(self) -> None:
        await self._roles.stop()
        await self._cluster_roles.stop()
        await self.reader.close()

    def _changed(self) -> None:
        for callback in self.on_change:
            try:
                callback()
            except Exception:
                log.exception("role source change callback failed")
