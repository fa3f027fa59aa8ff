"""Field sets, FieldsV1, the structural walks and the field manager, against expectations computed by
hand from sigs.k8s.io/structured-merge-diff's and k8s.io/apimachinery's own test cases."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from apiserver.apply.fieldmanager import (
    FieldManager,
    ManagedFieldsError,
    decode_managed_fields,
    encode_managed_fields,
    manager_identifier,
    prefix_from_user_agent,
    requests_reset,
    restore_unchanged_times,
)
from apiserver.apply.fieldpath import FieldSet, FieldsV1Error, Path, PathElement, path_string
from apiserver.apply.structure import (
    ListNode,
    MapNode,
    ScalarNode,
    compare,
    merge,
    structure_of,
    to_field_set,
    validate,
)
from apiserver.machinery.errors import StatusError
from apiserver.machinery.types import JSON
from apiserver.resources.event import EventKind
from apiserver.resources.rolebinding import RoleBindingKind

RB_API = "rbac.authorization.core.io/v1"
ROLE_REF = {"apiGroup": "rbac.authorization.core.io", "kind": "ClusterRole", "name": "view"}


def f(*names: str) -> Path:
    return tuple(PathElement.field(n) for n in names)


def dumps(document: JSON) -> str:
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False)


# ----------------------------------------------------------------------------- FieldsV1

# structured-merge-diff fieldpath/serialize_test.go TestSerializeV1GoldenData: read and written back
# byte for byte.
GOLDEN_FIELDS_V1 = [
    '{"f:aaa":{},"f:aab":{},"f:aac":{},"f:aad":{},"f:aae":{},"f:aaf":{},"k:{\\"name\\":\\"first\\"}":{},'
    '"k:{\\"name\\":\\"second\\"}":{},"k:{\\"port\\":443,\\"protocol\\":\\"tcp\\"}":{},'
    '"k:{\\"port\\":443,\\"protocol\\":\\"udp\\"}":{},"v:1":{},"v:2":{},"v:3":{},"v:\\"aa\\"":{},'
    '"v:\\"ab\\"":{},"v:true":{},"i:1":{},"i:2":{},"i:3":{},"i:4":{}}',
    '{"f:spec":{".":{},"f:apps":{".":{},"k:{\\"name\\":\\" app-💻\\"}":{".":{},"f:container":{".":{},'
    '"f:image":{},"f:name":{},"f:ports":{".":{},"k:{\\"name\\":\\"port 🔑\\"}":{".":{},'
    '"f:containerPort":{},"f:name":{}}}},"f:name":{}},"k:{\\"name\\":\\" app-🚀\\"}":{".":{},'
    '"f:container":{".":{},"f:image":{},"f:name":{},"f:ports":{".":{},"k:{\\"name\\":\\"port-✅ \\"}":'
    '{".":{},"f:containerPort":{},"f:name":{}}}},"f:name":{}}}}}',
]


@pytest.mark.parametrize("golden", GOLDEN_FIELDS_V1)
def test_fields_v1_golden_round_trip(golden: str) -> None:
    fields = FieldSet.from_fields_v1(json.loads(golden))
    assert dumps(fields.to_fields_v1()) == golden


def test_fields_v1_is_normalized_when_written() -> None:
    # serialize_test.go TestDeserializeForValidNonNormalized: out of order keys, spaces in values.
    messy: JSON = {
        "f:aad": {},
        "f:aaa": {},
        'k:{ "protocol":"udp","port":443}': {},
        'k:{"port":443,"protocol":"tcp"}': {},
        "v: 3": {},
        "v:1": {},
        "i:2": {},
        "i:1": {},
    }
    assert dumps(FieldSet.from_fields_v1(messy).to_fields_v1()) == (
        '{"f:aaa":{},"f:aad":{},"k:{\\"port\\":443,\\"protocol\\":\\"tcp\\"}":{},'
        '"k:{\\"port\\":443,\\"protocol\\":\\"udp\\"}":{},"v:1":{},"v:3":{},"i:1":{},"i:2":{}}'
    )


def test_fields_v1_members_and_children() -> None:
    labels = f("metadata", "labels")
    fields = FieldSet([labels, (*labels, PathElement.field("app")), f("subjects")])
    assert fields.to_fields_v1() == {
        "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
        "f:subjects": {},
    }
    assert FieldSet.from_fields_v1(fields.to_fields_v1()) == fields
    assert fields.has(labels) and not fields.has(f("metadata"))
    assert [path_string(p) for p in fields] == [".subjects", ".metadata.labels", ".metadata.labels.app"]


def test_fields_v1_unknown_element_kinds_are_dropped_and_bad_ones_refused() -> None:
    assert FieldSet.from_fields_v1({"x:future": {}, "f:a": {}}) == FieldSet([f("a")])
    bad: JSON
    for bad in ({"f": {}}, {"fa": {}}, {"v:[": {}}, {"i:x": {}}, {"f:a": 1}):
        with pytest.raises(FieldsV1Error):
            FieldSet.from_fields_v1(bad)


def test_path_element_order_and_strings() -> None:
    elements = [
        PathElement.at(1),
        PathElement.of_value("a"),
        PathElement.of_value(1),
        PathElement.keyed({"uid": "x"}),
        PathElement.field("b"),
        PathElement.of_value(True),
        PathElement.field("a"),
    ]
    assert [e.serialize() for e in sorted(elements)] == [
        "f:a",
        "f:b",
        'k:{"uid":"x"}',
        "v:1",
        'v:"a"',
        "v:true",
        "i:1",
    ]
    keyed = PathElement.keyed({"protocol": "tcp", "port": 443})
    assert keyed.serialize() == 'k:{"port":443,"protocol":"tcp"}'
    assert str(keyed) == '[port=443,protocol="tcp"]'
    assert str(PathElement.of_value("x")) == '[="x"]'
    assert PathElement.of_value(1) == PathElement.of_value(1.0)
    assert PathElement.of_value(1) != PathElement.of_value(True)
    assert PathElement.of_value("<&>").serialize() == 'v:"\\u003c\\u0026\\u003e"'


# ----------------------------------------------------------------------------- set algebra


def test_set_union_intersection_difference() -> None:
    a = FieldSet([f("a"), f("b", "c"), f("b", "d"), f("e")])
    b = FieldSet([f("a"), f("b", "d"), f("b", "x"), f("y")])
    assert a.union(b) == FieldSet([f("a"), f("b", "c"), f("b", "d"), f("b", "x"), f("e"), f("y")])
    assert a.intersection(b) == FieldSet([f("a"), f("b", "d")])
    assert a.difference(b) == FieldSet([f("b", "c"), f("e")])
    # A member does not take the paths below it away (Difference is not recursive upstream).
    assert FieldSet([f("b", "c")]).difference(FieldSet([f("b")])) == FieldSet([f("b", "c")])
    assert FieldSet([f("b", "c")]).difference(FieldSet([f("b", "c")])).empty()
    assert len(a) == 4


# ----------------------------------------------------------------------------- structure

RB_ROOT = structure_of(RoleBindingKind.model)
EVENT_ROOT = structure_of(EventKind.model)


def test_structure_of_the_kinds() -> None:
    meta = RB_ROOT.fields["metadata"]
    assert isinstance(meta, MapNode) and not meta.atomic
    subjects = RB_ROOT.fields["subjects"]
    assert isinstance(subjects, ListNode) and subjects.atomic
    role_ref = RB_ROOT.fields["roleRef"]
    assert isinstance(role_ref, MapNode) and role_ref.atomic
    owners = meta.fields["ownerReferences"]
    assert isinstance(owners, ListNode) and not owners.atomic and owners.keys == ("uid",)
    finalizers = meta.fields["finalizers"]
    assert isinstance(finalizers, ListNode) and not finalizers.atomic and finalizers.keys == ()
    managed = meta.fields["managedFields"]
    assert isinstance(managed, ListNode) and managed.atomic
    labels = meta.fields["labels"]
    assert isinstance(labels, MapNode) and not labels.atomic and labels.element is not None
    regarding = EVENT_ROOT.fields["regarding"]
    assert isinstance(regarding, MapNode) and regarding.atomic
    series = EVENT_ROOT.fields["series"]
    assert isinstance(series, MapNode) and not series.atomic


def test_to_field_set_of_an_applied_configuration() -> None:
    config = {
        "apiVersion": RB_API,
        "kind": "RoleBinding",
        "metadata": {
            "name": "x",
            "labels": {"app": "demo"},
            "finalizers": ["example.com/a"],
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u1"}],
            "annotations": {},
        },
        "roleRef": ROLE_REF,
        "subjects": [{"kind": "User", "name": "alice"}],
    }
    assert to_field_set(RB_ROOT, config).to_fields_v1() == {
        "f:apiVersion": {},
        "f:kind": {},
        "f:metadata": {
            "f:annotations": {},
            "f:finalizers": {'v:"example.com/a"': {}},
            "f:labels": {"f:app": {}},
            "f:name": {},
            # OwnerReference is an atomic struct: the item is owned whole.
            "f:ownerReferences": {'k:{"uid":"u1"}': {}},
        },
        "f:roleRef": {},
        "f:subjects": {},
    }


def test_validate_partial_objects_as_upstream() -> None:
    assert validate(RB_ROOT, {"apiVersion": RB_API, "spec": {"foo": 1}}) == [
        ".spec: field not declared in schema"
    ]
    assert validate(RB_ROOT, {"metadata": {"labels": {"a": 1}}}) == [
        ".metadata.labels.a: expected string, got &value.valueUnstructured{Value:1}"
    ]
    assert validate(RB_ROOT, {"subjects": "x"}) == [".subjects: expected list, got &{x}"]
    assert validate(RB_ROOT, {"metadata": {"generation": "1"}}) == [
        ".metadata.generation: expected numeric (int or float), got string"
    ]
    assert validate(RB_ROOT, {"subjects": [{"kind": "User", "bogus": 1}]}) == [
        ".subjects[0].bogus: field not declared in schema"
    ]
    assert validate(RB_ROOT, {"metadata": {"finalizers": ["a", "a"]}}) == [
        '.metadata.finalizers: duplicate entries for key [="a"]'
    ]
    assert validate(RB_ROOT, {"metadata": {"ownerReferences": [{"name": "x"}]}}) == [
        ".metadata.ownerReferences: element 0: associative list with keys has an element that omits all "
        'key fields ["uid"] (and doesn\'t have default values for any key fields)'
    ]
    assert validate(RB_ROOT, {"metadata": {"labels": None}, "subjects": None}) == []


def test_compare_maps_lists_and_atomic_values() -> None:
    live: JSON = {
        "metadata": {"labels": {"a": "1", "b": "2"}, "finalizers": ["x", "y"]},
        "roleRef": ROLE_REF,
        "subjects": [{"kind": "User", "name": "alice"}],
    }
    new = copy.deepcopy(live)
    new["metadata"]["labels"] = {"a": "changed", "c": "3"}
    new["metadata"]["finalizers"] = ["y", "z"]
    new["subjects"].append({"kind": "User", "name": "bob"})
    new["metadata"]["annotations"] = {"n": "v"}
    result = compare(RB_ROOT, live, new)
    assert result.modified == FieldSet([f("metadata", "labels", "a"), f("subjects")])
    labels, finalizers = f("metadata", "labels"), f("metadata", "finalizers")
    annotations = f("metadata", "annotations")
    assert result.added == FieldSet(
        [
            (*labels, PathElement.field("c")),
            (*finalizers, PathElement.of_value("z")),
            annotations,
            (*annotations, PathElement.field("n")),
        ]
    )
    assert result.removed == FieldSet(
        [(*labels, PathElement.field("b")), (*finalizers, PathElement.of_value("x"))]
    )
    assert compare(RB_ROOT, live, copy.deepcopy(live)).is_same()


FINALIZERS = ListNode(ScalarNode("string"), atomic=False)
NUMBERS = ListNode(ScalarNode("numeric"), atomic=False)
BOOLEANS = ListNode(ScalarNode("boolean"), atomic=False)


# structured-merge-diff typed/merge_test.go, "struct grab bag": (lhs, rhs, merged) of set lists.
SET_MERGES = [
    (FINALIZERS, ["a", "b", "c"], ["a", "b"], ["a", "b", "c"]),
    (FINALIZERS, ["a", "b"], ["a", "b", "c"], ["a", "b", "c"]),
    (FINALIZERS, ["a", "b", "c"], [], ["a", "b", "c"]),
    (FINALIZERS, [], ["a", "b", "c"], ["a", "b", "c"]),
    (FINALIZERS, ["a", "b"], ["b", "a"], ["b", "a"]),
    (FINALIZERS, ["a", "b", "c"], ["d", "e", "f"], ["a", "b", "c", "d", "e", "f"]),
    (FINALIZERS, ["a", "b", "c"], ["c", "d", "e", "f"], ["a", "b", "c", "d", "e", "f"]),
    (FINALIZERS, ["a", "b", "c", "g", "f"], ["c", "d", "e", "f"], ["a", "b", "c", "g", "d", "e", "f"]),
    (FINALIZERS, ["c", "d", "e", "f"], ["a", "c", "e"], ["a", "c", "d", "e", "f"]),
    (
        FINALIZERS,
        ["a", "b", "c", "x", "y", "z"],
        ["d", "e", "f"],
        ["a", "b", "c", "x", "y", "z", "d", "e", "f"],
    ),
    (FINALIZERS, ["a", "b", "c", "x", "y", "z"], ["d", "e", "f", "x", "y", "z"], list("abcdefxyz")),
    (FINALIZERS, ["c", "a", "g", "f"], ["c", "f", "a", "g"], ["c", "f", "a", "g"]),
    (FINALIZERS, ["a", "b", "c", "d"], ["d", "e", "f", "a"], ["b", "c", "d", "e", "f", "a"]),
    (
        FINALIZERS,
        list("cdefghij"),
        ["2", "h", "3", "e", "4", "k", "l"],
        ["c", "d", "f", "g", "2", "h", "i", "j", "3", "e", "4", "k", "l"],
    ),
    (
        FINALIZERS,
        list("abcdefghij"),
        ["1", "b", "2", "h", "3", "e", "4", "k", "l"],
        ["a", "1", "b", "c", "d", "f", "g", "2", "h", "i", "j", "3", "e", "4", "k", "l"],
    ),
    # Duplicates on the live side.
    (FINALIZERS, ["a", "b", "b"], ["c"], ["a", "b", "b", "c"]),
    (FINALIZERS, ["a", "b", "b"], ["b"], ["a", "b"]),
    (FINALIZERS, ["a", "b", "b"], ["a"], ["a", "b", "b"]),
    (
        FINALIZERS,
        ["a", "b", "c", "d", "e", "c"],
        ["1", "b", "2", "e", "d"],
        ["a", "1", "b", "c", "2", "e", "c", "d"],
    ),
    (
        FINALIZERS,
        ["a", "b", "c", "d", "e", "c"],
        ["1", "b", "2", "c", "e", "d"],
        ["a", "1", "b", "2", "c", "e", "d"],
    ),
    (FINALIZERS, ["a", "a", "b", "b"], ["b", "c", "d"], ["a", "a", "b", "c", "d"]),
    (FINALIZERS, ["a", "a", "b", "b"], [], ["a", "a", "b", "b"]),
    (BOOLEANS, [True], [False], [True, False]),
    (NUMBERS, [1, 2, 3.14159], [1, 2, 3], [1, 2, 3.14159, 3]),
    (FINALIZERS, ["c", "a", "g", "f", "c", "a"], ["c", "f", "a", "g"], ["c", "f", "a", "g"]),
    (NUMBERS, [1, 2, 3.14159, 1, 2], [1, 2, 3], [1, 2, 3.14159, 3]),
    (BOOLEANS, [True, False, True], [False], [True, False, True]),
    (BOOLEANS, [True, False, True], [True], [True, False]),
]


@pytest.mark.parametrize(("node", "lhs", "rhs", "merged"), SET_MERGES)
def test_merge_set_lists_in_upstreams_order(
    node: ListNode, lhs: list[Any], rhs: list[Any], merged: list[Any]
) -> None:
    assert merge(node, lhs, rhs) == merged


def test_merge_granular_maps_atomic_values_and_keyed_lists() -> None:
    live = {
        "metadata": {
            "labels": {"a": "1"},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": "p1", "uid": "u1"},
                {"apiVersion": "v1", "kind": "Pod", "name": "p2", "uid": "u2"},
            ],
        },
        "roleRef": ROLE_REF,
        "subjects": [{"kind": "User", "name": "alice"}, {"kind": "User", "name": "carol"}],
    }
    config: JSON = {
        "metadata": {
            "labels": {"b": "2"},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": "p3", "uid": "u3"},
                {"apiVersion": "v1", "kind": "Pod", "name": "renamed", "uid": "u1"},
            ],
        },
        "roleRef": {"kind": "Role"},
        "subjects": [{"kind": "User", "name": "bob"}],
    }
    merged = merge(RB_ROOT, live, config)
    assert merged["metadata"]["labels"] == {"a": "1", "b": "2"}
    assert [o["uid"] for o in merged["metadata"]["ownerReferences"]] == ["u3", "u1", "u2"]
    # OwnerReference is atomic: the applied item replaces the live one whole.
    assert merged["metadata"]["ownerReferences"][1] == config["metadata"]["ownerReferences"][1]
    assert merged["roleRef"] == {"kind": "Role"}
    assert merged["subjects"] == [{"kind": "User", "name": "bob"}]


# ----------------------------------------------------------------------------- managers


def test_prefix_from_user_agent() -> None:
    assert prefix_from_user_agent("kubectl/v1.33.9 (linux/amd64) kubernetes/abc") == "kubectl"
    assert prefix_from_user_agent("Python-urllib/3.12") == "Python-urllib"
    assert prefix_from_user_agent("a\tb\x00c/x") == "abc"
    assert prefix_from_user_agent("é" * 100) == "é" * 64
    assert prefix_from_user_agent("") == ""


def test_manager_identifiers_and_entry_codec() -> None:
    assert manager_identifier("kubectl", "Apply", RB_API) == '{"manager":"kubectl","operation":"Apply"}'
    assert (
        manager_identifier("kubectl-edit", "Update", RB_API)
        == '{"manager":"kubectl-edit","operation":"Update","apiVersion":"rbac.authorization.core.io/v1"}'
    )
    entries = [
        {
            "manager": "b",
            "operation": "Update",
            "apiVersion": RB_API,
            "time": "2026-01-01T00:00:02Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:subjects": {}},
        },
        {
            "manager": "a",
            "operation": "Update",
            "apiVersion": RB_API,
            "time": "2026-01-01T00:00:02Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:roleRef": {}},
        },
        {
            "manager": "z",
            "operation": "Apply",
            "apiVersion": RB_API,
            "time": "2026-01-01T00:00:09Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {"f:x": {}}}},
        },
    ]
    managed = decode_managed_fields(entries)
    # Apply first, then by time, then by manager.
    assert [e["manager"] for e in encode_managed_fields(managed)] == ["z", "a", "b"]
    assert encode_managed_fields(managed)[0] == entries[2]
    for bad in (
        [{"manager": "x", "operation": "Patch", "apiVersion": RB_API, "fieldsType": "FieldsV1"}],
        [{"manager": "x", "operation": "Update", "fieldsType": "FieldsV1"}],
        [{"manager": "x", "operation": "Update", "apiVersion": RB_API}],
        [{"manager": "x", "operation": "Update", "apiVersion": RB_API, "fieldsType": "FieldsV2"}],
        [
            {
                "manager": "x",
                "operation": "Update",
                "apiVersion": RB_API,
                "fieldsType": "FieldsV1",
                "fieldsV1": {"q": {}},
            }
        ],
    ):
        with pytest.raises(ManagedFieldsError):
            decode_managed_fields(bad)


def test_requests_reset() -> None:
    assert requests_reset({"metadata": {"managedFields": []}})
    assert requests_reset({"metadata": {"managedFields": [{}]}})
    assert requests_reset({"metadata": {"managedFields": [{"manager": "", "time": None}]}})
    assert not requests_reset({"metadata": {"managedFields": [{"fieldsV1": {}}]}})
    assert not requests_reset({"metadata": {"managedFields": None}})
    assert not requests_reset({"metadata": {}})


# ----------------------------------------------------------------------------- the field manager

RB = RoleBindingKind()
# Subjects as the server stores them: an applied subject without its defaulted apiGroup differs from
# the live one when upstream compares (before defaulting), which would make a conflict of it.
ALICE = {"kind": "User", "apiGroup": "rbac.authorization.core.io", "name": "alice"}


def rolebinding(**overrides: Any) -> JSON:
    raw: JSON = {
        "apiVersion": RB_API,
        "kind": "RoleBinding",
        "metadata": {"name": "rb", "namespace": "ns", "labels": {"app": "demo"}},
        "roleRef": ROLE_REF,
        "subjects": [ALICE],
    }
    raw.update(overrides)
    return raw


def stored(obj: JSON) -> JSON:
    """As the registry stores a created object: canonical, with the server's metadata."""
    out = RB.decode(copy.deepcopy(obj)).obj
    out["metadata"].update(uid="u-1", creationTimestamp="2026-01-01T00:00:00Z", resourceVersion="5")
    return out


