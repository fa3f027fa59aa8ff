"""Stored values that no longer decode, over real HTTP against a real server on both storages: the
bytes are overwritten straight in the SQLite file or put straight into etcd. Answered as
kube-apiserver v1.33 answers with AllowUnsafeMalformedObjectDeletion on: a list fails naming the
corrupt keys (500 StorageReadError), a GET or plain DELETE is an internal error, a watch ends with
an ERROR event at the corrupt object, and DeleteOptions.ignoreStoreReadErrorWithClusterBreakingPotential
removes it for a user also allowed the verb unsafe-delete-ignore-read-errors."""

from __future__ import annotations

import base64
import json
import sqlite3
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.test_rbac_standalone import UserApi, bind
from tests.support.api import Api, rb_path, rolebinding
from tests.support.server import BACKENDS, ServerProcess, backend_args, start_server

GARBAGE = b"garbage\x00\xff"
DECODE_ERROR = (
    "couldn't get version/kind; json parse error: invalid character 'g' looking for beginning of value"
)
UNSAFE = {
    "kind": "DeleteOptions",
    "apiVersion": "v1",
    "ignoreStoreReadErrorWithClusterBreakingPotential": True,
}
GR = "rolebindings.rbac.authorization.core.io"
OPTION = "ignoreStoreReadErrorWithClusterBreakingPotential"
REFUSED = f"{OPTION}: Invalid value: true:"
DORA_NS = "corrupt-rbac"


def key(namespace: str, name: str) -> str:
    return f"/registry/rbac.authorization.core.io/rolebindings/{namespace}/{name}"


def _flag(server: ServerProcess, name: str) -> str | None:
    args = server.extra_args
    return args[args.index(name) + 1] if name in args else None


def corrupt(server: ServerProcess, namespace: str, name: str) -> None:
    """Overwrites the stored bytes of an object: in place in SQLite (as a damaged disk would), or
    as a new revision in etcd (as a writer bypassing the server would)."""
    endpoint = _flag(server, "--etcd-servers")
    if endpoint is None:
        with sqlite3.connect(server.data_dir / "coreio.db", timeout=10) as conn:
            latest = "SELECT max(id) FROM kv WHERE name = ?"
            cursor = conn.execute(
                f"UPDATE kv SET value = ? WHERE id = ({latest})", (GARBAGE, key(namespace, name))
            )
            assert cursor.rowcount == 1
        return
    full_key = (_flag(server, "--etcd-prefix") or "") + key(namespace, name)
    body = {"key": base64.b64encode(full_key.encode()).decode(), "value": base64.b64encode(GARBAGE).decode()}
    request = urllib.request.Request(
        f"{endpoint}/v3/kv/put", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200


def on_etcd(server: ServerProcess) -> bool:
    return _flag(server, "--etcd-servers") is not None


def create(api: Api, namespace: str, *names: str) -> str:
    """Creates the bindings; the resourceVersion of the last."""
    rv = ""
    for name in names:
        response = api.post(rb_path(namespace), rolebinding(name))
        assert response.status == 201, response.body
        rv = response.json["metadata"]["resourceVersion"]
    return rv


def unsafe_delete(api: Api, namespace: str, name: str) -> None:
    response = api.delete(rb_path(namespace, name), UNSAFE)
    assert response.status == 200, response.body
    assert response.json == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": name, "kind": "RoleBinding"},
        "code": 200,
    }


@pytest.fixture(scope="module", params=BACKENDS)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """As the shared fixture, but on SQLite without the watch cache: the damage is made in place on
    disk under the running server, which only a server reading the disk sees (a cached one holds
    what it read; restarted, it would stay unready, its RBAC index failing to list, as upstream's)."""
    args = backend_args(request, request.param)
    if request.param == "sqlite":
        args.append("--watch-cache=false")
    process = start_server(tmp_path_factory.mktemp(f"coreio-{request.param}"), args)
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def dora(server: ServerProcess, api: Api) -> UserApi:
    """A user allowed to delete RoleBindings in DORA_NS (the admin ClusterRole) but not the unsafe
    delete; bound before anything is corrupted, so the binding index knows her."""
    bind(api, DORA_NS, "dora-admin", "admin", [{"kind": "User", "name": "dora"}])
    user = UserApi(server, "dora")
    assert user.get(rb_path(DORA_NS)).status == 200
    return user


