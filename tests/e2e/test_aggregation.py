"""coreio behind a real kube-apiserver: kubectl and the Python client reach our groups through the
cluster (discovery, OpenAPI and requests all via the aggregation layer), the user coreio sees is
the cluster's, and the cluster keeps working while coreio is down.

The control plane and coreio are started once a session (`control_plane`, `aggregated_coreio`);
tests share them and keep to namespaces of their own.
"""

from __future__ import annotations

import http.client
import json
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from apiserver import pki
from tests.support.aggregation import APISERVICES, AggregatedCoreio
from tests.support.controlplane import ControlPlane
from tests.support.controlplane_build import kubernetes_version
from tests.support.helm import Helm
from tests.support.kubectl import EV, RB, event_yaml, rolebinding_yaml
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

AGGREGATED_DISCOVERY = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def _namespace(plane: ControlPlane, name: str) -> str:
    plane.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


def _cluster_get(plane: ControlPlane, path: str, accept: str = "application/json") -> tuple[int, Any]:
    connection = http.client.HTTPSConnection("127.0.0.1", plane.port, context=plane.ssl_context(), timeout=30)
    try:
        connection.request("GET", path, headers={"Accept": accept})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


# --- registration and discovery -----------------------------------------------------------------


def test_apiservices_available(aggregated_coreio: AggregatedCoreio, control_plane: ControlPlane) -> None:
    print(
        f"APIServices Available {aggregated_coreio.available_after:.2f}s after registration; "
        f"OpenAPI aggregated {aggregated_coreio.openapi_after:.2f}s after that"
    )
    for name in APISERVICES:
        obj = control_plane.json("get", "apiservice", name)
        conditions = {c["type"]: c for c in obj["status"]["conditions"]}
        assert conditions["Available"]["status"] == "True", conditions
        assert obj["spec"]["service"] == {
            "namespace": "coreio-system",
            "name": "coreio",
            "port": aggregated_coreio.server.port,
        }


def test_cluster_reports_its_release(control_plane: ControlPlane) -> None:
    """The build stamps the release into /version (Helm's kubeVersion checks read it)."""
    status, version = _cluster_get(control_plane, "/version")
    assert status == 200
    assert (version["major"], version["minor"]) == ("1", "33")
    assert version["gitVersion"] == kubernetes_version()


def test_api_resources_through_the_cluster(
    aggregated_coreio: AggregatedCoreio, control_plane: ControlPlane
) -> None:
    events = control_plane.run("api-resources", "--api-group=events.core.io", "-o", "wide").stdout
    lines = [line.split() for line in events.splitlines()[1:]]
    assert [line[:5] for line in lines] == [["events", "ev", "events.core.io/v1", "true", "Event"]]
    assert "deletecollection" in events and "watch" in events
    rbac = control_plane.run("api-resources", "--api-group=rbac.authorization.core.io").stdout
    version = "rbac.authorization.core.io/v1"
    assert [line.split() for line in rbac.splitlines()[1:]] == [
        ["accessexplanations", version, "true", "AccessExplanation"],
        ["resourceaccessreviews", version, "true", "ResourceAccessReview"],
        ["rolebindingreviews", version, "true", "RoleBindingReview"],
        ["rolebindings", version, "true", "RoleBinding"],
    ]


def test_aggregated_discovery_merges_our_groups(
    aggregated_coreio: AggregatedCoreio, control_plane: ControlPlane
) -> None:
    status, body = _cluster_get(control_plane, "/apis", AGGREGATED_DISCOVERY)
    assert status == 200
    assert body["kind"] == "APIGroupDiscoveryList"
    groups = {item["metadata"]["name"]: item for item in body["items"]}
    events = groups["events.core.io"]["versions"][0]
    assert events["version"] == "v1"
    assert events["freshness"] == "Current"
    (resource,) = events["resources"]
    assert resource["resource"] == "events" and resource["shortNames"] == ["ev"]
    assert groups["rbac.authorization.core.io"]["versions"][0]["resources"][0]["resource"] == "rolebindings"


# --- kubectl through the cluster ----------------------------------------------------------------


