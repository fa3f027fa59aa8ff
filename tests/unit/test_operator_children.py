"""What the operator renders for an Installation: valid Kubernetes 1.33 objects of the shape the
issue asks for, the CRD's defaults equal to the typed spec's, and the refusals."""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from apiserver import pki
from apiserver.cluster.connection import in_cluster_connection
from apiserver.machinery.types import JSON
from apiserver.resources.rolebinding import ACCESS_REVIEWER
from apiserver_operator import children, reconcile
from apiserver_operator.children import Installation
from apiserver_operator.kube import KubeClient
from apiserver_operator.spec import InstallationSpec, parse_spec
from tests.support.manifests import validate_manifests

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "charts" / "coreio" / "crds" / "installations.operator.core.io.yaml"

SPECS: dict[str, JSON] = {
    "sqlite": {},
    "etcd-tls-3-replicas": {
        "replicas": 3,
        "storage": {
            "type": "etcd",
            "etcd": {
                "endpoints": ["https://etcd-0:2379", "https://etcd-1:2379"],
                "tlsSecretName": "etcd-client",
            },
        },
        "extraArgs": ["--event-ttl=7200"],
    },
    "etcd-plain": {"storage": {"type": "etcd", "etcd": {"endpoints": ["http://etcd:2379"], "prefix": "/x"}}},
    "event-export": {"eventExport": {"enabled": True}},
}


def _installation(spec: JSON, name: str = "coreio") -> Installation:
    return Installation("coreio-system", name, "0c7a8f1e-0000-4000-8000-000000000001", parse_spec(spec))


def _rendered(inst: Installation) -> list[JSON]:
    ca = pki.create_ca("test-ca")
    objects = reconcile.desired(inst, ca.cert_pem)
    objects.append(children.secret(inst, inst.serving_secret, "kubernetes.io/tls", {"tls.crt": "eA=="}, {}))
    return objects


@pytest.mark.parametrize("case", sorted(SPECS))
def test_every_rendered_object_validates_against_kubernetes_1_33(case: str) -> None:
    validate_manifests(_rendered(_installation(SPECS[case])))


def _deployment(objects: list[JSON]) -> JSON:
    found: JSON = next(o for o in objects if o["kind"] == "Deployment")
    return found


def test_etcd_with_replicas_gets_a_rolling_update_a_budget_and_spread() -> None:
    objects = _rendered(_installation(SPECS["etcd-tls-3-replicas"]))
    deployment = _deployment(objects)
    assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}
    assert deployment["spec"]["replicas"] == 3
    pod = deployment["spec"]["template"]["spec"]
    assert [c["topologyKey"] for c in pod["topologySpreadConstraints"]] == [
        "topology.kubernetes.io/zone",
        "kubernetes.io/hostname",
    ]
    assert any(o["kind"] == "PodDisruptionBudget" for o in objects)
    assert not any(o["kind"] == "PersistentVolumeClaim" for o in objects)
    args = pod["containers"][0]["args"]
    assert "--etcd-servers=https://etcd-0:2379,https://etcd-1:2379" in args
    assert "--etcd-cafile=/var/run/secrets/coreio/etcd/ca.crt" in args
    assert args[-1] == "--event-ttl=7200"
    assert {"name": "etcd-tls", "secret": {"secretName": "etcd-client"}} in pod["volumes"]


def test_sqlite_keeps_its_data_on_a_claim_and_recreates() -> None:
    objects = _rendered(_installation({}))
    deployment = _deployment(objects)
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    claim = next(o for o in objects if o["kind"] == "PersistentVolumeClaim")
    assert claim["spec"]["resources"]["requests"]["storage"] == "1Gi"
    # No ownerReference: deleting the Installation keeps the data, as a StatefulSet keeps volumes.
    assert "ownerReferences" not in claim["metadata"]
    assert not any(o["kind"] == "PodDisruptionBudget" for o in objects)


