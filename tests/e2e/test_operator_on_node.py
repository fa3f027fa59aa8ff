"""The operator's behaviours on the real node (`tests.support.node`): the chart installed with the
image built from the Dockerfile, two operator replicas as the chart's pods, the API server as the
operator's Deployment. Everything the operator does is seen as a cluster user sees it: through
kubectl, the aggregator, the pods' own endpoints (through kube-apiserver's pod proxy) and Helm.

Two replicas electing a leader and handing over when the leader's pod is deleted; drift repaired;
Event retention and the operator's metrics; the refusals (a second Installation, SQLite with two
replicas, with the CRD's rule and under an older CRD without it); the operator scaled to zero past
the serving certificate's end and recovering when scaled back; a refused Installation deleted with
its children; the etcd-backed shape with two replicas; `helm uninstall` with no operator running.

The tests share one installation and run in file order: each builds on what the one before left."""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import time
from collections.abc import Iterator

import pytest
from cryptography import x509

from apiserver import pki
from apiserver.machinery.types import JSON
from tests.support.kubectl import Kubectl
from tests.support.node import NODE_ETCD_URL, NODE_IP, NODE_NAME
from tests.support.node_install import (
    APISERVICES,
    CLUSTER_CHILDREN,
    NS,
    OPERATOR,
    REPOSITORY,
    TAG,
    OnNode,
    node_with_the_image,
)
from tests.support.traffic import AggregatedTraffic
from tests.support.waiting import CONVERGING, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.node]

IMAGE = f"{REPOSITORY}:{TAG}"
# A serving certificate of 40 s, so that the operator can be down past its end within the module;
# Event retention every 2 s; the operator reconciling every 2 s, so that drift is repaired at once.
VALUES = {
    "image": {"repository": REPOSITORY, "tag": TAG},
    # `second`: a namespace it manages besides its own, for the refusals below.
    "operator": {"replicas": 2, "extraArgs": ["--reconcile-interval=2"], "watchNamespaces": ["second"]},
    "installation": {
        "spec": {
            "storage": {"type": "sqlite"},
            "certificates": {"caLifetime": "1h", "servingLifetime": "40s", "renewAtPercent": 50},
            "eventRetention": {"maxAge": "1h", "interval": "2s"},
            "eventExport": {"enabled": True},
        }
    },
}


@pytest.fixture(scope="module")
def on_node() -> Iterator[OnNode]:
    with node_with_the_image("coreio-operator-node-") as state:
        yield state


def test_the_chart_installs_and_the_operator_reconciles(on_node: OnNode) -> None:
    started = time.monotonic()
    on_node.cluster.run("create", "namespace", "second")  # a RoleBinding goes there
    on_node.helm_install(VALUES)
    on_node.wait_condition("Available", timeout=180)
    on_node.timed("helm install to Available", started)
    crd = on_node.get("crd", "installations.operator.core.io")
    assert crd is not None
    assert any(c["type"] == "Established" and c["status"] == "True" for c in crd["status"]["conditions"])
    installation = on_node.installation()
    assert installation["spec"]["image"] == IMAGE
    assert installation["spec"]["replicas"] == 1  # the CRD's default
    uid = installation["metadata"]["uid"]
    for kind, name in [
        ("deployment", "coreio"),
        ("service", "coreio"),
        ("serviceaccount", "coreio"),
        ("secret", "coreio-ca"),
        ("secret", "coreio-serving"),
    ]:
        obj = on_node.get(kind, name, "-n", NS)
        assert obj is not None, f"{kind}/{name} missing"
        assert [o["uid"] for o in obj["metadata"].get("ownerReferences", [])] == [uid], f"{kind}/{name}"
    for kind, name, namespace in CLUSTER_CHILDREN:
        assert on_node.get(kind, name, *(["-n", namespace] if namespace else [])) is not None, (
            f"{kind}/{name}"
        )
    for name in APISERVICES:
        apiservice = on_node.get("apiservice", name)
        assert apiservice is not None
        assert not apiservice["spec"].get("insecureSkipTLSVerify")
        assert apiservice["spec"]["groupPriorityMinimum"] == 1000
    certificates = on_node.condition("CertificatesValid")
    assert certificates["status"] == "True" and "valid until" in certificates["message"]
    deployment = on_node.get("deployment", "coreio", "-n", NS)
    assert deployment is not None and deployment["spec"]["strategy"] == {"type": "Recreate"}  # SQLite
    # A bare `kubectl get rolebindings` keeps meaning the built-in group.
    resolved = on_node.cluster.run("get", "rolebindings", "-A", "-o", "name").stdout
    assert "rolebinding.rbac.authorization.k8s.io/" in resolved
    # spec.eventExport.enabled: the alpha version is served and reached through the aggregator.
    export = {
        "apiVersion": "events.core.io/v1alpha1",
        "kind": "EventExport",
        "metadata": {"name": "to-stdout", "namespace": "second"},
        "spec": {"sink": {"jsonLines": {"path": "-"}}},
    }
    on_node.cluster.apply(export)
    table = on_node.cluster.run("get", "eventexports", "-n", "second").stdout.splitlines()
    assert table[0].split() == ["NAME", "SINK", "POSITION", "LAG", "READY", "AGE"]
    assert table[1].split()[:2] == ["to-stdout", "jsonLines"]
    on_node.cluster.run("delete", "eventexport", "to-stdout", "-n", "second")


