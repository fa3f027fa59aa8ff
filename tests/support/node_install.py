"""The chart installed on the real node (`tests.support.node`), as the node tests share it: the
image built from the Dockerfile and handed to the node, the cluster started and stopped, and what
the tests read of the installation (its conditions, the API server's pods, the certificate they
present). Each step's time is kept and printed at the end."""

from __future__ import annotations

import base64
import contextlib
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
from tests.support.node import NodeCluster, NodeUnavailable, check_node_prerequisites
from tests.support.tools import helm_path
from tests.support.waiting import CONVERGING, wait_until

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "coreio"
NS = "coreio-system"
REPOSITORY = "coreio.invalid/coreio"
TAG = "node"
# The last only where installation.spec.eventExport.enabled (as test_operator_on_node's values).
APISERVICES = ("v1.rbac.authorization.core.io", "v1.events.core.io", "v1alpha1.events.core.io")
OPERATOR = "coreio-coreio-operator"  # the chart's operator Deployment for the release `coreio`
# What the operator writes outside the Installation's namespace (besides the APIServices).
CLUSTER_CHILDREN = [
    ("clusterrolebinding", "coreio:auth-delegator", ""),
    ("clusterrolebinding", "coreio:apiserver", ""),
    ("clusterrole", "coreio:apiserver", ""),
    ("clusterrolebinding", "coreio:access-reviewer", ""),
    ("clusterrole", "coreio:access-reviewer", ""),
    ("rolebinding", "coreio:authentication-reader", "kube-system"),
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

    def helm_install(self, values: JSON) -> None:
        """`helm install --wait` of the chart as the release `coreio` in `NS`."""
        path = self.directory / "values.yaml"
        path.write_text(yaml.safe_dump(values))
        self.helm("install", "coreio", str(CHART), "-n", NS, "--create-namespace", "-f", str(path), "--wait")

    def assert_nothing_of_coreio_left(self) -> None:
        """After `helm uninstall`: no Installation, APIService, cluster-wide child, pod, or object
        of the release in `NS` (the data claim aside, which outlives the release)."""
        assert self.get("installation", "coreio", "-n", NS) is None
        for name in APISERVICES:
            assert self.get("apiservice", name) is None, name
        for kind, name, namespace in [*CLUSTER_CHILDREN, ("clusterrole", OPERATOR, "")]:
            assert self.get(kind, name, *(["-n", namespace] if namespace else [])) is None, (
                f"{kind}/{name} left"
            )
        wait_until(
            lambda: (self.get("pods", "-n", NS) or {}).get("items") == [],
            timeout=120,
            interval=0.5,
            message="no pods left",
            ignoring=CONVERGING,
        )
        for kind in ("deployments", "services", "secrets", "jobs", "roles", "rolebindings"):
            found = self.get(kind, "-n", NS) or {"items": []}
            assert [i["metadata"]["name"] for i in found["items"]] == [], f"{kind} left in {NS}"

    def get(self, *args: str) -> JSON | None:
        done = self.cluster.run("get", *args, "-o", "json", check=False)
        return json.loads(done.stdout) if done.returncode == 0 else None

    def get_named(self, kind: str, name: str, namespace: str = "") -> JSON | None:
        """One object, namespaced when `namespace` is given; None when it does not exist."""
        return self.get(kind, name, *(["-n", namespace] if namespace else []))

    def installation(self, name: str = "coreio", namespace: str = NS) -> JSON:
        return self.get("installation", name, "-n", namespace) or {}

    def condition(self, kind: str, name: str = "coreio", namespace: str = NS) -> JSON:
        conditions = self.installation(name, namespace).get("status", {}).get("conditions", [])
        found: JSON = next((c for c in conditions if c["type"] == kind), {})
        return found

    def status(self, kind: str) -> str:
        return str(self.condition(kind).get("status", ""))

    def wait_condition(self, kind: str, timeout: float, message: str = "") -> None:
        """Until the Installation's `kind` condition is True (kubectl's failures while the
        cluster converges taken as "not yet")."""
        wait_until(
            lambda: self.status(kind) == "True",
            timeout=timeout,
            interval=0.5,
            message=message or f"{kind}=True",
            ignoring=CONVERGING,
        )

    def ready_pods(self, component: str) -> list[JSON]:
        pods = self.get("pods", "-n", NS, "-l", f"app.kubernetes.io/component={component}")
        assert pods is not None
        return [p for p in pods["items"] if ready(p) and not p["metadata"].get("deletionTimestamp")]

    def apiserver_pod(self) -> JSON:
        """The API server's one Ready pod."""
        found = self.ready_pods("apiserver")
        assert len(found) == 1, [p["metadata"]["name"] for p in found]
        return found[0]

    def presented_certificate(self) -> x509.Certificate:
        """The leaf a new handshake with the pod gets, asked from the node (pods route only there)."""
        pod = self.apiserver_pod()
        port = str(pod["spec"]["containers"][0]["ports"][0]["containerPort"])
        der = self.cluster.in_node([sys.executable, "-c", _PROBE, pod["status"]["podIP"], port]).strip()
        return x509.load_der_x509_certificate(base64.b64decode(der))

    def aggregated_ok(self) -> bool:
        """Whether a request through the aggregator to coreio succeeds."""
        path = "/apis/events.core.io/v1/namespaces/default/events?limit=1"
        return self.cluster.run("get", "--raw", path, check=False).returncode == 0

    def timed(self, step: str, started: float) -> None:
        self.steps[step] = round(time.monotonic() - started, 1)


def ready(pod: JSON) -> bool:
    conditions = pod.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def unavailable_reason() -> str:
    try:
        check_node_prerequisites()
        image.ensure_docker()
    except (NodeUnavailable, image.DockerUnavailable, GoUnavailable) as exc:
        return str(exc)
    return ""


@contextlib.contextmanager
def node_with_the_image(prefix: str) -> Iterator[OnNode]:
    """The node running, with the Dockerfile's image as `REPOSITORY:TAG`; skips with one line
    where a node cannot run here."""
    skip_without_control_plane()
    if reason := unavailable_reason():
        pytest.skip(reason)
    docker = image.ensure_docker()
    started = time.monotonic()
    tag, _ = image.build(docker, f"{REPOSITORY}:{TAG}")
    pause = node_runtime.pause_image(docker)
    directory = Path(tempfile.mkdtemp(prefix=prefix))
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
