"""The patch types: JSON merge patch, JSON patch and strategic merge patch, with upstream's errors."""

from __future__ import annotations

import copy
import functools
import json
import random
from collections.abc import Callable
from typing import Any

import pytest

from apiserver.machinery import jsonvalue
from apiserver.machinery.errors import StatusError
from apiserver.machinery.gofmt import go_float
from apiserver.patch import (
    MAX_JSON_PATCH_OPERATIONS,
    OBJECT_META_PATCH_SCHEMA,
    JSONPatcher,
    MergePatcher,
    Patcher,
    PatchSchema,
    PatchStrategy,
    StrategicMergePatcher,
    apply_json_patch,
    apply_merge_patch,
    apply_strategic_merge_patch,
    check_type_meta,
)
from apiserver.patch.stable_sort import go_stable_sort
from apiserver.resources.event import PATCH_SCHEMA as EVENT_PATCH_SCHEMA
from apiserver.resources.rolebinding import PATCH_SCHEMA as ROLE_BINDING_PATCH_SCHEMA

DECODING = "error decoding patch: json: cannot unmarshal "
GENERIC_422 = "the server rejected our request due to an error in our request"
FIND_KIND = (
    'struct { APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string "json:\\"kind,omitempty\\"" }'
)


def role_binding() -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.core.io/v1",
        "kind": "RoleBinding",
        "metadata": {
            "name": "rb",
            "namespace": "ns",
            "labels": {"app": "web", "tier": "front"},
            "finalizers": ["a.example.com/one", "a.example.com/two"],
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm1", "uid": "u1"},
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm2", "uid": "u2"},
            ],
        },
        "roleRef": {"apiGroup": "rbac.authorization.core.io", "kind": "Role", "name": "reader"},
        "subjects": [
            {"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.core.io"},
            {"kind": "User", "name": "bob", "apiGroup": "rbac.authorization.core.io"},
        ],
    }


def status_error(call: Any, *args: Any, **kwargs: Any) -> StatusError:
    with pytest.raises(StatusError) as info:
        call(*args, **kwargs)
    return info.value


# =============================================================================================
# JSON merge patch.


@pytest.mark.parametrize(
    ("target", "patch", "result"),
    [
        # RFC 7386 appendix A, the cases whose target and patch are objects.
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
        # Deleting what is not there is no error.
        ({"a": 1}, {"b": None}, {"a": 1}),
    ],
)
def test_merge_patch_rfc7386_examples(target: dict[str, Any], patch: Any, result: dict[str, Any]) -> None:
    assert apply_merge_patch(target, patch) == result


def test_merge_patch_on_an_object() -> None:
    original = role_binding()
    patched = apply_merge_patch(
        original,
        {
            "metadata": {"labels": {"tier": None, "env": "prod"}},
            "subjects": [{"kind": "Group", "name": "ops"}],
        },
    )
    assert patched["metadata"]["labels"] == {"app": "web", "env": "prod"}
    # Lists are replaced whole.
    assert patched["subjects"] == [{"kind": "Group", "name": "ops"}]
    assert patched["roleRef"] == original["roleRef"]


def test_merge_patch_prunes_nulls_inside_values_it_sets_as_json_patch_v4_does() -> None:
    # Null members of objects inside an array that replaces a value are pruned, while null
    # elements of such arrays stay (kube-apiserver 1.33 writes `[1,null,{"c":2}]`).
    assert apply_merge_patch({}, {"a": [1, None, {"b": None, "c": 2}]}) == {"a": [1, None, {"c": 2}]}
    assert apply_merge_patch({"a": "x"}, {"a": {"b": None, "c": {"d": None}}}) == {"a": {"c": {}}}
    # ...but a non-object replacing an object is taken as it is.
    assert apply_merge_patch({"a": {"x": 1}}, {"a": [None, {"b": None}]}) == {"a": [None, {"b": None}]}


def test_merge_patch_does_not_change_its_inputs() -> None:
    original, patch = role_binding(), {"metadata": {"labels": {"app": None}}, "x": {"y": None}}
    before, patch_before = copy.deepcopy(original), copy.deepcopy(patch)
    apply_merge_patch(original, patch)
    assert original == before
    assert patch == patch_before


@pytest.mark.parametrize(
    ("patch", "kind"), [([1], "array"), ("bar", "string"), (5, "number"), (1.5, "number"), (True, "bool")]
)
@pytest.mark.parametrize("validation", ["Strict", "Warn"])
def test_merge_patch_not_an_object_with_strict_decoding(patch: Any, kind: str, validation: str) -> None:
    err = status_error(apply_merge_patch, {"a": 1}, patch, field_validation=validation)
    assert (err.code, err.reason) == (400, "BadRequest")
    expected = f"{kind} into Go value of type map[string]interface {{}}"
    assert err.message == DECODING + expected


@pytest.mark.parametrize("validation", ["Strict", "Warn", "Ignore"])
def test_merge_patch_null(validation: str) -> None:
    err = status_error(apply_merge_patch, {"a": 1}, None, field_validation=validation)
    assert (err.code, err.reason, err.message) == (400, "BadRequest", "Invalid JSON Patch")


@pytest.mark.parametrize("patch", ["bar", 5, False])
def test_merge_patch_scalar_without_strict_decoding(patch: Any) -> None:
    err = status_error(apply_merge_patch, {"a": 1}, patch, field_validation="Ignore")
    assert (err.code, err.reason, err.message) == (400, "BadRequest", "Invalid JSON Patch")


def test_merge_patch_array_without_strict_decoding_replaces_the_object_and_fails_to_decode() -> None:
    err = status_error(apply_merge_patch, {"a": 1}, [1, None, "<x>"], field_validation="Ignore")
    assert (err.code, err.reason) == (422, "Invalid")
    detail = (
        "couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type "
    )
    # %q of the patched JSON (its null elements kept), whose HTML-safe escapes get their
    # backslashes escaped.
    body = r'Invalid value: "[1,null,\"\\u003cx\\u003e\"]": ' + detail + FIND_KIND
    assert err.message == f' "" is invalid: patch: {body}'
    assert err.details == {"causes": [{"reason": "FieldValueInvalid", "message": body, "field": "patch"}]}


# =============================================================================================
# JSON patch.


