"""What one Installation becomes in the cluster: the manifests of its children, as plain functions.

Namespaced children live in the Installation's namespace, are named after it and carry an
ownerReference to it. Cluster-scoped children (APIServices, the RBAC of delegated authentication and
of the access reviews) and the RoleBinding in kube-system cannot have a namespaced owner, so their
names are fixed (one Installation per cluster owns the API groups) and the annotation
`operator.core.io/installation` (`<namespace>/<name>`) says whose they are; the operator deletes them
itself when the Installation goes.
"""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass

from apiserver.admission.objects import GROUP as ADMISSION_GROUP
from apiserver.admission.objects import PLURALS as ADMISSION_PLURALS
from apiserver.machinery.types import JSON
from apiserver.resources.rolebinding import ACCESS_REVIEWER, ACCESS_REVIEWS
from apiserver.resources.rolebinding import GROUP as RBAC_GROUP
from apiserver_operator.spec import GROUP, KIND, VERSION, InstallationSpec

API_GROUPS = ("rbac.authorization.core.io", "events.core.io")
APISERVICE_NAMES = tuple(f"v1.{group}" for group in API_GROUPS)
# The alpha version (EventExport), served and registered only when spec.eventExport.enabled.
ALPHA_GROUP, ALPHA_VERSION = "events.core.io", "v1alpha1"
ALPHA_APISERVICE = f"{ALPHA_VERSION}.{ALPHA_GROUP}"
ALL_APISERVICE_NAMES = (*APISERVICE_NAMES, ALPHA_APISERVICE)
OWNER_ANNOTATION = f"{GROUP}/installation"
MANAGED_BY = "coreio-operator"
# How the objects of an EventExport's exporter are named (exporters.py); no Installation's name
# starts so, or its own objects could share a name with an exporter's.
EXPORTER_PREFIX = "coreio-export-"
SERVICE_PORT = 443
# Where the API server's pods find what the operator gives them (the image's defaults agree).
SERVING_DIR = "/var/run/secrets/coreio/serving"
ETCD_TLS_DIR = "/var/run/secrets/coreio/etcd"
DATA_DIR = "/var/lib/coreio"
RUN_AS = 65532

# Fixed names of the cluster-scoped children and the one in kube-system.
CLUSTER_ROLE = "coreio:apiserver"
AUTH_DELEGATOR_BINDING = "coreio:auth-delegator"
AUTH_READER_BINDING = "coreio:authentication-reader"
# Everyone authenticated may ask coreio's access reviews (the server then checks what the caller
# may list), as upstream's system:basic-user gives everyone selfsubjectaccessreviews.
AUTHENTICATED = {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:authenticated"}


@dataclass(frozen=True)
class Installation:
    """The identity of an Installation object, with its typed spec."""

    namespace: str
    name: str
    uid: str
    spec: InstallationSpec

    @property
    def owner(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def service_host(self) -> str:
        return f"{self.name}.{self.namespace}.svc"

    def serving_hosts(self) -> list[str]:
        """The names the aggregator and in-cluster clients reach the Service by."""
        short = f"{self.name}.{self.namespace}"
        return [self.service_host, self.name, short, f"{self.service_host}.cluster.local"]

    @property
    def ca_secret(self) -> str:
        return f"{self.name}-ca"

    @property
    def serving_secret(self) -> str:
        return f"{self.name}-serving"

    @property
    def data_claim(self) -> str:
        return f"{self.name}-data"


def labels(inst: Installation) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "coreio",
        "app.kubernetes.io/instance": inst.name,
        "app.kubernetes.io/component": "apiserver",
        "app.kubernetes.io/managed-by": MANAGED_BY,
    }


def selector(inst: Installation) -> dict[str, str]:
    return {"app.kubernetes.io/name": "coreio", "app.kubernetes.io/instance": inst.name}


def _meta(inst: Installation, name: str, namespace: str | None = None, *, owned: bool = True) -> JSON:
    meta: JSON = {"name": name, "labels": labels(inst), "annotations": {OWNER_ANNOTATION: inst.owner}}
    if namespace is not None:
        meta["namespace"] = namespace
    if owned:
        meta["ownerReferences"] = [
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": KIND,
                "name": inst.name,
                "uid": inst.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    return meta


def service_account(inst: Installation) -> JSON:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(inst, inst.name, inst.namespace)}


def _subjects(inst: Installation) -> list[JSON]:
    return [{"kind": "ServiceAccount", "name": inst.name, "namespace": inst.namespace}]


def _binding(
    inst: Installation,
    kind: str,
    name: str,
    role_kind: str,
    role: str,
    ns: str | None,
    subjects: list[JSON] | None = None,
) -> JSON:
    """A binding of `role` to `subjects`, by default the API server's ServiceAccount."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": _meta(inst, name, ns, owned=False),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": _subjects(inst) if subjects is None else subjects,
    }


def access_reviewer(inst: Installation) -> list[JSON]:
    """The ClusterRole ACCESS_REVIEWER (create the access reviews) and its binding to every
    authenticated user: kube-apiserver authorizes requests with the cluster's RBAC before it
    proxies them to coreio, so the grant a standalone server has built in must exist here."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": _meta(inst, ACCESS_REVIEWER, owned=False),
        "rules": [
            {
                "apiGroups": [RBAC_GROUP],
                "resources": [plural for plural, _ in ACCESS_REVIEWS],
                "verbs": ["create"],
            }
        ],
    }
    subjects = [dict(AUTHENTICATED)]
    binding = _binding(
        inst, "ClusterRoleBinding", ACCESS_REVIEWER, "ClusterRole", ACCESS_REVIEWER, None, subjects
    )
    return [role, binding]


