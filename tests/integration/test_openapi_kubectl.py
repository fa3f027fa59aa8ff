"""The OpenAPI documents as the real kubectl 1.33 uses them, against a freshly started server:
`kubectl explain` reads the v3 documents, `kubectl create` with its default validation trusts the
server's strict field validation because the v3 document says the write operations take
`fieldValidation`, and what still reads /openapi/v2 (validation of a kind the server does not serve,
`kubectl explain --output plaintext-openapiv2`) gets it in gnostic's protobuf, as from kube-apiserver,
where it used to get a 406 and print "the server was unable to respond with a content type that the
client supports"."""

from __future__ import annotations

import re

import pytest
import yaml
from pydantic import BaseModel

from apiserver.machinery.schema import fields_of
from apiserver.openapi.gnostic import encode_document
from apiserver.resources.event import EventSeries
from apiserver.resources.rolebinding import RoleRef
from tests.support.api import Api
from tests.support.kubectl import Kubectl
from tests.support.server import ServerProcess

pytestmark = pytest.mark.tools

RB = "rolebindings.rbac.authorization.core.io"
EV = "events.events.core.io"
PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
PROTOBUF_ASKED = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"  # what client-go sends


def words(text: str) -> str:
    """Text with its line wrapping and indentation undone (kubectl wraps descriptions at 80 columns)."""
    return " ".join(text.split())