# (verb, resource, namespace or "", allowed): what the operator's own token may do, as
# kube-apiserver answers it. Everything it writes it may; nothing beyond.
OPERATOR_RIGHTS = [
    ("get", "secrets", "kube-system", False),
    ("list", "secrets", "default", False),
    ("create", "deployments", "kube-system", False),
    ("create", "serviceaccounts", "default", False),
    ("patch", "apiservices/v1beta1.metrics.k8s.io", "", False),
    ("create", "apiservices", "", False),  # not by name: refused
    ("delete", "clusterroles/cluster-admin", "", False),
    ("patch", "clusterrolebindings/cluster-admin", "", False),
    ("create", "rolebindings", "kube-system", False),
    ("create", "rolebindings", "default", False),
    ("create", "roles", "default", False),
    ("get", "secrets", NS, True),
    ("create", "deployments", NS, True),
    ("patch", "apiservices/v1.events.core.io", "", True),
    ("delete", "clusterroles/coreio:apiserver", "", True),
    ("patch", "rolebindings/coreio:authentication-reader", "kube-system", True),
    # The exporters' Roles and RoleBindings, where it manages (exporters.py).
    ("create", "rolebindings", "second", True),
    ("patch", "eventexports.events.core.io/any --subresource=status", "second", True),
]


def test_the_operators_own_token_reaches_nothing_beyond_coreio(on_node: OnNode) -> None:
    """Asked of kube-apiserver with a token of the operator's ServiceAccount (the one its pods run
    with, and with which everything above was installed)."""
    cluster = on_node.cluster
    token = cluster.create_token("coreio-operator", NS, create=False)
    kubectl = Kubectl(
        cluster.kubectl.binary, cluster.user_kubeconfig(on_node.directory / "op.kubeconfig", token=token)
    )
    answers = []
    for verb, resource, namespace, _ in OPERATOR_RIGHTS:
        where = ["-n", namespace] if namespace else []
        done = kubectl.run(
            "auth", "can-i", verb, *resource.split(), *where, check=False, env=cluster.kubectl_env
        )
        answers.append((verb, resource, namespace, done.stdout.strip() == "yes"))
    assert answers == OPERATOR_RIGHTS
    for namespace in ("kube-system", NS):
        listed = kubectl.run("auth", "can-i", "--list", "-n", namespace, env=cluster.kubectl_env).stdout
        print(f"\nthe operator's rights in {namespace} (kubectl auth can-i --list):\n{listed}")


def test_everyone_authenticated_may_ask_access_reviews(on_node: OnNode) -> None:
    """Granted by the operator's `coreio:access-reviewer`, asked as kube-apiserver's own review."""
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": "nobody-in-particular",
            "groups": ["system:authenticated"],
            "resourceAttributes": {
                "verb": "create",
                "group": "rbac.authorization.core.io",
                "resource": "resourceaccessreviews",
                "namespace": "default",
            },
        },
    }
    answer = json.loads(
        on_node.cluster.run("create", "-f", "-", "-o", "json", input=json.dumps(review)).stdout
    )
    assert answer["status"] == {
        "allowed": True,
        "reason": 'RBAC: allowed by ClusterRoleBinding "coreio:access-reviewer" of ClusterRole'
        ' "coreio:access-reviewer" to Group "system:authenticated"',
    }


def _lease_holder(on_node: OnNode) -> str:
    lease = on_node.get("lease", "coreio-operator", "-n", NS)
    return str((lease or {}).get("spec", {}).get("holderIdentity") or "")


def _operator_pods(on_node: OnNode) -> list[str]:
    return [p["metadata"]["name"] for p in on_node.ready_pods("operator")]


def test_one_of_two_operators_leads_and_another_takes_over(on_node: OnNode) -> None:
    """The leader's pod deleted: it hands the Lease back as it stops, and a waiting replica (the
    other one, or the pod replacing the deleted one: whichever asks first) leads within seconds."""

    def two_ready() -> list[str] | None:
        pods = _operator_pods(on_node)
        return pods if len(pods) == 2 else None

    pods = wait_until(
        two_ready, timeout=60, interval=0.5, message="two operator pods Ready", ignoring=CONVERGING
    )

    def leader_among_them() -> str | None:
        held = _lease_holder(on_node)
        return held if held in pods else None

    leader = wait_until(leader_among_them, timeout=60, interval=0.5, message="a leader", ignoring=CONVERGING)
    (follower,) = [p for p in pods if p != leader]
    wait_until(
        lambda: "waiting to lead" in on_node.cluster.run("logs", "-n", NS, follower).stdout,
        timeout=60,
        interval=0.5,
        message="the other waiting",
        ignoring=CONVERGING,
    )
    assert "leading as" not in on_node.cluster.run("logs", "-n", NS, follower).stdout
    started = time.monotonic()
    on_node.cluster.run("delete", "pod", "-n", NS, leader, "--wait=false")

    def another_leader() -> str | None:
        held = _lease_holder(on_node)
        return held if held not in ("", leader) else None

    successor = wait_until(
        another_leader, timeout=60, interval=0.5, message="another leader", ignoring=CONVERGING
    )
    on_node.timed("leader pod deleted: another replica leads", started)
    assert f"leading as {successor}" in on_node.cluster.run("logs", "-n", NS, successor).stdout
    lease = on_node.get("lease", "coreio-operator", "-n", NS)
    assert lease is not None and lease["spec"]["leaseTransitions"] == 1
    wait_until(
        lambda: len(_operator_pods(on_node)) == 2,
        timeout=120,
        interval=0.5,
        message="two operator pods Ready again",
        ignoring=CONVERGING,
    )


