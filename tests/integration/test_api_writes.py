"""Writes over HTTP: system metadata, generateName, updates and patches, dry run, deletes."""

from __future__ import annotations

import concurrent.futures

from tests.support.api import Api, ev_path, event, rb_path, rolebinding


def test_create_sets_system_metadata(api: Api) -> None:
    body = rolebinding("meta")
    body["metadata"].update({"uid": "client-uid", "creationTimestamp": "2001-01-01T00:00:00Z"})
    created = api.post(rb_path("w"), body)
    assert created.status == 201
    meta = created.json["metadata"]
    assert meta["uid"] != "client-uid" and len(meta["uid"]) == 36
    assert meta["creationTimestamp"] != "2001-01-01T00:00:00Z" and meta["creationTimestamp"].endswith("Z")
    assert meta["namespace"] == "w" and meta["generation"] == 1
    assert api.get(rb_path("w", "meta")).json == created.json


def test_generate_name(api: Api) -> None:
    body = rolebinding("")
    body["metadata"] = {"generateName": "gen-"}
    first = api.post(rb_path("w"), body).json["metadata"]["name"]
    second = api.post(rb_path("w"), body).json["metadata"]["name"]
    assert first.startswith("gen-") and len(first) == len("gen-") + 5 and first != second


def test_immutable_metadata_on_update(api: Api) -> None:
    created = api.post(rb_path("w"), rolebinding("immut")).json
    changed_uid = dict(
        created, metadata=dict(created["metadata"], uid="00000000-0000-0000-0000-000000000000")
    )
    response = api.put(rb_path("w", "immut"), changed_uid)
    assert response.status == 422
    assert "metadata.uid" in [c["field"] for c in response.json["details"]["causes"]]
    # creationTimestamp changes are ignored, as upstream.
    moved = dict(created, metadata=dict(created["metadata"], creationTimestamp="2001-01-01T00:00:00Z"))
    moved["metadata"]["labels"] = {"x": "y"}
    updated = api.put(rb_path("w", "immut"), moved).json
    assert updated["metadata"]["creationTimestamp"] == created["metadata"]["creationTimestamp"]


def test_generation_counts_changes_outside_metadata(api: Api) -> None:
    created = api.post(rb_path("w"), rolebinding("gen")).json
    labelled = api.patch(rb_path("w", "gen"), {"metadata": {"labels": {"a": "b"}}}).json
    assert labelled["metadata"]["generation"] == 1
    more = api.patch(rb_path("w", "gen"), {"subjects": [{"kind": "Group", "name": "g"}]}).json
    assert more["metadata"]["generation"] == 2
    assert created["metadata"]["uid"] == more["metadata"]["uid"]


def test_noop_update_keeps_resource_version(api: Api) -> None:
    created = api.post(rb_path("w"), rolebinding("noop")).json
    again = api.put(rb_path("w", "noop"), created).json
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_put_creates_an_absent_object(api: Api) -> None:
    response = api.put(rb_path("w", "put-made"), rolebinding("put-made"))
    assert response.status == 201
    assert api.get(rb_path("w", "put-made")).status == 200


def test_unconditional_update_and_conflicting_precondition(api: Api) -> None:
    created = api.post(ev_path("w"), event("cond", namespace="w")).json
    unconditional = dict(
        created, metadata={k: v for k, v in created["metadata"].items() if k != "resourceVersion"}
    )
    unconditional["metadata"]["labels"] = {"a": "1"}
    assert api.put(ev_path("w", "cond"), unconditional).status == 200
    assert api.put(ev_path("w", "cond"), created).status == 409


def test_patch_types(api: Api) -> None:
    api.post(rb_path("w"), rolebinding("pt"))
    merged = api.patch(rb_path("w", "pt"), {"metadata": {"labels": {"m": "1"}}})
    assert merged.status == 200 and merged.json["metadata"]["labels"] == {"m": "1"}
    json_patched = api.patch(
        rb_path("w", "pt"),
        [{"op": "replace", "path": "/subjects/0/name", "value": "carol"}],
        content_type="application/json-patch+json",
    )
    assert json_patched.json["subjects"][0]["name"] == "carol"
    strategic = api.patch(
        rb_path("w", "pt"),
        {"subjects": [{"kind": "Group", "name": "admins"}], "metadata": {"finalizers": ["a/b"]}},
        content_type="application/strategic-merge-patch+json",
    )
    # subjects is atomic: replaced whole.
    assert [s["name"] for s in strategic.json["subjects"]] == ["admins"]
    assert strategic.json["metadata"]["finalizers"] == ["a/b"]
    strategic = api.patch(
        rb_path("w", "pt"),
        {"metadata": {"finalizers": ["c/d"]}},
        content_type="application/strategic-merge-patch+json",
    )
    # finalizers merge as a set.
    assert sorted(strategic.json["metadata"]["finalizers"]) == ["a/b", "c/d"]
    api.patch(rb_path("w", "pt"), {"metadata": {"finalizers": None}})
    failing = api.patch(
        rb_path("w", "pt"),
        [{"op": "test", "path": "/subjects/0/name", "value": "nobody"}],
        content_type="application/json-patch+json",
    )
    assert failing.status == 422, failing.body
    assert failing.json["reason"] == "Invalid"


