"""A kind declared in one module (tests/support/thirdkind.py, Gadget) and added to the served kinds
is served end to end by a real server, on SQLite and on etcd: discovery (aggregated and legacy),
OpenAPI v2 and v3, CRUD, watch, Table output, field selectors, strategic merge patch by its patch
schema, server-side apply, and RBAC through the aggregated edit and view roles it adds rules to.

The server is the program that module is (`python -m tests.support.thirdkind`): coreio's own command
line given one more kind, its `--gadget-ttl` flag included. Clients are the real kubectl and the
official Python client.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import config, dynamic, watch
from kubernetes.client import ApiClient

from tests.support.api import Api, rolebinding
from tests.support.kubectl import Kubectl, as_user
from tests.support.metrics import wait_for_bindings
from tests.support.server import BACKENDS, ServerProcess, backend_args, free_port

pytestmark = pytest.mark.tools

GROUP = "gadgets.example.com"
GROUP_VERSION = f"{GROUP}/v1alpha1"
GADGETS = f"gadgets.{GROUP}"
AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def gadget(name: str, color: str = "red", size: int = 3, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "Gadget",
        "metadata": {"name": name},
        "spec": {"color": color, "size": size, **spec},
    }


def gadgets_path(namespace: str, name: str = "") -> str:
    return f"/apis/{GROUP_VERSION}/namespaces/{namespace}/gadgets" + (f"/{name}" if name else "")


@pytest.fixture(scope="module", params=BACKENDS)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    process = ServerProcess(
        tmp_path_factory.mktemp(f"gadgets-{request.param}"),
        free_port(),
        [
            *backend_args(request, request.param),
            "--gadget-ttl",
            "86400",
            f"--runtime-config={GROUP_VERSION}=true",  # an alpha version, off by default
        ],
        module="tests.support.thirdkind",
    )
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def admin(server: ServerProcess) -> Api:
    return Api(server)


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Iterator[dynamic.DynamicClient]:
    api_client: ApiClient = config.new_client_from_config(config_file=str(server.kubeconfig))
    try:
        yield dynamic.DynamicClient(api_client)
    finally:
        api_client.close()


def test_discovery_aggregated_and_legacy(admin: Api, kubectl_cli: Kubectl) -> None:
    aggregated = admin.get("/apis", headers={"Accept": AGGREGATED}).json
    (group,) = [item for item in aggregated["items"] if item["metadata"]["name"] == GROUP]
    (version,) = group["versions"]
    assert version["version"] == "v1alpha1"
    assert version["resources"] == [
        {
            "resource": "gadgets",
            "responseKind": {"group": "", "version": "", "kind": "Gadget"},
            "scope": "Namespaced",
            "singularResource": "gadget",
            "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
            "shortNames": ["gdg"],
        }
    ]
    groups = admin.get("/apis").json["groups"]
    # The served kinds, then (standalone) the self reviews kubectl auth uses.
    expected = [
        "rbac.authorization.core.io",
        "events.core.io",
        GROUP,
        "authorization.k8s.io",
        "authentication.k8s.io",
    ]
    assert [g["name"] for g in groups] == expected
    (resource,) = admin.get(f"/apis/{GROUP_VERSION}").json["resources"]
    assert (resource["name"], resource["kind"], resource["namespaced"]) == ("gadgets", "Gadget", True)
    # kubectl finds it through discovery, short name included.
    listed = kubectl_cli.run("api-resources", f"--api-group={GROUP}", "--no-headers").stdout.split()
    assert listed == ["gadgets", "gdg", GROUP_VERSION, "true", "Gadget"]


def test_openapi_v2_and_v3(admin: Api, kubectl_cli: Kubectl) -> None:
    v2 = admin.get("/openapi/v2", headers={"Accept": "application/json"}).json
    definition = v2["definitions"]["com.example.gadgets.v1alpha1.Gadget"]
    assert definition["x-kubernetes-group-version-kind"] == [
        {"group": GROUP, "version": "v1alpha1", "kind": "Gadget"}
    ]
    assert f"/apis/{GROUP_VERSION}/namespaces/{{namespace}}/gadgets/{{name}}" in v2["paths"]
    index = admin.get("/openapi/v3").json["paths"]
    url = index[f"apis/{GROUP_VERSION}"]["serverRelativeURL"]
    v3 = admin.get(url).json
    spec = v3["components"]["schemas"]["com.example.gadgets.v1alpha1.GadgetSpec"]
    assert spec["required"] == ["color"]
    assert spec["properties"]["tags"]["x-kubernetes-list-type"] == "set"
    # kubectl explain reads the v3 document.
    explained = kubectl_cli.run("explain", f"{GADGETS}.spec.color").stdout
    assert "The gadget's color: blue, green or red." in explained


def test_crud_table_and_field_selector(kubectl_cli: Kubectl) -> None:
    namespace = "crud"
    for name, color in (("red-one", "red"), ("blue-one", "blue")):
        created = kubectl_cli.run("create", "-n", namespace, "-f", "-", input=json.dumps(gadget(name, color)))
        assert created.stdout == f"gadget.{GROUP}/{name} created\n"
    table = kubectl_cli.run("get", "gdg", "-n", namespace).stdout.splitlines()
    assert table[0].split() == ["NAME", "COLOR", "SIZE", "AGE"]
    assert [line.split()[:3] for line in table[1:]] == [["blue-one", "blue", "3"], ["red-one", "red", "3"]]
    selected = kubectl_cli.json("get", GADGETS, "-n", namespace, "--field-selector", "spec.color=red")
    assert [item["metadata"]["name"] for item in selected["items"]] == ["red-one"]
    refused = kubectl_cli.run("get", GADGETS, "-n", namespace, "--field-selector", "spec.size=3", check=False)
    assert "field label not supported: spec.size" in refused.stderr

    # The kind's own validation, as a 422 kubectl reports.
    bad = kubectl_cli.run(
        "create", "-n", namespace, "-f", "-", input=json.dumps(gadget("bad", "purple")), check=False
    )
    assert bad.stderr == (
        'The Gadget "bad" is invalid: spec.color: Unsupported value: "purple": supported values: '
        '"blue", "green", "red"\n'
    )

    # Strategic merge patch follows the kind's patch schema: spec.tags is a set that merges.
    kubectl_cli.run(
        "patch", GADGETS, "red-one", "-n", namespace, "--type=merge", "-p", '{"spec":{"tags":["a"]}}'
    )
    kubectl_cli.run("patch", GADGETS, "red-one", "-n", namespace, "-p", '{"spec":{"tags":["b"]}}')
    # (upstream's order: the patch's items first, then those only the server had)
    assert kubectl_cli.json("get", GADGETS, "red-one", "-n", namespace)["spec"]["tags"] == ["b", "a"]

    replaced = kubectl_cli.json("get", GADGETS, "red-one", "-n", namespace)
    replaced["spec"]["size"] = 9
    kubectl_cli.run("replace", "-f", "-", input=json.dumps(replaced))
    assert kubectl_cli.json("get", GADGETS, "red-one", "-n", namespace)["spec"]["size"] == 9

    deleted = kubectl_cli.run("delete", GADGETS, "red-one", "blue-one", "-n", namespace)
    assert deleted.stdout.splitlines() == [
        f'gadget.{GROUP} "red-one" deleted',
        f'gadget.{GROUP} "blue-one" deleted',
    ]
    assert kubectl_cli.json("get", GADGETS, "-n", namespace)["items"] == []


def test_watch_with_the_python_client(client: dynamic.DynamicClient) -> None:
    gadgets = client.resources.get(api_version=GROUP_VERSION, kind="Gadget")
    assert (gadgets.name, gadgets.namespaced, gadgets.short_names) == ("gadgets", True, ["gdg"])
    start = gadgets.get(namespace="watched").metadata.resourceVersion
    seen: list[tuple[str, str, Any]] = []
    done = threading.Event()

    def consume() -> None:
        watcher = watch.Watch()
        for event in gadgets.watch(namespace="watched", resource_version=start, timeout=20, watcher=watcher):
            seen.append((event["type"], event["object"].metadata.name, event["object"].spec.size))
            if len(seen) == 3:
                watcher.stop()
        done.set()

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    gadgets.create(body=gadget("w"), namespace="watched")
    gadgets.patch(
        name="w", namespace="watched", body={"spec": {"size": 4}}, content_type="application/merge-patch+json"
    )
    gadgets.delete(name="w", namespace="watched")
    assert done.wait(30), f"watch saw only {seen}"
    assert seen == [("ADDED", "w", 3), ("MODIFIED", "w", 4), ("DELETED", "w", 4)]


def test_server_side_apply(kubectl_cli: Kubectl, tmp_path: Path) -> None:
    manifest = tmp_path / "gadget.yaml"
    manifest.write_text(
        yaml.safe_dump({**gadget("applied", "green"), "metadata": {"name": "applied", "namespace": "ssa"}})
    )
    applied = kubectl_cli.run("apply", "--server-side", "-f", str(manifest))
    assert applied.stdout == f"gadget.{GROUP}/applied serverside-applied\n"
    obj = kubectl_cli.json("get", GADGETS, "applied", "-n", "ssa", "--show-managed-fields")
    (entry,) = obj["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"], entry["apiVersion"]) == ("kubectl", "Apply", GROUP_VERSION)
    assert entry["fieldsV1"] == {"f:spec": {"f:color": {}, "f:size": {}}}

    other = tmp_path / "other.yaml"
    other.write_text(
        yaml.safe_dump({**gadget("applied", "blue"), "metadata": {"name": "applied", "namespace": "ssa"}})
    )
    refused = kubectl_cli.run(
        "apply", "--server-side", "--field-manager=other", "-f", str(other), check=False
    )
    # The color conflicts; the size, applied with the same value, is shared.
    assert 'Apply failed with 1 conflict: conflict with "kubectl": .spec.color\n' in refused.stderr
    assert kubectl_cli.json("get", GADGETS, "applied", "-n", "ssa")["spec"]["color"] == "green"
    kubectl_cli.run("apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", str(other))
    obj = kubectl_cli.json("get", GADGETS, "applied", "-n", "ssa", "--show-managed-fields")
    assert obj["spec"]["color"] == "blue"
    owners = {entry["manager"]: entry["fieldsV1"] for entry in obj["metadata"]["managedFields"]}
    assert owners == {
        "kubectl": {"f:spec": {"f:size": {}}},
        "other": {"f:spec": {"f:color": {}, "f:size": {}}},
    }


def test_rbac_through_the_aggregated_roles(admin: Api, kubectl_cli: Kubectl, server: ServerProcess) -> None:
    namespace = f"rbac-{uuid.uuid4().hex[:6]}"
    for user, role in (("gina", "edit"), ("vic", "view")):
        body = rolebinding(f"{user}-{role}")
        body["roleRef"]["name"] = role
        body["subjects"] = [{"kind": "User", "name": user}]
        assert (
            admin.post(
                f"/apis/rbac.authorization.core.io/v1/namespaces/{namespace}/rolebindings", body
            ).status
            == 201
        )
    wait_for_bindings(server)  # the binding index follows the store's watch
    gina, vic, dan = (as_user(kubectl_cli, server, user) for user in ("gina", "vic", "dan"))

    # edit writes gadgets (the rule the kind adds through coreio:aggregate-to-edit) ...
    created = gina.run("create", "-n", namespace, "-f", "-", input=json.dumps(gadget("g")), check=False)
    assert created.stdout == f"gadget.{GROUP}/g created\n", created.stderr
    # ... view reads them but does not write ...
    assert [item["metadata"]["name"] for item in vic.json("get", GADGETS, "-n", namespace)["items"]] == ["g"]
    denied = vic.run("delete", GADGETS, "g", "-n", namespace, check=False)
    assert denied.stderr == (
        f'Error from server (Forbidden): gadgets.{GROUP} "g" is forbidden: User "vic" cannot delete resource'
        f' "gadgets" in API group "{GROUP}" in the namespace "{namespace}"\n'
    )
    # ... and without a binding there is nothing.
    nothing = dan.run("get", GADGETS, "-n", namespace, check=False)
    assert nothing.stderr == (
        f'Error from server (Forbidden): gadgets.{GROUP} is forbidden: User "dan" cannot list resource'
        f' "gadgets" in API group "{GROUP}" in the namespace "{namespace}"\n'
    )
    assert admin.get(gadgets_path(namespace, "g")).json["spec"]["color"] == "red"