def test_kubectl_rolebinding_lifecycle(
    aggregated_coreio: AggregatedCoreio, control_plane: ControlPlane
) -> None:
    kc = control_plane
    ns = _namespace(kc, "e2e-rb")
    created = kc.run("create", "-f", "-", input=rolebinding_yaml("readers", ns))
    assert "rolebinding.rbac.authorization.core.io/readers created" in created.stdout
    obj = kc.json("get", RB, "readers", "-n", ns)
    assert obj["roleRef"]["apiGroup"] == "rbac.authorization.core.io"
    assert obj["subjects"] == [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.core.io"}]

    kc.run("patch", RB, "readers", "-n", ns, "--type=merge", "-p", '{"metadata":{"labels":{"tier":"gold"}}}')
    assert kc.json("get", RB, "readers", "-n", ns)["metadata"]["labels"]["tier"] == "gold"
    kc.run(
        "patch",
        RB,
        "readers",
        "-n",
        ns,
        "--type=json",
        "-p",
        '[{"op":"add","path":"/subjects/-","value":{"kind":"Group","name":"devs"}}]',
    )
    subjects = kc.json("get", RB, "readers", "-n", ns)["subjects"]
    assert subjects[1] == {"kind": "Group", "name": "devs", "apiGroup": "rbac.authorization.core.io"}

    # Client-side apply: create, then a three-way patch of the change.
    manifest = yaml.safe_load(rolebinding_yaml("applied", ns))
    kc.run("apply", "-f", "-", input=json.dumps(manifest))
    manifest["metadata"]["labels"]["app"] = "changed"
    assert "configured" in kc.run("apply", "-f", "-", input=json.dumps(manifest)).stdout
    assert kc.json("get", RB, "applied", "-n", ns)["metadata"]["labels"]["app"] == "changed"

    # Server-side apply through the aggregator (Content-Type application/apply-patch+yaml).
    ssa = yaml.safe_load(rolebinding_yaml("server-applied", ns))
    assert "serverside-applied" in kc.run("apply", "--server-side", "-f", "-", input=json.dumps(ssa)).stdout
    ssa["metadata"]["labels"]["app"] = "server-side"
    kc.run("apply", "--server-side", "-f", "-", input=json.dumps(ssa))
    got = kc.json("get", RB, "server-applied", "-n", ns, "--show-managed-fields")
    assert got["metadata"]["labels"]["app"] == "server-side"
    assert [(m["manager"], m["operation"]) for m in got["metadata"]["managedFields"]] == [
        ("kubectl", "Apply")
    ]

    table = kc.run("get", RB, "-n", ns).stdout
    assert "readers" in table and "applied" in table and "ClusterRole/view" in table

    kc.run("delete", RB, "readers", "applied", "server-applied", "-n", ns)
    gone = kc.run("get", RB, "readers", "-n", ns, check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr


def _csa_then_ssa(kc: ControlPlane, namespace: str, group: str, subject: dict[str, str]) -> tuple[int, str]:
    """`kubectl apply`, then `kubectl apply --server-side` with a changed label, of a RoleBinding of
    `group`; the second apply's exit code and, on success, the labels now stored."""
    manifest: dict[str, Any] = {
        "apiVersion": f"{group}/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "migrated", "namespace": namespace, "labels": {"app": "client-side"}},
        "roleRef": {"apiGroup": group, "kind": "ClusterRole", "name": "view"},
        "subjects": [subject],
    }
    kc.run("apply", "-f", "-", input=json.dumps(manifest))
    manifest["metadata"]["labels"]["app"] = "server-side"
    upgraded = kc.run("apply", "--server-side", "-f", "-", input=json.dumps(manifest), check=False)
    if upgraded.returncode != 0:
        return upgraded.returncode, upgraded.stderr
    got = kc.json("get", f"rolebindings.{group}", "migrated", "-n", namespace)
    return 0, got["metadata"]["labels"]["app"]


@pytest.mark.parametrize(
    "subject",
    [
        {"kind": "User", "name": "alice", "apiGroup": "GROUP"},
        # The server defaults the omitted apiGroup; the last-applied annotation lacks it.
        {"kind": "User", "name": "alice"},
    ],
    ids=["explicit-apiGroup", "defaulted-apiGroup"],
)
def test_client_side_to_server_side_apply_upgrade_matches_kube_apiserver(
    aggregated_coreio: AggregatedCoreio, control_plane: ControlPlane, subject: dict[str, str]
) -> None:
    """kube-apiserver's own rbac.authorization.k8s.io RoleBinding and ours, through the same
    kubectl sequence, end the same way (both upgrade, or both report the same conflict)."""
    kc = control_plane
    outcomes = []
    for group in ("rbac.authorization.k8s.io", "rbac.authorization.core.io"):
        ns = _namespace(kc, f"e2e-upgrade-{group.split('.')[2]}-{len(subject)}")
        fixed = {k: (group if v == "GROUP" else v) for k, v in subject.items()}
        outcomes.append(_csa_then_ssa(kc, ns, group, fixed))
    (upstream_code, upstream_out), (ours_code, ours_out) = outcomes
    assert ours_code == upstream_code, (outcomes,)
    if upstream_code == 0:
        assert upstream_out == ours_out == "server-side"
    else:
        assert "conflict" in upstream_out.lower() and "conflict" in ours_out.lower()
        assert ".subjects" in upstream_out and ".subjects" in ours_out


def test_kubectl_event_lifecycle(aggregated_coreio: AggregatedCoreio, control_plane: ControlPlane) -> None:
    kc = control_plane
    ns = _namespace(kc, "e2e-ev")
    kc.run("create", "-f", "-", input=event_yaml("started", ns))
    obj = kc.json("get", "ev.events.core.io", "started", "-n", ns)
    assert obj["eventTime"] == "2026-11-22T02:16:41.123456Z"
    # Upstream's Event is immutable but for its metadata and series.
    kc.run(
        "patch",
        EV,
        "started",
        "-n",
        ns,
        "--type=merge",
        "-p",
        '{"series":{"count":2,"lastObservedTime":"2026-11-22T02:20:00.000000Z"}}',
    )
    assert kc.json("get", EV, "started", "-n", ns)["series"]["count"] == 2
    refused = kc.run(
        "patch", EV, "started", "-n", ns, "--type=merge", "-p", '{"note":"changed"}', check=False
    )
    assert refused.returncode != 0 and "field is immutable" in refused.stderr
    kc.run("label", EV, "started", "-n", ns, "severity=low")
    listed = kc.json("get", EV, "-n", ns, "-l", "severity=low")
    assert [item["metadata"]["name"] for item in listed["items"]] == ["started"]
    kc.run("delete", EV, "--all", "-n", ns)
    assert kc.json("get", EV, "-n", ns)["items"] == []


def test_kubectl_watch(aggregated_coreio: AggregatedCoreio, control_plane: ControlPlane) -> None:
    kc = control_plane
    ns = _namespace(kc, "e2e-watch")
    kc.run("create", "-f", "-", input=event_yaml("before", ns))
    command = kc.kubectl.command("get", EV, "-n", ns, "--watch", "--output-watch-events", "-o", "json")
    events: list[tuple[str, str]] = []
    watcher = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**kc.kubectl_env, "PATH": "/usr/bin:/bin"},
    )

    def read() -> None:
        assert watcher.stdout is not None
        for line in watcher.stdout:  # one compact JSON event a line
            if line.strip():
                event = json.loads(line)
                events.append((event["type"], event["object"]["metadata"]["name"]))

    def wait_for(count: int) -> None:
        wait_until(lambda: len(events) >= count, timeout=30, message=lambda: f"{count} events: {events}")

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        wait_for(1)  # the listed object: the watch is open from here on
        kc.run("create", "-f", "-", input=event_yaml("watched", ns))
        kc.run("delete", EV, "watched", "-n", ns)
        wait_for(3)
    finally:
        watcher.terminate()
        watcher.wait(timeout=10)
    assert events[:3] == [("ADDED", "before"), ("ADDED", "watched"), ("DELETED", "watched")], events