@pytest.fixture
def broken(api: Api, dora: UserApi) -> Iterator[list[str]]:
    """Corrupt objects a test made (put here), removed afterwards if the test did not."""
    made: list[str] = []
    yield made
    for path in made:
        api.delete(path, UNSAFE)


def break_one(server: ServerProcess, broken: list[str], namespace: str, name: str) -> None:
    corrupt(server, namespace, name)
    broken.append(rb_path(namespace, name))


def test_a_list_fails_naming_each_corrupt_key(server: ServerProcess, api: Api, broken: list[str]) -> None:
    create(api, "corrupt-list", "a-good", "b-bad", "c-bad", "d-good")
    break_one(server, broken, "corrupt-list", "b-bad")
    break_one(server, broken, "corrupt-list", "c-bad")
    # A page that fills before reaching them is served; the page that meets them is not.
    first = api.get(rb_path("corrupt-list") + "?limit=1")
    assert first.status == 200 and [i["metadata"]["name"] for i in first.json["items"]] == ["a-good"]
    token = first.json["metadata"]["continue"]
    paths = (
        rb_path("corrupt-list"),
        f"{rb_path('corrupt-list')}?limit=1&continue={token}",
        "/apis/rbac.authorization.core.io/v1/rolebindings",
    )
    for path in paths:
        response = api.get(path)
        assert response.status == 500, path
        status = response.json
        assert status["reason"] == "StorageReadError"
        assert status["message"] == f"failed to read one or more {GR} from the storage"
        details = status["details"]
        assert (details["name"], details["group"], details["kind"]) == (
            "list",
            "rbac.authorization.core.io",
            "rolebindings",
        )
        causes = details["causes"]
        assert [(c["reason"], c["field"]) for c in causes] == [
            ("UnexpectedServerResponse", key("corrupt-list", "b-bad")),
            ("UnexpectedServerResponse", key("corrupt-list", "c-bad")),
        ]
        where = key("corrupt-list", "b-bad")
        prefix = f"StorageError: corrupt object, Code: 7, Key: {where}, ResourceVersion: 0, "
        assert causes[0]["message"].startswith(prefix + "AdditionalErrorMsg: object not decodable revision=")
        assert causes[0]["message"].endswith(DECODE_ERROR)
    # Other namespaces are served.
    create(api, "corrupt-list-other", "fine")
    assert api.get(rb_path("corrupt-list-other")).status == 200
    # Once both are removed the list serves the rest.
    unsafe_delete(api, "corrupt-list", "b-bad")
    unsafe_delete(api, "corrupt-list", "c-bad")
    listed = api.get(rb_path("corrupt-list"))
    assert listed.status == 200
    assert [i["metadata"]["name"] for i in listed.json["items"]] == ["a-good", "d-good"]


def test_get_and_plain_delete_are_internal_errors(server: ServerProcess, api: Api, broken: list[str]) -> None:
    rv = create(api, "corrupt-get", "bad", "good")
    break_one(server, broken, "corrupt-get", "bad")
    response = api.get(rb_path("corrupt-get", "bad"))
    assert response.status == 500
    status = response.json
    assert status["reason"] == "InternalError"
    message = status["message"]
    assert message.startswith(
        f"Internal error occurred: StorageError: corrupt object, Code: 7, Key: {key('corrupt-get', 'bad')}, "
        "ResourceVersion: 0, AdditionalErrorMsg: object not decodable revision="
    )
    assert message.endswith(f": {DECODE_ERROR}")
    assert status["details"] == {"causes": [{"message": message.removeprefix("Internal error occurred: ")}]}
    if not on_etcd(server):
        assert f"revision={int(rv) - 1}:" in message  # rewritten in place: the revision it was created at
    deleted = api.delete(rb_path("corrupt-get", "bad"))
    assert (deleted.status, deleted.json["message"]) == (500, message)
    # Others are served; the option is refused on an object that decodes, and on a missing one.
    assert api.get(rb_path("corrupt-get", "good")).status == 200
    for name in ("good", "missing"):
        refused = api.delete(rb_path("corrupt-get", name), UNSAFE)
        assert refused.status == 422
        assert refused.json["message"] == (
            f'{GR} "{name}" is invalid: {REFUSED} '
            "is exclusively used to delete corrupt object(s), try again by removing this option"
        )
    assert api.get(rb_path("corrupt-get", "good")).status == 200


