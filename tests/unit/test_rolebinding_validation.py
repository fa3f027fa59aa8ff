"""RoleBinding: defaults, validation and strategy (upstream's rbac validation with the group renamed)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from apiserver.machinery.errors import FieldError, FieldErrorType
from apiserver.resources import KINDS, RoleBindingKind
from apiserver.resources.rolebinding import GROUP, RoleBinding

KIND = RoleBindingKind()

SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def binding(**changes: Any) -> dict[str, Any]:
    """A decoded (canonical, defaulted) RoleBinding, with top-level changes applied to the body."""
    body: dict[str, Any] = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "readers", "namespace": "team-a"},
        "subjects": [
            {"kind": "User", "name": "alice"},
            {"kind": "Group", "name": "devs"},
            {"kind": "ServiceAccount", "name": "builder", "namespace": "ci"},
        ],
        "roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "reader"},
    }
    body.update(changes)
    return KIND.decode(body).obj


def with_subject(subject: dict[str, Any]) -> dict[str, Any]:
    return binding(subjects=[subject])


def only(errs: list[FieldError]) -> FieldError:
    assert len(errs) == 1, [str(e) for e in errs]
    return errs[0]


def stored(obj: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["metadata"].update(
        uid="u-1", resourceVersion="7", generation=1, creationTimestamp="2026-11-22T02:16:41Z"
    )
    return obj


class TestKind:
    def test_names(self) -> None:
        assert (KIND.group, KIND.version, KIND.kind, KIND.list_kind) == (
            "rbac.authorization.core.io",
            "v1",
            "RoleBinding",
            "RoleBindingList",
        )
        assert (KIND.plural, KIND.singular, KIND.short_names, KIND.categories) == (
            "rolebindings",
            "rolebinding",
            (),
            (),
        )
        assert KIND.namespaced
        assert KIND.model is RoleBinding
        assert KIND.api_version == "rbac.authorization.core.io/v1"

    def test_registered(self) -> None:
        assert type(KINDS[0]) is RoleBindingKind

    def test_selectable_fields(self) -> None:
        assert KIND.selectable_fields(binding()) == {
            "metadata.name": "readers",
            "metadata.namespace": "team-a",
        }

    def test_prepare_leaves_the_object_alone(self) -> None:
        obj = binding()
        before = copy.deepcopy(obj)
        KIND.prepare_for_create(obj)
        KIND.prepare_for_update(obj, before)
        assert obj == before


class TestDefaults:
    def test_subject_api_groups(self) -> None:
        subjects = binding()["subjects"]
        assert subjects == [
            {"kind": "User", "apiGroup": GROUP, "name": "alice"},
            {"kind": "Group", "apiGroup": GROUP, "name": "devs"},
            {"kind": "ServiceAccount", "name": "builder", "namespace": "ci"},
        ]
        assert list(subjects[0]) == ["kind", "apiGroup", "name"]

    def test_given_api_group_is_kept(self) -> None:
        subject = with_subject({"kind": "User", "name": "alice", "apiGroup": "example.com"})["subjects"][0]
        assert subject["apiGroup"] == "example.com"

    def test_unknown_subject_kind_not_defaulted(self) -> None:
        assert with_subject({"kind": "Robot", "name": "r2"})["subjects"][0] == {"kind": "Robot", "name": "r2"}

    def test_role_ref_api_group(self) -> None:
        obj = binding(roleRef={"kind": "ClusterRole", "name": "view"})
        assert obj["roleRef"] == {"apiGroup": GROUP, "kind": "ClusterRole", "name": "view"}


class TestValidate:
    def test_good(self) -> None:
        assert KIND.validate(binding()) == []

    def test_no_subjects(self) -> None:
        assert KIND.validate(binding(subjects=[])) == []

    def test_metadata_name_is_a_path_segment(self) -> None:
        assert KIND.validate(binding(metadata={"name": "Readers:All_1", "namespace": "team-a"})) == []
        err = only(KIND.validate(binding(metadata={"name": "a/b", "namespace": "team-a"})))
        assert str(err) == "metadata.name: Invalid value: \"a/b\": may not contain '/'"

    def test_metadata_namespace_required(self) -> None:
        err = only(KIND.validate(binding(metadata={"name": "readers"})))
        assert (err.field, err.type) == ("metadata.namespace", FieldErrorType.REQUIRED)

    def test_role_ref_api_group(self) -> None:
        obj = binding(roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"})
        err = only(KIND.validate(obj))
        assert (err.field, err.type) == ("roleRef.apiGroup", FieldErrorType.NOT_SUPPORTED)
        assert str(err) == (
            'roleRef.apiGroup: Unsupported value: "rbac.authorization.k8s.io": '
            'supported values: "rbac.authorization.core.io"'
        )

    def test_role_ref_kind(self) -> None:
        err = only(KIND.validate(binding(roleRef={"apiGroup": GROUP, "kind": "Thing", "name": "reader"})))
        assert (err.field, err.type) == ("roleRef.kind", FieldErrorType.NOT_SUPPORTED)
        assert str(err) == 'roleRef.kind: Unsupported value: "Thing": supported values: "Role", "ClusterRole"'

    def test_role_ref_name_required(self) -> None:
        err = only(KIND.validate(binding(roleRef={"apiGroup": GROUP, "kind": "Role"})))
        assert (err.field, err.type, str(err)) == (
            "roleRef.name",
            FieldErrorType.REQUIRED,
            "roleRef.name: Required value",
        )

    @pytest.mark.parametrize(
        ("name", "message"),
        [
            (".", "may not be '.'"),
            ("..", "may not be '..'"),
            ("a/b", "may not contain '/'"),
            ("50%", "may not contain '%'"),
        ],
    )
    def test_role_ref_name_is_a_path_segment(self, name: str, message: str) -> None:
        err = only(KIND.validate(binding(roleRef={"apiGroup": GROUP, "kind": "Role", "name": name})))
        assert (err.field, err.type) == ("roleRef.name", FieldErrorType.INVALID)
        assert str(err) == f'roleRef.name: Invalid value: "{name}": {message}'

    def test_subject_name_required(self) -> None:
        err = only(KIND.validate(with_subject({"kind": "ServiceAccount", "name": ""})))
        assert (err.field, err.type) == ("subjects[0].name", FieldErrorType.REQUIRED)

    def test_service_account_name(self) -> None:
        err = only(KIND.validate(with_subject({"kind": "ServiceAccount", "name": "Builder"})))
        assert (err.field, err.type) == ("subjects[0].name", FieldErrorType.INVALID)
        assert str(err) == f'subjects[0].name: Invalid value: "Builder": {SUBDOMAIN_MSG}'

    def test_service_account_api_group_must_be_empty(self) -> None:
        subject = {"kind": "ServiceAccount", "name": "builder", "apiGroup": GROUP}
        err = only(KIND.validate(with_subject(subject)))
        assert (err.field, err.type) == ("subjects[0].apiGroup", FieldErrorType.NOT_SUPPORTED)
        assert str(err) == f'subjects[0].apiGroup: Unsupported value: "{GROUP}": supported values: ""'

    def test_service_account_without_namespace_is_accepted_in_a_role_binding(self) -> None:
        assert KIND.validate(with_subject({"kind": "ServiceAccount", "name": "builder"})) == []

    @pytest.mark.parametrize("kind", ["User", "Group"])
    def test_user_and_group_api_group(self, kind: str) -> None:
        err = only(KIND.validate(with_subject({"kind": kind, "name": "x", "apiGroup": "example.com"})))
        assert (err.field, err.type) == ("subjects[0].apiGroup", FieldErrorType.NOT_SUPPORTED)
        assert str(err) == (
            'subjects[0].apiGroup: Unsupported value: "example.com": '
            'supported values: "rbac.authorization.core.io"'
        )

    @pytest.mark.parametrize("kind", ["User", "Group"])
    def test_user_and_group_name_required(self, kind: str) -> None:
        """Reported once, as v1.33's ValidateRoleBindingSubject does."""
        err = only(KIND.validate(with_subject({"kind": kind, "name": ""})))
        assert (err.field, err.type) == ("subjects[0].name", FieldErrorType.REQUIRED)
        assert str(err) == "subjects[0].name: Required value"

    @pytest.mark.parametrize("kind", ["User", "Group"])
    def test_user_and_group_with_namespace_are_accepted(self, kind: str) -> None:
        assert KIND.validate(with_subject({"kind": kind, "name": "x", "namespace": "team-a"})) == []

    def test_user_names_are_free_form(self) -> None:
        assert KIND.validate(with_subject({"kind": "User", "name": "system:admin@Example/1"})) == []

    def test_unknown_subject_kind(self) -> None:
        err = only(KIND.validate(with_subject({"kind": "Robot", "name": "r2"})))
        assert (err.field, err.type) == ("subjects[0].kind", FieldErrorType.NOT_SUPPORTED)
        assert str(err) == (
            'subjects[0].kind: Unsupported value: "Robot": '
            'supported values: "ServiceAccount", "User", "Group"'
        )

    def test_subject_index_in_path(self) -> None:
        obj = binding(
            subjects=[{"kind": "User", "name": "a"}, {"kind": "User", "name": "b", "apiGroup": "x"}]
        )
        assert only(KIND.validate(obj)).field == "subjects[1].apiGroup"

    def test_errors_in_upstream_order(self) -> None:
        obj = binding(
            metadata={"namespace": "team-a"},
            roleRef={"apiGroup": "x", "kind": "Thing", "name": ""},
            subjects=[{"kind": "Robot", "name": "r"}],
        )
        assert [e.field for e in KIND.validate(obj)] == [
            "metadata.name",
            "roleRef.apiGroup",
            "roleRef.kind",
            "roleRef.name",
            "subjects[0].kind",
        ]


