"""coreio installed into a control plane with one `helm install`, its pods run as local processes.

A control plane of its own (its service CIDR lies in 127.0.0.0/8, so that a Service's ClusterIP
is a loopback address a local process can serve: see `tests.support.pods`). The chart is installed
with the real Helm; `coreio-operator` then runs as a local process with a token of the chart's
ServiceAccount `coreio-operator` (which proves the chart's RBAC sufficient), and the API server's
pod runs as a local process from the Deployment the operator wrote, with the Secret it wrote.

The real node (`test_real_node.py`) proves the product as a kubelet runs it: the image, the chart's
pods, `helm test`, certificate rotation through the kubelet's Secret volume, restarts on the claim,
uninstall. This harness stays for the operator's behaviours that need the operator's process in
the test's hands or a control plane reachable from the test's loopback: two operators handing over
the Lease, drift repair, Event retention and the operator's metrics, the refusals, the etcd shape
with two replicas on the control plane's own etcd. All of them could run on the real node too;
here they take about 40 s rather than minutes.

The tests share one installation and run in file order: each builds on what the one before left.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from cryptography import x509

from apiserver.machinery.types import JSON
from tests.support.controlplane import ControlPlane, skip_without_control_plane, start_control_plane
from tests.support.helm import Helm
from tests.support.pods import EmulatedPod
from tests.support.server import free_port
from tests.support.tools import helm_path
from tests.support.traffic import wait_for

pytestmark = [pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "coreio"
NS = "coreio-system"
APISERVICES = ("v1.rbac.authorization.core.io", "v1.events.core.io")
IMAGE = "registry.example.com/coreio:e2e"
# Short lifetimes, so that both tiers rotate within the module: the serving certificate renews
# at about 20 s, the CA rolls over at about 70 s (announced, then used 8 s later, then the old one
# dropped 8 s after that).
VALUES = {
    "image": {"repository": "registry.example.com/coreio", "tag": "e2e"},
    "installation": {
        "spec": {
            "storage": {"type": "sqlite"},
            "certificates": {
                "caLifetime": "150s",
                "servingLifetime": "40s",
                "renewAtPercent": 50,
                "caGracePeriod": "8s",
            },
            "eventRetention": {"maxAge": "1h", "interval": "2s"},
        }
    },
}


@dataclass
class Installed:
    plane: ControlPlane
    directory: Path
    operator: subprocess.Popen[bytes] | None = None
    operator_kubeconfig: Path | None = None
    metrics_port: int = 0
    liveness_port: int = 0
    pods: list[EmulatedPod] = field(default_factory=list)

    @property
    def operator_log(self) -> Path:
        return self.directory / "operator.log"

    def installation(self, name: str = "coreio", namespace: str = NS) -> JSON:
        found: JSON = self.plane.json("get", "installation", name, "-n", namespace)
        return found

    def condition(self, kind: str, name: str = "coreio", namespace: str = NS) -> JSON:
        conditions = self.installation(name, namespace).get("status", {}).get("conditions", [])
        found: JSON = next((c for c in conditions if c["type"] == kind), {})
        return found

    def get(self, *args: str) -> JSON | None:
        done = self.plane.run("get", *args, "-o", "json", check=False)
        return json.loads(done.stdout) if done.returncode == 0 else None

    def start_operator(self, *extra: str, log: Path | None = None) -> subprocess.Popen[bytes]:
        assert self.operator_kubeconfig is not None
        env = {**os.environ, "KUBECONFIG": str(self.operator_kubeconfig), "POD_NAME": f"op-{len(extra)}"}
        with (log or self.operator_log).open("ab") as out:
            return subprocess.Popen(
                [sys.executable, "-m", "apiserver_operator", f"--leader-election-namespace={NS}", *extra],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=ROOT,
            )

    def log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return self.operator_log.read_text(errors="replace")[-4000:]
        return ""


def helm(installed: Installed, *args: str) -> str:
    runner = Helm(helm_path(), installed.directory / "helm", kubeconfig=installed.plane.kubeconfig)
    return runner.run(*args).stdout


@pytest.fixture(scope="module")
def installed() -> Iterator[Installed]:
    skip_without_control_plane()
    directory = Path(tempfile.mkdtemp(prefix="coreio-install-"))
    plane = start_control_plane(directory / "cp", extra_flags=["--service-cluster-ip-range=127.99.0.0/24"])
    state = Installed(plane, directory)
    try:
        values = directory / "values.yaml"
        values.write_text(yaml.safe_dump(VALUES))
        helm(state, "install", "coreio", str(CHART), "-n", NS, "--create-namespace", "-f", str(values))
        token = plane.create_token("coreio-operator", NS, duration="2h", create=False)
        state.operator_kubeconfig = plane.user_kubeconfig(directory / "operator.kubeconfig", token=token)
        state.metrics_port, state.liveness_port = free_port(), free_port()
        state.operator = state.start_operator(
            "--reconcile-interval=2",
            f"--metrics-address=127.0.0.1:{state.metrics_port}",
            f"--liveness-endpoint=http://127.0.0.1:{state.liveness_port}/healthz",
        )
        yield state
    finally:
        for pod in state.pods:
            pod.stop()
        if state.operator is not None:
            state.operator.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                state.operator.wait(timeout=20)
        plane.stop()
        if os.environ.get("COREIO_KEEP_CONTROLPLANE"):
            print(f"install test files kept in {directory}")
        else:
            shutil.rmtree(directory, ignore_errors=True)


def test_chart_installs_crd_operator_and_rbac(installed: Installed) -> None:
    crd = installed.get("crd", "installations.operator.core.io")
    assert crd is not None
    established = [c for c in crd["status"]["conditions"] if c["type"] == "Established"]
    assert established and established[0]["status"] == "True"
    deployment = installed.get("deployment", "-n", NS, "-l", "app.kubernetes.io/component=operator")
    assert deployment is not None and len(deployment["items"]) == 1
    pod = deployment["items"][0]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "coreio-operator"
    assert pod["containers"][0]["command"] == ["coreio-operator"]
    assert installed.get("serviceaccount", "coreio-operator", "-n", NS) is not None
    can = installed.plane.run(
        "auth", "can-i", "create", "apiservices.apiregistration.k8s.io",
        f"--as=system:serviceaccount:{NS}:coreio-operator",
        check=False,
    )  # fmt: skip
    assert can.stdout.strip() == "yes", can.stderr
    installation = installed.installation()
    assert installation["spec"]["image"] == IMAGE
    assert installation["spec"]["certificates"]["servingLifetime"] == "40s"
    assert installation["spec"]["replicas"] == 1  # the CRD's default


def test_installation_reconciled_into_children(installed: Installed) -> None:
    wait_for(
        "Ready=True",
        lambda: installed.condition("Ready").get("status") == "True",
        timeout=90,
    )
    uid = installed.installation()["metadata"]["uid"]
    for kind, name in [
        ("deployment", "coreio"),
        ("service", "coreio"),
        ("serviceaccount", "coreio"),
        ("secret", "coreio-ca"),
        ("secret", "coreio-serving"),
        ("persistentvolumeclaim", "coreio-data"),
    ]:
        obj = installed.get(kind, name, "-n", NS)
        assert obj is not None, f"{kind}/{name} missing"
        if kind != "persistentvolumeclaim":
            owners = obj["metadata"].get("ownerReferences", [])
            assert [o["uid"] for o in owners] == [uid], f"{kind}/{name}: {owners}"
    for kind, name in [
        ("clusterrolebinding", "coreio:auth-delegator"),
        ("clusterrolebinding", "coreio:apiserver"),
        ("clusterrole", "coreio:apiserver"),
        ("clusterrolebinding", "coreio:access-reviewer"),
        ("clusterrole", "coreio:access-reviewer"),
    ]:
        assert installed.get(kind, name) is not None, f"{kind}/{name} missing"
    assert installed.get("rolebinding", "coreio:authentication-reader", "-n", "kube-system") is not None
    # Everyone authenticated may create the access reviews (which the operator could grant only
    # because the chart gives it the same right). Asked as a SubjectAccessReview: no coreio pod
    # serves here, and kubectl can-i asks about a type discovery does not list by its whole name.
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
        installed.plane.run("create", "-f", "-", "-o", "json", input=json.dumps(review)).stdout
    )
    assert answer["status"] == {
        "allowed": True,
        "reason": 'RBAC: allowed by ClusterRoleBinding "coreio:access-reviewer" of ClusterRole'
        ' "coreio:access-reviewer" to Group "system:authenticated"',
    }
    serving = installed.get("secret", "coreio-serving", "-n", NS)
    assert serving is not None and serving["type"] == "kubernetes.io/tls"
    for name in APISERVICES:
        apiservice = installed.get("apiservice", name)
        assert apiservice is not None
        spec = apiservice["spec"]
        assert not spec.get("insecureSkipTLSVerify")
        assert spec["groupPriorityMinimum"] == 1000
        assert base64.b64decode(spec["caBundle"]).startswith(b"-----BEGIN CERTIFICATE-----")
    certs = installed.condition("CertificatesValid")
    assert certs["status"] == "True" and "valid until" in certs["message"]
    # A bare `kubectl get rolebindings` keeps meaning the built-in group.
    resolved = installed.plane.run("get", "rolebindings", "-A", "-o", "name").stdout
    assert "rolebinding.rbac.authorization.k8s.io/" in resolved


def test_pod_security_and_probes(installed: Installed) -> None:
    deployment = installed.get("deployment", "coreio", "-n", NS)
    assert deployment is not None
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    container = pod["containers"][0]
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["livenessProbe"]["httpGet"]["path"] == "/livez"
    assert container["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"
    # SQLite: one writer at a time.
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}


def test_coreio_available_through_the_aggregator(installed: Installed) -> None:
    deployment = installed.get("deployment", "coreio", "-n", NS)
    service = installed.get("service", "coreio", "-n", NS)
    assert deployment is not None and service is not None
    pod = EmulatedPod(installed.plane, deployment, service, installed.directory / "pod-0")
    installed.pods.append(pod)
    pod.start()
    wait_for("Available=True", lambda: installed.condition("Available").get("status") == "True", timeout=90)
    binding = {
        "apiVersion": "rbac.authorization.core.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "through-the-cluster", "namespace": "default"},
        "roleRef": {"apiGroup": "rbac.authorization.core.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.core.io"}],
    }
    installed.plane.run("apply", "-f", "-", input=json.dumps(binding))
    listed = installed.plane.json("get", "rolebindings.rbac.authorization.core.io", "-n", "default")
    assert [item["metadata"]["name"] for item in listed["items"]] == ["through-the-cluster"]


def _check_api(installed: Installed, account: str, command: list[str]) -> subprocess.CompletedProcess[str]:
    token = installed.plane.create_token(account, NS, create=False)
    kubeconfig = installed.plane.user_kubeconfig(installed.directory / f"{account}.kubeconfig", token=token)
    assert command[0] == "coreio-operator"
    return subprocess.run(
        [sys.executable, "-m", "apiserver_operator", *command[1:]],
        capture_output=True,
        text=True,
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        cwd=ROOT,
        timeout=60,
        check=False,
    )


def test_helm_test_hook_lists_both_resources(installed: Installed) -> None:
    """What `helm test` runs (no kubelet runs its pod here): the hook pod's command, with a token
    of the hook's own ServiceAccount and its RBAC as the chart renders them."""
    hooks = [o for o in yaml.safe_load_all(helm(installed, "get", "hooks", "coreio", "-n", NS)) if o]
    pod = next(o for o in hooks if o["kind"] == "Pod")
    installed.plane.apply(*[o for o in hooks if o["kind"] != "Pod"])
    done = _check_api(installed, pod["spec"]["serviceAccountName"], pod["spec"]["containers"][0]["command"])
    assert done.returncode == 0, done.stderr
    assert "rolebindings.rbac.authorization.core.io: ok" in done.stdout
    assert "events.events.core.io: ok" in done.stdout
    # Without the hook's RBAC the same check fails, naming the refusal.
    installed.plane.apply(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "nobody", "namespace": NS}}
    )
    refused = _check_api(installed, "nobody", ["coreio-operator", "check-api"])
    assert refused.returncode == 1 and "Forbidden" in refused.stderr, refused.stderr


