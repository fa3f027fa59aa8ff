"""Every failure is a Status object with the code and reason kube-apiserver gives; discovery,
/version and health answer as clients expect."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.api import EV_PATH, RB_PATH, Api, ev_path, event, rb_path, rolebinding
from tests.support.server import ServerProcess


def _status(response: object, code: int, reason: str) -> dict[str, Any]:
    from tests.support.api import Response

    assert isinstance(response, Response)
    assert response.status == code, response.body
    assert response.headers["Content-Type"].startswith("application/json")
    body = response.json
    assert body["kind"] == "Status" and body["apiVersion"] == "v1"
    assert body["status"] == "Failure" and body["reason"] == reason and body["code"] == code
    return dict(body)


def test_no_credentials_is_401_but_health_is_open(server: ServerProcess) -> None:
    anonymous = Api(server, client_cert=False)
    _status(anonymous.get(rb_path("default")), 401, "Unauthorized")
    _status(anonymous.get("/apis"), 401, "Unauthorized")
    _status(anonymous.get("/version"), 401, "Unauthorized")
    for path in ("/healthz", "/livez", "/readyz"):
        response = anonymous.get(path)
        assert response.status == 200 and response.body == b"ok"


def test_bad_bearer_token_is_401(server: ServerProcess) -> None:
    _status(Api(server, client_cert=False, token="not-a-token").get(rb_path("default")), 401, "Unauthorized")


def test_admin_token_from_token_file_is_accepted(server: ServerProcess) -> None:
    line = (server.data_dir / "tokens.csv").read_text().splitlines()[0]
    token = line.split(",")[0]
    assert Api(server, client_cert=False, token=token).get(rb_path("default")).status == 200


def test_malformed_json_is_400(api: Api) -> None:
    body = _status(
        api.post(rb_path("e"), raw=b'{"kind": ', content_type="application/json"), 400, "BadRequest"
    )
    assert "json" in str(body["message"])


def test_malformed_yaml_is_400(api: Api) -> None:
    _status(
        api.post(rb_path("e"), raw=b"kind: [unclosed", content_type="application/yaml"), 400, "BadRequest"
    )


def test_yaml_body_is_accepted(api: Api) -> None:
    body = (
        b"apiVersion: rbac.authorization.core.io/v1\nkind: RoleBinding\nmetadata:\n  name: from-yaml\n"
        b"roleRef:\n  apiGroup: rbac.authorization.core.io\n  kind: Role\n  name: r\n"
    )
    response = api.post(rb_path("e"), raw=body, content_type="application/yaml")
    assert response.status == 201, response.body
    as_yaml = api.get(rb_path("e", "from-yaml"), headers={"Accept": "application/yaml"})
    assert as_yaml.headers["Content-Type"].startswith("application/yaml")
    assert b"name: from-yaml" in as_yaml.body


def test_wrong_api_version_or_kind_is_400(api: Api) -> None:
    body = _status(
        api.post(rb_path("e"), rolebinding("x", apiVersion="rbac.authorization.k8s.io/v1")), 400, "BadRequest"
    )
    assert "does not match the expected API version" in str(body["message"])
    _status(api.post(rb_path("e"), rolebinding("x", kind="Event")), 400, "BadRequest")
    _status(api.post(ev_path("e"), rolebinding("x")), 400, "BadRequest")


def test_unknown_resource_is_404(api: Api) -> None:
    _status(api.get(f"{RB_PATH}/namespaces/e/clusterrolebindings"), 404, "NotFound")
    _status(api.get("/apis/unknown.example.com/v1"), 404, "NotFound")
    _status(api.get(f"{RB_PATH}/namespaces/e/rolebindings/x/status"), 404, "NotFound")
    _status(api.get("/nothing/here"), 404, "NotFound")


def test_wrong_method_is_405(api: Api) -> None:
    _status(api.post(f"{RB_PATH}/rolebindings", rolebinding("x")), 405, "MethodNotAllowed")
    _status(api.request("PUT", rb_path("e"), rolebinding("x")), 405, "MethodNotAllowed")
    _status(api.post(rb_path("e", "x"), rolebinding("x")), 405, "MethodNotAllowed")


def test_body_over_3_mib_is_413(api: Api) -> None:
    big = rolebinding("big")
    big["metadata"]["annotations"] = {"a": "x" * (3 * 1024 * 1024 + 10)}
    _status(api.post(rb_path("e"), big), 413, "RequestEntityTooLarge")


def test_unsupported_content_type_is_415(api: Api) -> None:
    body = _status(
        api.post(rb_path("e"), raw=b"<xml/>", content_type="application/xml"), 415, "UnsupportedMediaType"
    )
    assert "application/json" in str(body["message"])
    api.post(rb_path("e"), rolebinding("patchme"))
    _status(api.patch(rb_path("e", "patchme"), {}, content_type="text/plain"), 415, "UnsupportedMediaType")


def test_unacceptable_accept_is_406_and_protobuf_first_falls_back_to_json(api: Api) -> None:
    _status(
        api.get(rb_path("e"), headers={"Accept": "application/vnd.kubernetes.protobuf"}), 406, "NotAcceptable"
    )
    response = api.get(
        rb_path("e"), headers={"Accept": "application/vnd.kubernetes.protobuf, application/json"}
    )
    assert response.status == 200 and response.json["kind"] == "RoleBindingList"


def test_already_exists_is_409(api: Api) -> None:
    assert api.post(rb_path("e"), rolebinding("dup")).status == 201
    body = _status(api.post(rb_path("e"), rolebinding("dup")), 409, "AlreadyExists")
    assert body["message"] == 'rolebindings.rbac.authorization.core.io "dup" already exists'
    assert body["details"] == {"name": "dup", "group": "rbac.authorization.core.io", "kind": "rolebindings"}


def test_stale_resource_version_is_409_conflict(api: Api) -> None:
    created = api.post(ev_path("e"), event("stale", namespace="e")).json
    newer = dict(created, metadata=dict(created["metadata"], labels={"v": "2"}))
    assert api.put(ev_path("e", "stale"), newer).status == 200
    body = _status(api.put(ev_path("e", "stale"), created), 409, "Conflict")
    assert body["message"] == (
        'Operation cannot be fulfilled on events.events.core.io "stale": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )


def test_missing_object_is_404(api: Api) -> None:
    body = _status(api.get(rb_path("e", "nope")), 404, "NotFound")
    assert body["message"] == 'rolebindings.rbac.authorization.core.io "nope" not found'
    assert body["details"] == {"name": "nope", "group": "rbac.authorization.core.io", "kind": "rolebindings"}
    _status(api.delete(ev_path("e", "nope")), 404, "NotFound")
    _status(api.patch(ev_path("e", "nope"), {"metadata": {}}), 404, "NotFound")


def test_namespace_and_name_must_agree_with_the_path(api: Api) -> None:
    other = rolebinding("x")
    other["metadata"]["namespace"] = "elsewhere"
    _status(api.post(rb_path("e"), other), 400, "BadRequest")
    api.post(rb_path("e"), rolebinding("named"))
    _status(api.put(rb_path("e", "named"), rolebinding("renamed")), 400, "BadRequest")


@pytest.mark.parametrize(
    "query",
    [
        "labelSelector=a%20in%20(",
        "fieldSelector=spec.nothing%3Dx",
        "limit=abc",
        "limit=99999999999999999999999",
        "timeoutSeconds=99999999999999999999999",
        "resourceVersion=abc",
        "resourceVersion=%C2%B2",
    ],
)
def test_bad_list_parameters_are_400(api: Api, query: str) -> None:
    _status(api.get(f"{rb_path('e')}?{query}"), 400, "BadRequest")


def test_bad_list_option_combinations_are_422(api: Api) -> None:
    body = _status(api.get(f"{rb_path('e')}?resourceVersionMatch=Exact"), 422, "Invalid")
    assert body["details"]["kind"] == "ListOptions"


def test_bad_dry_run_is_422(api: Api) -> None:
    body = _status(api.post(f"{rb_path('e')}?dryRun=All&dryRun=Yes", rolebinding("dry")), 422, "Invalid")
    # Upstream prints the whole list as Go prints a []string.
    assert body["message"] == (
        'CreateOptions.meta.k8s.io "" is invalid: '
        'dryRun: Unsupported value: []string{"All", "Yes"}: supported values: "All"'
    )


def test_discovery(api: Api) -> None:
    groups = api.get("/apis").json
    assert groups["kind"] == "APIGroupList"
    names = {g["name"]: g for g in groups["groups"]}
    assert names["events.core.io"]["preferredVersion"] == {
        "groupVersion": "events.core.io/v1",
        "version": "v1",
    }
    group = api.get("/apis/rbac.authorization.core.io").json
    assert (
        group["kind"] == "APIGroup"
        and group["versions"][0]["groupVersion"] == "rbac.authorization.core.io/v1"
    )
    resources = api.get(EV_PATH).json
    assert resources["kind"] == "APIResourceList" and resources["groupVersion"] == "events.core.io/v1"
    (events,) = resources["resources"]
    assert events["name"] == "events" and events["singularName"] == "event" and events["namespaced"]
    assert events["kind"] == "Event" and events["shortNames"] == ["ev"]
    assert sorted(events["verbs"]) == [
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    ]
    assert api.get("/apis").headers["Cache-Control"] == "no-cache, private"


def test_aggregated_discovery_with_etag(api: Api) -> None:
    accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
    response = api.get("/apis", headers={"Accept": accept})
    assert response.status == 200
    assert (
        response.headers["Content-Type"]
        == "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    )
    document = response.json
    assert document["kind"] == "APIGroupDiscoveryList" and document["apiVersion"] == "apidiscovery.k8s.io/v2"
    by_group = {item["metadata"]["name"]: item for item in document["items"]}
    (version,) = by_group["events.core.io"]["versions"]
    assert version["version"] == "v1" and version["freshness"] == "Current"
    (resource,) = version["resources"]
    assert resource["resource"] == "events" and resource["scope"] == "Namespaced"
    assert resource["responseKind"] == {"group": "", "version": "", "kind": "Event"}
    assert resource["shortNames"] == ["ev"] and resource["singularResource"] == "event"
    etag = response.headers["ETag"]
    again = api.get("/apis", headers={"Accept": accept, "If-None-Match": etag})
    assert again.status == 304


def test_version(api: Api) -> None:
    version = api.get("/version").json
    assert version["major"] == "1" and version["minor"].isdigit()
    assert version["gitVersion"].startswith("v1.")


def test_legacy_api_root_serves_implicit_namespaces(api: Api) -> None:
    # Standalone, the core group holds only the read-only, implicit namespaces (kopf needs them).
    document = api.get("/api").json
    assert document["kind"] == "APIVersions" and document["versions"] == ["v1"]
    resources = api.get("/api/v1").json["resources"]
    assert [(r["name"], r["kind"], r["namespaced"], r["verbs"]) for r in resources] == [
        ("namespaces", "Namespace", False, ["get", "list", "watch"])
    ]
