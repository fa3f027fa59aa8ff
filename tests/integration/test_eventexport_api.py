"""EventExports (events.core.io/v1alpha1) as their users meet them, with the real kubectl, on
SQLite and on etcd: served only once --runtime-config enables the alpha version; applied with their
defaults; printed with their columns; explained; refused with each mistake named; their status kept
from writes of the object; and written only by authors who may read what they export."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.api import Api, rolebinding
from tests.support.exporter import exports_server
from tests.support.kubectl import Kubectl, as_user
from tests.support.metrics import wait_for_bindings
from tests.support.server import BACKENDS, ServerProcess, free_port

pytestmark = pytest.mark.tools

GROUP_VERSION = "events.core.io/v1alpha1"
EXPORTS = "eventexports.events.core.io"
AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def export(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "EventExport",
        "metadata": {"name": name},
        "spec": {
            "match": [{"type": "Warning"}],
            "sink": {"webhook": {"url": "https://hooks.example.com/k8s"}},
        }
        | spec,
    }


@pytest.fixture(scope="module", params=BACKENDS)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    yield from exports_server(request, tmp_path_factory, "exports")


@pytest.fixture(scope="module")
def admin(server: ServerProcess) -> Api:
    return Api(server)


def namespace() -> str:
    return f"ns-{uuid.uuid4().hex[:6]}"


def test_applied_with_defaults_and_printed_with_its_columns(kubectl_cli: Kubectl) -> None:
    ns = namespace()
    created = kubectl_cli.run("apply", "-n", ns, "-f", "-", input=json.dumps(export("warnings")))
    assert created.stdout == "eventexport.events.core.io/warnings created\n"
    stored = kubectl_cli.json("get", EXPORTS, "warnings", "-n", ns)
    assert stored["metadata"]["generation"] == 1
    assert stored["spec"]["batch"] == {"maxEvents": 100, "maxWait": "1s"}
    assert (stored["spec"]["series"], stored["spec"]["maxLag"]) == ("Every", "1h")
    assert stored["spec"]["sink"]["webhook"]["format"] == "JSON"
    table = kubectl_cli.run("get", EXPORTS, "-n", ns).stdout.splitlines()
    assert table[0].split() == ["NAME", "SINK", "POSITION", "LAG", "READY", "AGE"]
    assert table[1].split()[:5] == ["warnings", "webhook", "<none>", "<none>", "<none>"]
    explained = kubectl_cli.run("explain", "eventexport.spec.sink.webhook").stdout
    assert f"VERSION:    {GROUP_VERSION.split('/')[1]}" in explained
    for field in ("url\t<string> -required-", "format\t<string>", "headersFrom\t<SecretReference>"):
        assert field in explained, explained


def test_each_mistake_is_named(kubectl_cli: Kubectl) -> None:
    bad = export("bad", namespaces=["*", "shop"], maxLag="10s")
    bad["spec"]["sink"]["jsonLines"] = {"path": "relative.jsonl"}
    refused = kubectl_cli.run("create", "-n", namespace(), "-f", "-", input=json.dumps(bad), check=False)
    assert refused.returncode == 1
    assert refused.stderr == (
        'The EventExport "bad" is invalid: \n'
        '* spec.namespaces: Invalid value: "*": must be the only entry when given\n'
        '* spec.sink: Invalid value: "webhook, jsonLines": exactly one sink must be given\n'
        '* spec.maxLag: Invalid value: "10s": must be at least 60s\n'
    )


def test_the_status_is_kept_from_writes_of_the_object(admin: Api, kubectl_cli: Kubectl) -> None:
    ns = namespace()
    path = f"/apis/{GROUP_VERSION}/namespaces/{ns}/eventexports"
    body = export("kept") | {"status": {"position": "99"}}
    created = admin.post(path, body)
    assert created.status == 201, created.body
    assert "status" not in created.json
    changed = created.json
    changed["spec"]["maxLag"] = "2h"
    changed["status"] = {"position": "1000"}
    updated = admin.put(f"{path}/kept", changed)
    assert updated.status == 200, updated.body
    assert "status" not in updated.json and updated.json["metadata"]["generation"] == 2


def test_only_authors_who_may_read_what_it_exports_write_one(
    admin: Api, kubectl_cli: Kubectl, server: ServerProcess
) -> None:
    ns = namespace()
    for user, role in (("ada", "admin"), ("eve", "edit")):
        binding = rolebinding(f"{user}-{role}")
        binding["roleRef"]["name"] = role
        binding["subjects"] = [{"kind": "User", "name": user}]
        assert (
            admin.post(f"/apis/rbac.authorization.core.io/v1/namespaces/{ns}/rolebindings", binding).status
            == 201
        )
    wait_for_bindings(server)
    ada, eve = as_user(kubectl_cli, server, "ada"), as_user(kubectl_cli, server, "eve")

    own = ada.run("create", "-n", ns, "-f", "-", input=json.dumps(export("own")), check=False)
    assert own.stdout == "eventexport.events.core.io/own created\n", own.stderr
    everything = export("everything", namespaces=["*"])
    refused = ada.run("create", "-n", ns, "-f", "-", input=json.dumps(everything), check=False)
    assert refused.stderr == (
        f'Error from server (Forbidden): error when creating "STDIN": {EXPORTS} "everything" is forbidden:'
        ' user "ada" cannot list events cluster-wide, which it would export\n'
    )
    with_secret = export("hook", sink={"webhook": {"url": "https://h.example", "headersFrom": {"name": "t"}}})
    secret = ada.run("create", "-n", ns, "-f", "-", input=json.dumps(with_secret), check=False)
    assert secret.stdout == "eventexport.events.core.io/hook created\n", secret.stderr  # admin gets Secrets
    # The status is the exporter's: no aggregated role grants it, admin included (kubectl reads it first).
    position = json.dumps({"status": {"position": "7"}})
    status = ada.run(
        "patch", EXPORTS, "own", "-n", ns, "--subresource=status", "--type=merge", "-p", position, check=False
    )
    assert status.stderr == (
        f'Error from server (Forbidden): {EXPORTS} "own" is forbidden: User "ada" cannot get resource'
        f' "eventexports/status" in API group "events.core.io" in the namespace "{ns}"\n'
    )
    # edit may not write exports at all: they send Events out of the cluster ...
    denied = eve.run("create", "-n", ns, "-f", "-", input=json.dumps(export("eves")), check=False)
    assert denied.stderr.startswith(
        f'Error from server (Forbidden): error when creating "STDIN": {EXPORTS} is forbidden: User "eve"'
        f' cannot create resource "eventexports" in API group "events.core.io" in the namespace "{ns}"'
    ), denied.stderr
    assert [item["metadata"]["name"] for item in ada.json("get", EXPORTS, "-n", ns)["items"]] == [
        "hook",
        "own",
    ]
    # ... nor read them: a webhook's URL may hold a token.
    unread = eve.run("get", EXPORTS, "-n", ns, check=False)
    assert unread.stderr == (
        f'Error from server (Forbidden): {EXPORTS} is forbidden: User "eve" cannot list resource'
        f' "eventexports" in API group "events.core.io" in the namespace "{ns}"\n'
    )


def test_the_alpha_version_is_not_served_unless_enabled(tmp_path: Path, kubectl: Path) -> None:
    plain = ServerProcess(tmp_path / "data", free_port(), [])
    plain.start()
    try:
        resources = Kubectl(kubectl, plain.kubeconfig).run("api-resources").stdout
        assert "events.core.io/v1 " in resources and "eventexports" not in resources
        api = Api(plain)
        assert api.get(f"/apis/{GROUP_VERSION}").status == 404
        assert api.get(f"/apis/{GROUP_VERSION}/namespaces/default/eventexports").status == 404
        group = api.get("/apis/events.core.io").json
        assert [version["version"] for version in group["versions"]] == ["v1"]
        assert f"apis/{GROUP_VERSION}" not in api.get("/openapi/v3").json["paths"]
    finally:
        plain.stop()


READY = {
    "type": "Ready",
    "status": "True",
    "reason": "Delivering",
    "message": "every batch acknowledged",
    "lastTransitionTime": "2026-11-27T18:00:00Z",
}


def test_the_exporter_writes_the_status_through_its_subresource(admin: Api, kubectl_cli: Kubectl) -> None:
    ns = namespace()
    path = f"/apis/{GROUP_VERSION}/namespaces/{ns}/eventexports"
    assert admin.post(path, export("tracked")).status == 201
    patch = {
        "status": {"position": "42", "lag": {"seconds": 5}, "conditions": [READY]},
        "spec": {"maxLag": "5h"},
    }
    patched = kubectl_cli.run(
        "patch", EXPORTS, "tracked", "-n", ns, "--subresource=status", "--type=merge", "-p", json.dumps(patch)
    )
    assert patched.stdout == "eventexport.events.core.io/tracked patched\n"
    stored = admin.get(f"{path}/tracked").json
    # Only the status moved: the spec and the generation are as they were.
    assert stored["status"] == {"position": "42", "lag": {"seconds": 5}, "conditions": [READY]}
    assert (stored["spec"]["maxLag"], stored["metadata"]["generation"]) == ("1h", 1)
    (entry,) = [e for e in stored["metadata"]["managedFields"] if e.get("subresource") == "status"]
    assert entry["manager"] == "kubectl-patch" and entry["operation"] == "Update"
    assert "f:status" in entry["fieldsV1"] and "f:spec" not in entry["fieldsV1"]
    row = kubectl_cli.run("get", EXPORTS, "tracked", "-n", ns, "--no-headers").stdout.split()
    assert row[1:5] == ["webhook", "42", "5s", "True"]
    # A PUT of the status names the version it read: a stale one is a conflict.
    stale = stored | {"status": {"position": "43"}}
    stale["metadata"] = stored["metadata"] | {"resourceVersion": "1"}
    assert admin.put(f"{path}/tracked/status", stale).status == 409
    assert admin.put(f"{path}/tracked/status", stored | {"status": {"position": "43"}}).status == 200
    assert admin.get(f"{path}/tracked/status").json["status"] == {"position": "43"}


def test_a_wrong_status_is_refused_and_no_status_is_created(admin: Api) -> None:
    ns = namespace()
    path = f"/apis/{GROUP_VERSION}/namespaces/{ns}/eventexports"
    created = admin.post(path, export("checked")).json
    bad = created | {"status": {"position": "latest", "conditions": [READY | {"status": "Maybe"}, READY]}}
    refused = admin.put(f"{path}/checked/status", bad)
    assert refused.status == 422, refused.body
    assert [(c["field"], c["reason"]) for c in refused.json["details"]["causes"]] == [
        ("status.position", "FieldValueInvalid"),
        ("status.conditions[0].status", "FieldValueNotSupported"),
        ("status.conditions[1].type", "FieldValueDuplicate"),
    ]
    missing = created | {"metadata": {"name": "absent", "namespace": ns}}
    assert admin.put(f"{path}/absent/status", missing).status == 404  # a status creates nothing
    events = f"/apis/events.core.io/v1/namespaces/{ns}/events/any/status"
    assert admin.get(events).status == 404  # Events have no status subresource


def test_server_side_apply_to_the_status_owns_the_status_alone(admin: Api, kubectl_cli: Kubectl) -> None:
    ns = namespace()
    path = f"/apis/{GROUP_VERSION}/namespaces/{ns}/eventexports"
    assert admin.post(path, export("applied")).status == 201
    config = export("applied", maxLag="5h") | {"status": {"position": "12"}}
    config["metadata"]["labels"] = {"ignored": "yes"}
    applied = kubectl_cli.run(
        "apply",
        "--server-side",
        "--subresource=status",
        "--field-manager=exporter",
        "-n",
        ns,
        "-f",
        "-",
        input=json.dumps(config),
    )
    assert applied.stdout == "eventexport.events.core.io/applied serverside-applied\n"
    stored = admin.get(f"{path}/applied").json
    assert stored["status"] == {"position": "12"}
    assert (stored["spec"]["maxLag"], stored["metadata"]["generation"]) == ("1h", 1)  # the rest kept
    assert "labels" not in stored["metadata"]
    (entry,) = [e for e in stored["metadata"]["managedFields"] if e["manager"] == "exporter"]
    assert (entry["operation"], entry["subresource"]) == ("Apply", "status")
    assert entry["fieldsV1"] == {"f:status": {"f:position": {}}}
    rival = {"apiVersion": GROUP_VERSION, "kind": "EventExport", "metadata": {"name": "applied"}}
    rival["status"] = {"position": "13"}
    apply = f"{path}/applied/status?fieldManager=rival"
    conflict = admin.patch(apply, rival, content_type="application/apply-patch+yaml")
    assert conflict.status == 409, conflict.body
    assert conflict.json["message"] == (
        'Apply failed with 1 conflict: conflict with "exporter" with subresource "status": .status.position'
    )
    forced = admin.patch(f"{apply}&force=true", rival, content_type="application/apply-patch+yaml")
    assert forced.status == 200 and forced.json["status"]["position"] == "13"
    malformed = admin.patch(apply, rival | {"spec": 5}, content_type="application/apply-patch+yaml")
    assert malformed.status == 400, malformed.body  # checked whole, as upstream, though only status counts
    assert "failed to create typed patch object" in malformed.json["message"]
    absent = f"{path}/absent/status?fieldManager=rival"
    missing = admin.patch(
        absent, rival | {"metadata": {"name": "absent"}}, content_type="application/apply-patch+yaml"
    )
    assert missing.status == 404, missing.body  # an apply to a status creates nothing


def test_discovery_and_openapi_list_the_status_subresource(admin: Api) -> None:
    resources = admin.get(f"/apis/{GROUP_VERSION}").json["resources"]
    assert resources[1] == {
        "name": "eventexports/status",
        "singularName": "",
        "namespaced": True,
        "kind": "EventExport",
        "verbs": ["get", "patch", "update"],
    }
    aggregated = admin.get("/apis", headers={"Accept": AGGREGATED}).json
    (group,) = [item for item in aggregated["items"] if item["metadata"]["name"] == "events.core.io"]
    (alpha,) = [v for v in group["versions"] if v["version"] == "v1alpha1"]
    assert alpha["resources"][0]["subresources"] == [
        {
            "subresource": "status",
            "responseKind": {"group": "", "version": "", "kind": "EventExport"},
            "verbs": ["get", "patch", "update"],
        }
    ]
    paths = admin.get(f"/openapi/v3/apis/{GROUP_VERSION}").json["paths"]
    status = paths[f"/apis/{GROUP_VERSION}/namespaces/{{namespace}}/eventexports/{{name}}/status"]
    assert [status[method]["operationId"] for method in ("get", "put", "patch")] == [
        "readEventsCoreIoV1alpha1NamespacedEventExportStatus",
        "replaceEventsCoreIoV1alpha1NamespacedEventExportStatus",
        "patchEventsCoreIoV1alpha1NamespacedEventExportStatus",
    ]


def test_writes_of_the_object_own_no_status_and_meet_no_conflict_on_it(
    admin: Api, kubectl_cli: Kubectl, tmp_path: Path
) -> None:
    ns = namespace()
    path = f"/apis/{GROUP_VERSION}/namespaces/{ns}/eventexports"
    created = admin.post(f"{path}?fieldManager=author", export("owned") | {"status": {"position": "9"}}).json
    assert all("f:status" not in e["fieldsV1"] for e in created["metadata"]["managedFields"])
    exporter = admin.patch(f"{path}/owned/status?fieldManager=exporter", {"status": {"position": "42"}})
    assert exporter.status == 200, exporter.body
    # A PUT of the object, without the status or with another one, owns none of it and leaves it.
    body = exporter.json | {"status": {"position": "1"}}
    body["spec"] = body["spec"] | {"maxLag": "2h"}
    replaced = admin.put(f"{path}/owned?fieldManager=other", body).json
    assert replaced["status"] == {"position": "42"}
    entries = {e["manager"]: e for e in replaced["metadata"]["managedFields"]}
    assert "f:status" in entries["exporter"]["fieldsV1"] and "f:status" not in entries["other"]["fieldsV1"]
    # Applying the object as read (status included) is no conflict with the exporter's status.
    manifest = tmp_path / "owned.json"
    read = admin.get(f"{path}/owned").json
    del read["metadata"]["managedFields"], read["metadata"]["resourceVersion"]
    manifest.write_text(json.dumps(read))
    applied = kubectl_cli.run("apply", "--server-side", "-n", ns, "-f", str(manifest), check=False)
    assert applied.stdout == "eventexport.events.core.io/owned serverside-applied\n", applied.stderr
    assert admin.get(f"{path}/owned").json["status"] == {"position": "42"}


@pytest.mark.parametrize(
    ("method", "suffix"),
    [
        ("PUT", "/namespaces/{ns}/eventexports//status"),  # no name
        ("GET", "/namespaces/{ns}/eventexports/x/status/more"),
        ("GET", "/watch/namespaces/{ns}/eventexports/x/status"),
        ("GET", "/eventexports/x/status"),
    ],
)
def test_only_a_named_objects_status_is_a_route(admin: Api, method: str, suffix: str) -> None:
    ns = namespace()
    admin.post(f"/apis/{GROUP_VERSION}/namespaces/{ns}/eventexports", export("x"))
    answer = admin.request(method, f"/apis/{GROUP_VERSION}{suffix.format(ns=ns)}", export("x"))
    assert answer.status == 404, answer.body


def test_status_numbers_and_conditions_are_checked_as_upstream(admin: Api) -> None:
    ns = namespace()
    path = f"/apis/{GROUP_VERSION}/namespaces/{ns}/eventexports"
    created = admin.post(path, export("strict")).json
    status = {
        "position": "\u00b2",
        "observedGeneration": -1,
        "conditions": [READY | {"reason": "x" * 1025, "observedGeneration": -2}],
    }
    refused = admin.put(f"{path}/strict/status", created | {"status": status})
    assert refused.status == 422, refused.body
    assert [(c["field"], c["reason"]) for c in refused.json["details"]["causes"]] == [
        ("status.position", "FieldValueInvalid"),
        ("status.observedGeneration", "FieldValueInvalid"),
        ("status.conditions[0].observedGeneration", "FieldValueInvalid"),
        ("status.conditions[0].reason", "FieldValueTooLong"),
    ]
