"""The coreio Helm chart (charts/coreio) with the real Helm 4, no cluster: `helm lint --strict`; the
manifests rendered for several sets of values, each valid for Kubernetes 1.33 in strict mode (the
Installation against its CRD), GitOps-safe (no nulls, no empty maps or lists, no Helm annotations
besides the test and uninstall hooks', identical on every render) and under the restricted Pod
Security profile; values.schema.json refusing bad values; the operator's RBAC exactly as the
operator needs it."""

from __future__ import annotations

import copy
import json
import re
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from apiserver.admission.objects import PLURALS as ADMISSION_PLURALS
from apiserver.resources.rolebinding import ACCESS_REVIEWER, ACCESS_REVIEWS
from apiserver_operator import children, exporters, reconcile
from apiserver_operator.children import Installation
from apiserver_operator.spec import InstallationSpec
from tests.support import manifests
from tests.support.chart import (
    CHART,
    IMAGE,
    KUBE_VERSION,
    NAMESPACE,
    RELEASE,
    REPOSITORY,
    ChartHelm,
    gitops_problems,
    is_test_hook,
    is_uninstall_hook,
    only,
    render,
    set_args,
)
from tests.support.manifests import ManifestError, load_yaml_documents, project_crds, validate_manifests
from tests.support.tools import ToolsUnavailable, helm_path

pytestmark = pytest.mark.tools

SERVICE_ACCOUNT = "coreio-operator"
OPERATOR = f"{RELEASE}-coreio-operator"

Obj = dict[str, Any]
Grant = tuple[str, str, str, str]  # (apiGroup, resource, verb, resourceName or "")

CUSTOMISED = (
    "image.tag=0.2.0",
    'imagePullSecrets=[{"name":"regcred"}]',
    "operator.podAnnotations.example\\.com/team=platform",
    "operator.podLabels.team=platform",
    "operator.nodeSelector.kubernetes\\.io/os=linux",
    'operator.tolerations=[{"key":"dedicated","operator":"Equal","value":"infra","effect":"NoSchedule"}]',
    'operator.affinity={"podAntiAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":100,'
    '"podAffinityTerm":{"topologyKey":"kubernetes.io/hostname","labelSelector":{"matchLabels":'
    '{"app.kubernetes.io/component":"operator"}}}}]}}',
    'operator.extraArgs=["--reconcile-interval=10"]',
    'operator.env=[{"name":"HTTPS_PROXY","value":"http://proxy.example.com:3128"}]',
    "operator.priorityClassName=platform-critical",
    'installation.spec={"replicas":3,"extraArgs":["--event-ttl=7200"],"storage":{"type":"etcd",'
    '"etcd":{"endpoints":["https://etcd-0.etcd:2379"],"tlsSecretName":"etcd-client"}}}',
)
# Everything that is off by default.
ALL_ON = (
    "metrics.serviceMonitor.enabled=true",
    "metrics.podMonitor.enabled=true",
    "networkPolicy.enabled=true",
)
VARIANTS: dict[str, tuple[str, ...]] = {
    "defaults": (),
    "replicas-2": ("operator.replicas=2",),
    "watch-namespaces": ('operator.watchNamespaces=["team-a","team-b"]',),
    "no-installation": ("installation.create=false",),
    "customised": CUSTOMISED,
    "network-policy": (
        "networkPolicy.enabled=true",
        'networkPolicy.apiserver.from=[{"ipBlock":{"cidr":"10.0.0.0/8","except":["10.1.0.0/16"]}},'
        '{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}}]',
        'networkPolicy.apiserver.extraEgress=[{"to":[{"ipBlock":{"cidr":"192.0.2.0/24"}}],'
        '"ports":[{"port":5432,"protocol":"TCP"}]}]',
        'networkPolicy.operator.from=[{"podSelector":{"matchLabels":{"app":"prometheus"}}}]',
        'installation.spec={"replicas":2,"storage":{"type":"etcd","etcd":{"endpoints":["https://etcd:2379"]}}}',
    ),
}
STANDARD_LABELS = {
    "app.kubernetes.io/name": "coreio",
    "app.kubernetes.io/instance": RELEASE,
    "app.kubernetes.io/version": "0.1.0",
    "app.kubernetes.io/managed-by": "Helm",
    "helm.sh/chart": "coreio-0.1.0",
}
SELECTOR_KEYS = {"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/component"}
GENERATED = re.compile(
    r"\b(lookup|now|date|rand\w*|uuidv4|genCA|genPrivateKey|genSelfSignedCert|genSignedCert|htpasswd)\b"
)


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> ChartHelm:
    try:
        binary = helm_path()
    except (ToolsUnavailable, RuntimeError, OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"no helm binary: {exc}")
    return ChartHelm(binary, tmp_path_factory.mktemp("helm-home"))