def test_drift_is_repaired(on_node: OnNode) -> None:
    run = on_node.cluster.run
    tampered = {"spec": {"insecureSkipTLSVerify": True, "caBundle": None, "groupPriorityMinimum": 9}}
    run("patch", "apiservice", APISERVICES[1], "--type=merge", "-p", json.dumps(tampered))
    run("set", "image", "deployment/coreio", "apiserver=evil.invalid/evil:latest", "-n", NS)
    run("delete", "clusterrolebinding", "coreio:auth-delegator")
    run("delete", "clusterrolebinding", "coreio:apiserver")
    # (Not the ServiceAccount: a new one has a new UID, and the running pod's token names the old.)
    started = time.monotonic()

    def repaired() -> bool:
        apiservice = on_node.get("apiservice", APISERVICES[1])
        deployment = on_node.get("deployment", "coreio", "-n", NS)
        assert apiservice is not None and deployment is not None
        spec = apiservice["spec"]
        return (
            "insecureSkipTLSVerify" not in spec
            and bool(spec.get("caBundle"))
            and spec["groupPriorityMinimum"] == 1000
            and deployment["spec"]["template"]["spec"]["containers"][0]["image"] == IMAGE
            and on_node.get("clusterrolebinding", "coreio:auth-delegator") is not None
            and on_node.get("clusterrolebinding", "coreio:apiserver") is not None
        )

    wait_until(repaired, timeout=30, interval=0.5, message="drift repaired", ignoring=CONVERGING)
    on_node.timed("drift repaired", started)
    # The Deployment rolled to the bad image and back (Recreate, for SQLite): it serves again.
    wait_until(
        lambda: on_node.aggregated_ok() and len(on_node.ready_pods("apiserver")) == 1,
        timeout=180,
        interval=0.5,
        message="serving again",
        ignoring=CONVERGING,
    )
    on_node.timed("drift: serving again", started)


POD_SETTINGS: JSON = {
    "pod": {
        "hostNetwork": True,
        "port": 9443,
        "nodeSelector": {"kubernetes.io/hostname": NODE_NAME},
        "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
        "priorityClassName": "system-cluster-critical",
        # Named, not present: the kubelet pulls nothing (the image is on the node) and goes on.
        "imagePullSecrets": [{"name": "regcred"}],
        "annotations": {"example.com/team": "platform"},
        "labels": {"team": "platform"},
    },
    "service": {"annotations": {"example.com/lb": "internal"}},
}


def test_pod_settings_reach_the_running_pod(on_node: OnNode) -> None:
    """The knobs real clusters need, on a real pod: on the node's network (where a control plane
    cannot reach pod addresses) on port 9443, placed and prioritised as asked; the aggregator
    reaches it through its Service all the same. Then back to the default shape."""
    run = on_node.cluster.run
    run("patch", "installation", "coreio", "-n", NS, "--type=merge", "-p", json.dumps({"spec": POD_SETTINGS}))
    started = time.monotonic()

    def on_the_nodes_network() -> bool:
        pods = on_node.ready_pods("apiserver")
        return len(pods) == 1 and pods[0]["spec"].get("hostNetwork") is True and on_node.aggregated_ok()

    wait_until(
        on_the_nodes_network,
        timeout=180,
        interval=1,
        message="serving from the node's network",
        ignoring=CONVERGING,
    )
    on_node.timed("pod settings: serving again from the node's network", started)
    pod = on_node.apiserver_pod()
    assert pod["status"]["podIP"] == NODE_IP
    assert pod["spec"]["containers"][0]["ports"][0]["containerPort"] == 9443
    assert pod["spec"]["priorityClassName"] == "system-cluster-critical" and pod["spec"]["priority"] > 10**9
    assert pod["spec"]["nodeSelector"] == {"kubernetes.io/hostname": NODE_NAME}
    assert pod["spec"]["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert pod["metadata"]["annotations"]["example.com/team"] == "platform"
    assert pod["metadata"]["labels"]["team"] == "platform"
    service = on_node.get("service", "coreio", "-n", NS)
    assert service is not None and service["metadata"]["annotations"]["example.com/lb"] == "internal"
    back = {"spec": {"pod": None, "service": None}}
    run("patch", "installation", "coreio", "-n", NS, "--type=merge", "-p", json.dumps(back))

    def back_on_the_pod_network() -> bool:
        pods = on_node.ready_pods("apiserver")
        return len(pods) == 1 and not pods[0]["spec"].get("hostNetwork") and on_node.aggregated_ok()

    wait_until(
        back_on_the_pod_network,
        timeout=180,
        interval=1,
        message="serving from the pod network again",
        ignoring=CONVERGING,
    )


def test_a_claim_resize_the_storage_cannot_do_is_reported(on_node: OnNode) -> None:
    """The node's PersistentVolume has no class that can expand it: kube-apiserver refuses the
    larger request, and its answer stands on the Installation's Ready condition (it was silently
    ignored before). Asked back to the claim's size, the Installation is Ready again."""
    run = on_node.cluster.run
    resize = {"spec": {"storage": {"sqlite": {"size": "2Gi"}}}}
    run("patch", "installation", "coreio", "-n", NS, "--type=merge", "-p", json.dumps(resize))
    ready = wait_until(
        lambda: on_node.condition("Ready").get("reason") == "ReconcileError" and on_node.condition("Ready"),
        timeout=60,
        interval=0.5,
        message="the refusal reported",
        ignoring=CONVERGING,
    )
    assert ready["status"] == "False"
    assert "persistentvolumeclaims" in ready["message"] and "can be resized" in ready["message"], ready
    claim = on_node.get("persistentvolumeclaim", "coreio-data", "-n", NS)
    assert claim is not None and claim["spec"]["resources"]["requests"]["storage"] == "1Gi"
    resize["spec"]["storage"]["sqlite"]["size"] = "1Gi"
    run("patch", "installation", "coreio", "-n", NS, "--type=merge", "-p", json.dumps(resize))
    on_node.wait_condition("Ready", timeout=60, message="Ready again")


def _event(name: str, age_seconds: int, namespace: str = "default") -> JSON:
    moment = time.gmtime(time.time() - age_seconds)
    return {
        "apiVersion": "events.core.io/v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "eventTime": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", moment),
        "reportingController": "example.com/e2e",
        "reportingInstance": "e2e-1",
        "action": "Test",
        "reason": "Testing",
        "type": "Normal",
        "regarding": {"kind": "Pod", "name": "p", "namespace": namespace},
        "note": "retention",
    }