def explained(kubectl_cli: Kubectl, what: str) -> str:
    result = kubectl_cli.run("explain", what, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout


def assert_fields_explained(output: str, model: type[BaseModel]) -> None:
    flat = words(output)
    for spec in fields_of(model):
        required = " -required-" if spec.required else ""
        shown = rf"\b{spec.name} <[^>]+>{required} {re.escape(words(spec.description))}"
        assert re.search(shown, flat), spec.name


def test_explain_rolebinding_role_ref(kubectl_cli: Kubectl) -> None:
    output = explained(kubectl_cli, f"{RB}.roleRef")
    assert "GROUP:      rbac.authorization.core.io" in output
    assert "KIND:       RoleBinding" in output
    assert "VERSION:    v1" in output
    assert "FIELD: roleRef <RoleRef>" in output
    flat = words(output)
    # The field's own description and its type's, then the type's fields, all from the models.
    assert (
        "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace"
        in flat
    )
    assert "This field is immutable." in flat
    assert "apiGroup <string> -required- APIGroup is the group for the resource being referenced" in flat
    assert "kind <string> -required- Kind is the type of resource being referenced" in flat
    assert "name <string> -required- Name is the name of resource being referenced" in flat
    assert_fields_explained(output, RoleRef)


def test_explain_event_series(kubectl_cli: Kubectl) -> None:
    output = explained(kubectl_cli, f"{EV}.series")
    assert "GROUP:      events.core.io" in output
    assert "KIND:       Event" in output
    assert "FIELD: series <EventSeries>" in output
    flat = words(output)
    assert (
        "series is data about the Event series this event represents or nil if it's a singleton Event."
        in flat
    )
    assert (
        "count <integer> -required- count is the number of occurrences in this series up to the last "
        "heartbeat time." in flat
    )
    assert "lastObservedTime <string> -required- lastObservedTime is the time when last Event" in flat
    assert_fields_explained(output, EventSeries)


def test_explain_whole_kinds(kubectl_cli: Kubectl) -> None:
    rolebinding = words(explained(kubectl_cli, RB))
    assert "RoleBinding references a role, but does not contain it." in rolebinding
    assert "roleRef <RoleRef> -required-" in rolebinding
    assert "subjects <[]Subject>" in rolebinding
    assert "metadata <ObjectMeta>" in rolebinding
    event = words(explained(kubectl_cli, EV))
    assert "eventTime <string> -required-" in event
    assert "regarding <ObjectReference>" in event
    assert "deprecatedSource <EventSource>" in event


RB_MANIFEST = {
    "apiVersion": "rbac.authorization.core.io/v1",
    "kind": "RoleBinding",
    "metadata": {"name": "validated", "namespace": "openapi"},
    "roleRef": {"apiGroup": "rbac.authorization.core.io", "kind": "ClusterRole", "name": "view"},
    "subjects": [{"kind": "User", "name": "alice"}],
}


def test_create_with_default_validation(kubectl_cli: Kubectl) -> None:
    # -v=6 logs every request: the v3 documents are consulted, the write asks for strict validation,
    # and the protobuf /openapi/v2 fallback is never needed.
    result = kubectl_cli.run("create", "-f", "-", "-v=6", input=yaml.safe_dump(RB_MANIFEST), check=False)
    assert result.returncode == 0, result.stderr
    assert "rolebinding.rbac.authorization.core.io/validated created" in result.stdout
    assert "/openapi/v3/apis/rbac.authorization.core.io/v1?hash=" in result.stderr
    assert "fieldValidation=Strict" in result.stderr
    assert "/openapi/v2" not in result.stderr


def test_create_with_an_unknown_field_fails_strict_validation(kubectl_cli: Kubectl) -> None:
    manifest = {
        **RB_MANIFEST,
        "metadata": {"name": "unknown-field", "namespace": "openapi"},
        "roleRef": {**RB_MANIFEST["roleRef"], "color": "blue"},  # type: ignore[dict-item]
        "spec": {"replicas": 1},
    }
    result = kubectl_cli.run("create", "-f", "-", input=yaml.safe_dump(manifest), check=False)
    assert result.returncode != 0
    assert "Error from server (BadRequest)" in result.stderr
    assert 'strict decoding error: unknown field "roleRef.color", unknown field "spec"' in result.stderr
    missing = kubectl_cli.run("get", RB, "unknown-field", "-n", "openapi", check=False)
    assert missing.returncode != 0
    assert "NotFound" in missing.stderr or "not found" in missing.stderr


def test_events_create_validates_on_the_server_too(kubectl_cli: Kubectl) -> None:
    manifest = {
        "apiVersion": "events.core.io/v1",
        "kind": "Event",
        "metadata": {"name": "strict", "namespace": "openapi"},
        "eventTime": "2026-11-22T02:16:41.123456Z",
        "action": "Started",
        "reason": "Started",
        "type": "Normal",
        "reportingController": "example.com/controller",
        "reportingInstance": "controller-1",
        "regarding": {"kind": "Pod", "namespace": "openapi", "name": "web-0", "colour": "x"},
    }
    result = kubectl_cli.run("create", "-f", "-", input=yaml.safe_dump(manifest), check=False)
    assert result.returncode != 0
    assert 'strict decoding error: unknown field "regarding.colour"' in result.stderr
    del manifest["regarding"]["colour"]  # type: ignore[attr-defined]
    result = kubectl_cli.run("create", "-f", "-", input=yaml.safe_dump(manifest), check=False)
    assert result.returncode == 0, result.stderr


def test_v3_document_etag_and_304_over_https(server: ServerProcess) -> None:
    api = Api(server)
    path = "/openapi/v3/apis/events.core.io/v1"
    first = api.get(path)
    assert first.status == 200
    assert first.headers["Content-Type"] == "application/json"
    assert first.headers["Cache-Control"] == "no-cache, private"
    etag = first.headers["ETag"]
    assert etag.startswith('"') and etag.endswith('"')
    assert first.json["openapi"] == "3.0.0"
    cached = api.get(path, headers={"If-None-Match": etag})
    assert cached.status == 304
    assert cached.body == b""
    assert cached.headers["ETag"] == etag

    index = api.get("/openapi/v3")
    assert index.status == 200
    url = index.json["paths"]["apis/events.core.io/v1"]["serverRelativeURL"]
    assert url == f"{path}?hash={etag.strip(chr(34))}"
    pinned = api.get(url)
    assert pinned.status == 200
    assert pinned.headers["Cache-Control"] == "public, immutable"
    assert pinned.headers["Expires"]
    assert pinned.body == first.body
    assert api.get("/openapi/v3", headers={"If-None-Match": index.headers["ETag"]}).status == 304


def test_v2_is_json_or_protobuf(server: ServerProcess) -> None:
    api = Api(server)
    document = api.get("/openapi/v2", headers={"Accept": "application/json"})
    assert document.status == 200
    assert document.json["swagger"] == "2.0"
    assert "io.core.rbac.authorization.v1.RoleBinding" in document.json["definitions"]
    assert api.get("/openapi/v2", headers={"If-None-Match": document.headers["ETag"]}).status == 304
    protobuf = api.get("/openapi/v2", headers={"Accept": PROTOBUF_ASKED})
    assert protobuf.status == 200
    assert protobuf.headers["Content-Type"] == PROTOBUF
    assert protobuf.headers["ETag"] == document.headers["ETag"]
    assert protobuf.body == encode_document(document.body)
    refused = api.get("/openapi/v2", headers={"Accept": "text/html"})
    assert refused.status == 406
    assert refused.json["reason"] == "NotAcceptable"


UNSERVED = {
    "apiVersion": "example.com/v1",
    "kind": "Widget",
    "metadata": {"name": "w", "namespace": "openapi"},
}
CONTENT_TYPE_ERROR = "the server was unable to respond with a content type that the client supports"


def test_apply_of_an_unserved_kind_names_the_kind(kubectl_cli: Kubectl) -> None:
    # kubectl validates the manifest against /openapi/v2 (protobuf) before it maps the kind; with a
    # 406 there it printed the content-type error instead of this one (kube-apiserver's wording too).
    result = kubectl_cli.run("apply", "-f", "-", "-v=6", input=yaml.safe_dump(UNSERVED), check=False)
    assert result.returncode != 0
    assert CONTENT_TYPE_ERROR not in result.stderr
    assert (
        'error: resource mapping not found for name: "w" namespace: "openapi" from "STDIN": no matches '
        'for kind "Widget" in version "example.com/v1"\nensure CRDs are installed first'
    ) in result.stderr
    assert re.search(r'verb="GET" url="[^"]*/openapi/v2[^"]*" status="200 OK"', result.stderr)


def test_explain_from_the_v2_document(kubectl_cli: Kubectl) -> None:
    result = kubectl_cli.run("explain", f"{RB}.roleRef", "--output", "plaintext-openapiv2", check=False)
    assert result.returncode == 0, result.stderr
    assert "KIND:     RoleBinding" in result.stdout
    assert "VERSION:  rbac.authorization.core.io/v1" in result.stdout
    assert "RESOURCE: roleRef <Object>" in result.stdout
    assert_fields_explained_v2(result.stdout, RoleRef)
    event = kubectl_cli.run("explain", EV, "--output", "plaintext-openapiv2", check=False)
    assert event.returncode == 0, event.stderr
    flat = words(event.stdout)
    assert "eventTime <string> -required-" in flat
    assert "series <Object>" in flat


def assert_fields_explained_v2(output: str, model: type[BaseModel]) -> None:
    """Each field of the model, as the v2 explainer prints it: name, type, -required-, description."""
    flat = words(output)
    for spec in fields_of(model):
        required = " -required-" if spec.required else ""
        shown = rf"\b{spec.name} <[^>]+>{required} {re.escape(words(spec.description))}"
        assert re.search(shown, flat), spec.name


def test_openapi_needs_credentials(server: ServerProcess) -> None:
    anonymous = Api(server, client_cert=False)
    assert anonymous.get("/openapi/v3").status == 401