def test_drift_is_repaired(installed: Installed) -> None:
    plane = installed.plane
    tampered = {"spec": {"insecureSkipTLSVerify": True, "caBundle": None, "groupPriorityMinimum": 9}}
    plane.run("patch", "apiservice", APISERVICES[1], "--type=merge", "-p", json.dumps(tampered))
    plane.run("set", "image", "deployment/coreio", "apiserver=evil:latest", "-n", NS)
    plane.run("delete", "clusterrolebinding", "coreio:auth-delegator")
    # (Not the ServiceAccount: its deletion revokes the running pod's token, which only the
    # kubelet's token refresh would replace.)
    plane.run("delete", "clusterrolebinding", "coreio:apiserver")

    def repaired() -> bool:
        apiservice = installed.get("apiservice", APISERVICES[1])
        deployment = installed.get("deployment", "coreio", "-n", NS)
        assert apiservice is not None and deployment is not None
        spec = apiservice["spec"]
        return (
            "insecureSkipTLSVerify" not in spec
            and bool(spec.get("caBundle"))
            and spec["groupPriorityMinimum"] == 1000
            and deployment["spec"]["template"]["spec"]["containers"][0]["image"] == IMAGE
            and installed.get("clusterrolebinding", "coreio:auth-delegator") is not None
            and installed.get("clusterrolebinding", "coreio:apiserver") is not None
        )

    wait_for("drift repaired", repaired, timeout=30)
    wait_for("Available=True", lambda: installed.condition("Available").get("status") == "True", timeout=60)