def test_json_patch_rfc6902_operations() -> None:
    doc = {"foo": "bar", "list": [1, 2, 3], "obj": {"x": 1}}
    patched = apply_json_patch(
        doc,
        [
            {"op": "test", "path": "/foo", "value": "bar"},
            {"op": "add", "path": "/baz", "value": "qux"},
            {"op": "add", "path": "/list/1", "value": 9},
            {"op": "add", "path": "/list/-", "value": 4},
            {"op": "remove", "path": "/list/0"},
            {"op": "replace", "path": "/foo", "value": ["x"]},
            {"op": "move", "from": "/obj/x", "path": "/moved"},
            {"op": "copy", "from": "/list", "path": "/copied"},
            {"op": "test", "path": "/copied", "value": [9, 2, 3, 4]},
        ],
    )
    assert patched == {
        "foo": ["x"],
        "baz": "qux",
        "list": [9, 2, 3, 4],
        "obj": {},
        "moved": 1,
        "copied": [9, 2, 3, 4],
    }


def test_json_patch_on_an_object() -> None:
    patched = apply_json_patch(
        role_binding(),
        [
            {"op": "add", "path": "/metadata/labels/env", "value": "prod"},
            {"op": "remove", "path": "/metadata/labels/tier"},
            {"op": "replace", "path": "/subjects/0/name", "value": "carol"},
            {"op": "add", "path": "/metadata/annotations", "value": {"a/b": "c"}},
            {"op": "test", "path": "/metadata/annotations/a~1b", "value": "c"},
        ],
    )
    assert patched["metadata"]["labels"] == {"app": "web", "env": "prod"}
    assert patched["subjects"][0]["name"] == "carol"
    assert patched["metadata"]["annotations"] == {"a/b": "c"}


def test_json_patch_pointer_escapes() -> None:
    patched = apply_json_patch({"a/b": 1, "m~n": 2, "~1": 3}, [{"op": "remove", "path": "/a~1b"}])
    assert patched == {"m~n": 2, "~1": 3}
    assert apply_json_patch({"m~n": 2}, [{"op": "replace", "path": "/m~0n", "value": 5}]) == {"m~n": 5}
    # "~01" decodes to "~1", not to "/".
    assert apply_json_patch({"~1": 3}, [{"op": "remove", "path": "/~01"}]) == {}


def test_json_patch_upstream_leniencies() -> None:
    # replace of an absent member adds it (json-patch v4), which clients rely on.
    assert apply_json_patch({"a": {}}, [{"op": "replace", "path": "/a/b", "value": 1}]) == {"a": {"b": 1}}
    # Negative indexes count from the end.
    assert apply_json_patch({"l": [1, 2, 3]}, [{"op": "remove", "path": "/l/-1"}]) == {"l": [1, 2]}
    assert apply_json_patch({"l": [1, 2]}, [{"op": "add", "path": "/l/-1", "value": 9}]) == {"l": [1, 2, 9]}
    assert apply_json_patch({"l": [1, 2]}, [{"op": "replace", "path": "/l/-2", "value": 0}]) == {"l": [0, 2]}
    # copy from an absent member copies null; add without a value adds null.
    assert apply_json_patch({}, [{"op": "copy", "from": "/x", "path": "/y"}]) == {"y": None}
    assert apply_json_patch({}, [{"op": "add", "path": "/y"}]) == {"y": None}
    # A path without a leading slash addresses the root's members all the same.
    assert apply_json_patch({"a": 1}, [{"op": "replace", "path": "x/a", "value": 2}]) == {"a": 2}


def test_json_patch_test_semantics() -> None:
    doc = {"n": 1, "f": 1.0, "b": True, "z": None, "o": {"k": [1, {"x": "y"}]}}
    ok = [
        {"op": "test", "path": "/n", "value": 1},
        {"op": "test", "path": "/f", "value": 1.0},
        {"op": "test", "path": "/b", "value": True},
        {"op": "test", "path": "/o", "value": {"k": [1, {"x": "y"}]}},
        # A null or absent member passes against null or no value.
        {"op": "test", "path": "/z", "value": None},
        {"op": "test", "path": "/missing", "value": None},
        {"op": "test", "path": "/missing"},
        {"op": "test", "path": "", "value": doc},
    ]
    assert apply_json_patch(doc, ok) == doc
    for value in (1.0, True, "1"):
        err = status_error(apply_json_patch, doc, [{"op": "test", "path": "/n", "value": value}])
        assert err.code == 422
    err = status_error(apply_json_patch, doc, [{"op": "test", "path": "/n"}])
    assert str(err.__cause__) == "testing value /n failed: test failed"
    err = status_error(apply_json_patch, doc, [{"op": "test", "path": "/missing", "value": 1}])
    assert str(err.__cause__) == "testing value /missing failed: test failed"


def test_json_patch_failed_test_is_422_with_upstreams_generic_message() -> None:
    err = status_error(apply_json_patch, {"a": 1}, [{"op": "test", "path": "/a", "value": 2}])
    assert (err.code, err.reason, err.message, err.details) == (422, "Invalid", GENERIC_422, None)
    assert err.status == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": GENERIC_422,
        "reason": "Invalid",
        "code": 422,
    }
    assert str(err.__cause__) == "testing value /a failed: test failed"


