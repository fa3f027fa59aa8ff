"""Deletes that finalizers hold, over HTTP, answered as kube-apiserver v1.33 answers them for the
built-in twins (rbac.authorization.k8s.io RoleBinding, events.k8s.io Event): the status code, the
garbage collector's finalizers the propagation options set, and the refusal of new finalizers on
an object being deleted."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.support.api import Api, ev_path, event, rb_path, rolebinding

HOLD = "example.com/hold"
NS = "fin"
MERGE = "application/merge-patch+json"

Path = Callable[..., str]
Body = Callable[[str], dict[str, Any]]
KINDS = [
    pytest.param(rb_path, lambda name: rolebinding(name), "RoleBinding", id="rolebinding"),
    pytest.param(ev_path, lambda name: event(name, NS), "Event", id="event"),
]


def held(api: Api, path: Path, body: Body, name: str, finalizers: list[str] | None = None) -> dict[str, Any]:
    obj = body(name)
    obj["metadata"]["finalizers"] = finalizers or [HOLD]
    created = api.post(path(NS), obj)
    assert created.status == 201, created.json
    return dict(created.json)


def release(api: Api, path: Path, name: str) -> None:
    assert api.patch(path(NS, name), {"metadata": {"finalizers": None}}).status == 200
    assert api.get(path(NS, name)).status == 404


@pytest.mark.parametrize(("path", "body", "kind"), KINDS)
def test_a_held_delete_is_200_with_the_marked_object(api: Api, path: Path, body: Body, kind: str) -> None:
    created = held(api, path, body, "plain")
    response = api.delete(path(NS, "plain"))
    assert response.status == 200
    marked = response.json
    assert marked["kind"] == kind and marked["metadata"]["uid"] == created["metadata"]["uid"]
    assert marked["metadata"]["deletionTimestamp"].endswith("Z")
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 0
    assert marked["metadata"]["finalizers"] == [HOLD]
    assert "generation" not in marked["metadata"]
    assert api.get(path(NS, "plain")).json == marked
    # Deleting it again is 200 with the same object, and writes nothing.
    again = api.delete(path(NS, "plain"))
    assert again.status == 200 and again.json == marked
    release(api, path, "plain")


@pytest.mark.parametrize(("path", "body", "kind"), KINDS)
@pytest.mark.parametrize("how", ["body", "query"])
def test_orphan_dependents_false_makes_a_held_delete_202(
    api: Api, path: Path, body: Body, kind: str, how: str
) -> None:
    name = f"cascade-{how}"
    held(api, path, body, name)
    if how == "body":
        response = api.delete(path(NS, name), {"kind": "DeleteOptions", "orphanDependents": False})
    else:
        response = api.delete(f"{path(NS, name)}?orphanDependents=false")
    assert response.status == 202
    assert response.json["kind"] == kind and response.json["metadata"]["deletionTimestamp"]
    # Also once it is being deleted already.
    assert api.delete(path(NS, name), {"orphanDependents": False}).status == 202
    release(api, path, name)


@pytest.mark.parametrize(("path", "body", "kind"), KINDS)
def test_a_dry_run_held_delete_answers_as_the_real_one_and_keeps_the_object(
    api: Api, path: Path, body: Body, kind: str
) -> None:
    created = held(api, path, body, "dry")
    plain = api.delete(f"{path(NS, 'dry')}?dryRun=All")
    assert plain.status == 200 and plain.json["metadata"]["deletionTimestamp"]
    cascading = api.delete(f"{path(NS, 'dry')}?dryRun=All", {"orphanDependents": False})
    assert cascading.status == 202 and cascading.json["kind"] == kind
    assert api.get(path(NS, "dry")).json == created
    api.patch(path(NS, "dry"), {"metadata": {"finalizers": None}})
    assert api.delete(path(NS, "dry")).json["kind"] == "Status"


@pytest.mark.parametrize(("path", "body", "kind"), KINDS)
def test_an_unheld_delete_is_a_200_status_even_with_orphan_dependents_false(
    api: Api, path: Path, body: Body, kind: str
) -> None:
    created = api.post(path(NS), body("free")).json
    response = api.delete(path(NS, "free"), {"orphanDependents": False})
    assert response.status == 200
    assert response.json["kind"] == "Status" and response.json["status"] == "Success"
    assert response.json["details"]["uid"] == created["metadata"]["uid"]


@pytest.mark.parametrize(
    ("options", "finalizers"),
    [
        ({"propagationPolicy": "Orphan"}, ["orphan"]),
        ({"propagationPolicy": "Foreground"}, ["foregroundDeletion"]),
        ({"orphanDependents": True}, ["orphan"]),
    ],
)
def test_propagation_options_hold_a_rolebinding_with_the_collectors_finalizer(
    api: Api, options: dict[str, Any], finalizers: list[str]
) -> None:
    api.post(rb_path(NS), rolebinding("gc"))
    response = api.delete(rb_path(NS, "gc"), options)
    # Held by the finalizer the garbage collector would remove: 200, not 202.
    assert response.status == 200
    assert response.json["metadata"]["finalizers"] == finalizers
    assert response.json["metadata"]["deletionTimestamp"]
    release(api, rb_path, "gc")


def test_propagation_options_replace_the_collectors_finalizer_on_a_rolebinding(api: Api) -> None:
    held(api, rb_path, lambda name: rolebinding(name), "swap", ["orphan", HOLD])
    response = api.delete(rb_path(NS, "swap"), {"propagationPolicy": "Foreground"})
    assert response.json["metadata"]["finalizers"] == [HOLD, "foregroundDeletion"]
    # Once being deleted it still takes the one a later delete asks for.
    again = api.delete(rb_path(NS, "swap"), {"propagationPolicy": "Orphan"})
    assert again.json["metadata"]["finalizers"] == [HOLD, "orphan"]
    release(api, rb_path, "swap")


def test_a_rolebinding_holding_only_orphan_goes_when_orphan_dependents_is_false(api: Api) -> None:
    held(api, rb_path, lambda name: rolebinding(name), "only-orphan", ["orphan"])
    response = api.delete(rb_path(NS, "only-orphan"), {"orphanDependents": False})
    assert response.status == 200 and response.json["kind"] == "Status"
    assert api.get(rb_path(NS, "only-orphan")).status == 404


def test_events_take_no_garbage_collector_finalizers(api: Api) -> None:
    # Upstream's Event strategy has the Unsupported policy: propagation options add nothing...
    api.post(ev_path(NS), event("gc", NS))
    response = api.delete(ev_path(NS, "gc"), {"propagationPolicy": "Orphan"})
    assert response.status == 200 and response.json["kind"] == "Status"
    # ...and an orphan finalizer an Event carries does not hold it.
    held(api, ev_path, lambda name: event(name, NS), "orphaned", ["orphan"])
    assert api.delete(ev_path(NS, "orphaned")).json["kind"] == "Status"
    assert api.get(ev_path(NS, "orphaned")).status == 404


def _forbidden(kind: str, name: str, found: str) -> str:
    group = "rbac.authorization.core.io" if kind == "RoleBinding" else "events.core.io"
    return (
        f'{kind}.{group} "{name}" is invalid: metadata.finalizers: Forbidden: no new finalizers can '
        f"be added if the object is being deleted, found new finalizers {found}"
    )


def _assert_refused(response: Any, kind: str, name: str, found: str) -> None:
    assert response.status == 422, response.json
    status = response.json
    assert status["reason"] == "Invalid" and status["message"] == _forbidden(kind, name, found)
    cause = {
        "reason": "FieldValueForbidden",
        "message": _forbidden(kind, name, found).split("metadata.finalizers: ", 1)[1],
        "field": "metadata.finalizers",
    }
    # Twice, as kube-apiserver: the checks of every kind's metadata, then the kind's own.
    assert status["details"]["causes"] == [cause, cause]


@pytest.mark.parametrize(("path", "body", "kind"), KINDS)
def test_no_finalizer_can_be_added_while_deleting(api: Api, path: Path, body: Body, kind: str) -> None:
    held(api, path, body, "closing")
    marked = api.delete(path(NS, "closing")).json
    merged = api.patch(path(NS, "closing"), {"metadata": {"finalizers": [HOLD, "x/y", "a/b"]}})
    _assert_refused(merged, kind, "closing", '[]string{"a/b", "x/y"}')
    replaced = dict(marked, metadata=dict(marked["metadata"], finalizers=[HOLD, "x/new"]))
    _assert_refused(api.put(path(NS, "closing"), replaced), kind, "closing", '[]string{"x/new"}')
    json_patch = [{"op": "add", "path": "/metadata/finalizers/-", "value": "kubernetes"}]
    patched = api.patch(path(NS, "closing"), json_patch, content_type="application/json-patch+json")
    _assert_refused(patched, kind, "closing", '[]string{"kubernetes"}')
    applied = {"apiVersion": body("x")["apiVersion"], "kind": kind, "metadata": {"name": "closing"}}
    applied["metadata"]["finalizers"] = ["c/d"]
    response = api.patch(
        f"{path(NS, 'closing')}?fieldManager=tests&force=true",
        applied,
        content_type="application/apply-patch+yaml",
    )
    _assert_refused(response, kind, "closing", '[]string{"c/d"}')
    # Keeping the finalizers is allowed; so is removing them, which lets the object go.
    kept = api.patch(path(NS, "closing"), {"metadata": {"finalizers": [HOLD], "labels": {"a": "b"}}})
    assert kept.status == 200 and kept.json["metadata"]["labels"] == {"a": "b"}
    release(api, path, "closing")


def test_new_finalizers_are_listed_after_other_metadata_errors(api: Api) -> None:
    # rest.BeforeUpdate's checks come first: the label error leads the message, as upstream.
    held(api, ev_path, lambda name: event(name, NS), "both")
    api.delete(ev_path(NS, "both"))
    patch = {"metadata": {"finalizers": [HOLD, "kubernetes"], "labels": {"bad key!": "x"}}}
    status = api.patch(ev_path(NS, "both"), patch).json
    assert status["message"].startswith('Event.events.core.io "both" is invalid: [metadata.labels: ')
    assert [c["field"] for c in status["details"]["causes"]] == [
        "metadata.labels",
        "metadata.finalizers",
        "metadata.labels",
        "metadata.finalizers",
        "metadata.labels",
    ]
    release(api, ev_path, "both")


@pytest.mark.parametrize(("path", "body", "kind"), KINDS)
def test_deletecollection_is_200_with_the_list_as_read(api: Api, path: Path, body: Body, kind: str) -> None:
    held_one = body("col-held")
    held_one["metadata"].update(finalizers=[HOLD], labels={"col": "1"})
    free_one = body("col-free")
    free_one["metadata"]["labels"] = {"col": "1"}
    api.post(path(NS), held_one)
    api.post(path(NS), free_one)
    response = api.delete(f"{path(NS)}?labelSelector=col%3D1", {"orphanDependents": False})
    assert response.status == 200 and response.json["kind"] == f"{kind}List"
    assert [i["metadata"]["name"] for i in response.json["items"]] == ["col-free", "col-held"]
    assert all("deletionTimestamp" not in i["metadata"] for i in response.json["items"])
    left = api.get(f"{path(NS)}?labelSelector=col%3D1").json["items"]
    assert [i["metadata"]["name"] for i in left] == ["col-held"]
    assert left[0]["metadata"]["deletionTimestamp"]
    release(api, path, "col-held")
