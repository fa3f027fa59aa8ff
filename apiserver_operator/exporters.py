"""What one EventExport becomes when the operator deploys its exporter: plain functions, as
`children` is for an Installation.

Each export in a namespace the operator manages gets, in that namespace, a Deployment of
`coreio-export NAME --leader-elect` (the Installation's image; its replicas elect one exporter
through the export's Lease), its own ServiceAccount, and the rights the exporter uses and no
others, as a Role and RoleBindings:

- its EventExport read and its status patched, by name;
- its Lease read and renewed, by name: the operator creates the Lease (holding no one), so that
  the exporter needs no `create`, which RBAC cannot limit to a name;
- the Secrets its sink names read, by name;
- the Events it exports listed and watched: a RoleBinding of the ClusterRole EVENTS_READER in each
  namespace it exports, or, for an export of every namespace, a subject of the one
  ClusterRoleBinding EVENTS_READER (the operator holds these rights, so RBAC lets it grant them).

These children carry an ownerReference to the EventExport, so the cluster's garbage collector
removes them with it too; the RoleBindings in other namespaces cannot, and are found by label.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from apiserver.machinery.types import JSON
from apiserver.resources import eventexport
from apiserver_operator.children import EXPORTER_PREFIX, MANAGED_BY, OWNER_ANNOTATION, RUN_AS, Installation

RBAC = "rbac.authorization.k8s.io"
RBAC_VERSION = f"{RBAC}/v1"
EVENTS_READER = "coreio:export-events"
NAME_LABEL = "coreio-export"
EXPORT_LABEL = f"{eventexport.GROUP}/export"
METRICS_PORT = 9090
MAX_NAME = 52  # a Deployment's pods get a ReplicaSet suffix and a random one; labels take 63


@dataclass(frozen=True)
class Export:
    """One EventExport, as far as deploying its exporter goes."""

    namespace: str
    name: str
    uid: str
    exported: tuple[str, ...]  # namespaces; "" for every namespace
    secrets: tuple[str, ...]

    @classmethod
    def of(cls, obj: JSON) -> Export:
        meta = obj.get("metadata") or {}
        return cls(
            str(meta.get("namespace") or ""),
            str(meta.get("name") or ""),
            str(meta.get("uid") or ""),
            tuple(eventexport.exported_namespaces(obj)),
            tuple(sorted(set(eventexport.secrets_read(obj)))),
        )

    @property
    def workload(self) -> str:
        """The name of its Deployment, ServiceAccount, Role and RoleBindings."""
        name = f"{EXPORTER_PREFIX}{self.name}"
        if len(name) <= MAX_NAME:
            return name
        digest = hashlib.sha256(self.name.encode()).hexdigest()[:8]
        return f"{name[: MAX_NAME - 9].rstrip('-.')}-{digest}"

    @property
    def subject(self) -> JSON:
        return {"kind": "ServiceAccount", "name": self.workload, "namespace": self.namespace}


def labels(inst: Installation, export: Export | None = None) -> dict[str, str]:
    """Every exporter child's labels; with `export`, that export's too."""
    found = {
        "app.kubernetes.io/name": NAME_LABEL,
        "app.kubernetes.io/instance": inst.name,
        "app.kubernetes.io/component": "exporter",
        "app.kubernetes.io/managed-by": MANAGED_BY,
    }
    return found | ({EXPORT_LABEL: export.workload} if export is not None else {})


def selector(inst: Installation) -> str:
    """The label selector of every exporter child of `inst`."""
    return ",".join(f"{key}={value}" for key, value in labels(inst).items())


def _meta(inst: Installation, export: Export, namespace: str, name: str = "") -> JSON:
    meta: JSON = {
        "name": name or export.workload,
        "namespace": namespace,
        "labels": labels(inst, export),
        "annotations": {OWNER_ANNOTATION: inst.owner},
    }
    if namespace == export.namespace:
        # No blockOwnerDeletion: it would need the right to set the export's finalizers.
        meta["ownerReferences"] = [
            {
                "apiVersion": f"{eventexport.GROUP}/{eventexport.VERSION}",
                "kind": "EventExport",
                "name": export.name,
                "uid": export.uid,
            }
        ]
    return meta


def service_account(inst: Installation, export: Export) -> JSON:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(inst, export, export.namespace)}


def _rule(group: str, resource: str, verbs: list[str], names: list[str]) -> JSON:
    return {"apiGroups": [group], "resources": [resource], "verbs": verbs, "resourceNames": names}


def role(inst: Installation, export: Export) -> JSON:
    # Listed and watched by name too: coreio-export reads its export with a metadata.name field
    # selector, which kube-apiserver and coreio authorize as a request for that name.
    rules = [
        _rule(eventexport.GROUP, "eventexports", ["get", "list", "watch"], [export.name]),
        _rule(eventexport.GROUP, "eventexports/status", ["patch"], [export.name]),
        _rule("coordination.k8s.io", "leases", ["get", "update"], [eventexport.lease_name(export.name)]),
    ]
    if export.secrets:
        rules.append(_rule("", "secrets", ["get"], list(export.secrets)))
    return {
        "apiVersion": RBAC_VERSION,
        "kind": "Role",
        "metadata": _meta(inst, export, export.namespace),
        "rules": rules,
    }


def _role_binding(inst: Installation, export: Export, namespace: str, kind: str, name: str) -> JSON:
    # The Events' bindings are named after the export's namespace too: exports of two namespaces
    # may export a third.
    binding = export.workload if kind == "Role" else f"coreio-export:{export.namespace}:{export.name}"
    return {
        "apiVersion": RBAC_VERSION,
        "kind": "RoleBinding",
        "metadata": _meta(inst, export, namespace, binding),
        "roleRef": {"apiGroup": RBAC, "kind": kind, "name": name},
        "subjects": [export.subject],
    }


def lease(inst: Installation, export: Export) -> JSON:
    """The exporter's Lease, held by no one until one of its replicas takes it."""
    meta = _meta(inst, export, export.namespace, eventexport.lease_name(export.name))
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta}