@pytest.mark.parametrize(
    ("doc", "op", "cause"),
    [
        (
            {},
            {"op": "add", "path": "/a/b", "value": 1},
            'add operation does not apply: doc is missing path: "/a/b": missing value',
        ),
        (
            {"a": "str"},
            {"op": "add", "path": "/a/b", "value": 1},
            'add operation does not apply: doc is missing path: "/a/b": missing value',
        ),
        (
            {"a": None},
            {"op": "add", "path": "/a/b", "value": 1},
            'add operation does not apply: doc is missing path: "/a/b": missing value',
        ),
        (
            {},
            {"op": "add", "path": "", "value": 1},
            'add operation does not apply: doc is missing path: "": missing value',
        ),
        (
            {"l": [1]},
            {"op": "add", "path": "/l/3", "value": 1},
            "error in add for path: '/l/3': Unable to access invalid index: 3: invalid index referenced",
        ),
        (
            {"l": [1]},
            {"op": "add", "path": "/l/-3", "value": 1},
            "error in add for path: '/l/-3': Unable to access invalid index: -3: invalid index referenced",
        ),
        (
            {"l": [1]},
            {"op": "add", "path": "/l/x", "value": 1},
            "error in add for path: '/l/x': value was not a proper array index: 'x': "
            'strconv.Atoi: parsing "x": invalid syntax',
        ),
        (
            {},
            {"op": "remove", "path": "/a"},
            "error in remove for path: '/a': Unable to remove nonexistent key: a: missing value",
        ),
        (
            {"l": [1]},
            {"op": "remove", "path": "/l/1"},
            "error in remove for path: '/l/1': Unable to access invalid index: 1: invalid index referenced",
        ),
        (
            {"l": [1]},
            {"op": "remove", "path": "/l/99999999999999999999"},
            "error in remove for path: '/l/99999999999999999999': "
            'strconv.Atoi: parsing "99999999999999999999": value out of range',
        ),
        (
            {},
            {"op": "remove", "path": "/a/b"},
            'remove operation does not apply: doc is missing path: "/a/b": missing value',
        ),
        (
            {},
            {"op": "replace", "path": "/a/b", "value": 1},
            "replace operation does not apply: doc is missing path: /a/b: missing value",
        ),
        (
            {"l": [1]},
            {"op": "replace", "path": "/l/1", "value": 1},
            "replace operation does not apply: doc is missing key: /l/1: missing value",
        ),
        (
            {},
            {"op": "replace", "path": "", "value": 1},
            "replace operation value must be object or array: %!w(<nil>)",
        ),
        (
            {},
            {"op": "move", "from": "/a/b", "path": "/c"},
            "move operation does not apply: doc is missing from path: /a/b: missing value",
        ),
        (
            {},
            {"op": "move", "from": "/a", "path": "/c"},
            "error in move for path: 'a': Unable to remove nonexistent key: a: missing value",
        ),
        (
            {"a": 1},
            {"op": "move", "from": "/a", "path": "/b/c"},
            "move operation does not apply: doc is missing destination path: /b/c: missing value",
        ),
        (
            {"a": {"b": 1}},
            {"op": "move", "from": "/a", "path": "/a/b"},
            "move operation does not apply: doc is missing destination path: /a/b: missing value",
        ),
        (
            {},
            {"op": "copy", "from": "/a/b", "path": "/c"},
            "copy operation does not apply: doc is missing from path: /a/b: missing value",
        ),
        (
            {"l": []},
            {"op": "copy", "from": "/l/0", "path": "/c"},
            "error in copy for from: '/l/0': Unable to access invalid index: 0: invalid index referenced",
        ),
        (
            {"a": 1},
            {"op": "copy", "from": "/a", "path": "/b/c"},
            "copy operation does not apply: doc is missing destination path: /b/c: missing value",
        ),
        (
            {},
            {"op": "test", "path": "/a/b", "value": 1},
            "test operation does not apply: is missing path: /a/b: missing value",
        ),
        ({}, {"op": "test", "path": "", "value": 1}, "testing value  failed: test failed"),
        ({}, {"op": "frob", "path": "/a"}, "Unexpected kind: frob"),
        ({}, {"path": "/a"}, "Unexpected kind: unknown"),
        ({}, {"op": "add", "value": 1}, "add operation failed to decode path: missing value"),
        ({}, {"op": "remove"}, "remove operation failed to decode path: missing value"),
        (
            {},
            {"op": "replace", "value": 1},
            "replace operation failed to decode path: operation missing path field: missing value",
        ),
        (
            {},
            {"op": "test", "path": None},
            "test operation failed to decode path: operation missing path field: missing value",
        ),
        (
            {},
            {"op": "move", "path": "/a"},
            "move operation failed to decode from: operation, missing from field: missing value",
        ),
        ({"a": 1}, {"op": "copy", "from": "/a"}, "copy operation failed to decode path: missing value"),
    ],
)
def test_json_patch_operation_failures(doc: dict[str, Any], op: dict[str, Any], cause: str) -> None:
    err = status_error(apply_json_patch, doc, [op])
    assert (err.code, err.reason, err.message) == (422, "Invalid", GENERIC_422)
    assert str(err.__cause__) == cause


def test_json_patch_path_of_wrong_type_without_strict_decoding() -> None:
    err = status_error(
        apply_json_patch, {}, [{"op": "replace", "path": 5, "value": 1}], field_validation="Ignore"
    )
    assert str(err.__cause__) == (
        "replace operation failed to decode path: json: cannot unmarshal number into Go value of type string"
    )


@pytest.mark.parametrize(
    ("patch", "strict", "lenient"),
    [
        (
            {"op": "add"},
            DECODING + "object into Go value of type []handlers.jsonPatchOp",
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch",
        ),
        (
            "x",
            DECODING + "string into Go value of type []handlers.jsonPatchOp",
            "json: cannot unmarshal string into Go value of type jsonpatch.Patch",
        ),
        (
            [["add"]],
            "error decoding patch: json: cannot unmarshal array into Go value of type handlers.jsonPatchOp",
            "json: cannot unmarshal array into Go value of type jsonpatch.Operation",
        ),
        (
            [{"op": "add", "path": "/a", "value": 1}, 7],
            "error decoding patch: json: cannot unmarshal number into Go value of type handlers.jsonPatchOp",
            "json: cannot unmarshal number into Go value of type jsonpatch.Operation",
        ),
    ],
)
def test_json_patch_that_does_not_decode(patch: Any, strict: str, lenient: str) -> None:
    for validation in ("Strict", "Warn"):
        err = status_error(apply_json_patch, {}, patch, field_validation=validation)
        assert (err.code, err.reason, err.message) == (400, "BadRequest", strict)
    err = status_error(apply_json_patch, {}, patch, field_validation="Ignore")
    assert (err.code, err.reason, err.message) == (400, "BadRequest", lenient)


def test_json_patch_operation_fields_of_wrong_type_with_strict_decoding() -> None:
    err = status_error(apply_json_patch, {}, [{"op": 1, "path": "/a"}])
    assert err.message == (DECODING + "number into Go struct field jsonPatchOp.op of type string")
    err = status_error(apply_json_patch, {}, [{"op": "move", "path": "/a", "from": {"x": 1}}])
    assert err.message == (DECODING + "object into Go struct field jsonPatchOp.from of type string")


def test_json_patch_null_and_empty_change_nothing() -> None:
    assert apply_json_patch({"a": 1}, None) == {"a": 1}
    assert apply_json_patch({"a": 1}, []) == {"a": 1}
    err = status_error(apply_json_patch, {"a": 1}, [None])
    assert (err.code, str(err.__cause__)) == (422, "Unexpected kind: unknown")


def test_json_patch_operation_limit() -> None:
    test_op = {"op": "test", "path": "/a", "value": 1}
    assert MAX_JSON_PATCH_OPERATIONS == 10000
    assert apply_json_patch({"a": 1}, [test_op] * 10000) == {"a": 1}
    err = status_error(apply_json_patch, {"a": 1}, [test_op] * 10001)
    assert (err.code, err.reason) == (413, "RequestEntityTooLarge")
    assert (
        err.message
        == "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001"
    )


