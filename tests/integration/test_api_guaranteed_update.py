"""The registry's read-modify-writes over HTTP, on both backends: patches racing each other lose
nothing, a PUT naming a stale resourceVersion is refused, the update that releases the last finalizer
answers as kube-apiserver does, and a watch of one named object takes no other name."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.support.api import Api, ev_path, event, rb_path, rolebinding

NS = "gu"
HOLD = "example.com/hold"


def test_concurrent_patches_lose_nothing(api: Api) -> None:
    assert api.post(rb_path(NS), rolebinding("hot")).status == 201

    def label(index: int) -> int:
        return api.patch(rb_path(NS, "hot"), {"metadata": {"labels": {f"l{index}": "x"}}}).status

    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(pool.map(label, range(16)))
    assert statuses == [200] * 16
    labels = api.get(rb_path(NS, "hot")).json["metadata"]["labels"]
    assert {f"l{index}" for index in range(16)} <= set(labels)


def test_a_put_naming_a_stale_resource_version_is_a_conflict(api: Api) -> None:
    created = api.post(ev_path(NS), event("stale", NS)).json
    assert api.patch(ev_path(NS, "stale"), {"metadata": {"labels": {"a": "b"}}}).status == 200
    response = api.put(ev_path(NS, "stale"), created)
    assert response.status == 409 and response.json["reason"] == "Conflict"
    assert "the object has been modified" in response.json["message"]


@pytest.mark.parametrize("how", ["patch", "put", "dry-run"])
def test_releasing_the_last_finalizer_answers_with_the_last_stored_version(api: Api, how: str) -> None:
    name = f"release-{how}"
    body = rolebinding(name)
    body["metadata"]["finalizers"] = [HOLD]
    assert api.post(rb_path(NS), body).status == 201
    marked = api.delete(rb_path(NS, name)).json
    if how == "put":
        released = api.put(rb_path(NS, name), dict(marked, metadata=dict(marked["metadata"], finalizers=[])))
    else:
        query = "?dryRun=All" if how == "dry-run" else ""
        released = api.patch(f"{rb_path(NS, name)}{query}", {"metadata": {"finalizers": None}})
    assert released.status == 200, released.json
    # The object as updated, at the resourceVersion it was last stored at (not the deletion's).
    assert released.json["metadata"]["resourceVersion"] == marked["metadata"]["resourceVersion"]
    assert released.json["metadata"]["deletionTimestamp"] == marked["metadata"]["deletionTimestamp"]
    assert not released.json["metadata"].get("finalizers")
    assert api.get(rb_path(NS, name)).status == (200 if how == "dry-run" else 404)


def _watch_one(api: Api, name: str, selector: str) -> tuple[int, list[str] | str]:
    query = f"?fieldSelector={selector}&timeoutSeconds=1" if selector else "?timeoutSeconds=1"
    response = api.get(
        f"/apis/rbac.authorization.core.io/v1/watch/namespaces/{NS}/rolebindings/{name}{query}"
    )
    if response.status != 200:
        return response.status, str(response.json["message"])
    lines = [json.loads(line) for line in response.body.splitlines() if line.strip()]
    return 200, [line["object"]["metadata"]["name"] for line in lines]


def test_a_watch_of_one_name_takes_no_other_name(api: Api) -> None:
    api.post(rb_path(NS), rolebinding("watched"))
    api.post(rb_path(NS), rolebinding("other"))
    mismatch = "fieldSelector metadata.name doesn't match requested name"
    assert _watch_one(api, "watched", "") == (200, ["watched"])
    assert _watch_one(api, "watched", "metadata.name%3Dwatched") == (200, ["watched"])
    assert _watch_one(api, "watched", "metadata.namespace%3Dgu,metadata.name%3Dwatched") == (200, ["watched"])
    assert _watch_one(api, "watched", "metadata.name%3Dother") == (400, mismatch)
    # A selector that does not pin the name is refused too, as upstream refuses it.
    assert _watch_one(api, "watched", "metadata.namespace%3Dgu") == (400, mismatch)
    assert _watch_one(api, "watched", "metadata.name!%3Dother") == (400, mismatch)