def test_event_retention_through_the_cluster(on_node: OnNode) -> None:
    events = [_event(f"old-{i}", 2 * 3600) for i in range(10)] + [_event(f"new-{i}", 60) for i in range(10)]
    on_node.cluster.apply(*events)

    def names() -> set[str]:
        listed = on_node.cluster.json("get", "events.events.core.io", "-n", "default")
        return {item["metadata"]["name"] for item in listed["items"]}

    wait_until(
        lambda: not any(n.startswith("old-") for n in names()),
        timeout=60,
        interval=0.5,
        message="old Events collected",
        ignoring=CONVERGING,
    )
    assert {f"new-{i}" for i in range(10)} <= names()
    retention = on_node.installation()["status"]["eventRetention"]
    assert retention["examined"] >= 10 and "lastRunTime" in retention


EXPORTER = "coreio-export-to-stdout"
# (verb, resource, namespace, allowed): the exporter's ServiceAccount, as kube-apiserver answers.
EXPORTER_RIGHTS = [
    ("list", "events.events.core.io", "second", True),
    ("watch", "events.events.core.io", "second", True),
    ("list", "events.events.core.io", "default", False),
    ("delete", "events.events.core.io", "second", False),
    ("get", "eventexports.events.core.io/to-stdout", "second", True),
    ("list", "eventexports.events.core.io", "second", False),
    ("create", "leases", "second", False),
    ("patch", "eventexports.events.core.io/to-stdout --subresource=status", "second", True),
    ("patch", "eventexports.events.core.io/other --subresource=status", "second", False),
    ("patch", "eventexports.events.core.io/to-stdout", "second", False),
    ("update", "leases/coreio-export-to-stdout", "second", True),
    ("update", "leases/coreio-operator", NS, False),
    ("get", "secrets", "second", False),
]


def _exporter_leader(on_node: OnNode) -> str:
    """The pod whose exporter holds the export's Lease ("" while none does)."""
    lease = on_node.get("lease", "coreio-export-to-stdout", "-n", "second") or {}
    return str(lease.get("spec", {}).get("holderIdentity") or "").rpartition("_")[0]


def _exported(on_node: OnNode, pod: str) -> set[str]:
    """The names of the Events the pod's exporter wrote to its stdout (JSON lines)."""
    done = on_node.cluster.run("logs", pod, "-n", "second", check=False)
    records = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {record["event"]["metadata"]["name"] for record in records}


def _exported_by_the_leader(on_node: OnNode, names: set[str], not_by: str = "") -> str:
    """The leading pod (not `not_by`) once its output holds every Event of `names`."""

    def leader_has_them() -> str | None:
        pod = _exporter_leader(on_node)
        return pod if pod and pod != not_by and names <= _exported(on_node, pod) else None

    found: str = wait_until(
        leader_has_them,
        timeout=120,
        interval=1,
        message=lambda: f"exported by the leader; {_exporters_said(on_node)}",
    )
    return found


def _exporters_said(on_node: OnNode) -> str:
    """The export's status, its Lease's holder and what each exporter pod logged (for failures)."""
    export = on_node.get("eventexport", "to-stdout", "-n", "second") or {}
    said = [f"status: {json.dumps(export.get('status'))}", f"leader: {_exporter_leader(on_node)!r}"]
    pods = on_node.get("pods", "-n", "second", "-l", "app.kubernetes.io/component=exporter") or {}
    for pod in pods.get("items", []):
        name = pod["metadata"]["name"]
        logs = on_node.cluster.run("logs", name, "-n", "second", check=False)
        said.append(f"{name}: {(logs.stdout + logs.stderr)[-1500:]}")
    return "\n".join(said)