def entries_of(obj: JSON) -> dict[tuple[str, str], JSON]:
    return {(e["manager"], e["operation"]): e["fieldsV1"] for e in obj["metadata"].get("managedFields", [])}


@pytest.fixture
def fm() -> FieldManager:
    return FieldManager(RB)


def test_create_is_an_update_entry_for_its_manager(fm: FieldManager) -> None:
    created = fm.update(fm.empty_object(), RB.decode(rolebinding()).obj, "kubectl-create")
    (entry,) = created["metadata"]["managedFields"]
    assert list(entry) == ["manager", "operation", "apiVersion", "time", "fieldsType", "fieldsV1"]
    assert entry["manager"] == "kubectl-create" and entry["operation"] == "Update"
    assert entry["apiVersion"] == RB_API and entry["fieldsType"] == "FieldsV1"
    assert entry["time"].endswith("Z") and len(entry["time"]) == 20
    # Upstream's FieldsV1 for a RoleBinding made by kubectl create: name and namespace are stripped.
    assert entry["fieldsV1"] == {
        "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
        "f:roleRef": {},
        "f:subjects": {},
    }


def test_no_manager_is_unknown(fm: FieldManager) -> None:
    created = fm.update(fm.empty_object(), RB.decode(rolebinding()).obj, "")
    assert created["metadata"]["managedFields"][0]["manager"] == "unknown"