def test_kubectl_explain_uses_our_openapi(
    aggregated_coreio: AggregatedCoreio, control_plane: ControlPlane
) -> None:
    role_ref = control_plane.run("explain", "rolebindings.rbac.authorization.core.io.roleRef").stdout
    assert "GROUP:      rbac.authorization.core.io" in role_ref
    assert "apiGroup\t<string> -required-" in role_ref
    # `events.events.core.io.regarding` would be read as the core Event's field path
    # `events.core.io.regarding` (kubectl matches the resource prefix `events` of the core group
    # first), so the group goes in --api-version.
    regarding = control_plane.run("explain", "events.regarding", "--api-version=events.core.io/v1").stdout
    assert "GROUP:      events.core.io" in regarding and "<ObjectReference>" in regarding


# --- who coreio sees ------------------------------------------------------------------------------

_DEV_ROLE: list[dict[str, Any]] = [
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "coreio-editor"},
        "rules": [
            {
                "apiGroups": ["rbac.authorization.core.io", "events.core.io"],
                "resources": ["rolebindings", "events"],
                "verbs": ["*"],
            }
        ],
    },
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "coreio-editor-devs"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "coreio-editor"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "devs"}],
    },
]


def _audit(coreio: AggregatedCoreio, verb: str, path_part: str) -> list[dict[str, Any]]:
    return _audit_entries(coreio, lambda e: e["verb"] == verb and path_part in e["requestURI"])