def test_json_patch_copy_size_limit() -> None:
    doc = {"big": "x" * 100}
    ops = [{"op": "copy", "from": "/big", "path": f"/c{i}"} for i in range(3)]
    assert len(apply_json_patch(doc, ops, max_copy_bytes=306)) == 4
    err = status_error(apply_json_patch, doc, ops, max_copy_bytes=305)
    assert err.code == 422
    assert str(err.__cause__) == (
        "Unable to complete the copy, the accumulated size increase of copy is 306, exceeding the limit 305"
    )


def test_json_patch_replacing_the_root() -> None:
    assert apply_json_patch({"a": 1}, [{"op": "replace", "path": "", "value": {"b": 2}}]) == {"b": 2}
    err = status_error(apply_json_patch, {"a": 1}, [{"op": "replace", "path": "", "value": [1]}])
    assert (err.code, err.reason) == (422, "Invalid")
    assert err.message.startswith(' "" is invalid: patch: Invalid value: "[1]": couldn\'t get version/kind')


def test_json_patch_does_not_change_its_inputs() -> None:
    original = role_binding()
    value = {"k": "v"}
    patch = [{"op": "add", "path": "/x", "value": value}, {"op": "add", "path": "/x/k2", "value": 1}]
    before = copy.deepcopy(original)
    patched = apply_json_patch(original, patch)
    assert original == before
    assert value == {"k": "v"}
    assert patched["x"] == {"k": "v", "k2": 1}


# =============================================================================================
# Strategic merge patch on our kinds.


def smp(
    original: dict[str, Any], patch: Any, schema: PatchSchema = ROLE_BINDING_PATCH_SCHEMA
) -> dict[str, Any]:
    return apply_strategic_merge_patch(original, patch, schema)


def smp_error(
    original: dict[str, Any], patch: Any, schema: PatchSchema = ROLE_BINDING_PATCH_SCHEMA
) -> StatusError:
    return status_error(apply_strategic_merge_patch, original, patch, schema)


def test_schemas() -> None:
    assert OBJECT_META_PATCH_SCHEMA.fields == {
        "metadata.ownerReferences": PatchStrategy("merge", "uid"),
        "metadata.finalizers": PatchStrategy("merge"),
    }
    assert ROLE_BINDING_PATCH_SCHEMA.strategy(["subjects"]) is None
    assert EVENT_PATCH_SCHEMA.strategy(["metadata", "finalizers"]) == PatchStrategy("merge")
    extended = OBJECT_META_PATCH_SCHEMA.extend({"spec.items": PatchStrategy("merge", "name")})
    assert extended.strategy(("spec", "items")) == PatchStrategy("merge", "name")
    assert OBJECT_META_PATCH_SCHEMA.strategy(("spec", "items")) is None
    assert "uid" in repr(OBJECT_META_PATCH_SCHEMA)


def test_null_deletes_a_label_and_maps_merge() -> None:
    patched = smp(role_binding(), {"metadata": {"labels": {"tier": None, "env": "prod"}}})
    assert patched["metadata"]["labels"] == {"app": "web", "env": "prod"}
    assert patched["metadata"]["name"] == "rb"
    # Deleting an absent member is no error; a null for a member not there is dropped.
    assert smp({"a": 1}, {"b": None}) == {"a": 1}


def test_subjects_are_replaced_whole() -> None:
    patched = smp(role_binding(), {"subjects": [{"kind": "Group", "name": "ops"}]})
    assert patched["subjects"] == [{"kind": "Group", "name": "ops"}]


def test_managed_fields_are_replaced_whole() -> None:
    original = {"metadata": {"managedFields": [{"manager": "a"}, {"manager": "b"}]}}
    assert smp(original, {"metadata": {"managedFields": [{"manager": "c"}]}}) == {
        "metadata": {"managedFields": [{"manager": "c"}]}
    }


def test_owner_references_merge_by_uid() -> None:
    patched = smp(
        role_binding(),
        {
            "metadata": {
                "ownerReferences": [
                    {"uid": "u2", "name": "cm2-renamed", "controller": True},
                    {"apiVersion": "v1", "kind": "Secret", "name": "s", "uid": "u3"},
                ]
            }
        },
    )
    assert patched["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm1", "uid": "u1"},
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm2-renamed", "uid": "u2", "controller": True},
        {"apiVersion": "v1", "kind": "Secret", "name": "s", "uid": "u3"},
    ]


def test_owner_references_follow_the_patch_order_and_keep_server_items_in_place() -> None:
    original = {"metadata": {"ownerReferences": [{"uid": "1"}, {"uid": "2", "name": "b"}, {"uid": "3"}]}}
    patched = smp(
        original, {"metadata": {"ownerReferences": [{"uid": "3", "name": "c"}, {"uid": "1", "name": "a"}]}}
    )
    assert patched["metadata"]["ownerReferences"] == [
        {"uid": "2", "name": "b"},
        {"uid": "3", "name": "c"},
        {"uid": "1", "name": "a"},
    ]


def test_owner_reference_deleted_with_patch_delete() -> None:
    patched = smp(role_binding(), {"metadata": {"ownerReferences": [{"uid": "u1", "$patch": "delete"}]}})
    assert [r["uid"] for r in patched["metadata"]["ownerReferences"]] == ["u2"]


def test_patch_delete_removes_every_element_with_the_key() -> None:
    original = {
        "metadata": {"ownerReferences": [{"uid": "1"}, {"uid": "1"}, {"uid": "2", "x": "a"}, {"uid": "3"}]}
    }
    patched = smp(
        original,
        {
            "metadata": {
                "ownerReferences": [{"uid": "1", "$patch": "delete"}, {"uid": "3", "$patch": "delete"}]
            }
        },
    )
    assert patched == {"metadata": {"ownerReferences": [{"uid": "2", "x": "a"}]}}


def test_owner_references_replaced_with_patch_replace() -> None:
    patched = smp(
        role_binding(), {"metadata": {"ownerReferences": [{"uid": "u9", "name": "z"}, {"$patch": "replace"}]}}
    )
    assert patched["metadata"]["ownerReferences"] == [{"uid": "u9", "name": "z"}]
    emptied = smp(role_binding(), {"metadata": {"ownerReferences": [{"$patch": "replace"}]}})
    assert emptied["metadata"]["ownerReferences"] == []