def test_updates_move_changed_fields_and_drop_removed_ones(fm: FieldManager) -> None:
    live = stored(fm.update(fm.empty_object(), RB.decode(rolebinding()).obj, "creator"))
    new = copy.deepcopy(live)
    new["metadata"]["labels"] = {"tier": "gold"}  # app removed, tier added
    new["subjects"] = [{"kind": "User", "name": "bob", "apiGroup": "rbac.authorization.core.io"}]
    updated = fm.update(live, new, "editor")
    assert entries_of(updated) == {
        # The labels map itself still exists, and is still the creator's (`.` without children).
        ("creator", "Update"): {"f:metadata": {"f:labels": {}}, "f:roleRef": {}},
        ("editor", "Update"): {"f:metadata": {"f:labels": {"f:tier": {}}}, "f:subjects": {}},
    }
    # A request that changes nothing leaves managedFields (times included) as they were.
    again = fm.update(stored(updated), copy.deepcopy(stored(updated)), "someone-else")
    assert again["metadata"]["managedFields"] == updated["metadata"]["managedFields"]


def test_an_update_taking_every_field_drops_the_empty_entry(fm: FieldManager) -> None:
    bare = rolebinding(metadata={"name": "rb", "namespace": "ns"}, subjects=[])
    live = stored(fm.update(fm.empty_object(), RB.decode(bare).obj, "creator"))
    new = copy.deepcopy(live)
    new["roleRef"] = {**ROLE_REF, "name": "edit"}
    updated = fm.update(live, new, "editor")
    assert [e["manager"] for e in updated["metadata"]["managedFields"]] == ["editor"]