def test_front_proxy_forwards_the_cluster_user(
    aggregated_coreio: AggregatedCoreio, control_plane: ControlPlane
) -> None:
    kc = control_plane
    ns = _namespace(kc, "e2e-front-proxy")
    kc.apply(*_DEV_ROLE)
    kc.run(
        "create",
        "-f",
        "-",
        "--as=alice",
        "--as-group=devs",
        "--as-uid=alice-uid-1",
        input=rolebinding_yaml("by-alice", ns),
    )
    (entry,) = _audit(aggregated_coreio, "create", f"/namespaces/{ns}/rolebindings")
    assert entry["user"]["username"] == "alice"
    assert entry["user"]["uid"] == "alice-uid-1"
    assert entry["user"]["groups"] == ["devs", "system:authenticated"]
    # kube-apiserver applied --as and stripped the Impersonate-* headers: coreio sees alice as the
    # front proxy's user, and impersonates nothing again.
    assert "impersonatedUser" not in entry
    # The created object names it, at every level, as kube-apiserver's LogRequestObject does.
    assert entry["objectRef"] == {
        "resource": "rolebindings",
        "namespace": ns,
        "name": "by-alice",
        "apiGroup": "rbac.authorization.core.io",
        "apiVersion": "v1",
    }

    # The cluster authorizes before it proxies: bob, without a grant, never reaches coreio.
    denied = kc.run("get", RB, "-n", ns, "--as=bob", check=False)
    assert denied.returncode != 0
    assert 'User "bob" cannot list resource "rolebindings"' in denied.stderr
    assert not [e for e in aggregated_coreio.audit_events() if e["user"].get("username") == "bob"]


def test_aggregator_probes_and_fetches_as_itself(aggregated_coreio: AggregatedCoreio) -> None:
    """What the aggregation layer asks of coreio on its own account: availability probes of each
    group version, the aggregated discovery document and both OpenAPI versions."""
    seen = {
        (e["requestURI"].split("?")[0], e["user"].get("username"), e["responseStatus"]["code"])
        for e in aggregated_coreio.audit_events()
    }
    assert ("/apis/events.core.io/v1", "system:kube-aggregator", 200) in seen
    assert ("/apis/rbac.authorization.core.io/v1", "system:kube-aggregator", 200) in seen
    assert any(path == "/apis" and code in (200, 304) for path, _, code in seen)
    assert any(path == "/openapi/v2" and code in (200, 304) for path, _, code in seen)
    assert any(path == "/openapi/v3" and code == 200 for path, _, code in seen)


def _direct(
    coreio: AggregatedCoreio, cert: tuple[Path, Path] | None, headers: dict[str, str]
) -> tuple[int, str]:
    """GET coreio itself (not through the cluster); returns (status, audit username)."""
    context = ssl.create_default_context(cafile=str(coreio.pki_dir / "ca.crt"))
    if cert is not None:
        context.load_cert_chain(str(cert[0]), str(cert[1]))
    marker = f"direct-{time.monotonic_ns()}"
    connection = http.client.HTTPSConnection("127.0.0.1", coreio.server.port, context=context, timeout=30)
    try:
        connection.request(
            "GET", f"/apis/events.core.io/v1/namespaces/{marker}/events", headers={**headers, "Accept": "*/*"}
        )
        response = connection.getresponse()
        response.read()
        status = response.status
    finally:
        connection.close()
    (entry,) = _audit_entries(coreio, lambda e: marker in e["requestURI"])
    return status, entry["user"].get("username", "")


def _audit_entries(
    coreio: AggregatedCoreio, wanted: Callable[[dict[str, Any]], bool]
) -> list[dict[str, Any]]:
    """The audit entries `wanted` selects. An audit line is written as its request completes, which
    may be just after the client has its answer (as with upstream's buffered audit backends), so
    this waits for them briefly."""
    return wait_until(
        lambda: [e for e in coreio.audit_events() if wanted(e)],
        timeout=5,
        interval=0.02,
        message="audit entries",
    )


