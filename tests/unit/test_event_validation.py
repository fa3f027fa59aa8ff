"""Event: validation and strategy (upstream's events.go for requests to events.k8s.io/v1)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from apiserver.machinery.errors import FieldError, FieldErrorType
from apiserver.resources import KINDS, EventKind
from apiserver.resources.event import Event

KIND = EventKind()


def event(**changes: Any) -> dict[str, Any]:
    """A decoded (canonical) Event, with top-level changes applied to the body (None removes)."""
    body: dict[str, Any] = {
        "apiVersion": "events.core.io/v1",
        "kind": "Event",
        "metadata": {"name": "web.17c8e2a1b4f5", "namespace": "team-a"},
        "eventTime": "2026-11-22T02:16:41.123456Z",
        "reportingController": "example.com/deployer",
        "reportingInstance": "deployer-7d9f",
        "action": "Scaling",
        "reason": "ScaledUp",
        "regarding": {"kind": "Deployment", "namespace": "team-a", "name": "web", "apiVersion": "apps/v1"},
        "note": "Scaled up to 3",
        "type": "Normal",
    }
    body.update(changes)
    body = {key: value for key, value in body.items() if value is not None}
    return KIND.decode(body).obj


def only(errs: list[FieldError]) -> FieldError:
    assert len(errs) == 1, [str(e) for e in errs]
    return errs[0]


def stored(obj: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["metadata"].update(uid="u-1", resourceVersion="7", creationTimestamp="2026-11-22T02:16:41Z")
    return obj


class TestKind:
    def test_names(self) -> None:
        assert (KIND.group, KIND.version, KIND.kind, KIND.list_kind) == (
            "events.core.io",
            "v1",
            "Event",
            "EventList",
        )
        assert (KIND.plural, KIND.singular, KIND.short_names, KIND.categories) == (
            "events",
            "event",
            ("ev",),
            (),
        )
        assert KIND.namespaced
        assert KIND.model is Event

    def test_registered(self) -> None:
        assert any(type(kind) is EventKind for kind in KINDS)

    def test_selectable_fields(self) -> None:
        # The core Event's field set (upstream's ToSelectableFields), under the core type's names.
        obj = event(related={"kind": "Pod", "name": "ignored"})
        assert KIND.selectable_fields(obj) == {
            "metadata.name": "web.17c8e2a1b4f5",
            "metadata.namespace": "team-a",
            "involvedObject.kind": "Deployment",
            "involvedObject.namespace": "team-a",
            "involvedObject.name": "web",
            "involvedObject.uid": "",
            "involvedObject.apiVersion": "apps/v1",
            "involvedObject.resourceVersion": "",
            "involvedObject.fieldPath": "",
            "reason": "ScaledUp",
            "reportingComponent": "example.com/deployer",
            "source": "example.com/deployer",
            "type": "Normal",
        }

    def test_source_field_prefers_the_deprecated_source_component(self) -> None:
        obj = event(deprecatedSource={"component": "kubelet", "host": "node-1"})
        fields = KIND.selectable_fields(obj)
        assert (fields["source"], fields["reportingComponent"]) == ("kubelet", "example.com/deployer")

    def test_field_label_conversion_is_upstreams(self) -> None:
        # pkg/apis/events/v1 AddFieldLabelConversionsForEvent: exactly these twelve labels.
        assert dict(KIND.field_labels) == {
            "metadata.name": "metadata.name",
            "metadata.namespace": "metadata.namespace",
            "reason": "reason",
            "type": "type",
            "reportingController": "reportingComponent",
            "regarding.kind": "involvedObject.kind",
            "regarding.namespace": "involvedObject.namespace",
            "regarding.name": "involvedObject.name",
            "regarding.uid": "involvedObject.uid",
            "regarding.apiVersion": "involvedObject.apiVersion",
            "regarding.resourceVersion": "involvedObject.resourceVersion",
            "regarding.fieldPath": "involvedObject.fieldPath",
        }
        # Every label converts to a field the set has: no accepted label is unmatchable.
        assert set(KIND.field_labels.values()) <= KIND.selectable_field_names

    def test_refused_labels_are_worded_as_the_events_conversion(self) -> None:
        for label in ("reportingInstance", "source", "involvedObject.kind", "series.count"):
            assert label not in KIND.field_labels
            assert KIND.field_label_error(label) == f"field label not supported: {label}"

    def test_prepare_leaves_the_object_alone(self) -> None:
        obj = event()
        before = copy.deepcopy(obj)
        KIND.prepare_for_create(obj)
        KIND.prepare_for_update(obj, before)
        assert obj == before


class TestValidate:
    def test_good(self) -> None:
        assert KIND.validate(event()) == []

    def test_warning_with_series(self) -> None:
        obj = event(type="Warning", series={"count": 2, "lastObservedTime": "2026-11-22T02:20:00.000000Z"})
        assert KIND.validate(obj) == []

    def test_event_time_required(self) -> None:
        # Without eventTime the legacy checks take the old-Event branch: only eventTime is reported.
        err = only(KIND.validate(event(eventTime=None)))
        assert (err.field, err.type, str(err)) == (
            "eventTime",
            FieldErrorType.REQUIRED,
            "eventTime: Required value",
        )

    @pytest.mark.parametrize("event_type", ["Info", "", "normal"])
    def test_type(self, event_type: str) -> None:
        err = only(KIND.validate(event(type=event_type)))
        assert (err.field, err.type) == ("type", FieldErrorType.INVALID)
        assert str(err) == f'type: Invalid value: "": has invalid value: {event_type}'

    def test_reporting_controller_required(self) -> None:
        errs = KIND.validate(event(reportingController=""))
        assert [(e.field, e.type) for e in errs] == [
            ("reportingController", FieldErrorType.REQUIRED),
            ("reportingController", FieldErrorType.INVALID),
            ("reportingController", FieldErrorType.INVALID),
        ]
        assert str(errs[1]) == 'reportingController: Invalid value: "": name part must be non-empty'

    def test_reporting_controller_is_a_qualified_name(self) -> None:
        err = only(KIND.validate(event(reportingController="example.com/my controller")))
        assert (err.field, err.type) == ("reportingController", FieldErrorType.INVALID)
        assert str(err).startswith(
            'reportingController: Invalid value: "example.com/my controller": name part must consist of'
        )

    @pytest.mark.parametrize("field", ["reportingInstance", "action", "reason"])
    def test_required_strings(self, field: str) -> None:
        err = only(KIND.validate(event(**{field: ""})))
        assert (err.field, err.type, str(err)) == (field, FieldErrorType.REQUIRED, f"{field}: Required value")

    @pytest.mark.parametrize("field", ["reportingInstance", "action", "reason"])
    def test_at_most_128_characters(self, field: str) -> None:
        assert KIND.validate(event(**{field: "x" * 128})) == []
        err = only(KIND.validate(event(**{field: "x" * 129})))
        assert (err.field, err.type) == (field, FieldErrorType.INVALID)
        assert str(err) == f'{field}: Invalid value: "": can have at most 128 characters'

    def test_length_counts_bytes(self) -> None:
        assert only(KIND.validate(event(reason="é" * 65))).field == "reason"

    def test_note_at_most_1024_characters(self) -> None:
        assert KIND.validate(event(note="n" * 1024)) == []
        err = only(KIND.validate(event(note="n" * 1025)))
        assert (err.field, err.type) == ("note", FieldErrorType.INVALID)
        assert str(err) == 'note: Invalid value: "": can have at most 1024 characters'

    def test_series_count_at_least_2(self) -> None:
        err = only(
            KIND.validate(event(series={"count": 1, "lastObservedTime": "2026-11-22T02:20:00.000000Z"}))
        )
        assert (err.field, err.type) == ("series.count", FieldErrorType.INVALID)
        assert str(err) == 'series.count: Invalid value: "": should be at least 2'

    def test_series_last_observed_time_required(self) -> None:
        err = only(KIND.validate(event(series={"count": 2})))
        assert (err.field, err.type) == ("series.lastObservedTime", FieldErrorType.REQUIRED)

    @pytest.mark.parametrize(
        ("field", "value"),
        [
            ("deprecatedFirstTimestamp", "2026-11-22T02:16:41Z"),
            ("deprecatedLastTimestamp", "2026-11-22T02:16:41Z"),
            ("deprecatedCount", 3),
            ("deprecatedSource", {"component": "kubelet"}),
            ("deprecatedSource", {"host": "node-1"}),
        ],
    )
    def test_deprecated_fields_must_be_unset(self, field: str, value: Any) -> None:
        err = only(KIND.validate(event(**{field: value})))
        assert (err.field, err.type) == (field, FieldErrorType.INVALID)
        assert str(err) == f'{field}: Invalid value: "": needs to be unset'

    def test_regarding_cluster_object_only_from_default_or_kube_system(self) -> None:
        node = {"kind": "Node", "name": "node-1"}
        err = only(KIND.validate(event(regarding=node)))
        assert (err.field, err.type) == ("regarding.namespace", FieldErrorType.INVALID)
        assert str(err) == 'regarding.namespace: Invalid value: "": does not match event.namespace'
        for namespace in ("default", "kube-system"):
            obj = event(regarding=node, metadata={"name": "n.1", "namespace": namespace})
            assert KIND.validate(obj) == []

    def test_regarding_in_another_namespace_is_accepted_as_upstream(self) -> None:
        obj = event(regarding={"kind": "Pod", "namespace": "elsewhere", "name": "p"})
        assert KIND.validate(obj) == []

    def test_old_style_event_namespaces_must_agree(self) -> None:
        obj = event(eventTime=None, regarding={"kind": "Pod", "namespace": "elsewhere", "name": "p"})
        assert [(e.field, str(e)) for e in KIND.validate(obj)] == [
            (
                "regarding.namespace",
                'regarding.namespace: Invalid value: "elsewhere": does not match event.namespace',
            ),
            ("eventTime", "eventTime: Required value"),
        ]

    def test_metadata_name_is_a_dns_subdomain(self) -> None:
        err = only(KIND.validate(event(metadata={"name": "Web_Event", "namespace": "team-a"})))
        assert (err.field, err.type) == ("metadata.name", FieldErrorType.INVALID)

    def test_metadata_checks(self) -> None:
        obj = event(
            metadata={"name": "e.1", "namespace": "team-a", "labels": {"a": "b c"}, "finalizers": ["x"]}
        )
        assert [e.field for e in KIND.validate(obj)] == ["metadata.labels", "metadata.finalizers[0]"]

    def test_everything_missing(self) -> None:
        obj = KIND.decode(
            {"metadata": {"name": "e", "namespace": "team-a"}, "eventTime": "2026-11-22T02:16:41.000000Z"}
        ).obj
        assert [(e.field, e.type) for e in KIND.validate(obj)] == [
            ("regarding.namespace", FieldErrorType.INVALID),
            ("reportingController", FieldErrorType.REQUIRED),
            ("reportingController", FieldErrorType.INVALID),
            ("reportingController", FieldErrorType.INVALID),
            ("reportingInstance", FieldErrorType.REQUIRED),
            ("action", FieldErrorType.REQUIRED),
            ("reason", FieldErrorType.REQUIRED),
            ("type", FieldErrorType.INVALID),
        ]


class TestValidateUpdate:
    def test_unchanged(self) -> None:
        old = stored(event())
        assert KIND.validate_update(copy.deepcopy(old), old) == []

    def test_series_and_metadata_may_change(self) -> None:
        old = stored(event())
        new = copy.deepcopy(old)
        new["series"] = {"count": 2, "lastObservedTime": "2026-11-22T02:20:00.000000Z"}
        new["metadata"]["labels"] = {"seen": "twice"}
        new["metadata"]["annotations"] = {"note": "x"}
        assert KIND.validate_update(new, old) == []

    def test_changed_series_is_validated(self) -> None:
        old = stored(event())
        new = copy.deepcopy(old)
        new["series"] = {"count": 1, "lastObservedTime": None}
        assert [e.field for e in KIND.validate_update(new, old)] == [
            "series.count",
            "series.lastObservedTime",
        ]

    def test_unchanged_series_is_not_validated(self) -> None:
        old = stored(event())
        old["series"] = {"count": 1, "lastObservedTime": "2026-11-22T02:20:00.000000Z"}
        assert KIND.validate_update(copy.deepcopy(old), old) == []

    @pytest.mark.parametrize(
        ("field", "value", "shown"),
        [
            ("reason", "Other", '"Other"'),
            ("note", "changed", '"changed"'),
            ("type", "Warning", '"Warning"'),
            ("action", "Other", '"Other"'),
            ("reportingController", "example.com/other", '"example.com/other"'),
            ("reportingInstance", "other", '"other"'),
            ("eventTime", "2026-11-22T02:16:41.500000Z", "2026-11-22 02:16:41.5 +0000 UTC"),
            ("deprecatedCount", 4, "4"),
            ("deprecatedFirstTimestamp", "2026-11-22T02:16:41Z", "2026-11-22 02:16:41 +0000 UTC"),
            ("deprecatedLastTimestamp", "2026-11-22T02:16:41Z", "2026-11-22 02:16:41 +0000 UTC"),
            ("deprecatedSource", {"component": "kubelet"}, 'core.EventSource{Component:"kubelet", Host:""}'),
            (
                "regarding",
                {"kind": "Pod", "namespace": "team-a", "name": "p"},
                'core.ObjectReference{Kind:"Pod", Namespace:"team-a", Name:"p", UID:"", APIVersion:"", '
                'ResourceVersion:"", FieldPath:""}',
            ),
            (
                "related",
                {"kind": "Pod", "name": "p"},
                'core.ObjectReference{Kind:"Pod", Namespace:"", Name:"p", UID:"", APIVersion:"", '
                'ResourceVersion:"", FieldPath:""}',
            ),
        ],
    )
    def test_immutable(self, field: str, value: Any, shown: str) -> None:
        old = stored(event())
        new = stored(event(**{field: value}))
        errs = [e for e in KIND.validate_update(new, old) if e.field == field]
        # reason is compared twice upstream, so its error appears twice.
        assert len(errs) == (2 if field == "reason" else 1)
        assert errs[0].type == FieldErrorType.INVALID
        assert str(errs[0]) == f"{field}: Invalid value: {shown}: field is immutable"

    def test_related_cannot_be_removed(self) -> None:
        old = stored(event(related={"kind": "Pod", "name": "p"}))
        new = stored(event())
        err = only(KIND.validate_update(new, old))
        assert str(err) == 'related: Invalid value: "null": field is immutable'

    def test_metadata_immutability(self) -> None:
        old = stored(event())
        new = copy.deepcopy(old)
        new["metadata"]["name"] = "other"
        err = only(KIND.validate_update(new, old))
        assert str(err) == 'metadata.name: Invalid value: "other": field is immutable'

    def test_legacy_checks_apply_to_the_new_object(self) -> None:
        old = stored(event())
        new = copy.deepcopy(old)
        new["note"] = "n" * 1025
        assert [e.field for e in KIND.validate_update(new, old)] == ["note", "note"]
