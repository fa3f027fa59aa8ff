"""ObjectMeta validation (upstream's ValidateObjectMeta/ValidateObjectMetaUpdate) and name formats."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from apiserver.machinery import formats
from apiserver.machinery.errors import FieldError, FieldErrorType
from apiserver.machinery.metav1 import (
    validate_common_object_meta,
    validate_common_object_meta_update,
    validate_object_meta,
    validate_object_meta_update,
)

SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
QUALIFIED_NAME_PART_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
    "must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', "
    "regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


def good_meta(**extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "web", "namespace": "team-a"}
    meta.update(extra)
    return meta


def dns(meta: dict[str, Any]) -> list[FieldError]:
    return validate_object_meta(meta, formats.name_is_dns_subdomain)


def only(errs: list[FieldError]) -> FieldError:
    assert len(errs) == 1, [str(e) for e in errs]
    return errs[0]


def stored_meta(**extra: Any) -> dict[str, Any]:
    meta = good_meta(uid="u-1", resourceVersion="5", generation=1, creationTimestamp="2026-11-22T02:16:41Z")
    meta.update(extra)
    return meta


# ----------------------------------------------------------------------------- formats


class TestFormats:
    def test_subdomain(self) -> None:
        assert formats.is_dns1123_subdomain("example.com") == []
        assert formats.is_dns1123_subdomain("Example") == [SUBDOMAIN_MSG]
        assert formats.is_dns1123_subdomain("a" * 254) == ["must be no more than 253 characters"]

    def test_label(self) -> None:
        assert formats.is_dns1123_label("my-name") == []
        assert formats.is_dns1123_label("a.b") == ["must not contain dots"]
        assert formats.is_dns1123_label("-a") == [LABEL_MSG]
        assert formats.is_dns1123_label("a" * 64) == ["must be no more than 63 characters"]

    def test_qualified_name(self) -> None:
        assert formats.is_qualified_name("example.com/My_Name") == []
        assert formats.is_qualified_name("-bad") == [QUALIFIED_NAME_PART_MSG]
        assert formats.is_qualified_name("") == ["name part must be non-empty", QUALIFIED_NAME_PART_MSG]
        assert formats.is_qualified_name("/x") == ["prefix part must be non-empty"]
        assert formats.is_qualified_name("Bad/x") == ["prefix part " + SUBDOMAIN_MSG]
        assert formats.is_qualified_name("x" * 64) == ["name part must be no more than 63 characters"]
        (message,) = formats.is_qualified_name("a/b/c")
        assert message.startswith("a qualified name must consist of alphanumeric characters")
        assert message.endswith("with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')")

    def test_label_value(self) -> None:
        assert formats.is_valid_label_value("") == []
        assert formats.is_valid_label_value("my_value.1") == []
        assert formats.is_valid_label_value("bad value") == [LABEL_VALUE_MSG]
        assert formats.is_valid_label_value("v" * 64) == ["must be no more than 63 characters"]

    def test_path_segment_name(self) -> None:
        assert formats.is_valid_path_segment_name("Any:Thing_at@all") == []
        assert formats.is_valid_path_segment_name(".") == ["may not be '.'"]
        assert formats.is_valid_path_segment_name("..") == ["may not be '..'"]
        assert formats.is_valid_path_segment_name("a/b%c") == ["may not contain '/'", "may not contain '%'"]

    def test_generate_name_may_end_with_dash(self) -> None:
        assert formats.name_is_dns_subdomain("web-", True) == []
        assert formats.name_is_dns_subdomain("web-", False) == [SUBDOMAIN_MSG]


# ----------------------------------------------------------------------------- create


class TestObjectMeta:
    def test_good(self) -> None:
        assert dns(good_meta(labels={"app": "web"}, annotations={"note": "anything at all"})) == []

    def test_name_required(self) -> None:
        err = only(dns({"namespace": "team-a"}))
        assert (err.field, err.type) == ("metadata.name", FieldErrorType.REQUIRED)
        assert str(err) == "metadata.name: Required value: name or generateName is required"

    def test_name_must_be_valid_for_the_kind(self) -> None:
        err = only(dns(good_meta(name="Web_1")))
        assert (err.field, err.type) == ("metadata.name", FieldErrorType.INVALID)
        assert str(err) == f'metadata.name: Invalid value: "Web_1": {SUBDOMAIN_MSG}'

    def test_path_segment_names(self) -> None:
        assert validate_object_meta(good_meta(name="Web_1:x"), formats.name_is_path_segment) == []
        err = only(validate_object_meta(good_meta(name="a/b"), formats.name_is_path_segment))
        assert str(err) == "metadata.name: Invalid value: \"a/b\": may not contain '/'"
        err = only(validate_object_meta(good_meta(name=".."), formats.name_is_path_segment))
        assert str(err) == "metadata.name: Invalid value: \"..\": may not be '..'"

    def test_generate_name_checked_as_prefix(self) -> None:
        assert dns(good_meta(generateName="web-")) == []
        err = only(dns(good_meta(generateName="Web-")))
        assert (err.field, err.type) == ("metadata.generateName", FieldErrorType.INVALID)
        assert str(err) == f'metadata.generateName: Invalid value: "Web-": {SUBDOMAIN_MSG}'

    def test_generate_name_alone_still_needs_the_generated_name(self) -> None:
        # Upstream validates after the name was generated: a missing name is always an error.
        err = only(dns({"namespace": "team-a", "generateName": "web-"}))
        assert err.field == "metadata.name"

    def test_namespace_required(self) -> None:
        err = only(dns({"name": "web"}))
        assert (err.field, err.type, str(err)) == (
            "metadata.namespace",
            FieldErrorType.REQUIRED,
            "metadata.namespace: Required value",
        )

    def test_namespace_is_a_dns_label(self) -> None:
        err = only(dns(good_meta(namespace="team.a")))
        assert (err.field, err.type) == ("metadata.namespace", FieldErrorType.INVALID)
        assert str(err) == 'metadata.namespace: Invalid value: "team.a": must not contain dots'

    def test_generation_not_negative(self) -> None:
        err = only(dns(good_meta(generation=-1)))
        assert str(err) == "metadata.generation: Invalid value: -1: must be greater than or equal to 0"

    def test_label_key(self) -> None:
        err = only(dns(good_meta(labels={"-bad": "x"})))
        assert (err.field, err.type) == ("metadata.labels", FieldErrorType.INVALID)
        assert str(err) == f'metadata.labels: Invalid value: "-bad": {QUALIFIED_NAME_PART_MSG}'

    def test_label_value(self) -> None:
        err = only(dns(good_meta(labels={"app": "bad value"})))
        assert str(err) == f'metadata.labels: Invalid value: "bad value": {LABEL_VALUE_MSG}'
        err = only(dns(good_meta(labels={"app": "v" * 64})))
        assert str(err) == f'metadata.labels: Invalid value: "{"v" * 64}": must be no more than 63 characters'

    def test_annotation_keys_are_checked_lower_cased(self) -> None:
        assert dns(good_meta(annotations={"Example.COM/Key": "x"})) == []
        assert dns(good_meta(labels={"Example.COM/Key": "x"})) != []
        err = only(dns(good_meta(annotations={"bad key": "x"})))
        assert (err.field, err.type) == ("metadata.annotations", FieldErrorType.INVALID)
        assert str(err) == f'metadata.annotations: Invalid value: "bad key": {QUALIFIED_NAME_PART_MSG}'

    def test_annotations_total_size(self) -> None:
        at_limit = {"a": "x" * (262144 - 1)}
        assert dns(good_meta(annotations=at_limit)) == []
        err = only(dns(good_meta(annotations={"a": "x" * 262144})))
        assert (err.field, err.type) == ("metadata.annotations", FieldErrorType.TOO_LONG)
        assert "262144 bytes" in str(err)

    def test_owner_reference_fields_required(self) -> None:
        errs = dns(good_meta(ownerReferences=[{"apiVersion": "", "kind": "", "name": "", "uid": ""}]))
        assert [(e.field, e.type) for e in errs] == [
            ("metadata.ownerReferences.apiVersion", FieldErrorType.INVALID),
            ("metadata.ownerReferences.kind", FieldErrorType.INVALID),
            ("metadata.ownerReferences.name", FieldErrorType.INVALID),
            ("metadata.ownerReferences.uid", FieldErrorType.INVALID),
        ]
        assert (
            str(errs[0])
            == 'metadata.ownerReferences.apiVersion: Invalid value: "": version must not be empty'
        )
        assert str(errs[2]) == 'metadata.ownerReferences.name: Invalid value: "": must not be empty'

    def test_owner_reference_group_without_version(self) -> None:
        ref = {"apiVersion": "apps/", "kind": "Deployment", "name": "d", "uid": "1"}
        err = only(dns(good_meta(ownerReferences=[ref])))
        assert err.field == "metadata.ownerReferences.apiVersion"

    def test_at_most_one_controller(self) -> None:
        refs = [
            {"apiVersion": "v1", "kind": "Pod", "name": "a", "uid": "1", "controller": True},
            {"apiVersion": "v1", "kind": "Pod", "name": "b", "uid": "2", "controller": False},
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": "c", "uid": "3", "controller": True},
        ]
        err = only(dns(good_meta(ownerReferences=refs)))
        assert (err.field, err.type) == ("metadata.ownerReferences", FieldErrorType.INVALID)
        assert str(err).endswith(
            'Only one reference can have Controller set to true. Found "true" in references for Pod/a and '
            "Deployment/c"
        )

    def test_core_event_cannot_own(self) -> None:
        ref = {"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "1"}
        err = only(dns(good_meta(ownerReferences=[ref])))
        assert err.field == "metadata.ownerReferences"
        assert str(err).endswith(": /v1, Kind=Event is disallowed from being an owner")

    def test_finalizers(self) -> None:
        assert dns(good_meta(finalizers=["kubernetes", "orphan", "example.com/cleanup"])) == []

    def test_finalizer_must_be_a_qualified_name(self) -> None:
        errs = dns(good_meta(finalizers=["example.com/bad name"]))
        err = only(errs)
        assert (err.field, err.type) == ("metadata.finalizers", FieldErrorType.INVALID)
        assert (
            str(err)
            == f'metadata.finalizers: Invalid value: "example.com/bad name": {QUALIFIED_NAME_PART_MSG}'
        )

    def test_finalizer_without_prefix_must_be_standard(self) -> None:
        err = only(dns(good_meta(finalizers=["example.com/x", "cleanup"])))
        assert (err.field, err.type) == ("metadata.finalizers[1]", FieldErrorType.INVALID)
        assert str(err) == (
            'metadata.finalizers[1]: Invalid value: "cleanup": '
            "name is neither a standard finalizer name nor is it fully qualified"
        )

    def test_orphan_and_foreground_exclusive(self) -> None:
        err = only(dns(good_meta(finalizers=["orphan", "foregroundDeletion"])))
        assert str(err) == (
            'metadata.finalizers: Invalid value: []string{"orphan", "foregroundDeletion"}: '
            "finalizer orphan and foregroundDeletion cannot be both set"
        )

    def test_duplicate_finalizers_are_accepted_as_upstream(self) -> None:
        assert dns(good_meta(finalizers=["example.com/x", "example.com/x"])) == []

    @pytest.mark.parametrize(
        ("entry", "field", "message"),
        [
            (
                {"operation": "Patch", "manager": "m"},
                "metadata.managedFields[0].operation",
                'Invalid value: "Patch": must be `Apply` or `Update`',
            ),
            (
                {"operation": "Apply", "fieldsType": "FieldsV2"},
                "metadata.managedFields[0].fieldsType",
                'Invalid value: "FieldsV2": must be `FieldsV1`',
            ),
            (
                {"operation": "Update", "manager": "m" * 129},
                "metadata.managedFields[0].manager",
                "Too long: may not be more than 128 bytes",
            ),
            (
                {"operation": "Update", "manager": "ab\x07"},
                "metadata.managedFields[0].manager",
                "invalid character U+0007 (at position 2)",
            ),
            (
                {"operation": "Update", "subresource": "s" * 257},
                "metadata.managedFields[0].subresource",
                "Too long: may not be more than 256 bytes",
            ),
        ],
    )
    def test_managed_fields(self, entry: dict[str, Any], field: str, message: str) -> None:
        err = only(dns(good_meta(managedFields=[entry])))
        assert err.field == field
        assert err.body().endswith(message)

    def test_good_managed_fields(self) -> None:
        entry = {"manager": "kubectl", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": {}}
        assert dns(good_meta(managedFields=[entry])) == []

    def test_common_validation_uses_path_segment_names(self) -> None:
        assert validate_common_object_meta(good_meta(name="Web_1")) == []
        assert only(validate_common_object_meta(good_meta(name="a%b"))).field == "metadata.name"


# ----------------------------------------------------------------------------- update


class TestObjectMetaUpdate:
    def test_unchanged(self) -> None:
        old = stored_meta()
        assert validate_object_meta_update(copy.deepcopy(old), old) == []

    @pytest.mark.parametrize(
        ("key", "value", "shown"),
        [
            ("name", "other", '"other"'),
            ("namespace", "other", '"other"'),
            ("uid", "u-2", '"u-2"'),
            ("creationTimestamp", "2026-11-22T02:16:42Z", "2026-11-22 02:16:42 +0000 UTC"),
        ],
    )
    def test_immutable(self, key: str, value: str, shown: str) -> None:
        old = stored_meta()
        err = only(validate_object_meta_update(stored_meta(**{key: value}), old))
        assert (err.field, err.type) == (f"metadata.{key}", FieldErrorType.INVALID)
        assert str(err) == f"metadata.{key}: Invalid value: {shown}: field is immutable"

    def test_same_instant_is_not_a_change(self) -> None:
        old = stored_meta()
        assert (
            validate_object_meta_update(stored_meta(creationTimestamp="2026-11-22T03:16:41+01:00"), old) == []
        )

    def test_deletion_timestamp_cannot_be_set_or_removed(self) -> None:
        old = stored_meta()
        new = stored_meta(deletionTimestamp="2026-11-23T00:00:00Z")
        err = only(validate_object_meta_update(new, old))
        assert (
            str(err)
            == "metadata.deletionTimestamp: Invalid value: 2026-11-23 00:00:00 +0000 UTC: field is immutable"
        )
        err = only(validate_object_meta_update(old, new))
        assert str(err) == 'metadata.deletionTimestamp: Invalid value: "null": field is immutable'

    def test_deletion_grace_period_immutable(self) -> None:
        old = stored_meta(deletionTimestamp="2026-11-23T00:00:00Z", deletionGracePeriodSeconds=30)
        new = stored_meta(deletionTimestamp="2026-11-23T00:00:00Z", deletionGracePeriodSeconds=0)
        err = only(validate_object_meta_update(new, old))
        assert str(err) == "metadata.deletionGracePeriodSeconds: Invalid value: 0: field is immutable"

    def test_resource_version_required(self) -> None:
        new = stored_meta()
        del new["resourceVersion"]
        err = only(validate_object_meta_update(new, stored_meta()))
        assert str(err) == 'metadata.resourceVersion: Invalid value: "": must be specified for an update'

    def test_generation_not_decremented(self) -> None:
        err = only(validate_object_meta_update(stored_meta(generation=1), stored_meta(generation=2)))
        assert str(err) == "metadata.generation: Invalid value: 1: must not be decremented"

    def test_no_new_finalizers_while_deleting(self) -> None:
        deleting = {"deletionTimestamp": "2026-11-23T00:00:00Z", "finalizers": ["example.com/a"]}
        old = stored_meta(**deleting)
        removed = stored_meta(**{**deleting, "finalizers": []})
        assert validate_object_meta_update(removed, old) == []
        added = stored_meta(**{**deleting, "finalizers": ["example.com/a", "example.com/c", "example.com/b"]})
        err = only(validate_object_meta_update(added, old))
        assert (err.field, err.type) == ("metadata.finalizers", FieldErrorType.FORBIDDEN)
        assert str(err) == (
            "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, "
            'found new finalizers []string{"example.com/b", "example.com/c"}'
        )

    def test_new_labels_and_finalizers_are_validated(self) -> None:
        errs = validate_object_meta_update(
            stored_meta(labels={"a": "b c"}, finalizers=["cleanup"]), stored_meta()
        )
        assert [e.field for e in errs] == ["metadata.labels", "metadata.finalizers[0]"]

    def test_common_update_validation(self) -> None:
        errs = validate_common_object_meta_update(stored_meta(name="other"), stored_meta())
        assert [e.field for e in errs] == ["metadata.name"]