def test_restricted_pod_security_profile() -> None:
    pod = _deployment(_rendered(_installation({})))["spec"]["template"]["spec"]
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "fsGroup": 65532,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    container = pod["containers"][0]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert {"/tmp", "/var/lib/coreio", "/var/run/secrets/coreio/serving"} <= mounts


def test_api_services_trust_the_bundle_and_never_skip_verification() -> None:
    inst = _installation({"apiService": {"groupPriorityMinimum": 500}})
    services = children.api_services(inst, b"PEM")
    assert [s["metadata"]["name"] for s in services] == ["v1.rbac.authorization.core.io", "v1.events.core.io"]
    for service in services:
        spec = service["spec"]
        assert spec["caBundle"] == base64.b64encode(b"PEM").decode()
        assert spec["insecureSkipTLSVerify"] is False
        assert spec["groupPriorityMinimum"] == 500
        assert spec["service"] == {"namespace": "coreio-system", "name": "coreio", "port": 443}
        # Cluster-scoped: no namespaced owner; the annotation says whose it is.
        assert "ownerReferences" not in service["metadata"]
        assert service["metadata"]["annotations"] == {"operator.core.io/installation": "coreio-system/coreio"}


def test_event_export_serves_and_registers_the_alpha_version_only_when_enabled() -> None:
    off, on = _installation({}), _installation({"eventExport": {"enabled": True}})
    assert [s["metadata"]["name"] for s in children.api_services(on, b"PEM")] == [
        "v1.rbac.authorization.core.io",
        "v1.events.core.io",
        "v1alpha1.events.core.io",
    ]
    alpha = children.api_services(on, b"PEM")[2]["spec"]
    assert (alpha["group"], alpha["version"], alpha["versionPriority"]) == ("events.core.io", "v1alpha1", 5)
    assert children.apiservice_names(off) == children.APISERVICE_NAMES
    assert "--runtime-config=events.core.io/v1alpha1=true" in children.server_args(on)
    assert not [a for a in children.server_args(off) if a.startswith("--runtime-config")]


async def test_the_alpha_api_service_goes_when_event_export_is_turned_off() -> None:
    cluster, on = _Cluster(), _installation({"eventExport": {"enabled": True}})
    alpha = "/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.events.core.io"
    await reconcile.apply_children(cluster, on, b"PEM")
    assert alpha in cluster.objects
    await reconcile.apply_children(cluster, _installation({}), b"PEM")
    assert alpha not in cluster.objects
    await reconcile.apply_children(cluster, on, b"PEM")
    assert "APIService v1alpha1.events.core.io" in await reconcile.remove_children(cluster, on)
    assert alpha not in cluster.objects


def test_serving_hosts_name_the_service() -> None:
    assert _installation({}).serving_hosts()[0] == "coreio.coreio-system.svc"


def _defaulted(schema: JSON, value: Any) -> Any:
    """`value` defaulted under `schema` as the API server does: absent fields with a default get
    it, then objects are walked into."""
    if not isinstance(value, dict) or "properties" not in schema:
        return value
    result = dict(value)
    for name, sub in schema["properties"].items():
        if name not in result and "default" in sub:
            result[name] = copy.deepcopy(sub["default"])
        if name in result:
            result[name] = _defaulted(sub, result[name])
    return result