def test_sent_managed_fields_replace_and_empty_list_resets(fm: FieldManager) -> None:
    live = stored(fm.update(fm.empty_object(), RB.decode(rolebinding()).obj, "creator"))
    replaced = copy.deepcopy(live)
    replaced["metadata"]["managedFields"] = [
        {
            "manager": "imported",
            "operation": "Apply",
            "apiVersion": RB_API,
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:subjects": {}},
        }
    ]
    out = fm.update(live, replaced, "editor")
    assert entries_of(out) == {("imported", "Apply"): {"f:subjects": {}}}
    # Undecodable ones are ignored: the live object's stay.
    broken = copy.deepcopy(live)
    broken["metadata"]["managedFields"] = [{"manager": "x", "operation": "Bogus"}]
    assert fm.update(live, broken, "editor")["metadata"]["managedFields"] == live["metadata"]["managedFields"]
    # An empty list clears them, and an object without them is not tracked until applied to.
    reset = copy.deepcopy(live)
    reset["metadata"].pop("managedFields")
    cleared = fm.update(live, reset, "editor", reset=True)
    assert "managedFields" not in cleared["metadata"]
    later = copy.deepcopy(stored(cleared))
    later["metadata"]["labels"]["x"] = "y"
    assert "managedFields" not in fm.update(stored(cleared), later, "editor")["metadata"]