@pytest.fixture(scope="module", params=list(VARIANTS))
def variant(request: pytest.FixtureRequest, helm: ChartHelm) -> tuple[str, str]:
    """(variant name, `helm template` output)."""
    name: str = request.param
    return name, helm.template(*VARIANTS[name]).stdout


# ----------------------------------------------------------------------------- lint


@pytest.mark.parametrize(
    "sets",
    [
        (),
        ("operator.replicas=2",),
        ('operator.watchNamespaces=["a"]',),
        ALL_ON,
    ],
    ids=str,
)
def test_lint_strict(helm: ChartHelm, sets: tuple[str, ...]) -> None:
    result = helm.run("lint", "--strict", str(CHART), "--kube-version", KUBE_VERSION, *set_args(sets))
    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout


@pytest.mark.parametrize("sets", [(), ("image.repository=",)], ids=["unset", "empty"])
def test_no_image_fails_at_once_in_one_line(helm: ChartHelm, sets: tuple[str, ...]) -> None:
    """No image is published: without image.repository the install fails before any pod exists,
    saying what to do (rather than pods in ImagePullBackOff on an image that does not exist)."""
    args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE, *set_args(sets)]
    result = helm.run(*args, check=False)
    assert result.returncode != 0
    first = result.stderr.strip().splitlines()[0]
    assert first.startswith("Error: execution error at (coreio/templates/")
    assert "image.repository is not set: no coreio image is published" in first
    assert "--set image.repository=<registry>/coreio" in first


def test_lint_refuses_values_outside_the_schema(helm: ChartHelm) -> None:
    result = helm.run("lint", "--strict", str(CHART), "--set", "operator.replicas=0", check=False)
    assert result.returncode != 0
    assert "/operator/replicas" in result.stdout + result.stderr


def test_kube_version_below_1_29_is_refused(helm: ChartHelm) -> None:
    args = ["template", RELEASE, str(CHART), "--kube-version", "1.28.0"]
    result = helm.run(*args, check=False)
    assert result.returncode != 0 and "kubeVersion" in result.stderr


# ----------------------------------------------------------------------------- every variant


def test_manifests_validate_against_kubernetes_1_33(variant: tuple[str, str]) -> None:
    validate_manifests([*load_yaml_documents(variant[1]), *copy.deepcopy(project_crds())])


def test_manifests_are_gitops_safe(variant: tuple[str, str]) -> None:
    problems = [p for obj in load_yaml_documents(variant[1]) for p in gitops_problems(obj)]
    assert problems == []


def test_rendering_is_deterministic(helm: ChartHelm, variant: tuple[str, str]) -> None:
    name, first = variant
    assert helm.template(*VARIANTS[name]).stdout == first


def test_every_object_has_the_standard_labels(variant: tuple[str, str]) -> None:
    for obj in load_yaml_documents(variant[1]):
        labels = obj["metadata"]["labels"]
        assert labels | STANDARD_LABELS == labels, manifests.describe(obj)
        assert labels["app.kubernetes.io/component"] in {"operator", "apiserver", "test", "uninstall"}


def test_pods_run_under_the_restricted_profile(variant: tuple[str, str]) -> None:
    specs = [(manifests.describe(o), s) for o in load_yaml_documents(variant[1]) for s in pod_specs(o)]
    expected = 2 if variant[0] == "no-installation" else 3
    assert len(specs) == expected, "the operator's Deployment, the test Pod and the uninstall Job"
    assert [f"{name}: {p}" for name, spec in specs for p in restricted_problems(spec)] == []


def pod_specs(obj: Obj) -> list[Obj]:
    if obj["kind"] == "Pod":
        return [obj["spec"]]
    if obj["kind"] in {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}:
        return [obj["spec"]["template"]["spec"]]
    if obj["kind"] == "CronJob":
        return [obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]]
    return []