def test_an_eventexport_gets_its_exporter_deployed_with_its_rights_alone(on_node: OnNode) -> None:
    """The operator deploys coreio-export for an EventExport (two replicas electing one), with a
    ServiceAccount allowed what the exporter does and nothing more; the leader's pod deleted, the
    other exports on from the position; the export deleted, its exporter goes."""
    export = {
        "apiVersion": "events.core.io/v1alpha1",
        "kind": "EventExport",
        "metadata": {"name": "to-stdout", "namespace": "second"},
        "spec": {"sink": {"jsonLines": {"path": "-"}}, "batch": {"maxWait": "200ms"}},
    }
    on_node.cluster.apply(export)

    def two_ready() -> bool:
        deployment = on_node.get("deployment", EXPORTER, "-n", "second") or {}
        return bool(deployment.get("status", {}).get("readyReplicas") == 2)

    wait_until(two_ready, timeout=120, interval=1, message="the exporter's two replicas", ignoring=CONVERGING)

    def positioned() -> bool:
        # A new export starts at the present: its first position, written before it reads.
        found = on_node.get("eventexport", "to-stdout", "-n", "second") or {}
        return bool(found.get("status", {}).get("position"))

    wait_until(positioned, timeout=60, interval=0.5, message=lambda: _exporters_said(on_node))
    on_node.cluster.apply(*[_event(f"export-{i}", 5, "second") for i in range(20)])
    first = _exported_by_the_leader(on_node, {f"export-{i}" for i in range(20)})
    who = f"--as=system:serviceaccount:second:{EXPORTER}"
    answers = []
    for verb, resource, namespace, _ in EXPORTER_RIGHTS:
        asked = ["auth", "can-i", verb, *resource.split(), "-n", namespace, who]
        answers.append(
            (verb, resource, namespace, on_node.cluster.run(*asked, check=False).stdout.strip() == "yes")
        )
    assert answers == EXPORTER_RIGHTS
    # Deleted (SIGTERM): it sends its batch, hands the Lease back; the standby goes on from the
    # position in the status, so the earlier Events are not written again.
    on_node.cluster.run("delete", "pod", first, "-n", "second", "--wait=false")
    on_node.cluster.apply(*[_event(f"after-{i}", 5, "second") for i in range(20)])
    second = _exported_by_the_leader(on_node, {f"after-{i}" for i in range(20)}, not_by=first)
    again = {name for name in _exported(on_node, second) if name.startswith("export-")}
    print(f"\nexported by {first}, then by {second} after the first's pod was deleted; again: {again}")
    assert not again
    on_node.cluster.run("delete", "eventexport", "to-stdout", "-n", "second")

    def removed() -> bool:
        named = [
            (kind, EXPORTER) for kind in ("deployment", "serviceaccount", "role", "rolebinding", "lease")
        ]
        named.append(("rolebinding", "coreio-export:second:to-stdout"))
        gone = all(on_node.get(kind, name, "-n", "second") is None for kind, name in named)
        return gone and on_node.get("clusterrole", "coreio:export-events") is None

    wait_until(
        removed, timeout=60, interval=0.5, message=f"{EXPORTER}'s objects removed", ignoring=CONVERGING
    )


def _from_leader(on_node: OnNode, port: int, path: str) -> str:
    """A GET on the leading operator pod's port, through kube-apiserver's pod proxy."""
    url = f"/api/v1/namespaces/{NS}/pods/{_lease_holder(on_node)}:{port}/proxy{path}"
    return on_node.cluster.run("get", "--raw", url).stdout


def test_operator_metrics_and_liveness(on_node: OnNode) -> None:
    text = _from_leader(on_node, 9090, "/metrics")
    assert 'coreio_operator_reconcile_total{result="success"}' in text
    deleted = [
        line
        for line in text.splitlines()
        if line.startswith('coreio_operator_events_deleted_total{rule="age"}')
    ]
    assert deleted and float(deleted[0].split()[-1]) >= 10
    serving = on_node.get("secret", "coreio-serving", "-n", NS)
    assert serving is not None
    leaf = x509.load_pem_x509_certificate(base64.b64decode(serving["data"]["tls.crt"]))
    series = (
        "coreio_operator_certificate_expiration_timestamp_seconds"
        '{certificate="serving",installation="coreio-system/coreio"}'
    )
    found = [float(line.split()[-1]) for line in text.splitlines() if line.startswith(series)]
    assert found, text
    assert abs(found[0] - leaf.not_valid_after_utc.timestamp()) <= 40  # renewed since, at most once
    assert time.time() < found[0] <= time.time() + 40  # the 40 s serving lifetime
    assert _from_leader(on_node, 8080, "/healthz") == "ok"
    events = on_node.cluster.json("get", "events", "-n", NS, "--field-selector", "involvedObject.name=coreio")
    assert "Certificates" in {e["reason"] for e in events["items"]}