def test_crd_defaults_are_the_typed_spec_defaults() -> None:
    crd = yaml.safe_load(CRD.read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    defaulted = _defaulted(schema, {})
    typed = InstallationSpec().model_dump(by_alias=True, exclude_none=True)
    # The image alone has no default in the CRD: the operator's --default-image fills it in.
    assert typed.pop("image") == "" and "default" not in schema["properties"]["image"]
    assert defaulted == typed


def test_an_installation_without_an_image_runs_the_operators_default() -> None:
    body: JSON = {"metadata": {"name": "c", "namespace": "n"}, "spec": {}}
    assert reconcile.installation(body, "registry.example.com/coreio:0.2.0").spec.image == (
        "registry.example.com/coreio:0.2.0"
    )
    named = {**body, "spec": {"image": "registry.example.com/coreio:pinned"}}
    assert reconcile.installation(named, "registry.example.com/coreio:0.2.0").spec.image.endswith(":pinned")


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"metadata": {"name": "c", "namespace": "n"}, "spec": {"replicas": 2}}, "SQLiteSingleReplica"),
        ({"metadata": {"name": "Bad_Name", "namespace": "n"}, "spec": {}}, "InvalidName"),
        ({"metadata": {"name": "coreio-export-c", "namespace": "n"}, "spec": {}}, "InvalidName"),
        ({"metadata": {"name": "c", "namespace": "n"}, "spec": {}}, "ImageNotSet"),
        (
            {"metadata": {"name": "c", "namespace": "n"}, "spec": {"certificates": {"caLifetime": "1y"}}},
            "InvalidSpec",
        ),
        (
            {
                "metadata": {"name": "c", "namespace": "n"},
                "spec": {"certificates": {"secretName": "c-serving"}},
            },
            "InvalidSpec",
        ),
    ],
)
def test_refusals_name_the_reason(body: JSON, reason: str) -> None:
    with pytest.raises(reconcile.Refused) as refused:
        reconcile.installation(body)
    assert refused.value.reason == reason
    assert refused.value.message


def test_in_cluster_credentials_as_client_go_reads_them(tmp_path: Path) -> None:
    ca = pki.create_ca("cluster-ca")
    (tmp_path / "ca.crt").write_bytes(ca.cert_pem)
    (tmp_path / "token").write_text("first\n")
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    connection = in_cluster_connection(tmp_path, env)
    assert connection is not None
    assert connection.server == "https://10.96.0.1:443"
    assert connection.headers() == {"Authorization": "Bearer first"}
    (tmp_path / "token").write_text("rotated")  # the kubelet rotates projected tokens in place
    assert connection.headers() == {"Authorization": "Bearer rotated"}
    assert in_cluster_connection(tmp_path, {}) is None
    assert in_cluster_connection(tmp_path / "absent", env) is None


def test_every_child_says_whose_it_is() -> None:
    inst = _installation({})
    secret = children.secret(inst, inst.ca_secret, "Opaque", {}, {"operator.core.io/ca-renew-after": "x"})
    for obj in [*_rendered(inst), secret]:
        assert obj["metadata"]["annotations"]["operator.core.io/installation"] == "coreio-system/coreio", obj


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ({}, 1),
        ({"requests": {"cpu": "1500m"}}, 2),
        ({"limits": {"cpu": "4"}, "requests": {"cpu": "100m"}}, 4),
    ],
)
def test_the_server_runs_a_worker_per_core_the_pod_is_given(resources: JSON, expected: int) -> None:
    deployment = _deployment(_rendered(_installation({"resources": resources})))
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert f"--workers={expected}" in args