def test_finalizers_union_in_upstreams_order() -> None:
    original = {"metadata": {"finalizers": ["a", "b", "c"]}}
    # Patch items go in the patch's order; server-only ones keep their place relative to them.
    assert smp(original, {"metadata": {"finalizers": ["d", "b"]}}) == {
        "metadata": {"finalizers": ["d", "a", "b", "c"]}
    }
    assert smp(original, {"metadata": {"finalizers": ["c", "a"]}}) == {
        "metadata": {"finalizers": ["b", "c", "a"]}
    }
    assert smp(original, {"metadata": {"finalizers": ["b", "b", "e"]}}) == {
        "metadata": {"finalizers": ["a", "b", "e", "c"]}
    }
    assert smp({"metadata": {}}, {"metadata": {"finalizers": ["x"]}}) == {"metadata": {"finalizers": ["x"]}}


def test_delete_from_primitive_list() -> None:
    original = {"metadata": {"finalizers": ["a", "b", "c", "b"]}}
    patched = smp(original, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["b", "zz"]}})
    assert patched == {"metadata": {"finalizers": ["a", "c"]}}


def test_delete_from_primitive_list_never_adds() -> None:
    assert smp({"metadata": {}}, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["b"]}}) == {
        "metadata": {}
    }
    assert smp(
        {"metadata": {"finalizers": None}}, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["b"]}}
    ) == {"metadata": {"finalizers": None}}


def test_kubectl_style_finalizer_patch() -> None:
    # What kubectl apply sends to add "d", drop "b" and reorder.
    original = {"metadata": {"finalizers": ["a", "b", "c"]}}
    patch = {
        "metadata": {
            "$setElementOrder/finalizers": ["c", "a", "d"],
            "finalizers": ["d"],
            "$deleteFromPrimitiveList/finalizers": ["b"],
        }
    }
    assert smp(original, patch) == {"metadata": {"finalizers": ["c", "a", "d"]}}


def test_set_element_order_of_owner_references() -> None:
    original = {"metadata": {"ownerReferences": [{"uid": "1"}, {"uid": "2", "v": 2}]}}
    patch = {
        "metadata": {
            "$setElementOrder/ownerReferences": [{"uid": "4"}, {"uid": "1"}, {"uid": "2"}, {"uid": "3"}],
            "ownerReferences": [{"uid": "4", "v": 4}, {"uid": "3", "v": 3}],
        }
    }
    assert smp(original, patch)["metadata"]["ownerReferences"] == [
        {"uid": "4", "v": 4},
        {"uid": "1"},
        {"uid": "2", "v": 2},
        {"uid": "3", "v": 3},
    ]


def test_retain_keys() -> None:
    patched = smp(role_binding(), {"roleRef": {"$retainKeys": ["name", "kind"], "name": "writer"}})
    assert patched["roleRef"] == {"kind": "Role", "name": "writer"}


def test_patch_directives_on_maps() -> None:
    assert smp(role_binding(), {"metadata": {"labels": {"$patch": "replace", "x": "y"}}})["metadata"][
        "labels"
    ] == {"x": "y"}
    assert smp(role_binding(), {"metadata": {"labels": {"$patch": "delete"}}})["metadata"]["labels"] == {}
    assert smp({"a": 1, "b": 2}, {"$patch": "replace", "c": 3}) == {"c": 3}
    assert smp({"a": 1}, {"$patch": "delete"}) == {}


def test_directives_and_nulls_do_not_leak_into_absent_fields() -> None:
    patched = smp(
        {"metadata": {"name": "x"}},
        {
            "metadata": {
                "labels": {"a": "b", "c": None},
                "ownerReferences": [{"uid": "1", "$patch": "delete"}, {"uid": "2", "name": None}],
                "annotations": {"$patch": "replace", "k": "v"},
            }
        },
    )
    assert patched == {"metadata": {"name": "x", "labels": {"a": "b"}, "ownerReferences": [{"uid": "2"}]}}


def test_smp_null_patch_changes_nothing_and_inputs_are_not_changed() -> None:
    original = role_binding()
    assert smp(original, None) == original
    patch = {"metadata": {"finalizers": ["z"], "labels": {"app": None}}}
    before, patch_before = copy.deepcopy(original), copy.deepcopy(patch)
    smp(original, patch)
    assert original == before
    assert patch == patch_before


@pytest.mark.parametrize(
    ("patch", "kind"), [([{"a": 1}], "array"), ("x", "string"), (1, "number"), (False, "bool")]
)
def test_smp_not_an_object(patch: Any, kind: str) -> None:
    err = smp_error({}, patch)
    assert (err.code, err.reason) == (400, "BadRequest")
    assert err.message == f"json: cannot unmarshal {kind} into Go value of type map[string]interface {{}}"


@pytest.mark.parametrize(
    ("original", "patch", "message"),
    [
        ({"a": {}}, {"a": {"$patch": "merge"}}, "unknown patch type: merge in map: map[$patch:merge]"),
        (
            {"a": {}},
            {"a": {"$patch": 1, "b": "c"}},
            "unknown patch type: %!s(int64=1) in map: map[$patch:1 b:c]",
        ),
        (
            {"metadata": {"ownerReferences": [{"uid": "1"}]}},
            {"metadata": {"ownerReferences": [{"uid": "1", "$patch": "merge"}]}},
            "merging lists cannot yet be specified in the patch",
        ),
        (
            {"metadata": {"ownerReferences": [{"uid": "1"}]}},
            {"metadata": {"ownerReferences": [{"uid": "1", "$patch": "explode"}]}},
            "unknown patch type: explode in map: map[$patch:explode uid:1]",
        ),
        (
            {"metadata": {"ownerReferences": [{"uid": "1"}]}},
            {"metadata": {"ownerReferences": [{"name": "x"}]}},
            "map: map[name:x] does not contain declared merge key: uid",
        ),
        (
            {"metadata": {"ownerReferences": [{"uid": "1"}]}},
            {"metadata": {"ownerReferences": [{"$patch": "delete"}]}},
            "map: map[$patch:delete] does not contain declared merge key: uid",
        ),
        (
            {"metadata": {"finalizers": ["a"]}},
            {"metadata": {"finalizers": [1]}},
            "list element types are not identical: [[a] [1]]",
        ),
        (
            {"metadata": {"finalizers": [{"a": 1}]}},
            {"metadata": {"finalizers": [{"b": 2.5}]}},
            "cannot merge lists without merge key for string",
        ),
        (
            {"subjects": [{"name": "a"}]},
            {"$deleteFromPrimitiveList/subjects": [{"name": "a"}]},
            "cannot merge lists without merge key for struct",
        ),
        ({}, {"$deleteFromPrimitiveListX/y": [1]}, "invalid patch format of primitive list"),
        ({}, {"$deleteFromPrimitiveList": [1]}, "invalid patch format of primitive list"),
        ({}, {"$setElementOrder": []}, "invalid patch format of setElementOrder list"),
        ({}, {"$setElementOrder/x": "a"}, "expected a []interface {}, but received a string"),
        ({"x": "a"}, {"$setElementOrder/x": []}, "expected a []interface {}, but received a string"),
        ({}, {"$retainKeys": "a"}, "invalid patch format of retainKeys"),
        ({"a": 1}, {"$retainKeys": ["a"], "b": 2}, "invalid patch format of retainKeys"),
        (
            {"metadata": {"finalizers": ["a", "b"]}},
            {"metadata": {"$setElementOrder/finalizers": ["a"], "finalizers": ["c"]}},
            "The order in patch list:\n[c]\n doesn't match $setElementOrder list:\n[a]\n",
        ),
        (
            {"metadata": {"finalizers": []}},
            {"metadata": {"$setElementOrder/finalizers": []}},
            "no elements in any of the given slices",
        ),
    ],
)
def test_smp_bad_patches_are_400(original: dict[str, Any], patch: Any, message: str) -> None:
    err = smp_error(original, patch)
    assert (err.code, err.reason, err.message) == (400, "BadRequest", message)


