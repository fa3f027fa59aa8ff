"""The chart on a real node (issue 21, part 3): `helm install` with the image built from the
Dockerfile, and nothing else.

The cluster is `tests.support.node`'s: kube-apiserver, controller-manager, scheduler, kube-proxy
and a kubelet running pods in containerd, in a network namespace of the test's own. The operator
runs as the chart's pod; the API server as the operator's Deployment, its certificate a Secret
volume the kubelet keeps current, its SQLite file on a PersistentVolume; the aggregator reaches it
through its Service's ClusterIP (kube-proxy's rules). Each step's time is printed.

The operator's own behaviours (two replicas electing a leader, drift repair, Event retention, the
refusals, recovery past the certificate's end, the etcd shape, uninstall without the operator) run
on the same kind of node in `test_operator_on_node.py`.

The tests share one installation and run in file order."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator

import pytest
from cryptography import x509

from apiserver.machinery.types import JSON
from tests.support.node import NODE_NAME, PV_NAME
from tests.support.node_install import (
    APISERVICES,
    NS,
    REPOSITORY,
    TAG,
    OnNode,
    node_with_the_image,
)
from tests.support.traffic import AggregatedTraffic
from tests.support.waiting import CONVERGING, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.node]

# Short lifetimes, so that the kubelet must carry a renewed certificate and a new CA into the
# running pod within the module.
VALUES = {
    "image": {"repository": REPOSITORY, "tag": TAG},
    "installation": {
        "spec": {
            "storage": {"type": "sqlite"},
            "certificates": {
                "caLifetime": "100s",
                "servingLifetime": "40s",
                "renewAtPercent": 50,
                "caGracePeriod": "8s",
            },
        }
    },
}
# An admission policy of the cluster's that refuses every write to the API server's Deployment.
FROZEN_DEPLOYMENT: list[JSON] = [
    {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "frozen-coreio-deployment"},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": ["apps"],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["deployments"],
                    }
                ]
            },
            "validations": [
                {"expression": "object.metadata.name != 'coreio'", "message": "frozen by a test"}
            ],
        },
    },
    {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "frozen-coreio-deployment"},
        "spec": {
            "policyName": "frozen-coreio-deployment",
            "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NS}}},
        },
    },
]


@pytest.fixture(scope="module")
def on_node() -> Iterator[OnNode]:
    with node_with_the_image("coreio-node-") as state:
        yield state


def test_helm_install_runs_the_operator_and_the_api_server_as_pods(on_node: OnNode) -> None:
    started = time.monotonic()
    on_node.helm_install(VALUES)
    on_node.timed("helm install --wait (operator pod Ready)", started)
    wait_until(
        lambda: on_node.status("Available") == "True",
        timeout=180,
        interval=0.5,
        message="Installation Available",
        ignoring=CONVERGING,
    )
    on_node.timed("API server Available through the aggregator", started)
    pod = on_node.apiserver_pod()
    assert pod["spec"]["nodeName"] == NODE_NAME
    status = pod["status"]["containerStatuses"][0]
    assert status["image"].endswith(f"{REPOSITORY}:{TAG}") and status["restartCount"] == 0
    claim = on_node.get("persistentvolumeclaim", "coreio-data", "-n", NS)
    assert claim is not None and claim["spec"]["volumeName"] == PV_NAME
    # What the kubelet made of the pod's security context, seen from inside the container.
    name = pod["metadata"]["name"]
    uid = on_node.cluster.run("exec", "-n", NS, name, "--", "id", "-u").stdout.strip()
    assert uid == "65532"
    touched = on_node.cluster.run("exec", "-n", NS, name, "--", "touch", "/opt/x", check=False)
    assert touched.returncode != 0 and "Read-only file system" in touched.stderr


def test_kubectl_reaches_both_resources_through_the_aggregator(on_node: OnNode) -> None:
    binding = {
        "apiVersion": "rbac.authorization.core.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "on-a-real-node", "namespace": "default"},
        "roleRef": {"apiGroup": "rbac.authorization.core.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.core.io"}],
    }
    event = {
        "apiVersion": "events.core.io/v1",
        "kind": "Event",
        "metadata": {"name": "on-a-real-node", "namespace": "default"},
        "eventTime": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime()),
        "reportingController": "example.com/node-e2e",
        "reportingInstance": "node-e2e-1",
        "action": "Test",
        "reason": "Testing",
        "type": "Normal",
        "regarding": {"kind": "Node", "name": NODE_NAME},
        "note": "stored on the claim",
    }
    on_node.cluster.apply(binding, event)
    assert _names(on_node) == ({"on-a-real-node"}, {"on-a-real-node"})


def _names(on_node: OnNode) -> tuple[set[str], set[str]]:
    found = []
    for resource in ("rolebindings.rbac.authorization.core.io", "events.events.core.io"):
        listed = on_node.cluster.json("get", resource, "-n", "default")
        found.append({item["metadata"]["name"] for item in listed["items"]})
    return found[0], found[1]


def test_helm_test_passes(on_node: OnNode) -> None:
    started = time.monotonic()
    output = on_node.helm("test", "coreio", "-n", NS)
    on_node.timed("helm test", started)
    assert "Phase:" in output and "Succeeded" in output, output


def _bundle(on_node: OnNode) -> tuple[str, ...]:
    apiservice = on_node.get("apiservice", APISERVICES[0])
    assert apiservice is not None
    pem = base64.b64decode(apiservice["spec"]["caBundle"])
    return tuple(c.subject.rfc4514_string() for c in x509.load_pem_x509_certificates(pem))


def test_certificates_rotate_through_the_kubelets_secret_volume(on_node: OnNode) -> None:
    """The renewed certificate and the new CA reach the running process only through the Secret
    volume the kubelet updates; no aggregated request fails and the container never restarts.
    Throughout, a child fails on every reconcile (a cluster's admission policy refuses every write
    to the API server's Deployment): the rollover must not depend on it (issue 22)."""
    started = time.monotonic()
    on_node.cluster.apply(*FROZEN_DEPLOYMENT)
    wait_until(
        lambda: on_node.status("Ready") == "False",
        timeout=60,
        interval=0.5,
        message="a child failing",
        ignoring=CONVERGING,
    )
    first = on_node.presented_certificate()
    first_ca = first.issuer.rfc4514_string()
    serials, issuers, bundles = {first.serial_number}, [first_ca], [_bundle(on_node)]
    # Each CA's serving certificates: two under one CA is a renewal (a CA roll issues one too). It
    # may come before the roll or, when the module's start took long, only under the new CA.
    by_issuer: dict[str, set[int]] = {first_ca: {first.serial_number}}
    with AggregatedTraffic(on_node.cluster) as traffic:
        deadline = time.monotonic() + 200
        # Until the CA rolled in the pod and the old one left caBundle, and a renewal was seen.
        while time.monotonic() < deadline:
            leaf = on_node.presented_certificate()
            serials.add(leaf.serial_number)
            by_issuer.setdefault(leaf.issuer.rfc4514_string(), set()).add(leaf.serial_number)
            if leaf.issuer.rfc4514_string() != issuers[-1]:
                issuers.append(leaf.issuer.rfc4514_string())
            if (current := _bundle(on_node)) != bundles[-1]:
                bundles.append(current)
            renewed = any(len(issued) >= 2 for issued in by_issuer.values())
            if len(issuers) > 1 and current == (issuers[-1],) and renewed:
                break
            time.sleep(1)
        time.sleep(2)
    on_node.timed("rotation observed (serving renewals and a CA roll)", started)
    assert on_node.status("Ready") == "False"  # the Deployment failed all along
    for policy in FROZEN_DEPLOYMENT:
        on_node.cluster.run("delete", policy["kind"].lower(), policy["metadata"]["name"])
    wait_until(
        lambda: on_node.status("Ready") == "True",
        timeout=60,
        interval=0.5,
        message="the child repaired",
        ignoring=CONVERGING,
    )
    print(
        f"rotation: {len(serials)} serving certificates, CAs {issuers}, {len(bundles)} caBundle states,"
        f" {traffic.ok} aggregated requests, {len(traffic.failures)} failed"
    )
    assert len(issuers) >= 2, f"the CA never rolled in the pod: {issuers}, bundles {bundles}"
    assert any(len(issued) >= 2 for issued in by_issuer.values()), f"no serving renewal: {by_issuer}"
    # The rollover as the aggregator saw it: the new CA announced beside the old, then alone.
    assert any(set(b) == {first_ca, issuers[1]} for b in bundles), bundles
    assert bundles[-1] == (issuers[-1],), bundles
    assert traffic.failures == [], traffic.failures[:5]
    assert traffic.ok > 100
    pod = on_node.apiserver_pod()
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 0  # reloaded, never restarted
    # The file in the container follows the Secret (the kubelet's watch; a renewal may be under way).
    name = pod["metadata"]["name"]

    def mounted_is_current() -> bool:
        secret = on_node.get("secret", "coreio-serving", "-n", NS)
        assert secret is not None
        path = "/var/run/secrets/coreio/serving/tls.crt"
        mounted = on_node.cluster.run("exec", "-n", NS, name, "--", "cat", path).stdout
        return mounted == base64.b64decode(secret["data"]["tls.crt"]).decode()

    wait_until(
        mounted_is_current,
        timeout=60,
        interval=1,
        message="the mounted certificate is the Secret's",
        ignoring=CONVERGING,
    )


def _promoted(on_node: OnNode) -> bool:
    ca = on_node.get("secret", "coreio-ca", "-n", NS)
    return ca is not None and "previous-ca.crt" in ca.get("data", {})


def test_kube_apiserver_restarted_mid_rollover(on_node: OnNode) -> None:
    """kube-apiserver killed right after the next CA is promoted (both CAs in caBundle, the pods
    moving to the new one) and started again 3 s later: the operator, cut off in the middle of the
    rollover, carries it on once the API answers, and the aggregator, which reads the APIServices
    afresh at start, never fails a handshake with the pods (requests fail only while
    kube-apiserver is away or warming up). Killed, not stopped: its graceful stop here takes 30 s,
    which the 40 s serving certificate of this module would not outlive unrenewed."""
    wait_until(
        lambda: _promoted(on_node),
        timeout=150,
        interval=0.5,
        message="the next CA promoted",
        ignoring=CONVERGING,
    )
    first_ca = _bundle(on_node)[-1]  # the previous CA, last in the bundle
    with AggregatedTraffic(on_node.cluster) as traffic:
        time.sleep(1)
        started = time.monotonic()
        on_node.cluster.restart_kube_apiserver(down_seconds=3, kill=True)
        on_node.timed("kube-apiserver restarted mid-rollover: ready again", started)
        back = len(traffic.failures), time.strftime("%X")

        def rolled() -> bool:
            leaf = on_node.presented_certificate()
            issuer = leaf.issuer.rfc4514_string()
            return issuer != first_ca and _bundle(on_node) == (issuer,)

        wait_until(
            rolled,
            timeout=120,
            interval=1,
            message="the rollover finished after the restart",
            ignoring=CONVERGING,
        )
        on_node.timed("kube-apiserver restarted mid-rollover: rollover finished", started)
        settled = len(traffic.failures)
        time.sleep(5)
    print(
        f"\nkube-apiserver restart mid-rollover: {traffic.ok} aggregated requests; failed "
        f"{back[0]} while it was away (until {back[1]}), {settled - back[0]} while it warmed up, "
        f"{len(traffic.failures) - settled} after the rollover"
    )
    assert not [f for f in traffic.failures if "x509" in f or "certificate" in f], traffic.failures
    assert traffic.failures[settled:] == []
    for component in ("operator", "apiserver"):
        pods = on_node.get("pods", "-n", NS, "-l", f"app.kubernetes.io/component={component}") or {
            "items": []
        }
        for pod in pods["items"]:
            assert pod["status"]["containerStatuses"][0]["restartCount"] == 0, pod["metadata"]["name"]


def test_a_killed_pod_is_replaced_and_the_data_survives(on_node: OnNode) -> None:
    cluster = on_node.cluster
    before = on_node.apiserver_pod()
    # The container killed under the kubelet: it restarts it in the same pod.
    container_id = before["status"]["containerStatuses"][0]["containerID"].removeprefix("containerd://")
    started = time.monotonic()
    runc_root = cluster.runtime.directory / "runc" / "k8s.io"
    cluster.in_node(["runc", "--root", str(runc_root), "kill", container_id, "KILL"])
    wait_until(
        lambda: on_node.apiserver_pod()["status"]["containerStatuses"][0]["restartCount"] == 1,
        timeout=120,
        interval=1,
        message="container restarted",
        ignoring=CONVERGING,
    )
    on_node.timed("container killed, restarted and Ready", started)
    _wait_for_data(on_node)
    on_node.timed("container killed: the data listed again through the aggregator", started)
    # The pod deleted: the Deployment makes another, which mounts the same claim.
    started = time.monotonic()
    cluster.run("delete", "pod", "-n", NS, before["metadata"]["name"], "--wait=false")
    wait_until(
        lambda: on_node.apiserver_pod()["metadata"]["name"] != before["metadata"]["name"],
        timeout=180,
        interval=1,
        message="replacement Ready",
        ignoring=CONVERGING,
    )
    on_node.timed("pod deleted, replaced and Ready", started)
    _wait_for_data(on_node)
    on_node.timed("pod deleted: the data listed again through the aggregator", started)


def _wait_for_data(on_node: OnNode) -> None:
    """Both objects listed again, once the aggregator has seen the APIServices come back (it
    marks them unavailable while the one replica is down; kubectl's discovery follows)."""
    expected = ({"on-a-real-node"}, {"on-a-real-node"})
    wait_until(
        lambda: _names(on_node) == expected,
        timeout=120,
        interval=1,
        message="the data listed again",
        ignoring=CONVERGING,
    )


def test_plain_helm_uninstall_removes_everything(on_node: OnNode) -> None:
    """`helm uninstall` alone: the chart's pre-delete hook (a Job the kubelet runs) deletes the
    Installation while the operator still runs, so nothing of coreio remains and nothing stays
    Terminating; the namespace can then be deleted."""
    cluster = on_node.cluster
    started = time.monotonic()
    on_node.helm("uninstall", "coreio", "-n", NS, "--wait")
    on_node.timed("helm uninstall --wait (pre-delete hook included)", started)
    on_node.assert_nothing_of_coreio_left()
    gone = cluster.run("get", "rolebindings.rbac.authorization.core.io", "-A", check=False)
    assert gone.returncode != 0 and "doesn't have a resource type" in gone.stderr
    # The data claim outlives the release (as a StatefulSet's volumes do) until its namespace goes.
    assert on_node.get("persistentvolumeclaim", "coreio-data", "-n", NS) is not None
    started = time.monotonic()
    cluster.run("delete", "namespace", NS, "--timeout=120s")
    on_node.timed("namespace deleted", started)
    assert on_node.get("namespace", NS) is None