def test_everyone_authenticated_may_create_the_access_reviews() -> None:
    """kube-apiserver authorizes a request with the cluster's RBAC before it proxies it to coreio:
    the grant a standalone server has built in is a ClusterRole bound to system:authenticated."""
    objects = children.rbac(_installation({}))
    role = next(o for o in objects if o["kind"] == "ClusterRole" and o["metadata"]["name"] == ACCESS_REVIEWER)
    assert role["rules"] == [
        {
            "apiGroups": ["rbac.authorization.core.io"],
            "resources": ["resourceaccessreviews", "accessexplanations", "rolebindingreviews"],
            "verbs": ["create"],
        }
    ]
    binding = next(
        o for o in objects if o["kind"] == "ClusterRoleBinding" and o["metadata"]["name"] == ACCESS_REVIEWER
    )
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "coreio:access-reviewer",
    }
    assert binding["subjects"] == [
        {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:authenticated"}
    ]
    # Cluster-scoped, so the operator deletes them itself: no owner, the annotation says whose.
    for obj in (role, binding):
        assert "ownerReferences" not in obj["metadata"]
        assert obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "coreio-operator"


class _Cluster(KubeClient):
    """Objects by path: apply, create, get and delete, as far as reconciliation uses them."""

    def __init__(self) -> None:
        self.objects: dict[str, JSON] = {}

    async def get_or_none(self, path: str) -> JSON | None:
        return self.objects.get(path)

    async def apply(self, path: str, obj: JSON, *, field_manager: str = "test") -> JSON:
        self.objects[path] = obj
        return obj

    async def create(self, path: str, obj: JSON) -> JSON:
        return await self.apply(reconcile.path_of(obj), obj)

    async def delete(self, path: str, options: JSON | None = None) -> bool:
        return self.objects.pop(path, None) is not None


async def test_the_access_reviewer_comes_and_goes_with_the_installation() -> None:
    cluster, inst = _Cluster(), _installation({})
    await reconcile.apply_children(cluster, inst, b"PEM")
    paths = {reconcile.path_of(o) for o in children.access_reviewer(inst)}
    assert paths == {
        "/apis/rbac.authorization.k8s.io/v1/clusterroles/coreio:access-reviewer",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/coreio:access-reviewer",
    }
    assert paths <= set(cluster.objects)
    removed = await reconcile.remove_children(cluster, inst)
    assert {f"ClusterRole {ACCESS_REVIEWER}", f"ClusterRoleBinding {ACCESS_REVIEWER}"} <= set(removed)
    assert not paths & set(cluster.objects)


POD_SETTINGS: JSON = {
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}],
    "affinity": {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}
    },
    "priorityClassName": "system-cluster-critical",
    "imagePullSecrets": [{"name": "regcred"}],
    "annotations": {"example.com/team": "platform"},
    "labels": {"team": "platform", "app.kubernetes.io/instance": "not-the-operators"},
    "securityContext": {"runAsNonRoot": True},
    "hostNetwork": True,
    "port": 9443,
}


def test_pod_settings_reach_the_deployment_and_the_service() -> None:
    inst = _installation({"pod": POD_SETTINGS, "service": {"annotations": {"example.com/lb": "internal"}}})
    template = children.deployment(inst)["spec"]["template"]
    pod = template["spec"]
    for key in ("nodeSelector", "tolerations", "affinity", "priorityClassName", "imagePullSecrets"):
        assert pod[key] == POD_SETTINGS[key], key
    assert pod["securityContext"] == {"runAsNonRoot": True}
    # On the node's network: its DNS policy follows, and the server listens on the port asked.
    assert (pod["hostNetwork"], pod["dnsPolicy"]) == (True, "ClusterFirstWithHostNet")
    container = pod["containers"][0]
    assert container["ports"] == [{"name": "https", "containerPort": 9443, "protocol": "TCP"}]
    assert "--secure-port=9443" in container["args"]
    assert template["metadata"]["annotations"] == {"example.com/team": "platform"}
    assert template["metadata"]["labels"]["team"] == "platform"
    assert template["metadata"]["labels"]["app.kubernetes.io/instance"] == "coreio"  # the selector's
    service = children.service(inst)
    assert service["metadata"]["annotations"]["example.com/lb"] == "internal"
    assert service["metadata"]["annotations"][children.OWNER_ANNOTATION] == inst.owner
    assert service["spec"]["ports"][0]["targetPort"] == "https"


def test_given_spread_constraints_replace_the_default_spread() -> None:
    spread = [{"maxSkew": 2, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule"}]
    etcd = {"type": "etcd", "etcd": {"endpoints": ["https://etcd:2379"]}}
    default = children.deployment(_installation({"replicas": 3, "storage": etcd}))["spec"]["template"]["spec"]
    assert [c["topologyKey"] for c in default["topologySpreadConstraints"]] == [
        "topology.kubernetes.io/zone",
        "kubernetes.io/hostname",
    ]
    given = _installation({"replicas": 3, "storage": etcd, "pod": {"topologySpreadConstraints": spread}})
    assert children.deployment(given)["spec"]["template"]["spec"]["topologySpreadConstraints"] == spread


def test_no_pod_settings_leave_the_pod_as_it_was() -> None:
    pod = children.deployment(_installation({}))["spec"]["template"]["spec"]
    assert set(pod) == {"serviceAccountName", "securityContext", "containers", "volumes"}