def test_smp_list_of_lists_is_422() -> None:
    schema = OBJECT_META_PATCH_SCHEMA.extend({"matrix": PatchStrategy("merge")})
    err = smp_error({"matrix": [[1]]}, {"matrix": [[2]]}, schema)
    assert (err.code, err.reason, err.message) == (422, "Invalid", GENERIC_422)
    assert str(err.__cause__) == "lists of lists are not supported"


# =============================================================================================
# Strategic merge patch: upstream's own fixtures (strategicpatch/patch_test.go), on a schema that
# carries the tags of its MergeItem test type.

MERGE_ITEM = PatchSchema(
    {
        "mergingList": PatchStrategy("merge", "name"),
        "mergingList.mergingList": PatchStrategy("merge", "name"),
        "mergingList.mergingIntList": PatchStrategy("merge"),
        "mergingIntList": PatchStrategy("merge"),
        "replacingItem": PatchStrategy("replace"),
        "retainKeysMergingList": PatchStrategy("merge", "name"),
        "retainKeysMap.mergingIntList": PatchStrategy("merge"),
        "retainKeysMap.mergingList": PatchStrategy("merge", "name"),
    }
)

UPSTREAM_CASES: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]] = [
    ("unique scalars", {"mergingIntList": [1, 2]}, {"mergingIntList": [2, 3]}, {"mergingIntList": [1, 2, 3]}),
    (
        "delete nested map",
        {"simpleMap": {"key1": 1, "key2": 1}},
        {"simpleMap": {"$patch": "delete"}},
        {"simpleMap": {}},
    ),
    (
        "delete all items from merging list",
        {"mergingList": [{"name": 1}, {"name": 2}]},
        {"mergingList": [{"$patch": "replace"}]},
        {"mergingList": []},
    ),
    ("merge empty merging lists", {"mergingList": []}, {"mergingList": []}, {"mergingList": []}),
    ("delete all keys from map", {"name": 1, "value": 1}, {"$patch": "replace"}, {}),
    (
        "add key, delete all others",
        {"name": 1, "value": 1},
        {"other": "a", "$patch": "replace"},
        {"other": "a"},
    ),
    (
        "retainKeys map can add a field",
        {"retainKeysMap": {"name": "foo"}},
        {"retainKeysMap": {"value": "bar"}},
        {"retainKeysMap": {"name": "foo", "value": "bar"}},
    ),
    (
        "retainKeys map can delete a field",
        {"retainKeysMap": {"name": "foo", "value": "a"}},
        {"retainKeysMap": {"value": None}},
        {"retainKeysMap": {"name": "foo"}},
    ),
    (
        "retainKeys list can change a field",
        {"retainKeysMergingList": [{"name": "bar"}, {"name": "foo", "value": "a"}]},
        {"retainKeysMergingList": [{"name": "foo", "value": "b"}]},
        {"retainKeysMergingList": [{"name": "bar"}, {"name": "foo", "value": "b"}]},
    ),
    (
        "preserve the order from the patch in a merging list",
        {"mergingList": [{"name": 1}, {"name": 2, "value": "b"}, {"name": 3}]},
        {"mergingList": [{"name": 3, "value": "c"}, {"name": 1, "value": "a"}, {"name": 2, "other": "x"}]},
        {
            "mergingList": [
                {"name": 3, "value": "c"},
                {"name": 1, "value": "a"},
                {"name": 2, "value": "b", "other": "x"},
            ]
        },
    ),
    (
        "preserve the order from the patch in a merging list 2",
        {"mergingList": [{"name": 1}, {"name": 2, "value": "b"}, {"name": 3}]},
        {"mergingList": [{"name": 3, "value": "c"}, {"name": 1, "value": "a"}]},
        {"mergingList": [{"name": 2, "value": "b"}, {"name": 3, "value": "c"}, {"name": 1, "value": "a"}]},
    ),
    (
        "preserve int list order",
        {"mergingIntList": [1, 2, 3]},
        {"mergingIntList": [3, 1, 2]},
        {"mergingIntList": [3, 1, 2]},
    ),
    (
        "preserve int list order 2",
        {"mergingIntList": [1, 2, 3]},
        {"mergingIntList": [3, 1]},
        {"mergingIntList": [2, 3, 1]},
    ),
    (
        "setElementOrder names an item absent from the list",
        {"mergingList": [{"name": 1}, {"name": 3}]},
        {
            "$setElementOrder/mergingList": [{"name": 3}, {"name": 2}, {"name": 1}],
            "mergingList": [{"name": 3, "value": 3}, {"name": 1, "value": 1}],
        },
        {"mergingList": [{"name": 3, "value": 3}, {"name": 1, "value": 1}]},
    ),
    (
        "setElementOrder of an int list alone",
        {"mergingIntList": [1, 3]},
        {"$setElementOrder/mergingIntList": [3, 2, 1]},
        {"mergingIntList": [3, 1]},
    ),
    (
        "deleteFromPrimitiveList of a nonexistent item",
        {"mergingIntList": [1, 2]},
        {"$deleteFromPrimitiveList/mergingIntList": [3]},
        {"mergingIntList": [1, 2]},
    ),
    (
        "deleteFromPrimitiveList on a null list",
        {"mergingIntList": None},
        {"$deleteFromPrimitiveList/mergingIntList": [3]},
        {"mergingIntList": None},
    ),
    (
        "deleteFromPrimitiveList on a nonexistent list",
        {"foo": ["bar"]},
        {"$deleteFromPrimitiveList/mergingIntList": [3]},
        {"foo": ["bar"]},
    ),
    (
        "deleteFromPrimitiveList without merge strategy",
        {"nonMergingIntList": [1, 2, 3]},
        {"$deleteFromPrimitiveList/nonMergingIntList": [2]},
        {"nonMergingIntList": [1, 3]},
    ),
    (
        "delete items in lists of scalars (current)",
        {"mergingIntList": [1, 2, 3, 3, 4]},
        {"$setElementOrder/mergingIntList": [1, 2], "$deleteFromPrimitiveList/mergingIntList": [3]},
        {"mergingIntList": [1, 2, 4]},
    ),
    (
        "add and delete items in lists of scalars",
        {"mergingIntList": [1, 2, 3]},
        {
            "$setElementOrder/mergingIntList": [1, 2, 4],
            "$deleteFromPrimitiveList/mergingIntList": [3],
            "mergingIntList": [4],
        },
        {"mergingIntList": [1, 2, 4]},
    ),
    (
        "merge lists of maps (current)",
        {"mergingList": [{"name": 1, "other": "a"}, {"name": 2, "value": 2, "other": "b"}]},
        {
            "$setElementOrder/mergingList": [{"name": 4}, {"name": 1}, {"name": 2}, {"name": 3}],
            "mergingList": [{"name": 4, "value": 4}, {"name": 3, "value": 3}],
        },
        {
            "mergingList": [
                {"name": 4, "value": 4},
                {"name": 1, "other": "a"},
                {"name": 2, "value": 2, "other": "b"},
                {"name": 3, "value": 3},
            ]
        },
    ),
    (
        "merge lists of maps with conflict (current)",
        {"mergingList": [{"name": 1, "other": "a"}, {"name": 2, "value": 3, "other": "b"}]},
        {
            "$setElementOrder/mergingList": [{"name": 1}, {"name": 2}, {"name": 3}],
            "mergingList": [{"name": 2, "value": 2}, {"name": 3, "value": 3}],
        },
        {
            "mergingList": [
                {"name": 1, "other": "a"},
                {"name": 2, "value": 2, "other": "b"},
                {"name": 3, "value": 3},
            ]
        },
    ),
    (
        "nested merging lists",
        {"mergingList": [{"name": 1, "mergingIntList": [1], "mergingList": [{"name": "x", "v": 1}]}]},
        {
            "mergingList": [
                {"name": 1, "mergingIntList": [2], "mergingList": [{"name": "x", "w": 2}, {"name": "y"}]}
            ]
        },
        {
            "mergingList": [
                {
                    "name": 1,
                    # A new scalar goes before the server's: upstream's merge of the two sorted
                    # parts lets a server item first only when both items are in the server's list.
                    "mergingIntList": [2, 1],
                    "mergingList": [{"name": "x", "v": 1, "w": 2}, {"name": "y"}],
                }
            ]
        },
    ),
    (
        "replacing item",
        {"replacingItem": {"a": 1, "b": 2}},
        {"replacingItem": {"c": 3}},
        {"replacingItem": {"c": 3}},
    ),
    (
        "non-merging list",
        {"nonMergingList": [{"name": 1}]},
        {"nonMergingList": [{"name": 2}]},
        {"nonMergingList": [{"name": 2}]},
    ),
    ("type change replaces", {"value": {"a": 1}}, {"value": "s"}, {"value": "s"}),
]


