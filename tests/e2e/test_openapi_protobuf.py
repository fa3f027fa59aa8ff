"""/openapi/v2 in gnostic's protobuf, proved against the real kube-apiserver: its own document,
fetched as JSON and as protobuf, encodes with coreio's encoder to the very bytes kube-apiserver
serves; both servers answer the protobuf request with the same headers; and the real kubectl, which
reads that encoding to validate a manifest, prints the same error on both for a kind neither
serves."""

from __future__ import annotations

import urllib.request
from email.message import Message
from pathlib import Path

import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from multidict import CIMultiDictProxy

from apiserver.http.middleware import status_errors
from apiserver.http.openapi import OpenAPIService
from apiserver.openapi.gnostic import encode_document
from apiserver.openapi.openapiv2 import message_class
from apiserver.resources import KINDS
from tests.support.controlplane import ControlPlane
from tests.support.kubectl import Kubectl
from tests.support.server import start_server
from tests.support.tools import kubectl_path

pytestmark = pytest.mark.e2e

ASKED = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"  # what client-go sends
SERVED = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"


def fetch(plane: ControlPlane, path: str, accept: str) -> tuple[bytes, Message]:
    request = urllib.request.Request(plane.url + path, headers={"Accept": accept})
    with urllib.request.urlopen(request, context=plane.ssl_context(), timeout=60) as response:
        return response.read(), response.headers


def _message(headers: CIMultiDictProxy[str]) -> Message:
    """aiohttp's headers as urllib's, to compare them alike."""
    message = Message()
    for name, value in headers.items():
        message[name] = value
    return message


def kube_v2(plane: ControlPlane) -> tuple[bytes, Message, bytes, Message]:
    """kube-apiserver's /openapi/v2 as JSON and as protobuf, of one version of the document (its
    OpenAPI controllers may publish a new one between two requests: fetch again then)."""
    for _ in range(5):
        json_body, json_headers = fetch(plane, "/openapi/v2", "application/json")
        proto_body, proto_headers = fetch(plane, "/openapi/v2", ASKED)
        if json_headers["ETag"] == proto_headers["ETag"]:
            return json_body, json_headers, proto_body, proto_headers
    raise AssertionError("kube-apiserver's /openapi/v2 kept changing")


def test_coreio_encodes_kube_apiserver_document_to_its_bytes(control_plane: ControlPlane) -> None:
    json_body, _, proto_body, headers = kube_v2(control_plane)
    assert headers["Content-Type"] == SERVED
    assert len(json_body) > 1_000_000  # the whole built-in API, not a stub
    ours = encode_document(json_body)
    if ours != proto_body:  # show where, by message
        document = message_class("Document")
        theirs, mine = document(), document()
        theirs.ParseFromString(proto_body)
        mine.ParseFromString(ours)
        assert str(mine) == str(theirs)
    assert ours == proto_body


async def test_coreio_answers_the_protobuf_request_as_kube_apiserver(control_plane: ControlPlane) -> None:
    _, kube_json, _, kube = kube_v2(control_plane)
    app = web.Application(middlewares=[status_errors])
    OpenAPIService(KINDS).add_routes(app.router)
    async with TestClient(TestServer(app)) as client:
        ours_json = _message(
            (await client.get("/openapi/v2", headers={"Accept": "application/json"})).headers
        )
        ours = _message((await client.get("/openapi/v2", headers={"Accept": ASKED})).headers)
    for headers, json_headers in ((kube, kube_json), (ours, ours_json)):
        assert headers["Content-Type"] == SERVED
        assert headers["ETag"] == json_headers["ETag"]  # the JSON's hash tags both encodings
        assert headers["Last-Modified"] == json_headers["Last-Modified"]
        assert headers.get_all("Vary") == ["Accept-Encoding", "Accept"]
        assert headers["Cache-Control"] == "no-cache, private"


UNSERVED = {
    "apiVersion": "example.com/v1",
    "kind": "Widget",
    "metadata": {"name": "w", "namespace": "default"},
}


def test_kubectl_apply_of_an_unserved_kind_says_what_kube_apiserver_says(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    manifest = yaml.safe_dump(UNSERVED)
    upstream = control_plane.run("apply", "-f", "-", input=manifest, check=False)
    coreio = start_server(tmp_path / "coreio")
    try:
        kubectl = Kubectl(kubectl_path(), coreio.kubeconfig)
        ours = kubectl.run("apply", "-f", "-", input=manifest, check=False, env={"HOME": str(tmp_path)})
    finally:
        coreio.stop()
    assert 'no matches for kind "Widget" in version "example.com/v1"' in upstream.stderr
    assert (ours.returncode, ours.stderr) == (upstream.returncode, upstream.stderr)