def test_front_proxy_headers_need_the_front_proxy_certificate(
    aggregated_coreio: AggregatedCoreio, control_plane: ControlPlane, tmp_path: Path
) -> None:
    spoof = {"X-Remote-User": "mallory", "X-Remote-Group": "system:masters"}
    fp = control_plane.pki.path

    # No client certificate: the headers are nobody's word.
    assert _direct(aggregated_coreio, None, spoof) == (401, "")
    # A client certificate of the cluster CA: its own user, never the headers'.
    direct_admin = (aggregated_coreio.pki_dir / "admin.crt", aggregated_coreio.pki_dir / "admin.key")
    assert _direct(aggregated_coreio, direct_admin, spoof) == (200, "coreio-e2e-direct")
    # A certificate of the front-proxy CA but not an allowed name.
    other = pki.issue_client_certificate(control_plane.pki.front_proxy_ca, "not-the-front-proxy")
    other.save(tmp_path / "other.crt", tmp_path / "other.key")
    assert _direct(aggregated_coreio, (tmp_path / "other.crt", tmp_path / "other.key"), spoof) == (401, "")
    # The aggregator's own certificate: the headers are believed.
    front_proxy = (fp("front-proxy-client.crt"), fp("front-proxy-client.key"))
    assert _direct(aggregated_coreio, front_proxy, spoof) == (200, "mallory")
    # ... and without a username header it is no one.
    assert _direct(aggregated_coreio, front_proxy, {}) == (401, "")


# --- delegated authentication and authorization ---------------------------------------------------


def _bearer(coreio: AggregatedCoreio, token: str, method: str, path: str) -> tuple[int, Any]:
    context = ssl.create_default_context(cafile=str(coreio.pki_dir / "ca.crt"))
    connection = http.client.HTTPSConnection("127.0.0.1", coreio.server.port, context=context, timeout=30)
    try:
        connection.request(
            method, path, headers={"Authorization": f"Bearer {token}", "Accept": "application/json"}
        )
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        connection.close()


def test_coreio_reads_extension_apiserver_authentication(
    aggregated_coreio: AggregatedCoreio, control_plane: ControlPlane
) -> None:
    """No CA or header flags were given: coreio took them from the cluster's ConfigMap."""
    assert aggregated_coreio.delegated
    assert not any("-ca-file" in arg or "requestheader" in arg for arg in aggregated_coreio.server.extra_args)
    published = aggregated_coreio.data_dir / "delegated"
    cp = control_plane.pki.path
    assert (published / "client-ca.crt").read_bytes().strip() == cp("ca.crt").read_bytes().strip()
    assert (published / "requestheader-client-ca.crt").read_bytes().strip() == (
        cp("front-proxy-ca.crt").read_bytes().strip()
    )
    assert (
        "read kube-system/extension-apiserver-authentication" in aggregated_coreio.server.log_file.read_text()
    )