def test_the_option_goes_with_no_other_and_not_with_deletecollection(
    server: ServerProcess, api: Api, broken: list[str]
) -> None:
    create(api, "corrupt-options", "bad")
    break_one(server, broken, "corrupt-options", "bad")
    combined = api.delete(
        rb_path("corrupt-options", "bad") + "?dryRun=All&gracePeriodSeconds=0",
        {**UNSAFE, "preconditions": {"uid": "x"}},
    )
    assert combined.status == 422
    assert combined.json["message"] == (
        f'DeleteOptions.meta.k8s.io "" is invalid: [{REFUSED} cannot be set together with .dryRun, '
        f"{REFUSED} cannot be set together with .gracePeriodSeconds, "
        f"{REFUSED} cannot be set together with .preconditions]"
    )
    collection = api.delete(
        rb_path("corrupt-options") + "?ignoreStoreReadErrorWithClusterBreakingPotential=true"
    )
    assert collection.status == 422
    assert collection.json["message"] == (
        f'DeleteOptions.meta.k8s.io "" is invalid: {REFUSED} '
        "is not allowed with DELETECOLLECTION, try again after removing the option"
    )
    # The query parameter works as the body does.
    response = api.delete(
        rb_path("corrupt-options", "bad") + "?ignoreStoreReadErrorWithClusterBreakingPotential=true"
    )
    assert response.status == 200 and response.json["details"] == {"name": "bad", "kind": "RoleBinding"}
    assert api.get(rb_path("corrupt-options", "bad")).status == 404


def test_the_unsafe_delete_needs_its_own_verb(
    server: ServerProcess, api: Api, dora: UserApi, broken: list[str]
) -> None:
    create(api, DORA_NS, "bad", "kept")
    break_one(server, broken, DORA_NS, "bad")
    # Allowed to delete: a plain delete reaches the storage and fails there.
    assert dora.delete(rb_path(DORA_NS, "bad")).status == 500
    refused = dora.delete(rb_path(DORA_NS, "bad"), UNSAFE)
    assert refused.status == 403
    status = refused.json
    assert status["reason"] == "Forbidden"
    # RBAC gives no reason for a request no rule allows (as upstream's), hence the empty one.
    assert status["message"] == (
        f'{GR} "bad" is forbidden: not permitted to do "unsafe-delete-ignore-read-errors", reason: '
    )
    assert status["details"] == {"name": "bad", "group": "rbac.authorization.core.io", "kind": "rolebindings"}
    assert api.get(rb_path(DORA_NS, "bad")).status == 500  # still there
    unsafe_delete(api, DORA_NS, "bad")  # system:masters may
    assert api.get(rb_path(DORA_NS, "bad")).status == 404
    assert dora.delete(rb_path(DORA_NS, "kept")).status == 200  # her binding still counts


def _error(event: dict[str, Any]) -> tuple[str, int, str, str]:
    obj = event["object"]
    return event["type"], obj["code"], obj["reason"], obj["message"]


INTERNAL = ("ERROR", 500, "InternalError", f"Internal error occurred: {DECODE_ERROR}")


def test_a_watch_serves_the_others_and_ends_at_a_corrupt_object(
    server: ServerProcess, api: Api, broken: list[str]
) -> None:
    ns = "corrupt-watch"
    rv = create(api, ns, "a-good", "m-bad", "z-good")
    if on_etcd(server):
        # A watch open when the corrupt value arrives ends with an ERROR event.
        with api.watch(f"{rb_path(ns)}?watch=true&resourceVersion={rv}") as events:
            break_one(server, broken, ns, "m-bad")
            assert _error(next(events)) == INTERNAL
            assert list(events) == []
    else:
        break_one(server, broken, ns, "m-bad")
    # Initial events: the objects before the corrupt one, then the ERROR.
    with api.watch(f"{rb_path(ns)}?watch=true") as events:
        first = next(events)
        assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "a-good")
        assert _error(next(events)) == INTERNAL
        assert list(events) == []
    # From a revision after it, the others' changes are served; its deletion ends the watch.
    after = create(api, ns, "later")
    with api.watch(f"{rb_path(ns)}?watch=true&resourceVersion={after}") as events:
        create(api, ns, "newer")
        added = next(events)
        assert (added["type"], added["object"]["metadata"]["name"]) == ("ADDED", "newer")
        unsafe_delete(api, ns, "m-bad")
        assert _error(next(events)) == INTERNAL
    listed = api.get(rb_path(ns))
    assert [i["metadata"]["name"] for i in listed.json["items"]] == ["a-good", "later", "newer", "z-good"]
