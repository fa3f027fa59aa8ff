"""Hostile input against the real server (issue #5, item 8): spoofed identity headers, bad client
certificates, names that try to leave their collection, oversized and deeply nested bodies, broken
encodings, huge numbers and wrong types. Every answer is a clean 4xx Status (or a correct answer),
never a 5xx, and the server keeps answering."""

from __future__ import annotations

import datetime
import gzip
import http.client
import json
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from apiserver import pki
from tests.support.api import Api, Response, ev_path, event, rb_path, rolebinding
from tests.support.rawhttp import serving_cleanly, user_context
from tests.support.server import ServerProcess
from tests.support.waiting import wait_until

FRONT_PROXY = "front-proxy"
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A standalone server that trusts a front proxy (its own CA, CN front-proxy) and writes an
    audit log, so the tests can see who each request was taken to be."""
    base = tmp_path_factory.mktemp("hostile")
    front_proxy_ca = pki.create_ca("front-proxy-ca")
    front_proxy_ca.save(base / "front-proxy-ca.crt", base / "front-proxy-ca.key")
    args = [
        "--requestheader-client-ca-file",
        str(base / "front-proxy-ca.crt"),
        "--requestheader-allowed-names",
        FRONT_PROXY,
        "--audit-log-path",
        str(base / "audit.log"),
    ]
    with serving_cleanly(base / "server", args) as server:
        yield server


@pytest.fixture(scope="module")
def admin(hostile: ServerProcess) -> Api:
    return Api(hostile)


@pytest.fixture(autouse=True)
def _still_serving(hostile: ServerProcess) -> Iterator[None]:
    yield
    assert Api(hostile).get("/readyz").status == 200, "the server stopped answering"


def _clean_4xx(response: Response, *codes: int) -> dict[str, Any]:
    """A Status object with a 4xx code (one of `codes` when given)."""
    assert 400 <= response.status < 500, (response.status, response.body[:500])
    if codes:
        assert response.status in codes, (response.status, response.body[:500])
    body = json.loads(response.body)
    assert body["kind"] == "Status" and body["status"] == "Failure", body
    assert body["code"] == response.status
    return dict(body)


def _audited_user(server: ServerProcess, path: str) -> str:
    """The user name the audit log recorded for the last request to `path`."""
    log = server.data_dir.parent / "audit.log"

    def users() -> list[str]:
        entries = map(json.loads, log.read_text().splitlines())
        return [entry["user"].get("username", "") for entry in entries if entry["requestURI"] == path]

    return str(wait_until(users, timeout=2.5, message=f"an audit entry for {path}")[-1])


def _front_proxy_context(server: ServerProcess, directory: Path, cn: str) -> ssl.SSLContext:
    base = server.data_dir.parent
    ca = pki.KeyPair.load(base / "front-proxy-ca.crt", base / "front-proxy-ca.key")
    pair = pki.issue_client_certificate(ca, cn)
    pair.save(directory / f"{cn}.crt", directory / f"{cn}.key")
    context = server.ssl_context(client_cert=False)
    context.load_cert_chain(str(directory / f"{cn}.crt"), str(directory / f"{cn}.key"))
    return context


def _api(server: ServerProcess, context: ssl.SSLContext) -> Api:
    api = Api(server, client_cert=False)
    api.context = context
    return api


SPOOF = {"X-Remote-User": "system:admin", "X-Remote-Group": "system:masters"}


# ----------------------------------------------------------------------------------- identity


def test_remote_user_headers_from_a_front_proxy_are_trusted(hostile: ServerProcess, tmp_path: Path) -> None:
    """The positive control: the same headers from the real front proxy count."""
    proxy = _api(hostile, _front_proxy_context(hostile, tmp_path, FRONT_PROXY))
    path = rb_path("spoof-proxy")
    assert proxy.get(path, headers=SPOOF).status == 200
    assert _audited_user(hostile, path) == "system:admin"


def test_remote_user_headers_with_a_user_certificate_are_ignored(
    hostile: ServerProcess, tmp_path: Path
) -> None:
    bob = _api(hostile, user_context(hostile, tmp_path, "bob"))
    path = rb_path("spoof-bob")
    _clean_4xx(bob.get(path, headers=SPOOF), 403)
    assert _audited_user(hostile, path) == "bob"


def test_remote_user_headers_with_the_admin_certificate_are_ignored(
    admin: Api, hostile: ServerProcess
) -> None:
    path = rb_path("spoof-admin")
    headers = {"X-Remote-User": "mallory", "X-Remote-Group": "nobody"}
    assert admin.get(path, headers=headers).status == 200
    assert _audited_user(hostile, path) == "coreio-admin"


def test_remote_user_headers_without_a_certificate_are_401(hostile: ServerProcess) -> None:
    body = _clean_4xx(Api(hostile, client_cert=False).get(rb_path("spoof-none"), headers=SPOOF), 401)
    assert body["reason"] == "Unauthorized"


def test_a_front_proxy_certificate_with_another_name_asserts_nothing(
    hostile: ServerProcess, tmp_path: Path
) -> None:
    """Issued by the front-proxy CA but not an allowed name: the headers are not believed, and the
    certificate is no user certificate either."""
    rogue = _api(hostile, _front_proxy_context(hostile, tmp_path, "rogue-proxy"))
    _clean_4xx(rogue.get(rb_path("spoof-rogue"), headers=SPOOF), 401)


def _certificate_context(
    server: ServerProcess, directory: Path, ca: pki.KeyPair, *, valid_from: datetime.datetime, days: float
) -> ssl.SSLContext:
    """A client certificate for system:masters, valid from `valid_from` for `days`."""
    key = pki.generate_key()
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
            x509.NameAttribute(NameOID.COMMON_NAME, "intruder"),
        ]
    )
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(ca.certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid_from)
        .not_valid_after(valid_from + datetime.timedelta(days=days))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca.key, hashes.SHA256())
    )
    pki.KeyPair(certificate, key).save(directory / "intruder.crt", directory / "intruder.key")
    context = server.ssl_context(client_cert=False)
    context.load_cert_chain(str(directory / "intruder.crt"), str(directory / "intruder.key"))
    return context


def _refused(server: ServerProcess, context: ssl.SSLContext) -> None:
    """The server refuses the certificate in the TLS handshake (it verifies client certificates
    against its CAs, CERT_OPTIONAL): over TLS 1.2 the handshake fails; over TLS 1.3, where the
    client's certificate is checked after the client thinks the handshake is done, the connection
    closes before any HTTP response. Never served, never a 5xx."""
    api = _api(server, context)
    for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
        context.maximum_version = version
        with pytest.raises((ssl.SSLError, ConnectionResetError, http.client.RemoteDisconnected)):
            api.get(rb_path("refused"))


def test_an_expired_client_certificate_is_refused(hostile: ServerProcess, tmp_path: Path) -> None:
    ca = pki.KeyPair.load(hostile.data_dir / "pki" / "ca.crt", hostile.data_dir / "pki" / "ca.key")
    past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=30)
    context = _certificate_context(hostile, tmp_path, ca, valid_from=past, days=1)
    _refused(hostile, context)


def test_a_not_yet_valid_client_certificate_is_refused(hostile: ServerProcess, tmp_path: Path) -> None:
    ca = pki.KeyPair.load(hostile.data_dir / "pki" / "ca.crt", hostile.data_dir / "pki" / "ca.key")
    future = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=30)
    context = _certificate_context(hostile, tmp_path, ca, valid_from=future, days=1)
    _refused(hostile, context)


def test_a_client_certificate_from_another_ca_is_refused(hostile: ServerProcess, tmp_path: Path) -> None:
    other = pki.create_ca("someone-elses-ca")
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=1)
    context = _certificate_context(hostile, tmp_path, other, valid_from=now, days=1)
    _refused(hostile, context)


# ----------------------------------------------------------------------------------- names


@pytest.fixture(scope="module")
def neighbour(admin: Api) -> dict[str, Any]:
    """An object in another namespace that traversal attempts try to reach."""
    response = admin.post(rb_path("neighbour"), rolebinding("secret"))
    assert response.status == 201
    return dict(response.json)


NAMES = [
    "..",
    ".",
    "%2E%2E",
    "%2e",
    "a%2Fb",
    "..%2F..%2Fneighbour%2Frolebindings%2Fsecret",
    "%00",
    "a%00b",
    "%",
    "a%25b",
    "%FF%FE",
    "%C0%AE%C0%AE",
    "x" * 254,
    "x" * 100_000,
]


@pytest.mark.parametrize("name", NAMES, ids=lambda n: n[:40])
def test_hostile_names_are_refused_or_not_found(admin: Api, neighbour: dict[str, Any], name: str) -> None:
    path = rb_path("names", "") + "/" + name
    for response in (
        admin.get(path),
        admin.delete(path),
        admin.put(path, rolebinding("same")),
        admin.patch(path, {"metadata": {"labels": {"a": "b"}}}),
        admin.get(path, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}),
    ):
        _clean_4xx(response, 400, 404, 409, 422)
    assert admin.get(rb_path("neighbour", "secret")).json["metadata"]["uid"] == neighbour["metadata"]["uid"]


def test_an_encoded_slash_is_a_slash_as_upstream(admin: Api, neighbour: dict[str, Any]) -> None:
    """kube-apiserver routes the decoded path: `rolebindings/%2F` is `rolebindings//`, whose trailing
    slashes go, so the collection is listed (and authorized as a list), not an object named "/"."""
    response = admin.get(rb_path("names", "") + "/%2F")
    assert response.status == 200 and response.json["kind"] == "RoleBindingList", response.body[:300]
    assert admin.put(rb_path("names", "") + "/%2F", rolebinding("same")).status == 405
    assert admin.get(rb_path("neighbour", "secret")).json["metadata"]["uid"] == neighbour["metadata"]["uid"]


def test_dot_dot_names_are_bad_requests_as_upstream(admin: Api) -> None:
    body = _clean_4xx(admin.get(rb_path("names", "..")), 400)
    assert body["message"] == "Name parameter invalid: \"..\": may not be '..'"
    # The path is decoded before it is routed (as kube-apiserver answers): `a%2Fb` is the name `a`
    # with a subresource `b`, which is not served.
    body = _clean_4xx(admin.delete(rb_path("names", "a%2Fb")), 404)
    assert body["message"] == "the server could not find the requested resource"


@pytest.mark.parametrize(
    "path",
    [
        "/namespaces/names/rolebindings/../../neighbour/rolebindings/secret",
        "/namespaces/names/rolebindings/%2E%2E/%2E%2E/neighbour/rolebindings/secret",
        "/namespaces/names/../neighbour/rolebindings/secret",
        "/namespaces/..%2Fneighbour/rolebindings/secret",
        "/namespaces/%2E%2E/neighbour/rolebindings/secret",
        "/namespaces/neighbour%2Frolebindings%2Fsecret/rolebindings",
        "/namespaces/names/rolebindings/secret/../../../neighbour/rolebindings/secret",
    ],
)
def test_path_traversal_does_not_reach_other_namespaces(
    admin: Api, neighbour: dict[str, Any], path: str
) -> None:
    response = admin.get("/apis/rbac.authorization.core.io/v1" + path)
    if response.status == 200:
        # Only ever an (empty) list of a namespace that does not exist.
        assert response.json["items"] == [], response.body[:500]
    else:
        _clean_4xx(response, 400, 404)


def test_hostile_namespaces_list_nothing_and_create_nothing(admin: Api) -> None:
    for namespace in ("..", ".", "%00", "x" * 300, "%FF"):
        listed = admin.get(rb_path(namespace))
        assert listed.status == 200 and listed.json["items"] == [], listed.body[:300]
        _clean_4xx(admin.post(rb_path(namespace), rolebinding("created")), 400, 404, 422)
    # An encoded slash is a slash (kube-apiserver answers both 404): no namespace, no kind.
    for namespace in ("%2F", "a%2Fb"):
        _clean_4xx(admin.get(rb_path(namespace)), 404)
        _clean_4xx(admin.post(rb_path(namespace), rolebinding("created")), 404)


def test_nul_bytes_in_names(admin: Api) -> None:
    """A RoleBinding name only has to be a path segment upstream: NUL is allowed, and must round-trip;
    an Event name must be a DNS subdomain."""
    created = admin.post(rb_path("nul"), rolebinding("a\u0000b"))
    assert created.status == 201, created.body
    assert admin.get(rb_path("nul", "a%00b")).json["metadata"]["name"] == "a\u0000b"
    assert [item["metadata"]["name"] for item in admin.get(rb_path("nul")).json["items"]] == ["a\u0000b"]
    assert admin.delete(rb_path("nul", "a%00b")).status == 200
    _clean_4xx(admin.post(ev_path("nul"), event("a\u0000b")), 422)


def test_very_long_names(admin: Api) -> None:
    """As upstream, a RoleBinding name has no length limit of its own (only the body's): it is
    stored and found again; an Event name is a DNS subdomain, at most 253 characters."""
    for name in ("x" * 254, "x" * 100_000):
        assert admin.post(rb_path("long"), rolebinding(name)).status == 201
        assert admin.get(rb_path("long", name)).json["metadata"]["name"] == name
        assert admin.delete(rb_path("long", name)).status == 200
        body = _clean_4xx(admin.post(ev_path("long"), event(name)), 422)
        assert "metadata.name" in body["message"]


# ----------------------------------------------------------------------------------- selectors


@pytest.mark.parametrize(
    "selector",
    [
        "labelSelector=" + quote("a=" + "b" * 100_000),
        "labelSelector=" + quote("a" * 100_000),
        "labelSelector=" + quote(",".join(f"k{i}=v{i}" for i in range(10_000))),
        "labelSelector=" + quote("k in (" + ",".join(f"v{i}" for i in range(10_000)) + ")"),
        "labelSelector=" + quote("!" * 10_000),
        "labelSelector=" + quote("(" * 10_000),
        "fieldSelector=" + quote(",".join(f"metadata.name!=n{i}" for i in range(10_000))),
        "fieldSelector=" + quote("metadata.name=" + "\\" * 100_000),
    ],
    ids=["long-value", "long-key", "10k-terms", "10k-in-values", "bangs", "parens", "10k-fields", "escapes"],
)
def test_huge_selectors_are_answered_quickly(admin: Api, selector: str) -> None:
    for path in (rb_path("selectors"), "/apis/rbac.authorization.core.io/v1/rolebindings"):
        started = time.monotonic()
        response = admin.get(f"{path}?{selector}")
        assert time.monotonic() - started < 5
        if response.status != 200:
            _clean_4xx(response, 400)


def test_a_huge_selector_still_selects_correctly(admin: Api) -> None:
    for i in range(3):
        labels = {"k": f"v{i}"}
        assert admin.post(
            rb_path("sel"), rolebinding(f"rb-{i}", metadata={"name": f"rb-{i}", "labels": labels})
        )
    values = ",".join(f"v{i}" for i in range(1, 10_000))
    listed = admin.get(rb_path("sel") + "?labelSelector=" + quote(f"k in ({values})"))
    assert [item["metadata"]["name"] for item in listed.json["items"]] == ["rb-1", "rb-2"]


# ----------------------------------------------------------------------------------- bodies

DEPTH = 10_000
DEEP_JSON = [
    b"[" * DEPTH + b"]" * DEPTH,
    b'{"a":' * DEPTH + b"1" + b"}" * DEPTH,
    b'{"metadata":{"labels":' + b'{"a":' * DEPTH + b"1" + b"}" * DEPTH + b"}}",
    b'[{"op":"add","path":"/metadata/labels","value":' + b"[" * DEPTH + b"]" * DEPTH + b"}]",
]
DEEP_YAML = [
    b"a: " + b"[" * DEPTH + b"]" * DEPTH,
    b"a: " + b"{b: " * DEPTH + b"1" + b"}" * DEPTH,
    b"".join(b"  " * i + b"a:\n" for i in range(1000)),
    b"".join(b"  " * i + b"- \n" for i in range(1000)),
    b"a: &a [" + b"*a, " * 1000 + b"]",
]
PATCH_TYPES = [
    "application/merge-patch+json",
    "application/json-patch+json",
    "application/strategic-merge-patch+json",
]


@pytest.mark.parametrize("body", DEEP_JSON, ids=["arrays", "objects", "labels", "json-patch"])
def test_deeply_nested_json_is_a_bad_request(admin: Api, body: bytes) -> None:
    admin.put(rb_path("deep", "target"), rolebinding("target"))
    _clean_4xx(admin.post(rb_path("deep"), raw=body, content_type="application/json"), 400)
    _clean_4xx(admin.put(rb_path("deep", "target"), raw=body, content_type="application/json"), 400)
    for content_type in PATCH_TYPES:
        _clean_4xx(admin.patch(rb_path("deep", "target"), None, raw=body, content_type=content_type), 400)
    _clean_4xx(admin.delete(rb_path("deep", "target"), raw=body, content_type="application/json"), 400)
    _clean_4xx(admin.post(ev_path("deep"), raw=body, content_type="application/json"), 400)


@pytest.mark.parametrize("body", DEEP_YAML, ids=["flow-seq", "flow-map", "block-map", "block-seq", "aliases"])
def test_deeply_nested_yaml_is_a_bad_request(admin: Api, body: bytes) -> None:
    admin.put(rb_path("deep", "target"), rolebinding("target"))
    _clean_4xx(admin.post(rb_path("deep"), raw=body, content_type="application/yaml"), 400)
    path = rb_path("deep", "target") + "?fieldManager=hostile"
    _clean_4xx(admin.patch(path, None, raw=body, content_type="application/apply-patch+yaml"), 400)


def test_bodies_over_3_mib_are_413(admin: Api) -> None:
    admin.put(rb_path("big", "target"), rolebinding("target"))
    too_big = b" " * (3 * MIB + 1)
    for response in (
        admin.post(rb_path("big"), raw=too_big, content_type="application/json"),
        admin.put(rb_path("big", "target"), raw=too_big, content_type="application/json"),
        admin.patch(rb_path("big", "target"), None, raw=too_big),
        admin.delete(rb_path("big", "target"), raw=too_big, content_type="application/json"),
    ):
        _clean_4xx(response, 413)
    # Exactly at the limit it is read (and refused for what it says).
    _clean_4xx(admin.post(rb_path("big"), raw=b" " * (3 * MIB), content_type="application/json"), 400)


def test_a_compressed_body_cannot_expand_past_the_limit(admin: Api) -> None:
    bomb = gzip.compress(b" " * (64 * MIB))
    started = time.monotonic()
    response = admin.post(
        rb_path("big"), raw=bomb, content_type="application/json", headers={"Content-Encoding": "gzip"}
    )
    assert time.monotonic() - started < 10
    _clean_4xx(response, 400, 413, 415)


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b'{"metadata":{"name":"\xff\xfe"}}', "application/json"),
        (b'\xef\xbb\xbf{"metadata":{"name":"bom"}}', "application/json"),
        (b'{"metadata":{"name":"\xed\xa0\x80"}}', "application/json"),
        (b"\xff\xfe\x00{", "application/json"),
        (b'metadata: {name: "\xff\xfe"}', "application/yaml"),
        (b"metadata:\n  name: \xc0\xae\n", "application/yaml"),
        (b'{"metadata":{"name":"a\\ud800b"}}', "application/json"),
        (b"\x00\x00\x00\x00", "application/json"),
        (b"", "application/json"),
        (b"null", "application/json"),
        (b"[]", "application/json"),
        (b'"string"', "application/json"),
        (b"--- !!python/object/apply:os.system ['true']", "application/yaml"),
        (b"!!binary aGVsbG8=", "application/yaml"),
        (b"a: !!set {x, y}", "application/yaml"),
        (b"? [a, b]\n: c", "application/yaml"),
        (b"--- a\n--- b\n", "application/yaml"),
    ],
)
def test_broken_encodings_are_bad_requests(admin: Api, body: bytes, content_type: str) -> None:
    admin.put(rb_path("enc", "target"), rolebinding("target"))
    for response in (
        admin.post(rb_path("enc"), raw=body, content_type=content_type),
        admin.put(rb_path("enc", "target"), raw=body, content_type=content_type),
    ):
        _clean_4xx(response, 400, 409, 415, 422)
    patch_type = (
        "application/merge-patch+json" if content_type.endswith("json") else "application/apply-patch+yaml"
    )
    path = rb_path("enc", "target") + "?fieldManager=hostile"
    response = admin.patch(path, None, raw=body, content_type=patch_type)
    if response.status != 200:
        _clean_4xx(response, 400, 409, 422)


@pytest.mark.parametrize(
    "number",
    [
        b"9" * 5000,
        b"1e999",
        b"-1e999",
        b"1e-999",
        b"18446744073709551616",
        b"-9223372036854775809",
        b"0.1e400",
    ],
)
def test_huge_numbers_are_refused(admin: Api, number: bytes) -> None:
    admin.put(rb_path("num", "target"), rolebinding("target"))
    body = b'{"apiVersion":"rbac.authorization.core.io/v1","kind":"RoleBinding",'
    body += b'"metadata":{"name":"n","generation":'
    body += number + b'},"roleRef":{"apiGroup":"rbac.authorization.core.io","kind":"Role","name":"r"}}'
    _clean_4xx(admin.post(rb_path("num"), raw=body, content_type="application/json"), 400, 422)
    patch = b'{"metadata":{"generation":' + number + b"}}"
    response = admin.patch(rb_path("num", "target"), None, raw=patch)
    if response.status != 200:  # a merge patch of generation is ignored when in range
        _clean_4xx(response, 400, 422)
    ev = (
        b'{"apiVersion":"events.core.io/v1","kind":"Event","metadata":{"name":"n"},"deprecatedCount":'
        + number
        + b"}"
    )
    _clean_4xx(admin.post(ev_path("num"), raw=ev, content_type="application/json"), 400, 422)
    delete = b'{"gracePeriodSeconds":' + number + b"}"
    response = admin.delete(rb_path("num", "missing"), raw=delete, content_type="application/json")
    _clean_4xx(response, 400, 404, 422)


@pytest.mark.parametrize(
    "query",
    [
        "limit=" + "9" * 400,
        "limit=1e9",
        "timeoutSeconds=" + "9" * 400,
        "resourceVersion=" + "9" * 400,
        "resourceVersion=18446744073709551615&resourceVersionMatch=NotOlderThan",
        "continue=" + "A" * 10_000,
        "watch=1&timeoutSeconds=" + "9" * 400,
        "watch=1&resourceVersion=" + "9" * 400,
        "timeout=" + "9" * 400 + "h",
        "timeout=-1s",
        "pretty=%FF&dryRun=%00",
    ],
)
def test_hostile_query_parameters(admin: Api, query: str) -> None:
    response = admin.get(rb_path("query") + "?" + query)
    if response.status != 200 and not _too_large_resource_version(response):
        _clean_4xx(response)


# ----------------------------------------------------------------------------------- types

WRONG: list[Any] = [None, 0, -1, 1.5, 2**70, "", "x", True, [], [1], [None], {}, {"a": 1}, [[[]]]]
RB_FIELDS = [
    "apiVersion",
    "kind",
    "metadata",
    "roleRef",
    "subjects",
    "metadata.name",
    "metadata.namespace",
    "metadata.labels",
    "metadata.annotations",
    "metadata.finalizers",
    "metadata.ownerReferences",
    "metadata.managedFields",
    "metadata.resourceVersion",
    "metadata.generateName",
    "metadata.uid",
    "metadata.creationTimestamp",
    "metadata.deletionTimestamp",
    "metadata.deletionGracePeriodSeconds",
    "metadata.generation",
    "metadata.labels.k",
    "metadata.annotations.k",
    "metadata.ownerReferences.0",
    "metadata.ownerReferences.0.controller",
    "metadata.managedFields.0",
    "metadata.managedFields.0.fieldsV1",
    "roleRef.apiGroup",
    "roleRef.kind",
    "roleRef.name",
    "subjects.0",
    "subjects.0.kind",
    "subjects.0.name",
    "subjects.0.namespace",
    "subjects.0.apiGroup",
]
EV_FIELDS = [
    "eventTime",
    "series",
    "series.count",
    "series.lastObservedTime",
    "reportingController",
    "reportingInstance",
    "action",
    "reason",
    "regarding",
    "regarding.name",
    "related",
    "note",
    "type",
    "deprecatedSource",
    "deprecatedSource.host",
    "deprecatedFirstTimestamp",
    "deprecatedLastTimestamp",
    "deprecatedCount",
]


def _with(obj: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    """`obj` with the field at `dotted` (numbers index lists) set to `value`, creating the way."""
    result: dict[str, Any] = json.loads(json.dumps(obj))
    parts = dotted.split(".")
    node: Any = result
    for part, following in zip(parts, [*parts[1:], None], strict=True):
        key: Any = int(part) if part.isdigit() else part
        if following is None:
            if isinstance(node, list):
                node.append(value)
            else:
                node[key] = value
            break
        empty: Any = [] if following.isdigit() else {}
        if isinstance(node, list):
            if not node:
                node.append(empty)
            node = node[0]
        else:
            if not isinstance(node.get(key), dict | list):
                node[key] = empty
            node = node[key]
    return result


def _never_5xx(response: Response) -> None:
    if response.status >= 400:
        _clean_4xx(response)


def _too_large_resource_version(response: Response) -> bool:
    """Upstream's one deliberate 5xx for a client's input: 504 with cause ResourceVersionTooLarge
    for a resourceVersion the store has not reached (clients wait and retry)."""
    if response.status != 504:
        return False
    causes = json.loads(response.body)["details"]["causes"]
    return [cause["reason"] for cause in causes] == ["ResourceVersionTooLarge"]


@pytest.mark.parametrize("field", RB_FIELDS)
def test_wrong_types_in_role_bindings(admin: Api, field: str) -> None:
    name = "wt-" + field.replace(".", "-").lower()
    admin.put(rb_path("types", name), rolebinding(name))
    for value in WRONG:
        body = _with(rolebinding(name), field, value)
        _never_5xx(admin.post(rb_path("types"), body))
        _never_5xx(admin.put(rb_path("types", name), body))
        _never_5xx(admin.patch(rb_path("types", name), _with({}, field, value)))
        _never_5xx(
            admin.patch(
                rb_path("types", name),
                _with({}, field, value),
                content_type="application/strategic-merge-patch+json",
            )
        )
        path = "/" + field.replace(".", "/")
        for op in ("add", "replace", "test", "remove"):
            _never_5xx(
                admin.patch(
                    rb_path("types", name),
                    [{"op": op, "path": path, "value": value}],
                    content_type="application/json-patch+json",
                )
            )
        _never_5xx(
            admin.patch(
                rb_path("types", name) + "?fieldManager=hostile&force=true",
                None,
                raw=json.dumps(body).encode(),
                content_type="application/apply-patch+yaml",
            )
        )


@pytest.mark.parametrize("field", EV_FIELDS)
def test_wrong_types_in_events(admin: Api, field: str) -> None:
    name = "wt-" + field.replace(".", "-").lower()
    admin.put(ev_path("types", name), event(name, "types"))
    admin.post(ev_path("types"), event(name, "types"))
    for value in WRONG:
        body = _with(event(name, "types"), field, value)
        _never_5xx(admin.post(ev_path("types"), body))
        _never_5xx(admin.put(ev_path("types", name), body))
        _never_5xx(admin.patch(ev_path("types", name), _with({}, field, value)))
        _never_5xx(
            admin.patch(
                ev_path("types", name),
                [{"op": "replace", "path": "/" + field.replace(".", "/"), "value": value}],
                content_type="application/json-patch+json",
            )
        )


@pytest.mark.parametrize("value", WRONG)
def test_wrong_types_in_delete_options(admin: Api, value: Any) -> None:
    for field in (
        "gracePeriodSeconds",
        "preconditions",
        "preconditions.uid",
        "propagationPolicy",
        "dryRun",
        "orphanDependents",
    ):
        body = _with({"kind": "DeleteOptions", "apiVersion": "v1"}, field, value)
        _never_5xx(admin.delete(rb_path("types", "missing"), body))
        _never_5xx(admin.delete(rb_path("types-empty"), body))


@pytest.mark.parametrize(
    "patch",
    [
        [{"op": "move", "from": "/metadata", "path": "/metadata/labels"}],
        [{"op": "copy", "from": "/subjects", "path": "/subjects/0/x"}],
        [{"op": "add", "path": "/subjects/99999999999999999999", "value": {}}],
        [{"op": "add", "path": "/subjects/-1", "value": {}}],
        [{"op": "remove", "path": ""}],
        [{"op": "replace", "path": "", "value": []}],
        [{"op": "add", "path": "/metadata/labels/~2", "value": "x"}],
        [{"op": "nonsense", "path": "/a"}],
        [{"path": "/a"}],
        [{"op": "add"}],
        [1, 2, 3],
        {"op": "add", "path": "/a", "value": 1},
        [{"op": "copy", "from": "/subjects", "path": "/subjects/-"}] * 30,
    ],
)
def test_hostile_json_patches(admin: Api, patch: Any) -> None:
    admin.put(rb_path("jp", "target"), rolebinding("target"))
    response = admin.patch(rb_path("jp", "target"), patch, content_type="application/json-patch+json")
    _never_5xx(response)


@pytest.mark.parametrize(
    "patch",
    [
        {"$patch": "delete"},
        {"$patch": "replace"},
        {"$patch": "nonsense"},
        {"subjects": [{"$patch": "delete"}]},
        {"subjects": [{"$patch": "replace"}]},
        {"subjects": {"$patch": "delete"}},
        {"$setElementOrder/subjects": [{"name": "x"}], "subjects": [{"name": "x"}]},
        {"$setElementOrder/subjects": "x"},
        {"$deleteFromPrimitiveList/metadata": [1]},
        {"$retainKeys": ["x"], "metadata": None},
        {"metadata": {"$patch": "delete"}},
        {"roleRef": {"$retainKeys": 5}},
    ],
)
def test_hostile_strategic_merge_patches(admin: Api, patch: Any) -> None:
    admin.put(rb_path("smp", "target"), rolebinding("target"))
    response = admin.patch(
        rb_path("smp", "target"), patch, content_type="application/strategic-merge-patch+json"
    )
    _never_5xx(response)


@pytest.mark.parametrize(
    ("content_type", "accept"),
    [
        ("application/json; charset=utf-16", ""),
        ("application/json;;;===", ""),
        ("text/plain", ""),
        ("application/json", "*/*;q=abc"),
        ("application/json", "application/json;as=Table;v=v9;g=meta.k8s.io"),
        ("application/json", "application/json;as=Nonsense;v=v1;g=meta.k8s.io"),
        ("application/json", "application/json, " * 400),
        ("application/json", "application/vnd.kubernetes.protobuf"),
        ("application/json", "text/html"),
    ],
)
def test_hostile_media_types(admin: Api, content_type: str, accept: str) -> None:
    headers = {"Accept": accept} if accept else {}
    for response in (
        admin.post(rb_path("media"), rolebinding("m"), content_type=content_type, headers=headers),
        admin.get(rb_path("media"), headers=headers),
    ):
        _never_5xx(response)


@pytest.mark.parametrize(
    "headers",
    [{"Content-Type": "\x7f"}, {"X-Big": "b" * (2 << 20)}],
    ids=["control-char", "header-over-1MiB"],
)
def test_malformed_headers_are_400_from_the_http_parser(admin: Api, headers: dict[str, str]) -> None:
    """Refused by aiohttp's HTTP parser before any handler (a header field is limited to 1 MiB, as
    Go's server limits all of them): a plain-text 400, as Go's server answers a malformed request."""
    response = admin.get(rb_path("media"), headers=headers)
    assert response.status == 400, response.body[:300]


def test_long_headers_within_upstreams_limit_are_served(admin: Api) -> None:
    """kube-apiserver takes 1 MiB of headers: a 100 KB header is served, and a 10 KB Accept of no
    known type is refused by content negotiation (406 Status), not by the parser."""
    assert admin.get(rb_path("media"), headers={"X-Big": "b" * 100_000}).status == 200
    _clean_4xx(admin.get(rb_path("media"), headers={"Accept": "a" * 10_000}), 406)


def test_a_bearer_token_that_is_no_utf8_is_unauthorized(hostile: ServerProcess) -> None:
    """Bytes that are no UTF-8 after `Bearer ` (http.client sends the header as Latin-1): 401 as
    for any unknown token, not a 500 with a traceback."""
    api = Api(hostile, client_cert=False)
    for token in ("\xff\xfe\xfd", "abc\x80", "\xc3("):
        response = api.get(ev_path("team-a"), headers={"Authorization": f"Bearer {token}"})
        assert _clean_4xx(response, 401)["reason"] == "Unauthorized"


def test_authorize_refuses_deeply_nested_json(admin: Api) -> None:
    """POST /authorize (the SubjectAccessReview webhook) with JSON nested past Python's recursion
    limit: 400 as every other body, not a 500."""
    for depth in (100_000, 1_000_000):
        response = admin.post("/authorize", raw=b"[" * depth + b"]" * depth)
        assert _clean_4xx(response, 400)["message"].startswith("the request body is no JSON")
