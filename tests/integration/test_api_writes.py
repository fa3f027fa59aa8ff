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
    # No generation: upstream's strategies for these kinds never set one.
    assert meta["namespace"] == "w" and "generation" not in meta
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
    # A uid in a PUT body is a precondition (as upstream): another uid is a 409 conflict.
    response = api.put(rb_path("w", "immut"), changed_uid)
    assert response.status == 409 and response.json["reason"] == "Conflict"
    # creationTimestamp changes are ignored, as upstream.
    moved = dict(created, metadata=dict(created["metadata"], creationTimestamp="2001-01-01T00:00:00Z"))
    moved["metadata"]["labels"] = {"x": "y"}
    updated = api.put(rb_path("w", "immut"), moved).json
    assert updated["metadata"]["creationTimestamp"] == created["metadata"]["creationTimestamp"]


def test_no_generation_on_create_update_or_patch(api: Api) -> None:
    created = api.post(rb_path("w"), rolebinding("gen")).json
    labelled = api.patch(rb_path("w", "gen"), {"metadata": {"labels": {"a": "b"}}}).json
    more = api.patch(rb_path("w", "gen"), {"subjects": [{"kind": "Group", "name": "g"}]}).json
    replaced = api.put(rb_path("w", "gen"), dict(more, subjects=[{"kind": "User", "name": "u"}])).json
    for obj in (created, labelled, more, replaced):
        assert "generation" not in obj["metadata"]
    assert replaced["subjects"] == [{"kind": "User", "name": "u", "apiGroup": "rbac.authorization.core.io"}]
    note = api.post(ev_path("w"), event("gen", "w")).json
    assert "generation" not in note["metadata"]
    noted = api.patch(ev_path("w", "gen"), {"metadata": {"labels": {"a": "b"}}}).json
    assert "generation" not in noted["metadata"]