def test_check_api_without_the_hooks_rights_names_the_refusal(on_node: OnNode) -> None:
    """What `helm test` runs, in a pod of a ServiceAccount without the test hook's RBAC: it fails,
    and its log says Forbidden (the chart's own hook passes in test_real_node.py)."""
    cluster = on_node.cluster
    cluster.apply(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "nobody", "namespace": NS}}
    )
    overrides = {"spec": {"serviceAccountName": "nobody"}}
    cluster.run(
        "run", "check-api-nobody", "-n", NS, f"--image={IMAGE}", "--restart=Never",
        f"--overrides={json.dumps(overrides)}", "--command", "--", "coreio-operator", "check-api",
    )  # fmt: skip

    def phase() -> str:
        pod = on_node.get("pod", "check-api-nobody", "-n", NS) or {}
        return str(pod.get("status", {}).get("phase", ""))

    assert (
        wait_until(
            lambda: phase() in ("Succeeded", "Failed") and phase(),
            timeout=120,
            interval=0.5,
            message="the check finished",
            ignoring=CONVERGING,
        )
        == "Failed"
    )
    log = cluster.run("logs", "-n", NS, "check-api-nobody").stdout
    assert "Forbidden" in log, log
    cluster.run("delete", "pod", "-n", NS, "check-api-nobody", "--wait=false")


def _installation(name: str, namespace: str, spec: JSON) -> JSON:
    return {
        "apiVersion": "operator.core.io/v1alpha1",
        "kind": "Installation",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def test_second_installation_is_refused_and_touches_nothing(on_node: OnNode) -> None:
    cluster = on_node.cluster
    cluster.apply(_installation("coreio", "second", {"storage": {"type": "sqlite"}}))
    ready = wait_until(
        lambda: on_node.condition("Ready", "coreio", "second"),
        timeout=30,
        interval=0.5,
        message="refusal",
        ignoring=CONVERGING,
    )
    assert ready["status"] == "False" and ready["reason"] == "ClusterAlreadyInstalled", ready
    assert "belongs to Installation coreio-system/coreio" in ready["message"]
    assert on_node.get("deployment", "coreio", "-n", "second") is None
    assert on_node.get("secret", "coreio-ca", "-n", "second") is None
    for name in APISERVICES:
        apiservice = on_node.get("apiservice", name)
        assert apiservice is not None and apiservice["spec"]["service"]["namespace"] == NS
    cluster.run("delete", "installation", "coreio", "-n", "second", "--timeout=30s")
    assert on_node.get("apiservice", APISERVICES[0]) is not None  # still the first one's


def test_an_installation_where_the_operator_has_no_rights_is_not_seen(on_node: OnNode) -> None:
    """Least privilege: outside the release namespace and operator.watchNamespaces the operator
    neither watches nor writes; such an Installation stays untouched (no finalizer, no status)."""
    cluster = on_node.cluster
    cluster.run("create", "namespace", "unmanaged")
    cluster.apply(_installation("coreio", "unmanaged", {"storage": {"type": "sqlite"}}))
    time.sleep(6)  # three of the operator's reconcile intervals
    found = on_node.installation("coreio", "unmanaged")
    assert "status" not in found and not found["metadata"].get("finalizers"), found
    assert on_node.get("deployment", "coreio", "-n", "unmanaged") is None
    cluster.run("delete", "installation", "coreio", "-n", "unmanaged", "--timeout=30s")


_SPEC_RULES = "/spec/versions/0/schema/openAPIV3Schema/properties/spec/x-kubernetes-validations"


@contextlib.contextmanager
def older_crd(on_node: OnNode) -> Iterator[None]:
    """The CRD as an older chart installed it (Helm never upgrades CRDs), without the rule that
    refuses SQLite with more than one replica at admission: the operator must refuse it itself."""
    run = on_node.cluster.run
    crd = on_node.get("crd", "installations.operator.core.io")
    assert crd is not None
    rules = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "x-kubernetes-validations"
    ]
    run(
        "patch",
        "crd",
        "installations.operator.core.io",
        "--type=json",
        "-p",
        json.dumps([{"op": "remove", "path": _SPEC_RULES}]),
    )
    try:
        yield
    finally:
        restored = [{"op": "add", "path": _SPEC_RULES, "value": rules}]
        run("patch", "crd", "installations.operator.core.io", "--type=json", "-p", json.dumps(restored))


def test_sqlite_with_two_replicas_is_refused(on_node: OnNode) -> None:
    cluster = on_node.cluster
    two = _installation("two", "second", {"replicas": 2, "storage": {"type": "sqlite"}})
    refused = cluster.run("create", "-f", "-", input=json.dumps(two), check=False)
    assert refused.returncode != 0 and "embedded SQLite allows one replica only" in refused.stderr
    with older_crd(on_node):
        cluster.apply(two)
        ready = wait_until(
            lambda: on_node.condition("Ready", "two", "second"),
            timeout=30,
            interval=0.5,
            message="refusal",
            ignoring=CONVERGING,
        )
        assert ready["status"] == "False" and ready["reason"] == "SQLiteSingleReplica", ready
        assert "one replica only" in ready["message"]
        assert on_node.get("deployment", "two", "-n", "second") is None
        cluster.run("delete", "installation", "two", "-n", "second", "--timeout=30s")


def _scale_operator(on_node: OnNode, replicas: int) -> None:
    on_node.cluster.run("scale", "deployment", OPERATOR, "-n", NS, f"--replicas={replicas}")