def test_token_review_and_subject_access_review(
    aggregated_coreio: AggregatedCoreio, control_plane: ControlPlane
) -> None:
    kc, coreio = control_plane, aggregated_coreio
    ns = _namespace(kc, "e2e-delegated")
    kc.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "coreio-reader", "namespace": ns},
            "rules": [
                {
                    "apiGroups": ["rbac.authorization.core.io"],
                    "resources": ["rolebindings"],
                    "verbs": ["get", "list"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "coreio-reader", "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "coreio-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": ns}],
        },
    )
    reader = kc.create_token("reader", ns)
    nobody = kc.create_token("nobody", ns)
    collection = f"/apis/rbac.authorization.core.io/v1/namespaces/{ns}/rolebindings"

    # Straight to coreio: the token is the cluster's (TokenReview), the permission too (SAR).
    status, body = _bearer(coreio, reader, "GET", collection)
    assert status == 200, body
    assert body["kind"] == "RoleBindingList"
    (entry,) = _audit_entries(
        coreio, lambda e: e["requestURI"] == collection and e["responseStatus"]["code"] == 200
    )
    assert entry["user"]["username"] == f"system:serviceaccount:{ns}:reader"
    assert f"system:serviceaccounts:{ns}" in entry["user"]["groups"]
    assert entry["user"]["uid"]

    status, body = _bearer(coreio, nobody, "GET", collection)
    assert status == 403, body
    assert body["reason"] == "Forbidden"
    assert body["message"] == (
        f'rolebindings.rbac.authorization.core.io is forbidden: User "system:serviceaccount:{ns}:nobody" '
        'cannot list resource "rolebindings" in API group "rbac.authorization.core.io" '
        f'in the namespace "{ns}"'
    )
    assert body["details"] == {"group": "rbac.authorization.core.io", "kind": "rolebindings"}
    # The reader may read, not write.
    status, body = _bearer(coreio, reader, "DELETE", f"{collection}/anything")
    assert status == 403 and 'cannot delete resource "rolebindings"' in body["message"]
    # A token the cluster does not know.
    status, body = _bearer(coreio, "not-a-real-token", "GET", collection)
    assert (status, body["reason"]) == (401, "Unauthorized")

    # Through the cluster with the same tokens: kube-apiserver authorizes, then forwards the user.
    reader_config = kc.user_kubeconfig(kc.directory / "reader.kubeconfig", token=reader)
    nobody_config = kc.user_kubeconfig(kc.directory / "nobody.kubeconfig", token=nobody)
    listed = kc.run("--kubeconfig", str(reader_config), "get", RB, "-n", ns, check=False)
    assert listed.returncode == 0, listed.stderr
    denied = kc.run("--kubeconfig", str(nobody_config), "get", RB, "-n", ns, check=False)
    assert denied.returncode != 0 and "forbidden" in denied.stderr


# --- the official Python client -------------------------------------------------------------------


def test_python_dynamic_client_through_the_cluster(
    aggregated_coreio: AggregatedCoreio, control_plane: ControlPlane, tmp_path: Path
) -> None:
    from kubernetes import config, dynamic

    ns = _namespace(control_plane, "e2e-python")
    api_client = config.new_client_from_config(config_file=str(control_plane.kubeconfig))
    try:
        client = dynamic.DynamicClient(api_client, cache_file=str(tmp_path / "discovery.json"))
        rb = client.resources.get(api_version="rbac.authorization.core.io/v1", kind="RoleBinding")
        ev = client.resources.get(api_version="events.core.io/v1", kind="Event")
        assert rb.namespaced and ev.namespaced and "ev" in ev.short_names
        body = yaml.safe_load(rolebinding_yaml("from-python", ns))
        created = rb.create(body=body, namespace=ns)
        assert created.metadata.uid
        patched = rb.patch(
            name="from-python",
            namespace=ns,
            body={"metadata": {"labels": {"via": "python"}}},
            content_type="application/merge-patch+json",
        )
        assert patched.metadata.labels["via"] == "python"
        ev.create(body=yaml.safe_load(event_yaml("from-python", ns)), namespace=ns)
        assert [i.metadata.name for i in ev.get(namespace=ns).items] == ["from-python"]
        rb.delete(name="from-python", namespace=ns)
        ev.delete(name="from-python", namespace=ns)
        assert rb.get(namespace=ns).items == []
    finally:
        api_client.close()


# --- Helm -----------------------------------------------------------------------------------------


def _chart(directory: Path) -> Path:
    templates = directory / "templates"
    templates.mkdir(parents=True)
    (directory / "Chart.yaml").write_text(
        yaml.safe_dump(
            {"apiVersion": "v2", "name": "coreio-e2e", "version": "0.1.0", "kubeVersion": ">=1.33.0-0"}
        )
    )
    (directory / "values.yaml").write_text(yaml.safe_dump({"subject": "alice", "stage": "first"}))
    (templates / "rolebinding.yaml").write_text(
        "apiVersion: rbac.authorization.core.io/v1\n"
        "kind: RoleBinding\n"
        "metadata:\n  name: {{ .Release.Name }}-readers\n"
        "roleRef: {apiGroup: rbac.authorization.core.io, kind: ClusterRole, name: view}\n"
        "subjects:\n- {kind: User, name: {{ .Values.subject | quote }}}\n"
    )
    (templates / "event.yaml").write_text(
        "apiVersion: events.core.io/v1\n"
        "kind: Event\n"
        "metadata:\n  name: {{ .Release.Name }}-installed\n  labels: {stage: {{ .Values.stage | quote }}}\n"
        "eventTime: '2026-11-22T02:16:41.123456Z'\n"
        "action: Installed\nreason: Helm\ntype: Normal\nnote: installed by Helm\n"
        "reportingController: example.com/helm\nreportingInstance: helm-1\n"
        "regarding: {kind: ConfigMap, name: settings, apiVersion: v1, namespace: {{ .Release.Namespace }}}\n"
    )
    return directory


@pytest.mark.parametrize("server_side", [False, True], ids=["client-side", "server-side"])
def test_helm_install_upgrade_uninstall(
    aggregated_coreio: AggregatedCoreio,
    control_plane: ControlPlane,
    helm: Path,
    tmp_path: Path,
    server_side: bool,
) -> None:
    kc = control_plane
    ns = _namespace(kc, f"e2e-helm-{'ssa' if server_side else 'csa'}")
    chart = _chart(tmp_path / "chart")
    runner = Helm(helm, tmp_path / "helm-home", kubeconfig=kc.kubeconfig)

    def helm_run(*args: str) -> str:
        return runner.run(*args, "--namespace", ns).stdout

    side = f"--server-side={'true' if server_side else 'false'}"
    helm_run("install", "demo", str(chart), side, "--wait", "--timeout=60s")
    assert kc.json("get", RB, "demo-readers", "-n", ns)["subjects"][0]["name"] == "alice"
    assert kc.json("get", EV, "demo-installed", "-n", ns)["metadata"]["labels"]["stage"] == "first"
    # Helm's default release storage: Secrets in the release namespace, in the cluster.
    secrets = kc.json("get", "secrets", "-n", ns, "-l", "owner=helm,name=demo")["items"]
    assert [s["metadata"]["name"] for s in secrets] == ["sh.helm.release.v1.demo.v1"]

    helm_run("upgrade", "demo", str(chart), side, "--set", "subject=bob", "--set", "stage=second", "--wait")
    assert kc.json("get", RB, "demo-readers", "-n", ns)["subjects"][0]["name"] == "bob"
    assert kc.json("get", EV, "demo-installed", "-n", ns)["metadata"]["labels"]["stage"] == "second"
    assert "deployed" in helm_run("status", "demo")

    helm_run("uninstall", "demo", "--wait", "--timeout=60s")
    assert kc.json("get", RB, "-n", ns)["items"] == []
    assert kc.json("get", EV, "-n", ns)["items"] == []
    assert kc.json("get", "secrets", "-n", ns, "-l", "owner=helm,name=demo")["items"] == []


# --- resilience (last: it stops coreio) -----------------------------------------------------------


@pytest.fixture
def restarts_coreio(aggregated_coreio: AggregatedCoreio) -> Iterator[AggregatedCoreio]:
    try:
        yield aggregated_coreio
    finally:
        # Whatever the test did, later tests (and teardown) find coreio up and Available.
        if aggregated_coreio.server.process is None or aggregated_coreio.server.process.poll() is not None:
            aggregated_coreio.start()
        aggregated_coreio.wait_available()


def test_cluster_survives_coreio_going_away(
    restarts_coreio: AggregatedCoreio, control_plane: ControlPlane
) -> None:
    coreio, kc = restarts_coreio, control_plane
    ns = _namespace(kc, "e2e-resilience")
    kc.run("create", "-f", "-", input=rolebinding_yaml("survivor", ns))

    coreio.stop()
    took_down = coreio.wait_available("False", timeout=90)
    status, message = coreio.available("v1.events.core.io")
    assert status == "False" and message, message
    # Core resources and discovery keep working; our groups answer 503.
    assert "kube-system" in kc.run("get", "namespaces").stdout
    assert kc.run("api-resources", "--api-group=apps").returncode == 0
    # Discovery drops the unavailable groups (kubectl then knows no such resource type); a request
    # to the group's path answers 503 from the aggregator.
    unknown = kc.run("get", RB, "survivor", "-n", ns, check=False)
    assert unknown.returncode != 0
    assert (
        "the server doesn't have a resource type" in unknown.stderr or "ServiceUnavailable" in unknown.stderr
    )
    raw = kc.run(
        "get", "--raw", f"/apis/rbac.authorization.core.io/v1/namespaces/{ns}/rolebindings", check=False
    )
    assert raw.returncode != 0 and "ServiceUnavailable" in raw.stderr, raw.stderr

    coreio.start()
    came_back = coreio.wait_available("True", timeout=90)
    assert kc.json("get", RB, "survivor", "-n", ns)["metadata"]["name"] == "survivor"
    print(f"APIServices Available=False {took_down:.1f}s after stop, True {came_back:.1f}s after restart")