def test_patch_with_stale_resource_version_conflicts(api: Api) -> None:
    created = api.post(rb_path("w"), rolebinding("pstale")).json
    api.patch(rb_path("w", "pstale"), {"metadata": {"labels": {"a": "1"}}})
    stale = {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"], "labels": {"b": "2"}}}
    assert api.patch(rb_path("w", "pstale"), stale).status == 409


def test_concurrent_patches_are_all_applied(api: Api) -> None:
    api.post(rb_path("w"), rolebinding("hot"))

    def label(index: int) -> int:
        return api.patch(rb_path("w", "hot"), {"metadata": {"labels": {f"k{index}": "v"}}}).status

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(pool.map(label, range(24)))
    assert statuses == [200] * 24
    labels = api.get(rb_path("w", "hot")).json["metadata"]["labels"]
    assert set(labels) == {f"k{i}" for i in range(24)}


def test_dry_run_stores_nothing(api: Api) -> None:
    response = api.post(f"{rb_path('w')}?dryRun=All", rolebinding("dry"))
    assert response.status == 201 and response.json["metadata"]["name"] == "dry"
    assert api.get(rb_path("w", "dry")).status == 404
    api.post(rb_path("w"), rolebinding("dry2"))
    patched = api.patch(f"{rb_path('w', 'dry2')}?dryRun=All", {"metadata": {"labels": {"x": "y"}}})
    assert patched.json["metadata"]["labels"] == {"x": "y"}
    assert "labels" not in api.get(rb_path("w", "dry2")).json["metadata"]
    assert api.delete(f"{rb_path('w', 'dry2')}?dryRun=All").status == 200
    assert api.get(rb_path("w", "dry2")).status == 200


def test_delete_answers_success_status(api: Api) -> None:
    uid = api.post(rb_path("w"), rolebinding("del")).json["metadata"]["uid"]
    response = api.delete(rb_path("w", "del"))
    assert response.status == 200
    assert response.json == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": "del", "group": "rbac.authorization.core.io", "kind": "rolebindings", "uid": uid},
    }


def test_delete_preconditions(api: Api) -> None:
    created = api.post(rb_path("w"), rolebinding("pre")).json
    wrong_uid = api.delete(
        rb_path("w", "pre"), {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "x"}}
    )
    assert (
        wrong_uid.status == 409 and "Precondition failed: UID in precondition: x" in wrong_uid.json["message"]
    )
    wrong_rv = api.delete(rb_path("w", "pre"), {"preconditions": {"resourceVersion": "1"}})
    assert wrong_rv.status == 409
    right = {
        "preconditions": {
            "uid": created["metadata"]["uid"],
            "resourceVersion": created["metadata"]["resourceVersion"],
        }
    }
    assert api.delete(rb_path("w", "pre"), right).status == 200


def test_delete_options_are_checked(api: Api) -> None:
    api.post(rb_path("w"), rolebinding("opts"))
    bad = api.delete(f"{rb_path('w', 'opts')}?propagationPolicy=Sometimes")
    assert bad.status == 422
    ok = api.delete(f"{rb_path('w', 'opts')}?propagationPolicy=Foreground&gracePeriodSeconds=0")
    assert ok.status == 200


def test_delete_collection_with_selector(api: Api) -> None:
    for name, team in (("dc1", "red"), ("dc2", "red"), ("dc3", "blue")):
        body = rolebinding(name)
        body["metadata"]["labels"] = {"team": team}
        api.post(rb_path("dc"), body)
    response = api.delete(f"{rb_path('dc')}?labelSelector=team%3Dred")
    assert response.status == 200
    assert sorted(i["metadata"]["name"] for i in response.json["items"]) == ["dc1", "dc2"]
    remaining = api.get(rb_path("dc")).json
    assert [i["metadata"]["name"] for i in remaining["items"]] == ["dc3"]


def test_field_validation_strict_and_warn(api: Api) -> None:
    body = rolebinding("fv")
    body["spec"] = {"x": 1}
    strict = api.post(f"{rb_path('w')}?fieldValidation=Strict", body)
    assert strict.status == 400 and 'unknown field "spec"' in strict.json["message"]
    warned = api.post(f"{rb_path('w')}?fieldValidation=Warn", body)
    assert warned.status == 201
    assert warned.header_values("Warning") == ['299 - "unknown field \\"spec\\""']
    assert "spec" not in warned.json
