"""Hostile input at the largest size the limits admit, as an ordinary user, while a second client
measures /healthz on the same worker (issue 20): every parser linear, the event loop never held.

Each input goes to every endpoint the user reaches (the kinds in a namespace she is admin of,
the self reviews and the access reviews): 3 MiB bodies of JSON, YAML and protobuf shaped to be worst
cases (many keys, deep nesting, long strings, many list items), a 1 MiB request line of selectors,
8 KiB headers. /healthz must answer within 1 s throughout, and the hostile request gets a 4xx or its
normal answer, never a 5xx. The table printed (`-s`) is each input's worst /healthz latency.

Alone, with the table: `./scripts/test -m stalls -s tests/integration/test_event_loop_stalls.py`
(about 90 s)."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from tests.support.api import Api, Response, ev_path, event, rb_path, rolebinding
from tests.support.metrics import metric
from tests.support.rawhttp import serving_cleanly, user_context
from tests.support.server import ServerProcess
from tests.support.waiting import wait_until

MIB = 1024 * 1024
BODY_LIMIT = 3 * MIB - 1024  # just under the server's 3 MiB limit
HEALTHZ_BOUND = 1.0
PROTOBUF = "application/vnd.kubernetes.protobuf"
pytestmark = pytest.mark.stalls


@dataclass
class Stalls:
    worst: float = 0.0
    answered: int = 0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with serving_cleanly(tmp_path_factory.mktemp("stalls"), ["--workers", "1"]) as process:
        yield process


@pytest.fixture(scope="module")
def dora(server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Api:
    """An ordinary user, admin of team-a (RoleBindings too), who may, as everyone, ask the reviews."""
    binding = rolebinding(
        "dora-admin",
        roleRef={"apiGroup": "rbac.authorization.core.io", "kind": "ClusterRole", "name": "admin"},
        subjects=[{"kind": "User", "name": "dora", "apiGroup": "rbac.authorization.core.io"}],
    )
    assert Api(server).post(rb_path("team-a"), binding).status == 201
    api = Api(server, client_cert=False)
    api.context = user_context(server, tmp_path_factory.mktemp("dora"), "dora")
    wait_until(lambda: api.get(ev_path("team-a")).status == 200, timeout=10, message="dora's binding")
    return api


def _watch_healthz(server: ServerProcess, stop: threading.Event, stalls: Stalls) -> None:
    """/healthz over one kept-alive connection, every 20 ms; the slowest answer is kept."""
    connection = http.client.HTTPSConnection(
        "127.0.0.1", server.port, context=server.ssl_context(client_cert=False), timeout=30
    )
    try:
        while not stop.is_set():
            started = time.monotonic()
            connection.request("GET", "/healthz")
            response = connection.getresponse()
            response.read()
            assert response.status == 200
            stalls.worst = max(stalls.worst, time.monotonic() - started)
            stalls.answered += 1
            stop.wait(0.02)
    finally:
        connection.close()


def _measured(server: ServerProcess, send: Callable[[], Response]) -> tuple[Response, Stalls]:
    stalls, stop = Stalls(), threading.Event()
    watcher = threading.Thread(target=_watch_healthz, args=(server, stop, stalls))
    watcher.start()
    try:
        wait_until(lambda: stalls.answered > 0, message="/healthz to answer")
        response = send()
        time.sleep(0.1)  # a window past the answer: work left behind it would stall the loop then
    finally:
        stop.set()
        watcher.join()
    return response, stalls


# --- the bodies ------------------------------------------------------------------------------


def _many_keys(prefix: bytes, suffix: bytes) -> bytes:
    """A JSON object of as many short keys as fit, inside `prefix` ... `suffix`."""
    room = BODY_LIMIT - len(prefix) - len(suffix)
    count = room // len(b'"k000000":"",')
    members = b",".join(b'"k%06d":""' % i for i in range(count))
    return prefix + b"{" + members + b"}" + suffix


def _event_json(shape: str) -> bytes:
    head = b'{"apiVersion":"events.core.io/v1","kind":"Event","metadata":{"name":"hostile"'
    if shape == "keys":
        return _many_keys(head + b',"labels":', b'}, "note":"n"}')
    if shape == "nesting":
        depth = (BODY_LIMIT - 200) // 2
        return head + b'},"note":' + b"[" * depth + b"]" * depth + b"}"
    if shape == "string":
        return head + b'},"note":"' + b"a" * (BODY_LIMIT - 200) + b'"}'
    items = (BODY_LIMIT - 200) // 2
    return head + b'},"related":[' + b",".join([b"0"] * items) + b"]}"


def _yaml(shape: str) -> bytes:
    head = b"apiVersion: events.core.io/v1\nkind: Event\nmetadata:\n  name: hostile\n"
    if shape == "keys":
        line = b"    k%06d: v\n"
        return head + b"  labels:\n" + b"".join(line % i for i in range((BODY_LIMIT - 200) // len(line % 0)))
    if shape == "nesting":
        depth = (BODY_LIMIT - 200) // 2
        return head + b"note: " + b"[" * depth + b"]" * depth + b"\n"
    if shape == "string":
        return head + b"note: " + b"a" * (BODY_LIMIT - 200) + b"\n"
    return head + b"related:\n" + b"- 0\n" * ((BODY_LIMIT - 200) // 4)


def _protobuf(shape: str) -> bytes:
    """A SelfSubjectAccessReview's protobuf envelope around a spec of many empty fields (the
    report's 2.9 MB case), or one long string, or deeply nested messages."""
    inner = {
        "keys": b"\x0a\x00" * ((BODY_LIMIT - 100) // 2),
        "string": b"\x0a" + _varint(BODY_LIMIT - 100) + b"a" * (BODY_LIMIT - 100),
    }.get(shape, b"\x0a\x00" * 10)
    typemeta = b"\x0a" + _field(b"authorization.k8s.io/v1") + b"\x12" + _field(b"SelfSubjectAccessReview")
    unknown = b"\x0a" + _field(typemeta) + b"\x12" + _field(inner)
    return b"k8s\x00" + unknown


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(data: bytes) -> bytes:
    return _varint(len(data)) + data


SHAPES = ["keys", "nesting", "string", "items"]
SSAR = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
SSRR = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"
SSR = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
WHO_CAN = "/apis/rbac.authorization.core.io/v1/namespaces/team-a/resourceaccessreviews"
EXPLAIN = "/apis/rbac.authorization.core.io/v1/namespaces/team-a/accessexplanations"
BINDINGS = "/apis/rbac.authorization.core.io/v1/namespaces/team-a/rolebindingreviews"

BODY_CASES: list[tuple[str, str, str, str, Callable[[str], bytes]]] = []
for _shape in SHAPES:
    BODY_CASES += [
        (f"POST events JSON {_shape}", "POST", ev_path("team-a"), "application/json", _event_json),
        (f"POST events YAML {_shape}", "POST", ev_path("team-a"), "application/yaml", _yaml),
        (f"PUT event JSON {_shape}", "PUT", ev_path("team-a", "hostile"), "application/json", _event_json),
        (
            f"PATCH event merge {_shape}",
            "PATCH",
            ev_path("team-a", "hostile"),
            "application/merge-patch+json",
            _event_json,
        ),
        (
            f"PATCH event strategic {_shape}",
            "PATCH",
            ev_path("team-a", "hostile"),
            "application/strategic-merge-patch+json",
            _event_json,
        ),
        (
            f"PATCH event apply {_shape}",
            "PATCH",
            ev_path("team-a", "hostile") + "?fieldManager=hostile",
            "application/apply-patch+yaml",
            _yaml,
        ),
        (f"POST rolebindings JSON {_shape}", "POST", rb_path("team-a"), "application/json", _event_json),
        (f"POST selfsubjectaccessreviews JSON {_shape}", "POST", SSAR, "application/json", _event_json),
        (f"POST selfsubjectaccessreviews YAML {_shape}", "POST", SSAR, "application/yaml", _yaml),
        (f"POST selfsubjectaccessreviews protobuf {_shape}", "POST", SSAR, PROTOBUF, _protobuf),
        (f"POST selfsubjectrulesreviews JSON {_shape}", "POST", SSRR, "application/json", _event_json),
        (f"POST selfsubjectreviews protobuf {_shape}", "POST", SSR, PROTOBUF, _protobuf),
        (f"POST resourceaccessreviews JSON {_shape}", "POST", WHO_CAN, "application/json", _event_json),
        (f"POST accessexplanations YAML {_shape}", "POST", EXPLAIN, "application/yaml", _yaml),
        (f"POST rolebindingreviews JSON {_shape}", "POST", BINDINGS, "application/json", _event_json),
    ]
BODY_CASES += [
    (
        f"PATCH event json-patch {shape}",
        "PATCH",
        ev_path("team-a", "hostile"),
        "application/json-patch+json",
        lambda shape: b"[" + b",".join([b'{"op":"test","path":"/a","value":0}'] * (BODY_LIMIT // 40)) + b"]",
    )
    for shape in ("items",)
]
REPORT: list[tuple[str, int, float]] = []


@pytest.fixture(scope="module", autouse=True)
def _report() -> Iterator[None]:
    yield
    print("\n| input | answer | worst /healthz (s) |\n|---|---|---|")
    for name, status, worst in REPORT:
        print(f"| {name} | {status} | {worst:.3f} |")


def _check(server: ServerProcess, name: str, send: Callable[[], Response]) -> None:
    response, stalls = _measured(server, send)
    REPORT.append((name, response.status, stalls.worst))
    assert response.status < 500, (name, response.status, response.body[:300])
    if response.status >= 400:
        assert json.loads(response.body)["kind"] == "Status", (name, response.body[:300])
    assert stalls.answered > 0 and stalls.worst < HEALTHZ_BOUND, (name, stalls)


@pytest.mark.stalls
@pytest.mark.parametrize(("name", "method", "path", "content_type", "make"), BODY_CASES, ids=lambda v: v)
def test_hostile_body(
    server: ServerProcess,
    dora: Api,
    name: str,
    method: str,
    path: str,
    content_type: str,
    make: Callable[[str], bytes],
) -> None:
    body = make(name.rsplit(" ", 1)[1])
    assert len(body) <= 3 * MIB, (name, len(body))
    if path.startswith(ev_path("team-a", "hostile")):
        # An Event of its own, small, so that no input is measured against what another stored.
        target = f"hostile-{len(REPORT)}"
        assert dora.post(ev_path("team-a"), event(target, "team-a")).status == 201
        path = path.replace("/hostile", f"/{target}", 1)
        body = body.replace(b'"name":"hostile"', b'"name":"%s"' % target.encode())
        body = body.replace(b"name: hostile", b"name: %s" % target.encode())
    _check(server, name, lambda: dora.request(method, path, raw=body, content_type=content_type))


REQUEST_LINE = MIB - 4096


QUERIES = [
    (
        "labelSelector of many terms",
        "labelSelector=" + ",".join(f"k{i}=v" for i in range(REQUEST_LINE // 12)),
    ),
    ("labelSelector of one long value", "labelSelector=k%3D" + "v" * (REQUEST_LINE - 40)),
    (
        "labelSelector set of many values",
        "labelSelector=k+in+(" + ",".join(["v"] * (REQUEST_LINE // 2)) + ")",
    ),
    ("fieldSelector of many terms", "fieldSelector=" + ",".join(["metadata.name=x"] * (REQUEST_LINE // 16))),
    ("fieldSelector of escapes", "fieldSelector=metadata.name%3D" + "%5C%5C" * (REQUEST_LINE // 7)),
    ("continue token", "limit=1&continue=" + "A" * (REQUEST_LINE - 40)),
]


@pytest.mark.stalls
@pytest.mark.parametrize(("name", "query"), QUERIES)
def test_hostile_request_line(server: ServerProcess, dora: Api, name: str, query: str) -> None:
    assert len(query) < MIB
    _check(server, f"GET events {name}", lambda: dora.get(ev_path("team-a") + "?" + query))


@pytest.mark.stalls
def test_hostile_headers(server: ServerProcess, dora: Api) -> None:
    headers = {f"X-Hostile-{i}": "v" * 8000 for i in range(8)}
    headers["Accept"] = ",".join(["application/json;q=0.9"] * 700)
    _check(server, "GET events with 8 KiB headers", lambda: dora.get(ev_path("team-a"), headers=headers))


def test_the_loop_lag_is_exported(server: ServerProcess) -> None:
    """coreio_event_loop_lag_seconds: a histogram of how late the loop's own timer fires."""
    assert metric(server, "coreio_event_loop_lag_seconds_count") > 0
    assert metric(server, "coreio_event_loop_lag_seconds_bucket", 'le="+Inf"') > 0