def test_entries_for_other_api_versions_are_dropped(fm: FieldManager) -> None:
    live = stored(fm.update(fm.empty_object(), RB.decode(rolebinding()).obj, "creator"))
    live["metadata"]["managedFields"].append(
        {
            "manager": "old",
            "operation": "Update",
            "apiVersion": "rbac.authorization.core.io/v1beta1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:roleRef": {}},
        }
    )
    new = copy.deepcopy(live)
    new["metadata"]["labels"]["x"] = "y"
    assert {m for m, _ in entries_of(fm.update(live, new, "editor"))} == {"creator", "editor"}


def test_update_managers_are_capped_into_ancient_changes(fm: FieldManager) -> None:
    live = stored(fm.update(fm.empty_object(), RB.decode(rolebinding()).obj, "creator"))
    for i in range(11):
        new = copy.deepcopy(live)
        new["metadata"]["labels"][f"l{i}"] = "v"
        live = stored(fm.update(live, new, f"m{i:02d}"))
    managers = [e["manager"] for e in live["metadata"]["managedFields"]]
    assert len(managers) == 10 and "ancient-changes" in managers


def test_restore_unchanged_times() -> None:
    old: JSON = {
        "metadata": {"managedFields": [{"manager": "a", "time": "2026-01-01T00:00:00Z", "fieldsV1": {}}]}
    }
    new = copy.deepcopy(old)
    new["metadata"]["managedFields"][0]["time"] = "2026-02-02T00:00:00Z"
    restore_unchanged_times(new, old)
    assert new == old
    changed = copy.deepcopy(new)
    changed["metadata"]["managedFields"][0]["time"] = "2026-02-02T00:00:00Z"
    changed["spec"] = 1
    restore_unchanged_times(changed, old)
    assert changed["metadata"]["managedFields"][0]["time"] == "2026-02-02T00:00:00Z"