def _own_secret(name: str, ca: pki.KeyPair, hosts: list[str]) -> JSON:
    """A Secret as cert-manager writes one for a Certificate: kubernetes.io/tls with ca.crt."""
    leaf = pki.issue_serving_certificate(ca, hosts)
    data = {"tls.crt": leaf.cert_pem, "tls.key": leaf.key_pem, "ca.crt": ca.cert_pem}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": NS},
        "type": "kubernetes.io/tls",
        "data": {key: base64.b64encode(value).decode() for key, value in data.items()},
    }


def _use_secret(on_node: OnNode, name: str) -> None:
    patch = {"spec": {"certificates": {"secretName": name}}}
    on_node.cluster.run("patch", "installation", "coreio", "-n", NS, "--type=merge", "-p", json.dumps(patch))


def _bundle_subjects(on_node: OnNode) -> list[tuple[str, ...]]:
    """Each APIService's caBundle, as the CAs' common names."""
    found = []
    for name in APISERVICES:
        apiservice = on_node.get("apiservice", name)
        assert apiservice is not None
        pem = base64.b64decode(apiservice["spec"]["caBundle"])
        found.append(tuple(_common_name(c) for c in x509.load_pem_x509_certificates(pem)))
    return found


def _bundle_is(on_node: OnNode, expected: list[tuple[str, ...]]) -> bool:
    return _bundle_subjects(on_node) == expected


def _common_name(certificate: x509.Certificate) -> str:
    return str(certificate.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value)


def _served_by(on_node: OnNode, ca_name: str) -> bool:
    return _common_name_of_issuer(on_node.presented_certificate()) == ca_name


def _common_name_of_issuer(certificate: x509.Certificate) -> str:
    return str(certificate.issuer.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value)


def test_certificates_the_user_brings(on_node: OnNode) -> None:
    """spec.certificates.secretName with a Secret shaped as cert-manager writes one. One that would
    not verify for the Service is refused and nothing changes. A good one is taken, its CA is
    replaced (a new issuer), and the operator's own certificates come back: the pods are given each
    certificate only once every caBundle trusts it, the old CA stays while a pod still presents a
    certificate of it, and not one aggregated request fails. The pod is never restarted: the
    Deployment does not change, the kubelet carries each certificate into its volume."""
    hosts = [f"coreio.{NS}.svc"]
    pod = on_node.apiserver_pod()["metadata"]["name"]
    operator_bundles = _bundle_subjects(on_node)
    on_node.cluster.apply(_own_secret("coreio-wrong", pki.create_ca("test-wrong"), ["elsewhere.example"]))
    _use_secret(on_node, "coreio-wrong")
    wait_until(
        lambda: on_node.condition("Ready").get("reason") == "CertificateNotTrusted",
        timeout=30,
        interval=0.5,
        message="the wrong Secret refused",
        ignoring=CONVERGING,
    )
    assert "coreio-wrong" in on_node.condition("Ready")["message"]
    assert _bundle_subjects(on_node) == operator_bundles and on_node.aggregated_ok()
    started = time.monotonic()
    with AggregatedTraffic(on_node.cluster) as traffic:
        for ca_name in ("test-first", "test-second"):  # the second: the user's issuer moved to a new CA
            on_node.cluster.apply(_own_secret("coreio-own", pki.create_ca(ca_name), hosts))
            _use_secret(on_node, "coreio-own")
            wait_until(
                functools.partial(_served_by, on_node, ca_name),
                timeout=90,
                interval=1,
                message=f"the pod presents {ca_name}'s",
                ignoring=CONVERGING,
            )
            wait_until(
                functools.partial(_bundle_is, on_node, [(ca_name,)] * len(APISERVICES)),
                timeout=60,
                interval=0.5,
                message="the old CA leaves",
                ignoring=CONVERGING,
            )
        assert on_node.installation()["status"]["certificates"]["source"] == "secret"
        assert on_node.status("Ready") == "True"
        _use_secret(on_node, "")

        def back_to_the_operators() -> bool:
            return _common_name_of_issuer(on_node.presented_certificate()).startswith("coreio-ca@")

        wait_until(
            back_to_the_operators,
            timeout=90,
            interval=1,
            message="the operator's own certificate again",
            ignoring=CONVERGING,
        )
        wait_until(
            functools.partial(_bundle_is, on_node, operator_bundles),
            timeout=60,
            interval=0.5,
            message="the user's CA leaves",
            ignoring=CONVERGING,
        )
        time.sleep(2)
    on_node.timed("certificates the user brings: taken, CA replaced, given back", started)
    print(f"\nbring-your-own certificates: {traffic.ok} aggregated requests, {len(traffic.failures)} failed")
    assert traffic.failures == [], traffic.failures[:5]
    assert traffic.ok > 50
    running = on_node.apiserver_pod()
    assert running["metadata"]["name"] == pod
    assert running["status"]["containerStatuses"][0]["restartCount"] == 0
    on_node.cluster.run("delete", "secret", "coreio-own", "coreio-wrong", "-n", NS)