def presented_certificate(address: str, port: int) -> x509.Certificate:
    """The leaf a new TLS handshake with the pod gets."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    with (
        socket.create_connection((address, port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="coreio.coreio-system.svc") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)


def _event(name: str, age_seconds: int) -> JSON:
    moment = time.gmtime(time.time() - age_seconds)
    return {
        "apiVersion": "events.core.io/v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": "default"},
        "eventTime": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", moment),
        "reportingController": "example.com/e2e",
        "reportingInstance": "e2e-1",
        "action": "Test",
        "reason": "Testing",
        "type": "Normal",
        "regarding": {"kind": "Pod", "name": "p", "namespace": "default"},
        "note": "retention",
    }


def test_event_retention_through_the_cluster(installed: Installed) -> None:
    events = [_event(f"old-{i}", 2 * 3600) for i in range(10)] + [_event(f"new-{i}", 60) for i in range(10)]
    installed.plane.apply(*events)

    def names() -> set[str]:
        listed = installed.plane.json("get", "events.events.core.io", "-n", "default")
        return {item["metadata"]["name"] for item in listed["items"]}

    wait_for("old Events collected", lambda: not any(n.startswith("old-") for n in names()), timeout=60)
    assert {f"new-{i}" for i in range(10)} <= names()
    retention = installed.installation()["status"]["eventRetention"]
    assert retention["examined"] >= 10 and "lastRunTime" in retention


def test_operator_metrics_and_liveness(installed: Installed) -> None:
    url = f"http://127.0.0.1:{installed.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    assert 'coreio_operator_reconcile_total{result="success"}' in text
    deleted = [
        line
        for line in text.splitlines()
        if line.startswith('coreio_operator_events_deleted_total{rule="age"}')
    ]
    assert deleted and float(deleted[0].split()[-1]) >= 10
    # When each certificate expires, as the Secrets hold it: an alert can watch it fall.
    serving = installed.get("secret", "coreio-serving", "-n", NS)
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
    with urllib.request.urlopen(f"http://127.0.0.1:{installed.liveness_port}/healthz", timeout=5) as response:
        assert response.status == 200
    events = installed.plane.json("get", "events", "-n", NS, "--field-selector", "involvedObject.name=coreio")
    reasons = {e["reason"] for e in events["items"]}
    assert "Certificates" in reasons, reasons


def _installation(name: str, namespace: str, spec: JSON) -> JSON:
    return {
        "apiVersion": "operator.core.io/v1alpha1",
        "kind": "Installation",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def test_second_installation_is_refused_and_touches_nothing(installed: Installed) -> None:
    plane = installed.plane
    plane.run("create", "namespace", "second")
    plane.apply(_installation("coreio", "second", {"storage": {"type": "sqlite"}}))
    ready = wait_for("refusal", lambda: installed.condition("Ready", "coreio", "second") or None, timeout=30)
    assert ready["status"] == "False" and ready["reason"] == "ClusterAlreadyInstalled", ready
    assert "belongs to Installation coreio-system/coreio" in ready["message"]
    assert installed.get("deployment", "coreio", "-n", "second") is None
    assert installed.get("secret", "coreio-ca", "-n", "second") is None
    for name in APISERVICES:
        apiservice = installed.get("apiservice", name)
        assert apiservice is not None and apiservice["spec"]["service"]["namespace"] == NS
    plane.run("delete", "installation", "coreio", "-n", "second", "--timeout=30s")
    assert installed.get("apiservice", APISERVICES[0]) is not None  # still the first one's


_SPEC_RULES = "/spec/versions/0/schema/openAPIV3Schema/properties/spec/x-kubernetes-validations"


@contextlib.contextmanager
def older_crd(installed: Installed) -> Iterator[None]:
    """The CRD as an older chart installed it (Helm never upgrades CRDs), without the rule that
    refuses SQLite with more than one replica at admission: the operator must refuse it itself."""
    plane = installed.plane
    rules = plane.json("get", "crd", "installations.operator.core.io")["spec"]["versions"][0]["schema"][
        "openAPIV3Schema"
    ]["properties"]["spec"]["x-kubernetes-validations"]
    removed = [{"op": "remove", "path": _SPEC_RULES}]
    plane.run("patch", "crd", "installations.operator.core.io", "--type=json", "-p", json.dumps(removed))
    try:
        yield
    finally:
        restored = [{"op": "add", "path": _SPEC_RULES, "value": rules}]
        plane.run("patch", "crd", "installations.operator.core.io", "--type=json", "-p", json.dumps(restored))


def test_sqlite_with_two_replicas_is_refused(installed: Installed) -> None:
    plane = installed.plane
    two = _installation("two", "second", {"replicas": 2, "storage": {"type": "sqlite"}})
    refused = plane.run("create", "-f", "-", input=json.dumps(two), check=False)
    assert refused.returncode != 0 and "embedded SQLite allows one replica only" in refused.stderr
    with older_crd(installed):
        plane.apply(two)
        ready = wait_for("refusal", lambda: installed.condition("Ready", "two", "second") or None, timeout=30)
        assert ready["status"] == "False" and ready["reason"] == "SQLiteSingleReplica", ready
        assert "one replica only" in ready["message"]
        assert installed.get("deployment", "two", "-n", "second") is None
        plane.run("delete", "installation", "two", "-n", "second", "--timeout=30s")


def test_leader_election_hands_over(installed: Installed) -> None:
    second_log = installed.directory / "operator-2.log"
    second = installed.start_operator("--reconcile-interval=2", "--identity=second", log=second_log)
    try:
        wait_for("second operator started", lambda: "waiting to lead" in second_log.read_text(), timeout=30)
        time.sleep(3)  # a few of its attempts at the Lease
        assert "leading as second" not in second_log.read_text()
        lease = installed.get("lease", "coreio-operator", "-n", NS)
        assert lease is not None and lease["spec"]["holderIdentity"] != "second"
        assert installed.operator is not None
        installed.operator.terminate()
        installed.operator.wait(timeout=30)
        wait_for("handover", lambda: "leading as second" in second_log.read_text(), timeout=30)
        installed.operator = second
        lease = installed.get("lease", "coreio-operator", "-n", NS)
        assert lease is not None and lease["spec"]["holderIdentity"] == "second"
    except BaseException:
        second.terminate()
        raise


def _aggregated_ok(installed: Installed) -> bool:
    url = f"{installed.plane.url}/apis/events.core.io/v1/namespaces/default/events?limit=1"
    try:
        with urllib.request.urlopen(url, context=installed.plane.ssl_context(), timeout=5) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def test_an_operator_down_past_the_serving_certificates_end_recovers_at_start(installed: Installed) -> None:
    """Down longer than the serving certificate lives (40 s here): the pod presents an expired
    certificate to every new connection; the operator renews at once when it starts again, and the
    pod reloads it. (Connections the aggregator already holds stay up: TLS checks validity at the
    handshake only.)"""
    assert installed.operator is not None
    installed.operator.terminate()
    installed.operator.wait(timeout=30)
    serving = installed.get("secret", "coreio-serving", "-n", NS)
    assert serving is not None
    last = x509.load_pem_x509_certificate(base64.b64decode(serving["data"]["tls.crt"]))
    time.sleep(max(0.0, last.not_valid_after_utc.timestamp() - time.time()) + 3)
    pod = installed.pods[0]
    stale = presented_certificate(pod.address, pod.port)
    assert stale.not_valid_after_utc.timestamp() < time.time(), "the pod's certificate has not expired"
    started = time.monotonic()
    installed.operator = installed.start_operator("--reconcile-interval=2", "--identity=after-expiry")

    def valid_again() -> bool:
        leaf = presented_certificate(pod.address, pod.port)
        return leaf.not_valid_after_utc.timestamp() > time.time() and _aggregated_ok(installed)

    wait_for("a valid certificate served again", valid_again, timeout=60, every=0.5)
    recovered = time.monotonic() - started
    print(f"\nrecovery after the serving certificate expired: {recovered:.1f}s from the operator's start")
    assert recovered < 30


def test_deleting_the_installation_removes_its_children(installed: Installed) -> None:
    # Refused now (SQLite with three replicas, under an older CRD), after it served: its children
    # go all the same.
    with older_crd(installed):
        installed.plane.run(
            "patch", "installation", "coreio", "-n", NS, "--type=merge", "-p", '{"spec":{"replicas":3}}'
        )
        wait_for(
            "refusal", lambda: installed.condition("Ready").get("reason") == "SQLiteSingleReplica", timeout=30
        )
        installed.plane.run("delete", "installation", "coreio", "-n", NS, "--timeout=60s")
    for kind, name, ns in [
        ("apiservice", APISERVICES[0], ""),
        ("apiservice", APISERVICES[1], ""),
        ("clusterrolebinding", "coreio:auth-delegator", ""),
        ("clusterrole", "coreio:apiserver", ""),
        ("clusterrolebinding", "coreio:access-reviewer", ""),
        ("clusterrole", "coreio:access-reviewer", ""),
        ("rolebinding", "coreio:authentication-reader", "kube-system"),
        ("deployment", "coreio", NS),
        ("service", "coreio", NS),
        ("secret", "coreio-ca", NS),
        ("secret", "coreio-serving", NS),
    ]:
        args = (kind, name, "-n", ns) if ns else (kind, name)
        assert installed.get(*args) is None, f"{kind}/{name} still there"
    # The data outlives the Installation, as a StatefulSet's volumes do.
    assert installed.get("persistentvolumeclaim", "coreio-data", "-n", NS) is not None


def test_etcd_storage_with_replicas(installed: Installed) -> None:
    """The production shape: etcd storage (the control plane's own etcd, under a prefix of its own),
    two replicas with a PodDisruptionBudget and topology spread, as the real kube-apiserver takes
    them."""
    for pod in installed.pods:
        pod.stop()
    plane = installed.plane
    storage = {"type": "etcd", "etcd": {"endpoints": [plane.etcd.client_url], "prefix": "/coreio-e2e"}}
    plane.apply(_installation("coreio", NS, {"image": IMAGE, "replicas": 2, "storage": storage}))
    wait_for("Ready=True", lambda: installed.condition("Ready").get("status") == "True", timeout=60)
    deployment = installed.get("deployment", "coreio", "-n", NS)
    assert deployment is not None
    assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}
    assert len(deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]) == 2
    budget = installed.get("poddisruptionbudget", "coreio", "-n", NS)
    assert budget is not None and budget["spec"]["maxUnavailable"] == 1
    service = installed.get("service", "coreio", "-n", NS)
    assert service is not None
    pod = EmulatedPod(plane, deployment, service, installed.directory / "pod-etcd")
    installed.pods.append(pod)
    pod.start()
    wait_for("Available=True", lambda: installed.condition("Available").get("status") == "True", timeout=90)
    plane.run("create", "namespace", "on-etcd")
    plane.apply(_event("on-etcd", 5) | {"metadata": {"name": "on-etcd", "namespace": "on-etcd"}})
    listed = plane.json("get", "events.events.core.io", "-n", "on-etcd")
    assert [item["metadata"]["name"] for item in listed["items"]] == ["on-etcd"]


def test_uninstall_hook_cleans_up_without_the_operator(installed: Installed) -> None:
    """The chart's pre-delete hook, its command run here as its Job would run it (no kubelet runs
    Jobs in this harness; `test_real_node.py` runs the real one): with the operator stopped it
    waits, then removes the children itself and drops the finalizer, so `helm uninstall` finishes."""
    assert installed.operator is not None
    installed.operator.terminate()
    installed.operator.wait(timeout=30)
    installed.operator = None
    hooks = [o for o in yaml.safe_load_all(helm(installed, "get", "hooks", "coreio", "-n", NS)) if o]
    job = next(o for o in hooks if o["kind"] == "Job")
    installed.plane.apply(*[o for o in hooks if o["kind"] in {"Role", "RoleBinding"}])
    container = job["spec"]["template"]["spec"]["containers"][0]
    args = [a for a in container["args"] if not a.startswith("--wait=")] + ["--wait=3"]
    account = job["spec"]["template"]["spec"]["serviceAccountName"]
    done = _check_api(installed, account, [*container["command"], *args])
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"Installation {NS}/coreio: the operator did not finish within 3s"
    assert "APIService v1.events.core.io" in lines[1] and "Deployment coreio" in lines[1]
    assert lines[-1] == f"Installation {NS}/coreio: deleted"
    assert installed.get("installation", "coreio", "-n", NS) is None
    for name in APISERVICES:
        assert installed.get("apiservice", name) is None
    assert installed.get("clusterrolebinding", "coreio:auth-delegator") is None
    assert installed.get("deployment", "coreio", "-n", NS) is None
    # Run again (a retried Job): nothing left to do, and it says so.
    again = _check_api(installed, account, [*container["command"], *args])
    assert (
        again.returncode == 0
        and again.stdout.strip() == f"Installation {NS}/coreio: not found, nothing to remove"
    )


def test_helm_uninstall_after_the_hook(installed: Installed) -> None:
    # --no-hooks: the hook's work is done above, and no kubelet would run its Job here.
    helm(installed, "uninstall", "coreio", "-n", NS, "--no-hooks", "--wait", "--timeout=60s")
    operators = installed.get("deployment", "-n", NS, "-l", "app.kubernetes.io/component=operator")
    assert operators is not None and operators["items"] == []
    assert installed.get("apiservice", APISERVICES[0]) is None
    # Helm keeps CRDs it installed from crds/.
    assert installed.get("crd", "installations.operator.core.io") is not None