def restricted_problems(spec: Obj) -> list[str]:
    pod = spec.get("securityContext", {})
    problems = [f"spec.{key}" for key in ("hostNetwork", "hostPID", "hostIPC") if spec.get(key)]
    problems += [f"volume {v['name']}: hostPath" for v in spec.get("volumes", []) if "hostPath" in v]
    for container in [*spec.get("initContainers", []), *spec["containers"]]:
        problems += [f"{container['name']}: {p}" for p in container_problems(pod, container)]
    return problems


def container_problems(pod: Obj, container: Obj) -> list[str]:
    own = container.get("securityContext", {})
    effective = pod | own  # runAsNonRoot, runAsUser and seccompProfile may be set on either
    user = effective.get("runAsUser")
    checks = {
        "runAsNonRoot": effective.get("runAsNonRoot") is True,
        "numeric non-root runAsUser": isinstance(user, int) and not isinstance(user, bool) and user > 0,
        "seccompProfile RuntimeDefault": effective.get("seccompProfile", {}).get("type") == "RuntimeDefault",
        "allowPrivilegeEscalation false": own.get("allowPrivilegeEscalation") is False,
        "capabilities drop ALL": own.get("capabilities", {}).get("drop") == ["ALL"],
        "no added capabilities": not own.get("capabilities", {}).get("add"),
        "readOnlyRootFilesystem": own.get("readOnlyRootFilesystem") is True,
        "not privileged": not own.get("privileged"),
    }
    return [check for check, holds in checks.items() if not holds]


def test_templates_use_no_generated_or_cluster_values() -> None:
    for template in sorted((CHART / "templates").rglob("*")):
        if template.is_file():
            actions = re.findall(r"\{\{-?\s*(.*?)\s*-?\}\}", template.read_text(), re.S)
            code = [a for a in actions if not a.startswith("/*")]
            assert [a for a in code if GENERATED.search(a)] == [], template.name


# ----------------------------------------------------------------------------- the operator


def test_operator_deployment(helm: ChartHelm) -> None:
    objs = render(helm)
    deployment = only(objs, "Deployment", OPERATOR)
    assert deployment["metadata"]["namespace"] == NAMESPACE
    assert deployment["spec"]["replicas"] == 1
    assert set(deployment["spec"]["selector"]["matchLabels"]) == SELECTOR_KEYS
    pod = deployment["spec"]["template"]
    assert pod["metadata"]["labels"].items() >= deployment["spec"]["selector"]["matchLabels"].items()
    assert pod["spec"]["serviceAccountName"] == SERVICE_ACCOUNT
    assert only(objs, "ServiceAccount", SERVICE_ACCOUNT)["automountServiceAccountToken"] is True
    assert [c["name"] for c in pod["spec"]["containers"]] == ["operator"]
    assert_operator_container(pod["spec"]["containers"][0])
    assert pod["spec"]["volumes"] == [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}]
    assert not [o for o in objs if o["kind"] == "PodDisruptionBudget"], "no PDB for one replica"