def test_an_operator_down_past_the_serving_certificates_end_recovers_at_start(on_node: OnNode) -> None:
    """Scaled to zero for longer than the serving certificate lives (40 s): the pod presents an
    expired certificate to every new connection. Scaled back, the operator renews at once and the
    kubelet carries the new certificate into the pod's Secret volume, which the server reloads."""
    _scale_operator(on_node, 0)
    wait_until(
        lambda: (
            not (on_node.get("pods", "-n", NS, "-l", "app.kubernetes.io/component=operator") or {}).get(
                "items"
            )
        ),
        timeout=120,
        interval=0.5,
        message="no operator pod",
        ignoring=CONVERGING,
    )
    serving = on_node.get("secret", "coreio-serving", "-n", NS)
    assert serving is not None
    last = x509.load_pem_x509_certificate(base64.b64decode(serving["data"]["tls.crt"]))
    time.sleep(max(0.0, last.not_valid_after_utc.timestamp() - time.time()) + 3)
    stale = on_node.presented_certificate()
    assert stale.not_valid_after_utc.timestamp() < time.time(), "the pod's certificate has not expired"
    started = time.monotonic()
    _scale_operator(on_node, 2)

    def valid_again() -> bool:
        leaf = on_node.presented_certificate()
        return leaf.not_valid_after_utc.timestamp() > time.time() and on_node.aggregated_ok()

    wait_until(
        valid_again, timeout=120, interval=1, message="a valid certificate served again", ignoring=CONVERGING
    )
    on_node.timed("operator scaled back after the serving certificate expired: served again", started)
    print(f"\nrecovery after the serving certificate expired: {time.monotonic() - started:.1f}s")


def test_deleting_a_refused_installation_removes_its_children(on_node: OnNode) -> None:
    cluster = on_node.cluster
    with older_crd(on_node):
        cluster.run(
            "patch", "installation", "coreio", "-n", NS, "--type=merge", "-p", '{"spec":{"replicas":3}}'
        )
        wait_until(
            lambda: on_node.condition("Ready").get("reason") == "SQLiteSingleReplica",
            timeout=60,
            interval=0.5,
            message="refusal",
            ignoring=CONVERGING,
        )
        cluster.run("delete", "installation", "coreio", "-n", NS, "--timeout=60s")
    for kind, name, ns in [
        ("apiservice", APISERVICES[0], ""),
        ("apiservice", APISERVICES[1], ""),
        *CLUSTER_CHILDREN,
        ("deployment", "coreio", NS),
        ("service", "coreio", NS),
        ("secret", "coreio-ca", NS),
        ("secret", "coreio-serving", NS),
    ]:
        assert on_node.get_named(kind, name, ns) is None, f"{kind}/{name} still there"
    # The data outlives the Installation, as a StatefulSet's volumes do.
    assert on_node.get("persistentvolumeclaim", "coreio-data", "-n", NS) is not None


def test_etcd_storage_with_two_replicas(on_node: OnNode) -> None:
    """The production shape: etcd storage (the cluster's own etcd, under a prefix of its own), two
    replicas with a PodDisruptionBudget and topology spread, both pods serving on the one node."""
    cluster = on_node.cluster
    storage = {"type": "etcd", "etcd": {"endpoints": [NODE_ETCD_URL], "prefix": "/coreio-e2e"}}
    started = time.monotonic()
    # No image: the operator's --default-image, the chart's image.
    cluster.apply(_installation("coreio", NS, {"replicas": 2, "storage": storage}))
    on_node.wait_condition("Available", timeout=180)
    wait_until(
        lambda: len(on_node.ready_pods("apiserver")) == 2,
        timeout=120,
        interval=0.5,
        message="two API server pods Ready",
        ignoring=CONVERGING,
    )
    on_node.timed("etcd storage, two replicas: Available", started)
    deployment = on_node.get("deployment", "coreio", "-n", NS)
    assert deployment is not None
    assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == IMAGE
    assert len(deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]) == 2
    budget = on_node.get("poddisruptionbudget", "coreio", "-n", NS)
    assert budget is not None and budget["spec"]["maxUnavailable"] == 1
    cluster.run("create", "namespace", "on-etcd")
    cluster.apply(_event("on-etcd", 5, namespace="on-etcd"))
    listed = cluster.json("get", "events.events.core.io", "-n", "on-etcd")
    assert [item["metadata"]["name"] for item in listed["items"]] == ["on-etcd"]


def test_helm_uninstall_without_the_operator_finishes(on_node: OnNode) -> None:
    """No operator running: the pre-delete hook sees its Lease released, stops waiting for it at
    once, removes the children itself and lets the Installation go; `helm uninstall` finishes well
    within the hook's 120 s wait, and nothing of coreio remains."""
    _scale_operator(on_node, 0)
    wait_until(
        lambda: _lease_holder(on_node) == "",
        timeout=60,
        interval=0.5,
        message="the Lease released",
        ignoring=CONVERGING,
    )
    started = time.monotonic()
    on_node.helm("uninstall", "coreio", "-n", NS, "--wait")
    on_node.timed("helm uninstall --wait without the operator", started)
    assert time.monotonic() - started < 90, "the hook waited for an operator that was not running"
    on_node.assert_nothing_of_coreio_left()
    on_node.cluster.run("delete", "namespace", NS, "--timeout=120s")
    assert on_node.get("namespace", NS) is None