def role_binding(inst: Installation, export: Export) -> JSON:
    return _role_binding(inst, export, export.namespace, "Role", export.workload)


def events_bindings(inst: Installation, export: Export) -> list[JSON]:
    """The RoleBindings of EVENTS_READER in the namespaces `export` exports (none for every
    namespace: `all_namespaces_binding` grants that)."""
    return [
        _role_binding(inst, export, namespace, "ClusterRole", EVENTS_READER)
        for namespace in export.exported
        if namespace
    ]


def events_reader(inst: Installation) -> JSON:
    return {
        "apiVersion": RBAC_VERSION,
        "kind": "ClusterRole",
        "metadata": {
            "name": EVENTS_READER,
            "labels": labels(inst),
            "annotations": {OWNER_ANNOTATION: inst.owner},
        },
        "rules": [{"apiGroups": [eventexport.GROUP], "resources": ["events"], "verbs": ["list", "watch"]}],
    }


def all_namespaces_binding(inst: Installation, exports: list[Export]) -> JSON:
    """EVENTS_READER bound cluster-wide to the exporters of every namespace's Events."""
    return {
        "apiVersion": RBAC_VERSION,
        "kind": "ClusterRoleBinding",
        "metadata": {
            "name": EVENTS_READER,
            "labels": labels(inst),
            "annotations": {OWNER_ANNOTATION: inst.owner},
        },
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": EVENTS_READER},
        "subjects": [export.subject for export in exports if "" in export.exported],
    }


def _container(inst: Installation, export: Export) -> JSON:
    resources = inst.spec.event_export.exporters.resources
    return {
        "name": "exporter",
        "image": inst.spec.image,
        "imagePullPolicy": inst.spec.image_pull_policy,
        "command": ["coreio-export"],
        "args": [
            export.name,
            f"--namespace={export.namespace}",
            "--leader-elect",
            f"--metrics-bind-address=0.0.0.0:{METRICS_PORT}",
        ],
        "ports": [{"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"}],
        "livenessProbe": {
            "httpGet": {"path": "/metrics", "port": "metrics"},
            "periodSeconds": 20,
            "timeoutSeconds": 5,
            "failureThreshold": 3,
        },
        "resources": {"requests": dict(resources.requests), "limits": dict(resources.limits)},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }


def _pod_spec(inst: Installation, export: Export) -> JSON:
    pod = inst.spec.pod
    settings: JSON = {
        "nodeSelector": dict(pod.node_selector),
        "tolerations": list(pod.tolerations),
        "priorityClassName": pod.priority_class_name,
        "imagePullSecrets": [dict(secret) for secret in pod.image_pull_secrets],
    }
    return {
        "serviceAccountName": export.workload,
        "securityContext": dict(pod.security_context)
        if pod.security_context is not None
        else {
            "runAsNonRoot": True,
            "runAsUser": RUN_AS,
            "runAsGroup": RUN_AS,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [_container(inst, export)],
        # The standby on another node where there is one, so that a node's loss leaves one.
        "affinity": {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {"matchLabels": _selector(export)},
                        },
                    }
                ]
            }
        },
        **{key: value for key, value in settings.items() if value},
    }


def _selector(export: Export) -> dict[str, str]:
    return {"app.kubernetes.io/name": NAME_LABEL, EXPORT_LABEL: export.workload}


def deployment(inst: Installation, export: Export) -> JSON:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(inst, export, export.namespace),
        "spec": {
            "replicas": inst.spec.event_export.exporters.replicas,
            "selector": {"matchLabels": _selector(export)},
            "template": {"metadata": {"labels": labels(inst, export)}, "spec": _pod_spec(inst, export)},
        },
    }


def objects(inst: Installation, export: Export) -> list[JSON]:
    """Every namespaced child of `export`, the Deployment last (its pods find their rights)."""
    return [
        service_account(inst, export),
        lease(inst, export),
        role(inst, export),
        role_binding(inst, export),
        *events_bindings(inst, export),
        deployment(inst, export),
    ]