# ----------------------------------------------------------------------------- apply


def apply(fm: FieldManager, live: JSON, config: JSON, manager: str, *, force: bool = False) -> JSON:
    return stored(fm.apply(live, config, manager, force=force))


def test_apply_creates_and_owns_exactly_its_configuration(fm: FieldManager) -> None:
    created = apply(fm, fm.empty_object(), rolebinding(subjects=[{"kind": "User", "name": "a"}]), "kubectl")
    assert entries_of(created) == {
        ("kubectl", "Apply"): {"f:metadata": {"f:labels": {"f:app": {}}}, "f:roleRef": {}, "f:subjects": {}}
    }
    assert created["subjects"][0]["apiGroup"] == "rbac.authorization.core.io"  # defaulted after the merge
    # Upstream compares before defaulting: the same subjects without their default are a change of
    # an atomic list, so a conflict for another applier (and a no-op for the owner).
    with pytest.raises(StatusError):
        fm.apply(created, rolebinding(subjects=[{"kind": "User", "name": "a"}]), "other", force=False)
    assert (
        stored(
            fm.apply(created, rolebinding(subjects=[{"kind": "User", "name": "a"}]), "kubectl", force=False)
        )["subjects"]
        == created["subjects"]
    )


def test_apply_conflicts_name_the_owner_and_the_field(fm: FieldManager) -> None:
    live = apply(fm, fm.empty_object(), rolebinding(), "kubectl")
    other = {"apiVersion": RB_API, "kind": "RoleBinding", "subjects": [{"kind": "User", "name": "bob"}]}
    with pytest.raises(StatusError) as caught:
        fm.apply(live, other, "other", force=False)
    err = caught.value
    assert err.code == 409 and err.reason == "Conflict"
    assert err.message == 'Apply failed with 1 conflict: conflict with "kubectl": .subjects'
    assert err.status["details"] == {
        "causes": [
            {"reason": "FieldManagerConflict", "message": 'conflict with "kubectl"', "field": ".subjects"}
        ]
    }
    # An Update owner is named with its apiVersion; several conflicts are grouped by manager.
    edited = copy.deepcopy(live)
    edited["roleRef"] = {**ROLE_REF, "name": "edit"}
    edited["metadata"]["labels"]["app"] = "changed"
    edited = stored(fm.update(live, edited, "kubectl-edit"))
    config = {
        "apiVersion": RB_API,
        "kind": "RoleBinding",
        "metadata": {"labels": {"app": "mine"}},
        "roleRef": ROLE_REF,
        "subjects": [{"kind": "User", "name": "bob"}],
    }
    with pytest.raises(StatusError) as caught:
        fm.apply(edited, config, "other", force=False)
    assert caught.value.message == (
        "Apply failed with 3 conflicts: "
        'conflicts with "kubectl":\n- .subjects\n'
        'conflicts with "kubectl-edit" using rbac.authorization.core.io/v1:\n'
        "- .roleRef\n- .metadata.labels.app"
    )
    assert [c["field"] for c in caught.value.status["details"]["causes"]] == [
        ".subjects",
        ".roleRef",
        ".metadata.labels.app",
    ]