def assert_operator_container(container: Obj) -> None:
    assert container["image"] == IMAGE
    assert container["command"] == ["coreio-operator"]
    assert container["args"] == [
        f"--namespace={NAMESPACE}",
        f"--leader-election-namespace={NAMESPACE}",
        "--liveness-endpoint=http://0.0.0.0:8080/healthz",
        "--metrics-address=0.0.0.0:9090",
        f"--default-image={IMAGE}",  # an Installation naming no image runs the operator's
    ]
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {"health": 8080, "metrics": 9090}
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe] == {"httpGet": {"path": "/healthz", "port": "health"}}
    assert container["env"] == [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    ]
    assert container["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]
    assert container["resources"]["requests"] and container["resources"]["limits"]


def test_more_replicas_get_a_disruption_budget(helm: ChartHelm) -> None:
    objs = render(helm, "operator.replicas=2")
    deployment = only(objs, "Deployment", OPERATOR)
    budget = only(objs, "PodDisruptionBudget", OPERATOR)
    assert deployment["spec"]["replicas"] == 2
    assert budget["spec"]["selector"] == deployment["spec"]["selector"]
    assert budget["spec"]["maxUnavailable"] == 1


def test_watch_namespaces_add_to_the_release_namespace(helm: ChartHelm) -> None:
    """The operator manages Installations where its RoleBindings give it rights, and only there."""
    objs = render(helm, 'operator.watchNamespaces=["team-a","team-b"]')
    args = only(objs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    managed = [NAMESPACE, "team-a", "team-b"]
    assert args[:3] == [f"--namespace={ns}" for ns in managed]
    assert "--all-namespaces" not in args
    bindings = [
        o for o in objs if o["kind"] == "RoleBinding" and o["roleRef"]["name"] == f"{OPERATOR}-namespaced"
    ]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == sorted(managed)
    # The release namespace named again is not bound twice.
    again = render(helm, f'operator.watchNamespaces=["{NAMESPACE}"]')
    args = only(again, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert [a for a in args if a.startswith("--namespace=")] == [f"--namespace={NAMESPACE}"]


def test_pod_settings_from_values(helm: ChartHelm) -> None:
    pod = only(render(helm, *CUSTOMISED), "Deployment")["spec"]["template"]
    assert pod["metadata"]["annotations"] == {"example.com/team": "platform"}
    assert pod["metadata"]["labels"]["team"] == "platform"
    assert pod["spec"]["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert pod["spec"]["tolerations"][0]["key"] == "dedicated"
    assert "podAntiAffinity" in pod["spec"]["affinity"]
    assert pod["spec"]["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["spec"]["priorityClassName"] == "platform-critical"
    container = pod["spec"]["containers"][0]
    assert container["image"] == f"{REPOSITORY}:0.2.0"
    assert container["args"][-1] == "--reconcile-interval=10"
    assert container["env"][1:] == [{"name": "HTTPS_PROXY", "value": "http://proxy.example.com:3128"}]


def test_pod_labels_cannot_change_the_selector(helm: ChartHelm) -> None:
    deployment = only(render(helm, "operator.podLabels.app\\.kubernetes\\.io/component=other"), "Deployment")
    assert deployment["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"] == "operator"


# ----------------------------------------------------------------------------- the Installation


def test_installation_defaults(helm: ChartHelm) -> None:
    installation = only(render(helm), "Installation", "coreio")
    assert installation["apiVersion"] == "operator.core.io/v1alpha1"
    assert installation["metadata"]["namespace"] == NAMESPACE
    assert installation["spec"] == {"image": IMAGE, "storage": {"type": "sqlite"}}


def test_installation_spec_from_values(helm: ChartHelm) -> None:
    installation = only(render(helm, *CUSTOMISED, "installation.name=prod"), "Installation", "prod")
    assert installation["spec"] == {
        "image": f"{REPOSITORY}:0.2.0",
        "replicas": 3,
        "extraArgs": ["--event-ttl=7200"],
        "storage": {
            "type": "etcd",
            "etcd": {"endpoints": ["https://etcd-0.etcd:2379"], "tlsSecretName": "etcd-client"},
        },
    }
    other = only(render(helm, "installation.spec.image=registry.example/coreio:9"), "Installation")
    assert other["spec"]["image"] == "registry.example/coreio:9"


def test_the_pull_policy_reaches_the_api_servers_pods(helm: ChartHelm) -> None:
    """image.pullPolicy applies to the Installation's pods too (the CRD's default is IfNotPresent,
    so that one is left to it); the Installation's own setting wins."""
    always = only(render(helm, "image.pullPolicy=Always"), "Installation")
    assert always["spec"]["imagePullPolicy"] == "Always"
    own = only(
        render(helm, "image.pullPolicy=Always", "installation.spec.imagePullPolicy=Never"), "Installation"
    )
    assert own["spec"]["imagePullPolicy"] == "Never"
    assert "imagePullPolicy" not in only(render(helm), "Installation")["spec"]


def test_notes_without_an_installation_name_the_image(helm: ChartHelm) -> None:
    args = ["install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--dry-run=client"]
    args += ["--set", f"image.repository={REPOSITORY}", "--set", "installation.create=false"]
    notes = helm.run(*args).stdout.partition("NOTES:")[2]
    assert f"    image: {IMAGE}\n" in notes  # not the CRD's default, which goes stale on upgrades


def test_installation_can_be_left_out(helm: ChartHelm) -> None:
    assert [o for o in render(helm, "installation.create=false") if o["kind"] == "Installation"] == []


def test_values_schema_mirrors_the_crd() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    (crd,) = project_crds()
    crd_spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert property_tree(schema["definitions"]["installationSpec"]) == property_tree(crd_spec)


def property_tree(schema: Obj) -> Obj:
    return {name: property_tree(sub) for name, sub in schema.get("properties", {}).items()}


# ----------------------------------------------------------------------------- values.schema.json


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ("operator.replicas=0", "/operator/replicas"),
        ("operator.replicas=two", "/operator/replicas"),
        ("image.pullPolicy=Sometimes", "/image/pullPolicy"),
        ("installation.spec.storage.type=mysql", "/installation/spec/storage/type"),
        ("installation.spec.storage.type=etcd", "'etcd'"),
        ("installation.spec.replicas=null", "/installation/spec/replicas"),
        ("installation.spec.imagepullpolicy=Always", "'imagepullpolicy'"),
        ('operator.watchNamespaces=["Team_A"]', "/operator/watchNamespaces/0"),
        ("operator.nodeselector.disk=ssd", "'nodeselector'"),
        ('operator.extraArgs=["reconcile-interval=10"]', "/operator/extraArgs/0"),
        ('operator.env=[{"value":"x"}]', "/operator/env/0"),
        ("nosuchkey=1", "'nosuchkey'"),
    ],
)
def test_schema_refuses(helm: ChartHelm, value: str, field: str) -> None:
    result = helm.template(value, check=False)
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr
    assert field in result.stderr


# ----------------------------------------------------------------------------- RBAC


def grants(group: str, resources: list[str], verbs: list[str], names: tuple[str, ...] = ("",)) -> set[Grant]:
    return {(group, resource, verb, name) for resource in resources for verb in verbs for name in names}


def granted(rules: list[Obj]) -> set[Grant]:
    return {
        grant
        for rule in rules
        for group in rule["apiGroups"]
        for grant in grants(group, rule["resources"], rule["verbs"], tuple(rule.get("resourceNames", [""])))
    }


CRUD = ["get", "list", "watch", "create", "update", "patch", "delete"]
READ = ["get", "list", "watch"]
BY_NAME = ["get", "create", "update", "patch", "delete"]  # create by name: server-side apply
RBAC = "rbac.authorization.k8s.io"
OPERATOR_GRANTS = {
    *grants("operator.core.io", ["installations"], ["get", "list", "watch", "patch", "update"]),
    *grants("operator.core.io", ["installations/status"], ["get", "patch", "update"]),
    *grants("apiextensions.k8s.io", ["customresourcedefinitions"], READ),
    *grants("apiregistration.k8s.io", ["apiservices"], BY_NAME, children.ALL_APISERVICE_NAMES),
    *grants(
        RBAC, ["clusterroles"], BY_NAME, (children.CLUSTER_ROLE, ACCESS_REVIEWER, exporters.EVENTS_READER)
    ),
    *grants(
        RBAC,
        ["clusterrolebindings"],
        BY_NAME,
        (children.CLUSTER_ROLE, children.AUTH_DELEGATOR_BINDING, ACCESS_REVIEWER, exporters.EVENTS_READER),
    ),
    *grants(RBAC, ["clusterroles"], ["bind"], ("system:auth-delegator",)),
    *grants(RBAC, ["roles", "clusterroles"], READ),
    *grants("", ["namespaces"], READ),
    # Held because coreio's role grants them: the cluster's admission policies and webhooks.
    *grants("admissionregistration.k8s.io", list(ADMISSION_PLURALS.values()), READ),
    *grants("rbac.authorization.core.io", [plural for plural, _ in ACCESS_REVIEWS], ["create"]),
    *grants("events.core.io", ["events"], ["get", "list", "watch", "delete", "deletecollection"]),
}
NAMESPACED_GRANTS = {
    *grants("", ["serviceaccounts", "services", "secrets", "persistentvolumeclaims"], CRUD),
    *grants("apps", ["deployments"], CRUD),
    *grants("policy", ["poddisruptionbudgets"], CRUD),
    *grants("", ["events"], ["create", "patch"]),
    # The exporters it deploys (exporters.py): their Roles and bindings, and what those grant.
    *grants(RBAC, ["roles", "rolebindings"], CRUD),
    *grants("coordination.k8s.io", ["leases"], CRUD),
    *grants("events.core.io", ["eventexports"], READ),
    *grants("events.core.io", ["eventexports/status"], ["patch"]),
}
KUBE_SYSTEM_GRANTS = {
    *grants(RBAC, ["rolebindings"], BY_NAME, (children.AUTH_READER_BINDING,)),
    *grants(RBAC, ["roles"], ["bind"], ("extension-apiserver-authentication-reader",)),
}
SUBJECTS = [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}]


def bound(objs: list[Obj], kind: str, role: str, namespace: str | None = None) -> Obj:
    """The one binding of `kind` to `role` (in `namespace`), which must name the operator only."""
    found = [
        o
        for o in objs
        if o["kind"] == kind and o["roleRef"]["name"] == role and o["metadata"].get("namespace") == namespace
    ]
    assert len(found) == 1, f"{len(found)} {kind} of {role} in {namespace}"
    assert found[0]["subjects"] == SUBJECTS
    return found[0]


def test_operator_rights_are_least_privilege(helm: ChartHelm) -> None:
    """Cluster-wide, nothing but coreio's own kinds, reads of RBAC, namespaces and admission
    configuration, and by name the objects it writes; Secrets, Deployments and the rest only in the
    namespaces it manages; in kube-system, one RoleBinding by name."""
    objs = render(helm)
    assert granted(only(objs, "ClusterRole", OPERATOR)["rules"]) == OPERATOR_GRANTS
    bound(objs, "ClusterRoleBinding", OPERATOR)
    assert granted(only(objs, "ClusterRole", f"{OPERATOR}-namespaced")["rules"]) == NAMESPACED_GRANTS
    assert not [
        o for o in objs if o["kind"] == "ClusterRoleBinding" and o["roleRef"]["name"].endswith("namespaced")
    ]
    bound(objs, "RoleBinding", f"{OPERATOR}-namespaced", NAMESPACE)
    kube_system = [o for o in objs if o["kind"] == "Role" and o["metadata"]["namespace"] == "kube-system"]
    assert [granted(o["rules"]) for o in kube_system] == [KUBE_SYSTEM_GRANTS]
    bound(objs, "RoleBinding", kube_system[0]["metadata"]["name"], "kube-system")


def test_operator_holds_what_it_writes(helm: ChartHelm) -> None:
    """Every child the operator writes (as `reconcile.desired` and the Secrets list them), under a
    right the chart grants in the right place; and kube-apiserver's escalation check: it may write
    a ClusterRole only with rules it holds, and bind a role it did not write only with `bind`."""
    objs = render(helm)
    cluster = granted(only(objs, "ClusterRole", OPERATOR)["rules"])
    namespaced = granted(only(objs, "ClusterRole", f"{OPERATOR}-namespaced")["rules"])
    kube_system = granted(only(objs, "Role", OPERATOR)["rules"])
    inst = Installation(NAMESPACE, RELEASE, "uid", InstallationSpec(replicas=2))
    secrets = [children.secret(inst, inst.ca_secret, "Opaque", {}, {})]
    for obj in [*reconcile.desired(inst, b""), *secrets]:
        plural, group = reconcile.PLURALS[obj["kind"]], obj["apiVersion"].rpartition("/")[0]
        namespace, name = obj["metadata"].get("namespace"), obj["metadata"]["name"]
        held = kube_system if namespace == "kube-system" else namespaced if namespace else cluster
        where = "" if namespace == NAMESPACE else name  # namespaced rights are not by name
        for verb in ("get", "create", "patch", "delete"):
            assert (group, plural, verb, where) in held, f"{verb} {plural} {name} in {namespace}"
    written = {o["metadata"]["name"] for o in children.rbac(inst) if o["kind"] == "ClusterRole"}
    for obj in children.rbac(inst):
        if obj["kind"] == "ClusterRole":
            assert granted(obj["rules"]) <= cluster, manifests.describe(obj)
            continue
        ref = obj["roleRef"]
        plural = {"ClusterRole": "clusterroles", "Role": "roles"}[ref["kind"]]
        assert ref["name"] in written or (RBAC, plural, "bind", ref["name"]) in cluster | kube_system


def test_operator_holds_what_it_writes_and_grants_for_an_exporter(helm: ChartHelm) -> None:
    """Every object of an exporter (exporters.py), written under a right the chart grants where
    it lives; and every right its Role and ClusterRole grant, held by the operator there
    (kube-apiserver's escalation check), a right held for every name covering one by name."""
    objs = render(helm)
    cluster = granted(only(objs, "ClusterRole", OPERATOR)["rules"])
    namespaced = granted(only(objs, "ClusterRole", f"{OPERATOR}-namespaced")["rules"])
    inst = Installation(NAMESPACE, RELEASE, "uid", InstallationSpec())
    sink = {"webhook": {"url": "https://hook", "headersFrom": {"name": "token"}}}
    obj = {"metadata": {"namespace": NAMESPACE, "name": "e", "uid": "u"}, "spec": {"sink": sink}}
    export = exporters.Export.of(obj)
    every = exporters.Export.of(obj | {"spec": {"namespaces": ["*"]}})
    written = [
        *exporters.objects(inst, export),
        exporters.events_reader(inst),
        exporters.all_namespaces_binding(inst, [every]),
    ]
    for child in written:
        plural, group = reconcile.PLURALS[child["kind"]], child["apiVersion"].rpartition("/")[0]
        namespace, name = child["metadata"].get("namespace"), child["metadata"]["name"]
        held, where = (namespaced, "") if namespace else (cluster, name)
        for verb in ("get", "create", "patch", "delete"):
            assert (group, plural, verb, where) in held, f"{verb} {plural} {name} in {namespace}"
    for role, held in ((exporters.role(inst, export), namespaced), (exporters.events_reader(inst), cluster)):
        for group, resource, verb, _ in granted(role["rules"]):
            assert (group, resource, verb, "") in held, f"{verb} {resource} granted, not held"


def test_operator_role_holds_its_lease(helm: ChartHelm) -> None:
    objs = render(helm)
    role = only(objs, "Role", f"{OPERATOR}-lease")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert granted(role["rules"]) == grants(
        "coordination.k8s.io", ["leases"], ["get", "list", "watch", "create", "update", "patch"]
    )
    bound(objs, "RoleBinding", f"{OPERATOR}-lease", NAMESPACE)


def test_no_role_grants_a_wildcard(helm: ChartHelm) -> None:
    roles = [o for o in render(helm) if o["kind"] in {"Role", "ClusterRole"}]
    # The operator's four (cluster-wide, namespaced, kube-system, the Lease), the test hook's, the
    # uninstall hook's.
    assert len(roles) == 6
    for role in roles:
        for rule in role["rules"]:
            assert "nonResourceURLs" not in rule
            assert not [v for v in rule_values(rule) if "*" in v], manifests.describe(role)


def rule_values(rule: Obj) -> list[str]:
    return [v for key in ("apiGroups", "resources", "verbs", "resourceNames") for v in rule.get(key, [])]


# ----------------------------------------------------------------------------- helm test, NOTES


def test_test_hook_checks_both_apis(helm: ChartHelm) -> None:
    hooks = [o for o in render(helm) if is_test_hook(o)]
    test_name = f"{RELEASE}-coreio-test"
    assert sorted(o["kind"] for o in hooks) == ["ClusterRole", "ClusterRoleBinding", "Pod", "ServiceAccount"]
    for hook in hooks:
        policy = hook["metadata"]["annotations"]["helm.sh/hook-delete-policy"]
        assert policy == "before-hook-creation,hook-succeeded"
        assert hook["metadata"]["name"] == test_name
    pod = only(hooks, "Pod")["spec"]
    assert (pod["restartPolicy"], pod["serviceAccountName"]) == ("Never", test_name)
    assert pod["containers"][0]["command"] == ["coreio-operator", "check-api"]
    assert pod["containers"][0]["image"] == IMAGE
    assert granted(only(hooks, "ClusterRole")["rules"]) == {
        ("rbac.authorization.core.io", "rolebindings", "list", ""),
        ("events.core.io", "events", "list", ""),
    }


def test_uninstall_hook_deletes_the_installation_first(helm: ChartHelm) -> None:
    """`helm uninstall` runs it before deleting anything: the operator's ServiceAccount, and for the
    hook's life only, the right to delete this one Installation."""
    hooks = [o for o in render(helm, "installation.name=prod") if is_uninstall_hook(o)]
    assert sorted(o["kind"] for o in hooks) == ["Job", "Role", "RoleBinding"]
    for hook in hooks:
        annotations = hook["metadata"]["annotations"]
        assert annotations["helm.sh/hook-delete-policy"] == "before-hook-creation,hook-succeeded"
        assert annotations["argocd.argoproj.io/hook"] == "PreDelete"
        assert hook["metadata"]["namespace"] == NAMESPACE
    weights = {o["kind"]: int(o["metadata"]["annotations"].get("helm.sh/hook-weight", "0")) for o in hooks}
    assert weights["Role"] < weights["Job"] and weights["RoleBinding"] < weights["Job"]
    assert granted(only(hooks, "Role")["rules"]) == {
        ("operator.core.io", "installations", verb, "prod") for verb in ("get", "delete", "patch")
    }
    binding = only(hooks, "RoleBinding")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}
    ]
    pod = only(hooks, "Job")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == SERVICE_ACCOUNT and pod["restartPolicy"] == "Never"
    container = pod["containers"][0]
    assert container["image"] == IMAGE
    assert [*container["command"], *container["args"]] == [
        "coreio-operator", "uninstall", f"--namespace={NAMESPACE}", "--installation=prod", "--wait=120",
    ]  # fmt: skip
    # Without an Installation of the chart's own, there is nothing to uninstall first.
    assert [o for o in render(helm, "installation.create=false") if is_uninstall_hook(o)] == []