def test_a_generation_set_at_creation_is_kept_and_never_moves(api: Api) -> None:
    # Upstream's create leaves generation as the request set it; updates cannot change it.
    body = rolebinding("gen5")
    body["metadata"]["generation"] = 5
    assert api.post(rb_path("w"), body).json["metadata"]["generation"] == 5
    patched = api.patch(rb_path("w", "gen5"), {"metadata": {"generation": 9, "labels": {"a": "b"}}})
    assert patched.status == 200 and patched.json["metadata"]["generation"] == 5
    lower = dict(patched.json, metadata=dict(patched.json["metadata"], generation=1))
    assert api.put(rb_path("w", "gen5"), lower).json["metadata"]["generation"] == 5
    put_created = api.put(
        rb_path("w", "gen3"), rolebinding("gen3", metadata={"name": "gen3", "generation": 3})
    )
    assert put_created.status == 201 and put_created.json["metadata"]["generation"] == 3


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
    assert wrong_uid.status == 409
    assert wrong_uid.json["message"] == (
        'Operation cannot be fulfilled on RoleBinding.rbac.authorization.core.io "pre": the UID in the '
        f"precondition (x) does not match the UID in record ({created['metadata']['uid']}). "
        "The object might have been deleted and then recreated"
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
    # Foreground leaves it to the garbage collector, as upstream: held by its finalizer.
    assert ok.status == 200 and ok.json["metadata"]["finalizers"] == ["foregroundDeletion"]
    api.patch(rb_path("w", "opts"), {"metadata": {"finalizers": None}})
    assert api.get(rb_path("w", "opts")).status == 404


def test_delete_collection_with_selector(api: Api) -> None:
    for name, team in (("dc1", "red"), ("dc2", "red"), ("dc3", "blue")):
        body = rolebinding(name)
        body["metadata"]["labels"] = {"team": team}
        api.post(rb_path("dc"), body)
    response = api.delete(f"{rb_path('dc')}?labelSelector=team%3Dred")
    # As upstream: the list as read before deleting.
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


def test_dry_run_create_of_a_taken_name_is_409(api: Api) -> None:
    api.post(rb_path("w"), rolebinding("taken"))
    response = api.post(f"{rb_path('w')}?dryRun=All", rolebinding("taken"))
    assert response.status == 409 and response.json["reason"] == "AlreadyExists"


def test_put_with_a_uid_is_a_precondition(api: Api) -> None:
    created = api.post(rb_path("w"), rolebinding("uidpre")).json
    other = dict(created, metadata=dict(created["metadata"], uid="11111111-1111-1111-1111-111111111111"))
    other["metadata"].pop("resourceVersion")
    response = api.put(rb_path("w", "uidpre"), other)
    assert response.status == 409 and response.json["reason"] == "Conflict"
    assert "Precondition failed: UID in precondition" in response.json["message"]
    # A stale export of a deleted object is not silently recreated under a new uid.
    api.delete(rb_path("w", "uidpre"))
    assert api.put(rb_path("w", "uidpre"), other).status == 409
    assert api.get(rb_path("w", "uidpre")).status == 404


def test_marking_for_deletion_leaves_generation_absent(api: Api) -> None:
    body = rolebinding("markgen")
    body["metadata"]["finalizers"] = ["example.com/hold"]
    api.post(rb_path("w"), body)
    marked = api.delete(rb_path("w", "markgen")).json
    assert marked["metadata"]["deletionTimestamp"] and "generation" not in marked["metadata"]
    api.patch(rb_path("w", "markgen"), {"metadata": {"finalizers": None}})


def test_marking_for_deletion_moves_a_generation_set_at_creation_once(api: Api) -> None:
    body = event("markgen5", "w")
    body["metadata"].update(generation=5, finalizers=["example.com/hold"])
    api.post(ev_path("w"), body)
    marked = api.delete(ev_path("w", "markgen5")).json
    assert marked["metadata"]["generation"] == 6
    # Deleting it again changes nothing, the generation included.
    again = api.delete(ev_path("w", "markgen5")).json
    assert again["metadata"]["generation"] == 6
    assert again["metadata"]["resourceVersion"] == marked["metadata"]["resourceVersion"]
    api.patch(ev_path("w", "markgen5"), {"metadata": {"finalizers": None}})


def test_force_on_a_non_apply_patch_is_422(api: Api) -> None:
    api.post(rb_path("w"), rolebinding("forced"))
    response = api.patch(f"{rb_path('w', 'forced')}?force=true", {"metadata": {"labels": {"a": "b"}}})
    assert response.status == 422 and response.json["details"]["kind"] == "PatchOptions"
    assert response.json["details"]["causes"][0]["field"] == "force"


def test_duplicate_fields_are_named_by_path(api: Api) -> None:
    raw = (
        b'{"apiVersion":"rbac.authorization.core.io/v1","kind":"RoleBinding",'
        b'"metadata":{"name":"dups","labels":{"a":"1","a":"2"}},'
        b'"roleRef":{"apiGroup":"rbac.authorization.core.io","kind":"Role","name":"r"}}'
    )
    warned = api.post(rb_path("w"), raw=raw, content_type="application/json")
    assert warned.status == 201
    assert warned.header_values("Warning") == ['299 - "duplicate field \\"metadata.labels.a\\""']
    assert warned.json["metadata"]["labels"] == {"a": "2"}
    strict = api.post(f"{rb_path('w')}?fieldValidation=Strict", raw=raw, content_type="application/json")
    assert strict.status == 400 and 'duplicate field "metadata.labels.a"' in strict.json["message"]


def test_yaml_alias_bomb_is_400_and_fast(api: Api) -> None:
    import time

    levels = ["a: &a [" + ",".join(['"lol"'] * 9) + "]"]
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True):
        levels.append(f"{name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]")
    began = time.monotonic()
    response = api.post(rb_path("w"), raw="\n".join(levels).encode(), content_type="application/yaml")
    assert response.status == 400 and "excessive aliasing" in response.json["message"]
    assert time.monotonic() - began < 2


def test_lone_surrogates_become_replacement_characters(api: Api) -> None:
    raw = (
        b'{"apiVersion":"rbac.authorization.core.io/v1","kind":"RoleBinding",'
        b'"metadata":{"name":"surrogate","annotations":{"note":"x\\udfffy"}},'
        b'"roleRef":{"apiGroup":"rbac.authorization.core.io","kind":"Role","name":"r"}}'
    )
    response = api.post(rb_path("w"), raw=raw, content_type="application/json")
    assert response.status == 201, response.body
    assert response.json["metadata"]["annotations"]["note"] == "x\ufffdy"


def test_unknown_field_with_control_characters_drops_the_warning(api: Api) -> None:
    body = rolebinding("ctrl")
    body["x\ny"] = 1
    response = api.post(rb_path("w"), body)
    assert response.status == 201
    assert response.header_values("Warning") == []
