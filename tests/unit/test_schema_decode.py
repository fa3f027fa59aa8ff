"""Decoding request bodies into canonical JSON: pruning, omitempty, timestamps, type errors."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apiserver.machinery import jsonvalue
from apiserver.machinery.errors import StatusError
from apiserver.machinery.metav1 import ObjectMeta
from apiserver.machinery.schema import (
    INT32,
    MICRO_TIME,
    TIME,
    DecodeError,
    ListOf,
    Scalar,
    Struct,
    Timestamp,
    canonical_timestamp,
    decode_object,
    fields_of,
)
from apiserver.resources import EventKind, RoleBindingKind
from apiserver.resources.event import Event
from apiserver.resources.rolebinding import RoleBinding

RB = RoleBindingKind()
EV = EventKind()


def rb_body(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {"name": "readers", "namespace": "team-a"},
        "roleRef": {"apiGroup": "rbac.authorization.core.io", "kind": "Role", "name": "reader"},
    }
    body.update(changes)
    return body


def bad_request(kind: RoleBindingKind | EventKind, body: Any) -> str:
    with pytest.raises(StatusError) as caught:
        kind.decode(body)
    assert caught.value.code == 400
    assert caught.value.reason == "BadRequest"
    return caught.value.message


# ----------------------------------------------------------------------------- unknown fields


class TestUnknownFields:
    def test_pruned_and_reported_in_document_order(self) -> None:
        body = {
            "foo": 1,
            "metadata": {"name": "readers", "Name": "x", "namespace": "team-a", "bar": {}},
            "subjects": [{"kind": "User", "name": "a"}, {"kind": "User", "name": "b", "baz": True}],
            "roleRef": {"apiGroup": "rbac.authorization.core.io", "kind": "Role", "name": "r", "qux": "q"},
            "status": {},
        }
        decoded = RB.decode(body)
        assert decoded.unknown_fields == [
            "foo",
            "metadata.Name",
            "metadata.bar",
            "subjects[1].baz",
            "roleRef.qux",
            "status",
        ]
        assert "foo" not in decoded.obj and "status" not in decoded.obj
        assert decoded.obj["metadata"] == {
            "name": "readers",
            "namespace": "team-a",
            "creationTimestamp": None,
        }
        assert decoded.obj["subjects"][1] == {
            "kind": "User",
            "apiGroup": "rbac.authorization.core.io",
            "name": "b",
        }

    def test_keys_are_case_sensitive(self) -> None:
        decoded = RB.decode(rb_body(RoleRef={"kind": "Role"}, Subjects=[]))
        assert decoded.unknown_fields == ["RoleRef", "Subjects"]

    def test_free_form_maps_have_no_unknown_fields(self) -> None:
        meta = {
            "name": "readers",
            "namespace": "team-a",
            "labels": {"Any.Key/x": "v"},
            "annotations": {"whatever": "{}"},
            "managedFields": [{"manager": "m", "operation": "Apply", "fieldsV1": {"f:roleRef": {".": {}}}}],
        }
        decoded = RB.decode(rb_body(metadata=meta))
        assert decoded.unknown_fields == []
        assert decoded.obj["metadata"]["managedFields"][0]["fieldsV1"] == {"f:roleRef": {".": {}}}

    def test_nested_struct_paths(self) -> None:
        body = {
            "metadata": {
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u", "x": 1}]
            },
            "eventTime": "2026-11-22T02:16:41.000000Z",
            "series": {"count": 2, "lastObservedTime": "2026-11-22T02:16:41.000000Z", "y": 2},
            "regarding": {"kind": "Pod", "z": 3},
            "deprecatedSource": {"component": "c", "w": 4},
        }
        assert EV.decode(body).unknown_fields == [
            "metadata.ownerReferences[0].x",
            "series.y",
            "regarding.z",
            "deprecatedSource.w",
        ]


# ----------------------------------------------------------------------------- canonical output


class TestCanonicalOutput:
    def test_role_binding(self) -> None:
        obj = RB.decode({"kind": "RoleBinding", "subjects": [], "roleRef": {"kind": "Role", "name": "r"}}).obj
        assert obj == {
            "kind": "RoleBinding",
            "metadata": {"creationTimestamp": None},
            "roleRef": {"apiGroup": "rbac.authorization.core.io", "kind": "Role", "name": "r"},
        }

    def test_role_ref_fields_are_never_omitted(self) -> None:
        # RoleRef has no omitempty (apiGroup empty only before defaulting: decode the schema directly).
        obj = decode_object(RoleBinding, {}, kind="RoleBinding", version="v1").obj
        assert obj["roleRef"] == {"apiGroup": "", "kind": "", "name": ""}

    def test_subject_omitempty(self) -> None:
        obj = RB.decode(
            rb_body(subjects=[{"kind": "ServiceAccount", "name": "sa", "apiGroup": "", "namespace": ""}])
        ).obj
        assert obj["subjects"] == [{"kind": "ServiceAccount", "name": "sa"}]
        obj = RB.decode(rb_body(subjects=[{}])).obj
        assert obj["subjects"] == [{"kind": "", "name": ""}]

    def test_go_struct_order(self) -> None:
        body = {
            "roleRef": {"name": "r", "kind": "Role", "apiGroup": "rbac.authorization.core.io"},
            "subjects": [{"namespace": "n", "name": "sa", "kind": "ServiceAccount"}],
            "metadata": {"labels": {"b": "1", "a": "2"}, "namespace": "team-a", "name": "x"},
            "apiVersion": "rbac.authorization.core.io/v1",
            "kind": "RoleBinding",
        }
        obj = RB.decode(body).obj
        assert list(obj) == ["kind", "apiVersion", "metadata", "subjects", "roleRef"]
        assert list(obj["metadata"]) == ["name", "namespace", "creationTimestamp", "labels"]
        assert list(obj["metadata"]["labels"]) == ["b", "a"]
        assert list(obj["subjects"][0]) == ["kind", "name", "namespace"]
        assert list(obj["roleRef"]) == ["apiGroup", "kind", "name"]

    def test_event_value_structs_and_times(self) -> None:
        obj = EV.decode({"metadata": {"name": "e"}}).obj
        assert obj == {
            "metadata": {"name": "e", "creationTimestamp": None},
            "eventTime": None,
            "regarding": {},
            "deprecatedSource": {},
            "deprecatedFirstTimestamp": None,
            "deprecatedLastTimestamp": None,
        }
        assert json.dumps(obj).count("null") == 4

    def test_event_pointers(self) -> None:
        obj = EV.decode({"related": {}, "series": {}}).obj
        assert obj["related"] == {}
        assert obj["series"] == {"count": 0, "lastObservedTime": None}
        assert list(obj)[:4] == ["metadata", "eventTime", "series", "regarding"]

    def test_zero_values_omitted(self) -> None:
        body = {
            "metadata": {"name": "", "generation": 0, "labels": {}, "finalizers": [], "ownerReferences": []},
            "reportingController": "",
            "deprecatedCount": 0,
            "note": "",
        }
        obj = EV.decode(body).obj
        assert obj["metadata"] == {"creationTimestamp": None}
        assert "deprecatedCount" not in obj and "note" not in obj and "reportingController" not in obj

    def test_present_pointer_zero_values_kept(self) -> None:
        meta = {
            "deletionGracePeriodSeconds": 0,
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u", "controller": False}
            ],
        }
        obj = RB.decode(rb_body(metadata=meta)).obj
        assert obj["metadata"]["deletionGracePeriodSeconds"] == 0
        assert obj["metadata"]["ownerReferences"] == [
            {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u", "controller": False}
        ]

    def test_null_is_absent(self) -> None:
        body = rb_body(subjects=None, kind=None)
        body["metadata"] = {"name": "x", "namespace": None, "labels": None, "deletionTimestamp": None}
        obj = RB.decode(body).obj
        assert obj["metadata"] == {"name": "x", "creationTimestamp": None}
        assert "subjects" not in obj and "kind" not in obj
        obj = EV.decode({"eventTime": None, "related": None, "regarding": None}).obj
        assert obj["eventTime"] is None and "related" not in obj and obj["regarding"] == {}

    def test_null_elements_are_zero_values(self) -> None:
        obj = RB.decode(rb_body(subjects=[None], metadata={"finalizers": [None], "labels": {"a": None}})).obj
        assert obj["subjects"] == [{"kind": "", "name": ""}]
        assert obj["metadata"]["finalizers"] == [""]
        assert obj["metadata"]["labels"] == {"a": ""}

    def test_input_not_modified(self) -> None:
        body = rb_body(subjects=[{"kind": "User", "name": "a", "extra": 1}])
        before = json.dumps(body)
        RB.decode(body)
        assert json.dumps(body) == before


# ----------------------------------------------------------------------------- timestamps


class TestTimestamps:
    @pytest.mark.parametrize(
        ("given", "time"),
        [
            ("2026-11-22T02:16:41Z", "2026-11-22T02:16:41Z"),
            ("2026-11-22T02:16:41.987654321Z", "2026-11-22T02:16:41Z"),
            ("2026-11-22T04:16:41.123+02:00", "2026-11-22T02:16:41Z"),
            ("2026-11-21T23:46:41-02:30", "2026-11-22T02:16:41Z"),
            # What Go's time.Parse also takes: a one-digit hour, a comma, an offset of 24 hours.
            ("2026-11-22T2:16:41,5Z", "2026-11-22T02:16:41Z"),
            ("2026-11-23T02:16:41+24:00", "2026-11-22T02:16:41Z"),
        ],
    )
    def test_time_is_rfc3339_normalized(self, given: str, time: str) -> None:
        assert canonical_timestamp(given, micro=False) == time

    @pytest.mark.parametrize(
        ("given", "micro"),
        [
            ("2026-11-22T02:16:41.000000Z", "2026-11-22T02:16:41.000000Z"),
            ("2026-11-22T02:16:41.987654Z", "2026-11-22T02:16:41.987654Z"),
            ("2026-11-22T04:16:41.123000+02:00", "2026-11-22T02:16:41.123000Z"),
            ("2026-11-22T02:16:41,500000Z", "2026-11-22T02:16:41.500000Z"),
        ],
    )
    def test_micro_time_takes_exactly_six_fraction_digits(self, given: str, micro: str) -> None:
        assert canonical_timestamp(given, micro=True) == micro

    def test_zero_time_is_null(self) -> None:
        assert canonical_timestamp("0001-01-01T00:00:00Z", micro=False) is None

    @pytest.mark.parametrize(
        ("given", "error"),
        [
            ("", 'as "2006-01-02T15:04:05Z07:00": cannot parse "" as "2006"'),
            ("yesterday", 'as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006"'),
            ("2026-11-22", 'as "2006-01-02T15:04:05Z07:00": cannot parse "" as "T"'),
            ("2026-11-22 02:16:41Z", 'as "2006-01-02T15:04:05Z07:00": cannot parse " 02:16:41Z" as "T"'),
            ("2026-13-01T00:00:00Z", ": month out of range"),
            ("2026-02-29T00:00:00Z", ": day out of range"),
            ("2026-11-22T24:00:00Z", ": hour out of range"),
            ("2026-11-22T02:16:41", 'as "2006-01-02T15:04:05Z07:00": cannot parse "" as "Z07:00"'),
            ("2026-11-22T02:16:41+25:00", ": time zone offset hour out of range"),
            ("2026-11-22t02:16:41z", 'as "2006-01-02T15:04:05Z07:00": cannot parse "t02:16:41z" as "T"'),
        ],
    )
    def test_malformed_time(self, given: str, error: str) -> None:
        with pytest.raises(ValueError) as caught:
            canonical_timestamp(given, micro=False)
        assert str(caught.value) == f'parsing time "{given}"{"" if error.startswith(":") else " "}{error}'

    def test_time_quotes_bytes_outside_printable_ascii(self) -> None:
        with pytest.raises(ValueError) as caught:
            canonical_timestamp("2026-11-22T02:16:41Z\u00e9", micro=False)
        assert str(caught.value) == 'parsing time "2026-11-22T02:16:41Z\\xc3\\xa9": extra text: "\\xc3\\xa9"'

    @pytest.mark.parametrize(
        ("given", "error"),
        [
            ("2026-11-22T02:16:41Z", 'cannot parse "Z" as ".000000"'),
            ("2026-11-22T02:16:41.5Z", 'cannot parse ".5Z" as ".000000"'),
            ("2026-11-22T02:16:41.1234567Z", 'cannot parse "7Z" as "Z07:00"'),
        ],
    )
    def test_malformed_micro_time(self, given: str, error: str) -> None:
        with pytest.raises(ValueError) as caught:
            canonical_timestamp(given, micro=True)
        assert str(caught.value) == f'parsing time "{given}" as "2006-01-02T15:04:05.000000Z07:00": {error}'

    def test_in_objects(self) -> None:
        meta = {"name": "x", "creationTimestamp": "2026-11-22T03:16:41.9+01:00"}
        assert (
            RB.decode(rb_body(metadata=meta)).obj["metadata"]["creationTimestamp"] == "2026-11-22T02:16:41Z"
        )
        obj = EV.decode(
            {
                "eventTime": "2026-11-22T02:16:41.100000Z",
                "series": {"count": 2, "lastObservedTime": "2026-11-22T02:16:41.000000+00:00"},
                "deprecatedFirstTimestamp": "2026-11-22T02:16:41.999Z",
            }
        ).obj
        assert obj["eventTime"] == "2026-11-22T02:16:41.100000Z"
        assert obj["series"]["lastObservedTime"] == "2026-11-22T02:16:41.000000Z"
        assert obj["deprecatedFirstTimestamp"] == "2026-11-22T02:16:41Z"

    def test_bad_timestamp_is_400_with_time_parses_error(self) -> None:
        # Time.UnmarshalJSON's error is not a type error: encoding/json names no field for it.
        assert bad_request(EV, {"eventTime": "yesterday"}) == (
            'Event in version "v1" cannot be handled as a Event: parsing time "yesterday" as '
            '"2006-01-02T15:04:05.000000Z07:00": cannot parse "yesterday" as "2006"'
        )
        message = bad_request(EV, {"series": {"lastObservedTime": "2026-11-22T02:16:41Z"}})
        assert message.endswith('cannot parse "Z" as ".000000"')

    def test_non_string_timestamp(self) -> None:
        message = bad_request(RB, rb_body(metadata={"creationTimestamp": 1700000000}))
        go_field = "ObjectMeta.metadata.creationTimestamp"
        assert message.endswith(
            f"json: cannot unmarshal number into Go struct field {go_field} of type string"
        )


# ----------------------------------------------------------------------------- type errors


class TestTypeErrors:
    @pytest.mark.parametrize(
        ("body", "expected"),
        [
            (
                rb_body(subjects="alice"),
                "string into Go struct field RoleBinding.subjects of type []v1.Subject",
            ),
            (
                rb_body(subjects=["alice"]),
                "string into Go struct field RoleBinding.subjects of type v1.Subject",
            ),
            (
                rb_body(subjects=[{"kind": "User", "name": 5}]),
                "number into Go struct field Subject.subjects.name of type string",
            ),
            (
                rb_body(roleRef=[]),
                "array into Go struct field RoleBinding.roleRef of type v1.RoleRef",
            ),
            (
                rb_body(metadata="x"),
                "string into Go struct field RoleBinding.metadata of type v1.ObjectMeta",
            ),
            (
                rb_body(metadata={"labels": {"a": 1}}),
                "number into Go struct field ObjectMeta.metadata.labels of type string",
            ),
            (
                rb_body(metadata={"labels": ["a"]}),
                "array into Go struct field ObjectMeta.metadata.labels of type map[string]string",
            ),
            (
                rb_body(metadata={"finalizers": "x"}),
                "string into Go struct field ObjectMeta.metadata.finalizers of type []string",
            ),
            (
                rb_body(metadata={"generation": "1"}),
                "string into Go struct field ObjectMeta.metadata.generation of type int64",
            ),
            (
                rb_body(metadata={"generation": True}),
                "bool into Go struct field ObjectMeta.metadata.generation of type int64",
            ),
            (
                rb_body(metadata={"ownerReferences": [{"controller": "yes"}]}),
                "string into Go struct field OwnerReference.metadata.ownerReferences.controller of type bool",
            ),
            (
                rb_body(kind=5),
                "number into Go struct field RoleBinding.kind of type string",
            ),
        ],
    )
    def test_role_binding(self, body: Any, expected: str) -> None:
        message = bad_request(RB, body)
        prefix = 'RoleBinding in version "v1" cannot be handled as a RoleBinding: json: cannot unmarshal '
        assert message == prefix + expected

    @pytest.mark.parametrize(
        ("body", "expected"),
        [
            (
                {"series": {"count": 1.5}},
                "number 1.5 into Go struct field EventSeries.series.count of type int32",
            ),
            (
                {"series": {"count": 2**31}},
                "number 2147483648 into Go struct field EventSeries.series.count of type int32",
            ),
            (
                {"deprecatedCount": -(2**31) - 1},
                "number -2147483649 into Go struct field Event.deprecatedCount of type int32",
            ),
            (
                {"series": 3},
                "number into Go struct field Event.series of type v1.EventSeries",
            ),
            (
                {"related": "pod"},
                "string into Go struct field Event.related of type v1.ObjectReference",
            ),
            (
                {"note": {"text": "x"}},
                "object into Go struct field Event.note of type string",
            ),
        ],
    )
    def test_event(self, body: Any, expected: str) -> None:
        prefix = 'Event in version "v1" cannot be handled as a Event: json: cannot unmarshal '
        assert bad_request(EV, body) == prefix + expected

    def test_int32_bounds_accepted(self) -> None:
        obj = EV.decode({"deprecatedCount": 2**31 - 1, "series": {"count": -(2**31)}}).obj
        assert obj["deprecatedCount"] == 2**31 - 1 and obj["series"]["count"] == -(2**31)

    def test_first_error_in_document_order(self) -> None:
        message = bad_request(RB, {"roleRef": {"name": 1}, "subjects": 2})
        assert "RoleRef.roleRef.name" in message

    def test_body_not_an_object(self) -> None:
        assert bad_request(RB, ["x"]).endswith(
            "json: cannot unmarshal array into Go value of type v1.RoleBinding"
        )

    def test_free_form_must_be_an_object(self) -> None:
        message = bad_request(RB, rb_body(metadata={"managedFields": [{"fieldsV1": "x"}]}))
        assert "ManagedFieldsEntry.metadata.managedFields.fieldsV1 of type v1.FieldsV1" in message


class TestStrictErrors:
    """What fieldValidation=Strict refuses and Warn warns of, as sigs.k8s.io/json reports it (the
    order and wording of kube-apiserver's answers in tests/integration/test_decode_errors.py)."""

    def test_unknown_and_repeated_fields_in_text_order(self) -> None:
        raw = (
            '{"metadata":{"name":"a","name":"a","foo":1},"spec":{"foo":1},'
            '"roleRef":{"kind":"Role","name":"r","bar":2},'
            '"subjects":[{"kind":"User","name":"a","name":"b","zzz":1}],"spec":2}'
        )
        decoded = RB.decode(json.loads(raw, object_pairs_hook=jsonvalue.from_pairs))
        assert decoded.strict_errors == [
            'duplicate field "metadata.name"',
            'unknown field "metadata.foo"',
            'unknown field "spec"',
            'unknown field "roleRef.bar"',
            'duplicate field "subjects[0].name"',
            'unknown field "subjects[0].zzz"',
        ]
        assert decoded.obj["subjects"][0]["name"] == "b"

    def test_repeats_inside_unknown_fields_and_fields_v1_go_unreported(self) -> None:
        raw = (
            '{"metadata":{"labels":{"a":"1","a":"2"},"managedFields":[{"fieldsV1":{"f:a":{},"f:a":{}}}]},'
            '"spec":{"foo":1,"foo":2},"roleRef":{"kind":"Role"},"roleRef":{"kind":"Role","name":"r"}}'
        )
        decoded = RB.decode(json.loads(raw, object_pairs_hook=jsonvalue.from_pairs))
        assert decoded.strict_errors == [
            'duplicate field "metadata.labels.a"',
            'unknown field "spec"',
            'duplicate field "roleRef"',
        ]
        assert decoded.obj["metadata"]["managedFields"][0]["fieldsV1"] == {"f:a": {}}

    def test_every_value_of_a_repeated_field_is_decoded(self) -> None:
        raw = '{"roleRef":{"name":5},"roleRef":{"kind":"Role","name":"r"}}'
        message = bad_request(RB, json.loads(raw, object_pairs_hook=jsonvalue.from_pairs))
        assert message.endswith("number into Go struct field RoleRef.roleRef.name of type string")

    def test_named_string_types_are_named(self) -> None:
        message = bad_request(RB, rb_body(metadata={"uid": 5}))
        assert message.endswith("number into Go struct field ObjectMeta.metadata.uid of type types.UID")


class TestUnstructuredConversion:
    """A strategic merge patch's result, converted as runtime.DefaultUnstructuredConverter does; the
    messages are kube-apiserver's (tests/integration/test_decode_errors.py)."""

    @staticmethod
    def detail(kind: RoleBindingKind | EventKind, body: Any) -> str:
        with pytest.raises(DecodeError) as caught:
            kind.decode(body, unstructured=True)
        return caught.value.detail

    @pytest.mark.parametrize(
        ("body", "expected"),
        [
            (rb_body(roleRef={"name": 5}), "cannot convert int64 to string"),
            (rb_body(roleRef={"name": True}), "unrecognized type: string"),
            (rb_body(roleRef={"name": 1.5}), "unrecognized type: string"),
            (rb_body(roleRef={"name": [1]}), "unrecognized type: string"),
            (rb_body(roleRef="x"), "cannot restore struct from: string"),
            (rb_body(roleRef=[1]), "cannot restore struct from: slice"),
            (rb_body(subjects="x"), "cannot restore slice from string"),
            (rb_body(subjects={"a": 1}), "cannot restore slice from map"),
            (rb_body(metadata={"labels": "x"}), "cannot restore map from string"),
            (rb_body(metadata={"uid": 5}), "cannot convert int64 to types.UID"),
            (rb_body(metadata={"generation": "x"}), "unrecognized type: int64"),
            (rb_body(metadata={"generation": 1.5}), "cannot convert float64 to int64"),
            (
                rb_body(metadata={"creationTimestamp": 5}),
                "json: cannot unmarshal number into Go value of type string",
            ),
            (rb_body(metadata={"ownerReferences": [{"controller": "yes"}]}), "unrecognized type: bool"),
            # Subjects come before roleRef in the Go struct, whatever the document's order.
            (rb_body(roleRef={"name": 5}, subjects="x"), "cannot restore slice from string"),
        ],
    )
    def test_role_binding(self, body: Any, expected: str) -> None:
        assert self.detail(RB, body) == expected

    def test_event(self) -> None:
        assert self.detail(EV, {"series": {"count": "x"}}) == "unrecognized type: int32"
        assert self.detail(EV, {"deprecatedCount": 2.5}) == "cannot convert float64 to int32"

    def test_numbers_convert_as_reflect_does(self) -> None:
        obj = EV.decode({"deprecatedCount": 2**32 + 1, "series": {"count": 3.0}}, unstructured=True).obj
        assert (obj["deprecatedCount"], obj["series"]["count"]) == (1, 3)

    def test_unknown_fields_sorted(self) -> None:
        body = {"zz": 1, "metadata": {"qq": 1}, "aa": {"x": 1}, "subjects": [{"name": "a", "oo": 1}]}
        assert RB.decode(body, unstructured=True).strict_errors == [
            'unknown field "aa"',
            'unknown field "metadata.qq"',
            'unknown field "subjects[0].oo"',
            'unknown field "zz"',
        ]


# ----------------------------------------------------------------------------- schema introspection


class TestFieldSpecs:
    def test_markers_drive_the_schema(self) -> None:
        specs = {spec.name: spec for spec in fields_of(Event)}
        assert specs["eventTime"].type == Timestamp(micro=True)
        assert specs["eventTime"].go.format == MICRO_TIME
        assert specs["eventTime"].required
        assert specs["deprecatedCount"].type == Scalar(INT32)
        assert specs["deprecatedFirstTimestamp"].go.format == TIME
        assert specs["series"].go.pointer and specs["series"].go.omitempty
        assert not specs["note"].required
        assert "1kB" in specs["note"].description

    def test_role_binding(self) -> None:
        specs = {spec.name: spec for spec in fields_of(RoleBinding)}
        assert [spec.name for spec in fields_of(RoleBinding)] == [
            "kind",
            "apiVersion",
            "metadata",
            "subjects",
            "roleRef",
        ]
        assert specs["roleRef"].required and not specs["subjects"].required
        assert isinstance(specs["subjects"].type, ListOf)
        assert specs["subjects"].extensions == {"x-kubernetes-list-type": "atomic"}
        assert specs["metadata"].type == Struct(ObjectMeta)

    def test_object_meta_extensions(self) -> None:
        specs = {spec.name: spec for spec in fields_of(ObjectMeta)}
        assert specs["ownerReferences"].extensions["x-kubernetes-patch-merge-key"] == "uid"
        assert specs["finalizers"].extensions["x-kubernetes-list-type"] == "set"
        assert all(spec.description for spec in fields_of(ObjectMeta))