def test_same_values_are_shared_not_conflicts(fm: FieldManager) -> None:
    live = apply(fm, fm.empty_object(), rolebinding(), "kubectl")
    shared = apply(fm, live, rolebinding(), "second")
    assert entries_of(shared)[("second", "Apply")] == entries_of(shared)[("kubectl", "Apply")]


def test_force_takes_ownership(fm: FieldManager) -> None:
    live = apply(fm, fm.empty_object(), rolebinding(), "kubectl")
    other = {"apiVersion": RB_API, "kind": "RoleBinding", "subjects": [{"kind": "Group", "name": "devs"}]}
    forced = apply(fm, live, other, "other", force=True)
    assert forced["subjects"][0]["name"] == "devs"
    assert entries_of(forced) == {
        ("other", "Apply"): {"f:subjects": {}},
        ("kubectl", "Apply"): {"f:metadata": {"f:labels": {"f:app": {}}}, "f:roleRef": {}},
    }


def test_fields_no_longer_applied_are_removed_unless_owned(fm: FieldManager) -> None:
    live = apply(fm, fm.empty_object(), rolebinding(), "kubectl")
    labelled = copy.deepcopy(live)
    labelled["metadata"]["labels"]["keep"] = "me"
    live = stored(fm.update(live, labelled, "kubectl-label"))
    config = rolebinding()
    config["metadata"] = {"name": "rb", "annotations": {"note": "x"}}
    pruned = apply(fm, live, config, "kubectl")
    # app was only kubectl's: gone. keep belongs to kubectl-label: stays.
    assert pruned["metadata"]["labels"] == {"keep": "me"}
    assert pruned["metadata"]["annotations"] == {"note": "x"}
    assert entries_of(pruned)[("kubectl", "Apply")] == {
        "f:metadata": {"f:annotations": {"f:note": {}}},
        "f:roleRef": {},
        "f:subjects": {},
    }
    # A field another applier also applies stays when one of them stops applying it.
    both = apply(fm, pruned, rolebinding(metadata={"annotations": {"note": "x"}}), "second")
    config["metadata"] = {"name": "rb"}
    after = apply(fm, both, config, "kubectl")
    assert after["metadata"]["annotations"] == {"note": "x"}


# structured-merge-diff merge/set_test.go, on metadata.finalizers.
def test_apply_update_apply_on_a_set_list(fm: FieldManager) -> None:
    def with_finalizers(names: list[str]) -> JSON:
        return {
            "apiVersion": RB_API,
            "kind": "RoleBinding",
            "metadata": {"finalizers": [f"example.com/{n}" for n in names]},
        }

    live = apply(fm, stored(rolebinding()), with_finalizers(["a", "c"]), "default")
    # (the stored object carried no managedFields: before-first-apply owns what was there)
    assert ("before-first-apply", "Update") in entries_of(live)
    updated = copy.deepcopy(live)
    updated["metadata"]["finalizers"] = [f"example.com/{n}" for n in ["a", "b", "c", "d"]]
    live = stored(fm.update(live, updated, "controller"))
    result = apply(fm, live, with_finalizers(["a", "aprime", "c", "cprime"]), "default")
    assert result["metadata"]["finalizers"] == [
        f"example.com/{n}" for n in ["a", "b", "aprime", "c", "d", "cprime"]
    ]
    fields = entries_of(result)
    assert fields[("default", "Apply")] == {
        "f:metadata": {
            "f:finalizers": {f'v:"example.com/{n}"': {} for n in ["a", "aprime", "c", "cprime"]},
        }
    }
    assert fields[("controller", "Update")] == {
        "f:metadata": {"f:finalizers": {f'v:"example.com/{n}"': {} for n in ["b", "d"]}}
    }
    # Dropping an item this applier alone owned removes it; one the controller owns stays.
    result = apply(fm, result, with_finalizers(["a", "c"]), "default")
    assert result["metadata"]["finalizers"] == [f"example.com/{n}" for n in ["a", "b", "c", "d"]]