@pytest.mark.parametrize(
    ("original", "patch", "expected"), [c[1:] for c in UPSTREAM_CASES], ids=[c[0] for c in UPSTREAM_CASES]
)
def test_upstream_fixtures(original: dict[str, Any], patch: dict[str, Any], expected: dict[str, Any]) -> None:
    assert apply_strategic_merge_patch(original, patch, MERGE_ITEM) == expected


@pytest.mark.parametrize(
    ("original", "patch", "message"),
    [
        (
            {"mergingList": [{"name": 1}, {"name": 3}, {"name": 2}]},
            {
                "$setElementOrder/mergingList": [{"name": 1}, {"name": 2}, {"name": 3}],
                "mergingList": [{"name": 3, "value": 3}, {"name": 1, "value": 1}],
            },
            "doesn't match",
        ),
        (
            {"mergingIntList": [1, 3, 2]},
            {"$setElementOrder/mergingIntList": [1, 2, 3], "mergingIntList": [3, 1]},
            "doesn't match",
        ),
        (
            {"mergingList": [{"name": 1, "value": "a"}]},
            {"mergingList": [{"value": "b"}]},
            "does not contain declared merge key",
        ),
    ],
)
def test_upstream_error_fixtures(original: dict[str, Any], patch: dict[str, Any], message: str) -> None:
    err = status_error(apply_strategic_merge_patch, original, patch, MERGE_ITEM)
    assert err.code == 400
    assert message in err.message


# =============================================================================================
# Helpers that mirror Go.


def _less_by(keys: list[int], i: int, j: int) -> bool:
    return keys[i] < keys[j]


def test_go_stable_sort_is_a_stable_sort_for_a_strict_order() -> None:
    rng = random.Random(7)
    for n in range(0, 130):
        keys = [rng.randint(0, 9) for _ in range(n)]
        less: Callable[[int, int], bool] = functools.partial(_less_by, keys)
        order = go_stable_sort(keys, less)
        assert order == sorted(range(n), key=keys.__getitem__)


def test_go_stable_sort_with_upstreams_comparator_for_absent_items() -> None:
    # Items 1 and 3 are absent from the order (position -1), which upstream's comparator calls
    # smaller than anything; the expected permutation is traced by hand through Go's insertion sort.
    positions = [2, -1, 0, -1, 1]

    def less(i: int, j: int) -> bool:
        if positions[i] >= 0 and positions[j] >= 0:
            return positions[i] < positions[j]
        return True

    assert go_stable_sort(positions, less) == [3, 2, 4, 1, 0]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0"),
        (1.5, "1.5"),
        (100.0, "100"),
        (123456.0, "123456"),
        (1e6, "1e+06"),
        (1234567.0, "1.234567e+06"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (-2.5, "-2.5"),
        (1e21, "1e+21"),
    ],
)
def test_go_float_formatting(value: float, text: str) -> None:
    assert go_float(value) == text