def rbac(inst: Installation) -> list[JSON]:
    """Delegated authentication and authorization (TokenReview, SubjectAccessReview and the
    extension-apiserver-authentication ConfigMap), read access to the cluster's Roles and
    ClusterRoles for coreio's RBAC authorizer, to its Namespaces for namespace lifecycle
    admission and to its admission policies and webhook configurations; and everyone's right to
    create the access reviews (`access_reviewer`)."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": _meta(inst, CLUSTER_ROLE, owned=False),
        "rules": [
            {
                "apiGroups": ["rbac.authorization.k8s.io"],
                "resources": ["roles", "clusterroles"],
                "verbs": ["get", "list", "watch"],
            },
            # Namespace lifecycle admission: nothing is created in a namespace that does not exist.
            {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]},
            # The cluster's admission policies and webhooks apply to coreio's objects too.
            {
                "apiGroups": [ADMISSION_GROUP],
                "resources": list(ADMISSION_PLURALS.values()),
                "verbs": ["get", "list", "watch"],
            },
        ],
    }
    return [
        role,
        _binding(inst, "ClusterRoleBinding", CLUSTER_ROLE, "ClusterRole", CLUSTER_ROLE, None),
        _binding(
            inst, "ClusterRoleBinding", AUTH_DELEGATOR_BINDING, "ClusterRole", "system:auth-delegator", None
        ),
        _binding(
            inst,
            "RoleBinding",
            AUTH_READER_BINDING,
            "Role",
            "extension-apiserver-authentication-reader",
            "kube-system",
        ),
        *access_reviewer(inst),
    ]


def service(inst: Installation) -> JSON:
    meta = _meta(inst, inst.name, inst.namespace)
    meta["annotations"] = {**inst.spec.service.annotations, **meta["annotations"]}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "type": "ClusterIP",
            "selector": selector(inst),
            "ports": [{"name": "https", "port": SERVICE_PORT, "targetPort": "https", "protocol": "TCP"}],
        },
    }


def secret(
    inst: Installation, name: str, kind: str, data: dict[str, str], annotations: dict[str, str]
) -> JSON:
    meta = _meta(inst, name, inst.namespace)
    meta["annotations"].update(annotations)
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": kind, "data": dict(data)}


def data_claim(inst: Installation) -> JSON:
    sqlite = inst.spec.storage.sqlite
    spec: JSON = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": sqlite.size}}}
    if sqlite.storage_class_name:
        spec["storageClassName"] = sqlite.storage_class_name
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        # No owner: the data outlives the Installation, as a StatefulSet's volumes do.
        "metadata": _meta(inst, inst.data_claim, inst.namespace, owned=False),
        "spec": spec,
    }


def disruption_budget(inst: Installation) -> JSON:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _meta(inst, inst.name, inst.namespace),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": selector(inst)}},
    }


def apiservice_names(inst: Installation) -> tuple[str, ...]:
    """The APIServices the Installation registers: both v1 ones, and the alpha one when enabled."""
    return ALL_APISERVICE_NAMES if inst.spec.event_export.enabled else APISERVICE_NAMES


def api_services(inst: Installation, ca_bundle: bytes, *, every: bool = False) -> list[JSON]:
    """The APIServices (`apiservice_names`; with `every`, the alpha one too, as for deleting),
    trusting exactly `ca_bundle` (never insecureSkipTLSVerify)."""
    versions = [("v1", group) for group in API_GROUPS]
    if every or inst.spec.event_export.enabled:
        versions.append((ALPHA_VERSION, ALPHA_GROUP))
    return [api_service(inst, group, version, ca_bundle) for version, group in versions]


def api_service(inst: Installation, group: str, version: str, ca_bundle: bytes) -> JSON:
    settings = inst.spec.api_service
    # The alpha version ranks below v1 within the group, as upstream's alpha versions do.
    priority = settings.version_priority if version == "v1" else max(1, settings.version_priority // 3)
    return {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": _meta(inst, f"{version}.{group}", owned=False),
        "spec": {
            "group": group,
            "version": version,
            "service": {"namespace": inst.namespace, "name": inst.name, "port": SERVICE_PORT},
            "caBundle": base64.b64encode(ca_bundle).decode("ascii"),
            # Owned explicitly, so that server-side apply takes it back from anybody who set it.
            "insecureSkipTLSVerify": False,
            "groupPriorityMinimum": settings.group_priority_minimum,
            "versionPriority": priority,
        },
    }


def workers(limits: dict[str, str], requests: dict[str, str]) -> int:
    """One worker per core the pod is given: its CPU limit, else its request, rounded up (at least
    one). Left to itself, the server would count the node's cores, which a pod without a CPU limit
    does not own (and each worker holds its own watch cache against the memory limit)."""
    given = limits.get("cpu") or requests.get("cpu") or "1"
    try:
        cores = float(given[:-1]) / 1000 if given.endswith("m") else float(given)
    except ValueError:
        return 1
    return max(1, math.ceil(cores))


def server_args(inst: Installation) -> list[str]:
    """coreio-apiserver's flags in the pod. Delegated authentication and authorization use the
    pod's in-cluster credentials (the server's default when it runs in a pod)."""
    args = [
        "--bind-address=0.0.0.0",
        f"--secure-port={inst.spec.pod.port}",
        f"--data-dir={DATA_DIR}",
        f"--tls-cert-file={SERVING_DIR}/tls.crt",
        f"--tls-private-key-file={SERVING_DIR}/tls.key",
        f"--workers={workers(inst.spec.resources.limits, inst.spec.resources.requests)}",
    ]
    storage = inst.spec.storage
    if storage.type == "etcd" and storage.etcd is not None:
        args += [f"--etcd-servers={','.join(storage.etcd.endpoints)}", f"--etcd-prefix={storage.etcd.prefix}"]
        if storage.etcd.tls_secret_name:
            args += [
                f"--etcd-cafile={ETCD_TLS_DIR}/ca.crt",
                f"--etcd-certfile={ETCD_TLS_DIR}/tls.crt",
                f"--etcd-keyfile={ETCD_TLS_DIR}/tls.key",
            ]
    if inst.spec.event_export.enabled:
        args.append(f"--runtime-config={ALPHA_GROUP}/{ALPHA_VERSION}=true")
    return args + list(inst.spec.extra_args)


def _volumes(inst: Installation) -> tuple[list[JSON], list[JSON]]:
    """(volumes, mounts): the serving Secret, etcd's client TLS, the data directory and /tmp."""
    volumes: list[JSON] = [{"name": "serving", "secret": {"secretName": inst.serving_secret}}]
    mounts: list[JSON] = [{"name": "serving", "mountPath": SERVING_DIR, "readOnly": True}]
    storage = inst.spec.storage
    if storage.type == "etcd" and storage.etcd is not None and storage.etcd.tls_secret_name:
        volumes.append({"name": "etcd-tls", "secret": {"secretName": storage.etcd.tls_secret_name}})
        mounts.append({"name": "etcd-tls", "mountPath": ETCD_TLS_DIR, "readOnly": True})
    if storage.type == "sqlite":
        volumes.append({"name": "data", "persistentVolumeClaim": {"claimName": inst.data_claim}})
    else:
        volumes.append({"name": "data", "emptyDir": {}})
    mounts.append({"name": "data", "mountPath": DATA_DIR})
    volumes.append({"name": "tmp", "emptyDir": {}})
    mounts.append({"name": "tmp", "mountPath": "/tmp"})
    return volumes, mounts


