"""The chart on a real node (issue 21, part 3): `helm install` with the image built from the
Dockerfile, and nothing else.

The cluster is `tests.support.node`'s: kube-apiserver, controller-manager, scheduler, kube-proxy
and a kubelet running pods in containerd, in a network namespace of the test's own. The operator
runs as the chart's pod; the API server as the operator's Deployment, its certificate a Secret
volume the kubelet keeps current, its SQLite file on a PersistentVolume; the aggregator reaches it
through its Service's ClusterIP (kube-proxy's rules). Each step's time is printed.

`tests/e2e/test_install.py` keeps the processes-as-pods harness for what needs more than one
node's worth of time or a second control plane: leader election between two operators, drift
repair, the etcd-backed shape with two replicas, refusals of a second Installation.

The tests share one installation and run in file order."""

from __future__ import annotations

import base64
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from cryptography import x509

from apiserver.machinery.types import JSON
from tests.support import image, node_runtime
from tests.support.controlplane import skip_without_control_plane
from tests.support.gobuild import GoUnavailable
from tests.support.helm import Helm
from tests.support.node import NODE_NAME, PV_NAME, NodeCluster, NodeUnavailable, check_node_prerequisites
from tests.support.tools import helm_path
from tests.support.traffic import AggregatedTraffic, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.node]

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "coreio"
NS = "coreio-system"
REPOSITORY = "coreio.invalid/coreio"
TAG = "node"
APISERVICES = ("v1.rbac.authorization.core.io", "v1.events.core.io")
# Short lifetimes, so that the kubelet must carry a renewed certificate and a new CA into the
# running pod within the module (as in test_install.py).
VALUES = {
    "image": {"repository": REPOSITORY, "tag": TAG},
    "installation": {
        "spec": {
            "storage": {"type": "sqlite"},
            "certificates": {
                "caLifetime": "150s",
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
_PROBE = (
    "import base64, socket, ssl, sys\n"
    "c = ssl.create_default_context(); c.check_hostname = False; c.verify_mode = ssl.CERT_NONE\n"
    "with c.wrap_socket(socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)) as s:\n"
    "    print(base64.b64encode(s.getpeercert(True)).decode())\n"
)


@dataclass
class OnNode:
    cluster: NodeCluster
    directory: Path
    steps: dict[str, float] = field(default_factory=dict)

    def helm(self, *args: str, timeout: str = "180s") -> str:
        runner = Helm(helm_path(), self.directory / "helm", kubeconfig=self.cluster.kubeconfig)
        return runner.run(*args, f"--timeout={timeout}").stdout

    def get(self, *args: str) -> JSON | None:
        done = self.cluster.run("get", *args, "-o", "json", check=False)
        return json.loads(done.stdout) if done.returncode == 0 else None

    def condition(self, kind: str) -> str:
        installation = self.get("installation", "coreio", "-n", NS) or {}
        conditions = installation.get("status", {}).get("conditions", [])
        return next((c["status"] for c in conditions if c["type"] == kind), "")

    def apiserver_pod(self) -> JSON:
        """The API server's one Ready pod."""
        pods = self.get("pods", "-n", NS, "-l", "app.kubernetes.io/component=apiserver")
        assert pods is not None
        ready = [p for p in pods["items"] if _ready(p) and not p["metadata"].get("deletionTimestamp")]
        assert len(ready) == 1, [p["metadata"]["name"] for p in pods["items"]]
        pod: JSON = ready[0]
        return pod

    def presented_certificate(self) -> x509.Certificate:
        """The leaf a new handshake with the pod gets, asked from the node (pods route only there)."""
        pod = self.apiserver_pod()
        port = str(pod["spec"]["containers"][0]["ports"][0]["containerPort"])
        der = self.cluster.in_node([sys.executable, "-c", _PROBE, pod["status"]["podIP"], port]).strip()
        return x509.load_der_x509_certificate(base64.b64decode(der))

    def timed(self, step: str, started: float) -> None:
        self.steps[step] = round(time.monotonic() - started, 1)


def _ready(pod: JSON) -> bool:
    conditions = pod.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _unavailable_reason() -> str:
    try:
        check_node_prerequisites()
        image.ensure_docker()
    except (NodeUnavailable, image.DockerUnavailable, GoUnavailable) as exc:
        return str(exc)
    return ""


@pytest.fixture(scope="module")
def on_node() -> Iterator[OnNode]:
    skip_without_control_plane()
    if reason := _unavailable_reason():
        pytest.skip(reason)
    docker = image.ensure_docker()
    started = time.monotonic()
    tag, _ = image.build(docker, f"{REPOSITORY}:{TAG}")
    pause = node_runtime.pause_image(docker)
    directory = Path(tempfile.mkdtemp(prefix="coreio-node-"))
    cluster = NodeCluster(directory / "cluster", images=[(docker, pause), (docker, tag)])
    state = OnNode(cluster, directory, {"image build": round(time.monotonic() - started, 1)})
    try:
        cluster.start()
        state.steps.update(cluster.timings)
        yield state
    finally:
        print(f"\nreal node steps (seconds): {json.dumps(state.steps)}")
        cluster.stop()
        shutil.rmtree(directory, ignore_errors=True)


def test_helm_install_runs_the_operator_and_the_api_server_as_pods(on_node: OnNode) -> None:
    started = time.monotonic()
    values = on_node.directory / "values.yaml"
    values.write_text(yaml.safe_dump(VALUES))
    on_node.helm("install", "coreio", str(CHART), "-n", NS, "--create-namespace", "-f", str(values), "--wait")
    on_node.timed("helm install --wait (operator pod Ready)", started)
    wait_for("Installation Available", lambda: on_node.condition("Available") == "True", timeout=180)
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
    wait_for("a child failing", lambda: on_node.condition("Ready") == "False", timeout=60)
    first = on_node.presented_certificate()
    first_ca = first.issuer.rfc4514_string()
    serials, issuers, bundles = {first.serial_number}, [first_ca], [_bundle(on_node)]
    with AggregatedTraffic(on_node.cluster) as traffic:
        deadline = time.monotonic() + 200
        # Until the CA rolled in the pod and the old one left caBundle, with renewals before.
        while time.monotonic() < deadline:
            leaf = on_node.presented_certificate()
            serials.add(leaf.serial_number)
            if leaf.issuer.rfc4514_string() != issuers[-1]:
                issuers.append(leaf.issuer.rfc4514_string())
            if (current := _bundle(on_node)) != bundles[-1]:
                bundles.append(current)
            if len(issuers) > 1 and current == (issuers[-1],):
                break
            time.sleep(1)
        time.sleep(2)
    on_node.timed("rotation observed (serving renewals and a CA roll)", started)
    assert on_node.condition("Ready") == "False"  # the Deployment failed all along
    for policy in FROZEN_DEPLOYMENT:
        on_node.cluster.run("delete", policy["kind"].lower(), policy["metadata"]["name"])
    wait_for("the child repaired", lambda: on_node.condition("Ready") == "True", timeout=60)
    print(
        f"rotation: {len(serials)} serving certificates, CAs {issuers}, {len(bundles)} caBundle states,"
        f" {traffic.ok} aggregated requests, {len(traffic.failures)} failed"
    )
    assert len(issuers) >= 2, f"the CA never rolled in the pod: {issuers}, bundles {bundles}"
    assert len(serials) - (len(issuers) - 1) >= 2, f"no serving renewal before the CA roll: {len(serials)}"
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

    wait_for("the mounted certificate is the Secret's", mounted_is_current, timeout=60, every=1)


def test_a_killed_pod_is_replaced_and_the_data_survives(on_node: OnNode) -> None:
    cluster = on_node.cluster
    before = on_node.apiserver_pod()
    # The container killed under the kubelet: it restarts it in the same pod.
    container_id = before["status"]["containerStatuses"][0]["containerID"].removeprefix("containerd://")
    started = time.monotonic()
    runc_root = cluster.runtime.directory / "runc" / "k8s.io"
    cluster.in_node(["runc", "--root", str(runc_root), "kill", container_id, "KILL"])
    wait_for(
        "container restarted",
        lambda: on_node.apiserver_pod()["status"]["containerStatuses"][0]["restartCount"] == 1,
        timeout=120,
        every=1,
    )
    on_node.timed("container killed, restarted and Ready", started)
    _wait_for_data(on_node)
    on_node.timed("container killed: the data listed again through the aggregator", started)
    # The pod deleted: the Deployment makes another, which mounts the same claim.
    started = time.monotonic()
    cluster.run("delete", "pod", "-n", NS, before["metadata"]["name"], "--wait=false")
    wait_for(
        "replacement Ready",
        lambda: on_node.apiserver_pod()["metadata"]["name"] != before["metadata"]["name"],
        timeout=180,
        every=1,
    )
    on_node.timed("pod deleted, replaced and Ready", started)
    _wait_for_data(on_node)
    on_node.timed("pod deleted: the data listed again through the aggregator", started)


def _wait_for_data(on_node: OnNode) -> None:
    """Both objects listed again, once the aggregator has seen the APIServices come back (it
    marks them unavailable while the one replica is down; kubectl's discovery follows)."""
    expected = ({"on-a-real-node"}, {"on-a-real-node"})
    wait_for("the data listed again", lambda: _names(on_node) == expected, timeout=120, every=1)


def test_plain_helm_uninstall_removes_everything(on_node: OnNode) -> None:
    """`helm uninstall` alone: the chart's pre-delete hook (a Job the kubelet runs) deletes the
    Installation while the operator still runs, so nothing of coreio remains and nothing stays
    Terminating; the namespace can then be deleted."""
    cluster = on_node.cluster
    started = time.monotonic()
    on_node.helm("uninstall", "coreio", "-n", NS, "--wait")
    on_node.timed("helm uninstall --wait (pre-delete hook included)", started)
    assert on_node.get("installation", "coreio", "-n", NS) is None
    for name in APISERVICES:
        assert on_node.get("apiservice", name) is None
    for kind, name in [
        ("clusterrolebinding", "coreio:auth-delegator"),
        ("clusterrolebinding", "coreio:apiserver"),
        ("clusterrole", "coreio:apiserver"),
        ("clusterrolebinding", "coreio:access-reviewer"),
        ("clusterrole", "coreio:access-reviewer"),
        ("clusterrole", "coreio-coreio-operator"),
    ]:
        assert on_node.get(kind, name) is None, f"{kind}/{name} left"
    assert on_node.get("rolebinding", "coreio:authentication-reader", "-n", "kube-system") is None
    wait_for("no pods left", lambda: (on_node.get("pods", "-n", NS) or {}).get("items") == [], timeout=120)
    for kind in ("deployments", "services", "secrets", "jobs", "roles", "rolebindings"):
        found = on_node.get(kind, "-n", NS) or {"items": []}
        assert [i["metadata"]["name"] for i in found["items"]] == [], f"{kind} left in {NS}"
    gone = cluster.run("get", "rolebindings.rbac.authorization.core.io", "-A", check=False)
    assert gone.returncode != 0 and "doesn't have a resource type" in gone.stderr
    # The data claim outlives the release (as a StatefulSet's volumes do) until its namespace goes.
    assert on_node.get("persistentvolumeclaim", "coreio-data", "-n", NS) is not None
    started = time.monotonic()
    cluster.run("delete", "namespace", NS, "--timeout=120s")
    on_node.timed("namespace deleted", started)
    assert on_node.get("namespace", NS) is None