def test_apply_refuses_what_is_not_this_kind(fm: FieldManager) -> None:
    live = fm.empty_object()
    with pytest.raises(StatusError) as caught:
        fm.apply(live, {"kind": "RoleBinding"}, "m", force=False)
    assert (caught.value.code, caught.value.message) == (400, "invalid object type: /, Kind=RoleBinding")
    with pytest.raises(StatusError) as caught:
        fm.apply(live, {"apiVersion": "v1", "kind": "ConfigMap"}, "m", force=False)
    assert caught.value.message == "invalid object type: /v1, Kind=ConfigMap"
    with pytest.raises(StatusError) as caught:
        fm.apply(live, {**rolebinding(), "metadata": {"name": "rb", "managedFields": []}}, "m", force=False)
    assert caught.value.message == "metadata.managedFields must be nil"
    with pytest.raises(StatusError) as caught:
        fm.apply(live, {**rolebinding(), "spec": {"foo": 1}}, "m", force=False)
    assert (caught.value.code, caught.value.message) == (
        400,
        "failed to create typed patch object (ns/rb; rbac.authorization.core.io/v1, Kind=RoleBinding): "
        ".spec: field not declared in schema",
    )


def test_a_no_op_apply_keeps_the_object(fm: FieldManager) -> None:
    live = apply(
        fm,
        fm.empty_object(),
        rolebinding(subjects=[{"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}]),
        "kubectl",
    )
    again = fm.apply(
        live,
        rolebinding(subjects=[{"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}]),
        "kubectl",
        force=False,
    )
    assert again["metadata"]["managedFields"] == live["metadata"]["managedFields"]
    assert stored(again) == live


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def test_client_side_apply_upgrades_to_server_side_without_conflicts(fm: FieldManager) -> None:
    # kubectl apply (client-side) made the object and recorded its configuration in the annotation.
    config = rolebinding()
    annotated = copy.deepcopy(config)
    annotated["metadata"]["annotations"] = {LAST_APPLIED: json.dumps(config)}
    live = stored(fm.update(fm.empty_object(), RB.decode(annotated).obj, "kubectl-client-side-apply"))
    changed = rolebinding(
        subjects=[{"kind": "User", "apiGroup": "rbac.authorization.core.io", "name": "bob"}]
    )
    # Another manager gets the conflict,
    with pytest.raises(StatusError):
        fm.apply(live, changed, "other", force=False)
    # kubectl does not: the annotation shows it applied those fields, and keeps following.
    upgraded = apply(fm, live, changed, "kubectl")
    assert upgraded["subjects"][0]["name"] == "bob"
    assert json.loads(upgraded["metadata"]["annotations"][LAST_APPLIED]) == changed
    assert upgraded["metadata"]["annotations"][LAST_APPLIED].endswith("\n")
    # A field changed by someone else since is still a conflict for kubectl.
    edited = copy.deepcopy(upgraded)
    edited["roleRef"] = {**ROLE_REF, "name": "edit"}
    edited = stored(fm.update(upgraded, edited, "kubectl-edit"))
    with pytest.raises(StatusError) as caught:
        fm.apply(edited, rolebinding(), "kubectl", force=False)
    assert ".roleRef" in caught.value.message


def test_event_fields(fm: FieldManager) -> None:
    kind = EventKind()
    events = FieldManager(kind)
    raw = {
        "apiVersion": "events.core.io/v1",
        "kind": "Event",
        "metadata": {"name": "e", "namespace": "ns"},
        "eventTime": "2026-11-22T02:16:41.123456Z",
        "action": "Started",
        "reason": "Started",
        "note": "n",
        "type": "Normal",
        "reportingController": "example.com/c",
        "reportingInstance": "c-1",
        "regarding": {"kind": "Pod", "name": "p"},
        "series": {"count": 2, "lastObservedTime": "2026-11-22T02:16:41.123456Z"},
    }
    created = events.update(events.empty_object(), kind.decode(raw).obj, "recorder")
    assert created["metadata"]["managedFields"][0]["fieldsV1"] == {
        "f:action": {},
        "f:eventTime": {},
        "f:note": {},
        "f:reason": {},
        "f:regarding": {},
        "f:reportingController": {},
        "f:reportingInstance": {},
        "f:series": {".": {}, "f:count": {}, "f:lastObservedTime": {}},
        "f:type": {},
    }