def _probe(path: str, period: int, failures: int) -> JSON:
    return {
        "httpGet": {"path": path, "port": "https", "scheme": "HTTPS"},
        "periodSeconds": period,
        "timeoutSeconds": 5,
        "failureThreshold": failures,
    }


def _container(inst: Installation, mounts: list[JSON]) -> JSON:
    resources = inst.spec.resources
    return {
        "name": "apiserver",
        "image": inst.spec.image,
        "imagePullPolicy": inst.spec.image_pull_policy,
        "command": ["coreio-apiserver"],
        "args": server_args(inst),
        "ports": [{"name": "https", "containerPort": inst.spec.pod.port, "protocol": "TCP"}],
        "livenessProbe": _probe("/livez", 10, 6),
        "readinessProbe": _probe("/readyz", 5, 3),
        "startupProbe": _probe("/livez", 2, 30),
        "resources": {"requests": dict(resources.requests), "limits": dict(resources.limits)},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": mounts,
    }


def _spread(inst: Installation) -> list[JSON]:
    if inst.spec.pod.topology_spread_constraints:
        return list(inst.spec.pod.topology_spread_constraints)
    if inst.spec.replicas <= 1:
        return []
    return [
        {
            "maxSkew": 1,
            "topologyKey": key,
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": selector(inst)},
        }
        for key in ("topology.kubernetes.io/zone", "kubernetes.io/hostname")
    ]