# =============================================================================================
# What json-patch writes back out, which a 422 about the result quotes (kube-apiserver's answers
# in tests/integration/test_decode_errors.py show the same orders).


def _decoded(text: str) -> Any:
    return json.loads(text, object_pairs_hook=jsonvalue.from_pairs)


def test_merge_patch_sorts_what_it_decodes_and_sets_the_rest_as_it_is() -> None:
    original = {"kind": "K", "metadata": {"uid": "u", "name": "n"}, "roleRef": {"name": "v", "kind": "R"}}
    patch = _decoded(
        '{"zz":[1,null,{"b":null,"a":2}],"subjects":{"b":1,"a":{"d":null,"c":1}},'
        '"roleRef":[{"b":1,"a":null}],"metadata":{"labels":{"y":"1","x":"2"}}}'
    )
    assert jsonvalue.compact(apply_merge_patch(original, patch)) == (
        '{"kind":"K","metadata":{"labels":{"x":"2","y":"1"},"name":"n","uid":"u"},'
        '"roleRef":[{"b":1,"a":null}],"subjects":{"a":{"c":1},"b":1},"zz":[1,null,{"a":2}]}'
    )


def test_json_patch_sorts_only_what_it_walks_into_or_compares() -> None:
    original = {
        "kind": "K",
        "metadata": {"uid": "u", "name": "n"},
        "roleRef": {"name": "v", "kind": "R"},
        "subjects": [{"name": "a", "kind": "User"}],
    }
    patch = _decoded(
        '[{"op":"add","path":"/zz","value":{"b":{"d":1,"c":2},"a":1}},{"op":"move","from":"/zz/b","path":"/yy"},'
        '{"op":"copy","from":"/roleRef","path":"/xx"},{"op":"add","path":"/subjects/0/q","value":1},'
        '{"op":"test","path":"/yy","value":{"c":2,"d":1}},{"op":"add","path":"/ww","value":[{"b":null,"a":"<&>"}]}]'
    )
    assert jsonvalue.compact(apply_json_patch(original, patch)) == (
        '{"kind":"K","metadata":{"uid":"u","name":"n"},"roleRef":{"name":"v","kind":"R"},'
        '"subjects":[{"kind":"User","name":"a","q":1}],"ww":[{"b":null,"a":"\\u003c\\u0026\\u003e"}],'
        '"xx":{"name":"v","kind":"R"},"yy":{"c":2,"d":1},"zz":{"a":1}}'
    )


def test_json_patch_keeps_the_repeated_keys_of_what_it_never_decodes() -> None:
    patch = _decoded(
        '[{"op":"add","path":"/a","value":{"x":1,"x":2}},{"op":"add","path":"/b","value":{"y":1,"y":2}},'
        '{"op":"add","path":"/b/z","value":3}]'
    )
    assert jsonvalue.compact(apply_json_patch({}, patch)) == '{"a":{"x":1,"x":2},"b":{"y":2,"z":3}}'


def test_strict_errors_of_the_patch_itself() -> None:
    operations = _decoded('[{"op":"add","op":"add","path":"/x","value":{"b":1,"b":2},"extra":1,"Op":2}]')
    assert JSONPatcher(operations, "Strict").strict_errors == [
        'json patch duplicate field "[0].op"',
        'json patch duplicate field "[0].value.b"',
        'json patch unknown field "[0].extra"',
        'json patch unknown field "[0].Op"',
    ]
    merge = _decoded('{"a":1,"a":2,"b":{"x":1,"x":2},"b":{"y":1}}')
    assert MergePatcher(merge, "Warn").strict_errors == [
        'duplicate field "a"',
        'duplicate field "b.x"',
        'duplicate field "b"',
    ]
    assert MergePatcher(merge, "Ignore").strict_errors == []


def test_a_strategic_merge_patch_is_quoted_as_the_merge_left_its_map() -> None:
    patcher = StrategicMergePatcher(
        {"zz": {"a": [{"d": 1, "c": None}], "b": 1}, "subjects": "x"}, "Strict", ROLE_BINDING_PATCH_SCHEMA
    )
    patcher.apply({"kind": "RoleBinding"})
    assert patcher.quoted({}) == "map[subjects:x zz:map[a:[map[d:1]] b:1]]"


@pytest.mark.parametrize(
    ("patched", "detail"),
    [
        (
            {"apiVersion": "g/v1", "kind": 5},
            "couldn't get version/kind; json parse error: "
            "json: cannot unmarshal number into Go struct field .kind of type string",
        ),
        (
            {"kind": "Foo"},
            'no kind "Foo" is registered for version "g/v1" in scheme "pkg/runtime/scheme.go:110"',
        ),
        (
            {"apiVersion": "v9"},
            'no kind "K" is registered for version "v9" in scheme "pkg/runtime/scheme.go:110"',
        ),
    ],
)
def test_the_patched_type_must_stay_the_object_type(patched: dict[str, Any], detail: str) -> None:
    err = status_error(check_type_meta, patched, "g/v1", "K")
    assert (err.code, err.reason) == (422, "Invalid")
    assert err.message.endswith(f'": {detail}')
    assert err.details is not None and err.details["causes"][0]["field"] == "patch"


def test_an_empty_kind_is_the_object_type() -> None:
    check_type_meta({"apiVersion": "g/v1", "kind": ""}, "g/v1", "K")


@pytest.mark.parametrize(
    ("patch_type", "field_validation", "message"),
    [
        (MergePatcher, "Strict", "error decoding patch: unexpected end of JSON input"),
        (MergePatcher, "Warn", "error decoding patch: unexpected end of JSON input"),
        (MergePatcher, "Ignore", "Invalid JSON Patch"),
        (JSONPatcher, "Warn", "error decoding patch: unexpected end of JSON input"),
        (JSONPatcher, "Ignore", "unexpected end of JSON input"),
        (StrategicMergePatcher, "Strict", "unexpected end of JSON input"),
        (StrategicMergePatcher, "Ignore", "unexpected end of JSON input"),
    ],
)
def test_a_patch_that_is_no_json_is_400_worded_per_type(
    patch_type: type[Patcher], field_validation: str, message: str
) -> None:
    error = patch_type.malformed("unexpected end of JSON input", field_validation)
    assert (error.code, error.reason, error.message) == (400, "BadRequest", message)