def test_an_empty_installation_name_means_coreio_everywhere(helm: ChartHelm) -> None:
    """The schema takes "" for the default name: the Installation and the uninstall hook that deletes
    it must agree on it."""
    objs = render(helm, "installation.name=")
    assert only(objs, "Installation")["metadata"]["name"] == "coreio"
    hooks = [o for o in objs if is_uninstall_hook(o)]
    assert only(hooks, "Role")["rules"][0]["resourceNames"] == ["coreio"]
    assert "--installation=coreio" in only(hooks, "Job")["spec"]["template"]["spec"]["containers"][0]["args"]


def test_notes_explain_how_to_check_the_installation(helm: ChartHelm) -> None:
    args = ["install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--dry-run=client"]
    args += ["--set", f"image.repository={REPOSITORY}"]
    notes = helm.run(*args).stdout.partition("NOTES:")[2]
    for command in (
        f"kubectl get installations -n {NAMESPACE}",
        "kubectl get apiservices v1.rbac.authorization.core.io v1.events.core.io",
        "kubectl describe apiservice v1.rbac.authorization.core.io",
        f"kubectl logs -n {NAMESPACE} deployment/{OPERATOR}",
        "kubectl get rolebindings.rbac.authorization.core.io -A",
        "kubectl get events.events.core.io -A",
        f"helm test {RELEASE} -n {NAMESPACE}",
    ):
        assert command in notes