class TestValidateUpdate:
    def test_subjects_may_change(self) -> None:
        old = stored(binding())
        new = stored(binding(subjects=[{"kind": "User", "name": "bob"}]))
        assert KIND.validate_update(new, old) == []

    def test_role_ref_is_immutable(self) -> None:
        old = stored(binding())
        new = stored(binding(roleRef={"apiGroup": GROUP, "kind": "ClusterRole", "name": "admin"}))
        err = only(KIND.validate_update(new, old))
        assert (err.field, err.type) == ("roleRef", FieldErrorType.INVALID)
        assert str(err) == (
            'roleRef: Invalid value: rbac.RoleRef{APIGroup:"rbac.authorization.core.io", Kind:"ClusterRole", '
            'Name:"admin"}: cannot change roleRef'
        )

    def test_metadata_immutability(self) -> None:
        old = stored(binding())
        new = copy.deepcopy(old)
        new["metadata"]["uid"] = "u-2"
        err = only(KIND.validate_update(new, old))
        assert str(err) == 'metadata.uid: Invalid value: "u-2": field is immutable'

    def test_new_object_errors_reported_twice_as_upstream(self) -> None:
        old = stored(binding())
        new = stored(binding(subjects=[{"kind": "Robot", "name": "r"}]))
        assert [e.field for e in KIND.validate_update(new, old)] == ["subjects[0].kind", "subjects[0].kind"]