def _pod_settings(inst: Installation) -> JSON:
    """The spec's pod settings, only those set (so that the Deployment stays as short as it was)."""
    pod = inst.spec.pod
    dns_policy = pod.dns_policy or ("ClusterFirstWithHostNet" if pod.host_network else "")
    settings: JSON = {
        "nodeSelector": dict(pod.node_selector),
        "tolerations": list(pod.tolerations),
        "affinity": dict(pod.affinity),
        "priorityClassName": pod.priority_class_name,
        "imagePullSecrets": [dict(secret) for secret in pod.image_pull_secrets],
        "hostNetwork": pod.host_network,
        "dnsPolicy": dns_policy,
        "topologySpreadConstraints": _spread(inst),
    }
    return {key: value for key, value in settings.items() if value}


def _pod_spec(inst: Installation) -> JSON:
    volumes, mounts = _volumes(inst)
    security = inst.spec.pod.security_context
    return {
        "serviceAccountName": inst.name,
        "securityContext": dict(security)
        if security is not None
        else {
            "runAsNonRoot": True,
            "runAsUser": RUN_AS,
            "runAsGroup": RUN_AS,
            "fsGroup": RUN_AS,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [_container(inst, mounts)],
        "volumes": volumes,
        **_pod_settings(inst),
    }


def _pod_metadata(inst: Installation) -> JSON:
    metadata: JSON = {"labels": {**inst.spec.pod.labels, **labels(inst)}}  # the operator's win
    if inst.spec.pod.annotations:
        metadata["annotations"] = dict(inst.spec.pod.annotations)
    return metadata


def deployment(inst: Installation) -> JSON:
    # With etcd, new pods come up before old ones go (maxUnavailable 0). SQLite has one writer
    # on one volume: the old pod must stop first.
    strategy: JSON = (
        {"type": "Recreate"}
        if inst.spec.storage.type == "sqlite"
        else {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}
    )
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(inst, inst.name, inst.namespace),
        "spec": {
            "replicas": inst.spec.replicas,
            "selector": {"matchLabels": selector(inst)},
            "strategy": strategy,
            "template": {"metadata": _pod_metadata(inst), "spec": _pod_spec(inst)},
        },
    }