# ----------------------------------------------------------------------------- the validator itself


def _installation(objs: list[Obj]) -> Obj:
    return only(objs, "Installation")


BROKEN: dict[str, Callable[[list[Obj]], None]] = {
    "unknown spec field": lambda o: _installation(o)["spec"].update(bogus=1),
    "enum": lambda o: _installation(o)["spec"]["storage"].update(type="mysql"),
    "type": lambda o: _installation(o)["spec"].update(replicas="3"),
    "metadata field": lambda o: _installation(o)["metadata"].update(labelz={"a": "b"}),
    "name": lambda o: _installation(o)["metadata"].update(name="Not_A_Name"),
    "built-in field": lambda o: only(o, "Deployment")["spec"].update(replica=1),
    "unknown kind": lambda o: o.append({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {}}),
}


@pytest.mark.parametrize("by_hand", [False, True], ids=["jsonschema", "by-hand"])
@pytest.mark.parametrize("breakage", list(BROKEN))
def test_validator_refuses(
    helm: ChartHelm, monkeypatch: pytest.MonkeyPatch, breakage: str, by_hand: bool
) -> None:
    if by_hand:
        monkeypatch.setattr(manifests, "jsonschema", None)
    objs = render(helm)
    BROKEN[breakage](objs)
    with pytest.raises(ManifestError):
        validate_manifests(objs)
