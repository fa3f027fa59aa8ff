"""Every validation rule, sent to the real server: a 422 `Invalid` Status whose cause names the
offending field by its JSON path."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.api import Api, ev_path, event, rb_path, rolebinding


def _with(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of `obj` with the dotted `path` set (None deletes it)."""
    import copy

    out = copy.deepcopy(obj)
    target = out
    parts = path.split(".")
    for part in parts[:-1]:
        key: Any = int(part) if part.isdigit() else part
        target = target[key]
    last: Any = int(parts[-1]) if parts[-1].isdigit() else parts[-1]
    if value is None:
        del target[last]
    else:
        target[last] = value
    return out


RB = rolebinding("valid")
EV = event("valid", namespace="val")

ROLEBINDING_CASES = [
    (
        "roleRef.apiGroup",
        "FieldValueNotSupported",
        _with(RB, "roleRef.apiGroup", "rbac.authorization.k8s.io"),
    ),
    ("roleRef.kind", "FieldValueNotSupported", _with(RB, "roleRef.kind", "Pod")),
    ("roleRef.name", "FieldValueRequired", _with(RB, "roleRef.name", "")),
    ("roleRef.name", "FieldValueInvalid", _with(RB, "roleRef.name", "a/b")),
    ("subjects[0].name", "FieldValueRequired", _with(RB, "subjects.0.name", "")),
    ("subjects[0].kind", "FieldValueNotSupported", _with(RB, "subjects.0.kind", "Robot")),
    ("subjects[0].apiGroup", "FieldValueNotSupported", _with(RB, "subjects.0.apiGroup", "example.com")),
    (
        "subjects[0].apiGroup",
        "FieldValueNotSupported",
        _with(
            RB,
            "subjects",
            [{"kind": "ServiceAccount", "name": "sa", "apiGroup": "rbac.authorization.core.io"}],
        ),
    ),
    (
        "subjects[0].name",
        "FieldValueInvalid",
        _with(RB, "subjects", [{"kind": "ServiceAccount", "name": "Bad_Name", "namespace": "x"}]),
    ),
    ("metadata.name", "FieldValueInvalid", _with(RB, "metadata.name", "a%b")),
    ("metadata.name", "FieldValueRequired", _with(RB, "metadata.name", None)),
    ("metadata.labels", "FieldValueInvalid", _with(RB, "metadata.labels", {"bad key!": "x"})),
    ("metadata.labels", "FieldValueInvalid", _with(RB, "metadata.labels", {"ok": "bad value!"})),
    ("metadata.annotations", "FieldValueInvalid", _with(RB, "metadata.annotations", {"bad key!": "x"})),
]

EVENT_CASES = [
    ("eventTime", "FieldValueRequired", _with(EV, "eventTime", None)),
    ("type", "FieldValueInvalid", _with(EV, "type", "Bad")),
    ("reportingController", "FieldValueRequired", _with(EV, "reportingController", None)),
    ("reportingController", "FieldValueInvalid", _with(EV, "reportingController", "not a qualified name!")),
    ("reportingInstance", "FieldValueRequired", _with(EV, "reportingInstance", None)),
    ("reportingInstance", "FieldValueInvalid", _with(EV, "reportingInstance", "i" * 129)),
    ("action", "FieldValueRequired", _with(EV, "action", None)),
    ("action", "FieldValueInvalid", _with(EV, "action", "a" * 129)),
    ("reason", "FieldValueRequired", _with(EV, "reason", None)),
    ("reason", "FieldValueInvalid", _with(EV, "reason", "r" * 129)),
    ("note", "FieldValueInvalid", _with(EV, "note", "n" * 1025)),
    (
        "series.count",
        "FieldValueInvalid",
        _with(EV, "series", {"count": 1, "lastObservedTime": EV["eventTime"]}),
    ),
    ("series.lastObservedTime", "FieldValueRequired", _with(EV, "series", {"count": 2})),
    (
        "deprecatedFirstTimestamp",
        "FieldValueInvalid",
        _with(EV, "deprecatedFirstTimestamp", "2026-11-22T02:16:41Z"),
    ),
    (
        "deprecatedLastTimestamp",
        "FieldValueInvalid",
        _with(EV, "deprecatedLastTimestamp", "2026-11-22T02:16:41Z"),
    ),
    ("deprecatedCount", "FieldValueInvalid", _with(EV, "deprecatedCount", 3)),
    ("deprecatedSource", "FieldValueInvalid", _with(EV, "deprecatedSource", {"component": "kubelet"})),
    ("regarding.namespace", "FieldValueInvalid", _with(EV, "regarding.namespace", "")),
    ("metadata.name", "FieldValueInvalid", _with(EV, "metadata.name", "Bad_Name")),
]


def _assert_invalid(response: Any, kind: str, group: str, field: str, reason: str) -> None:
    assert response.status == 422, response.body
    status = response.json
    assert status["kind"] == "Status" and status["reason"] == "Invalid" and status["code"] == 422
    assert status["details"]["kind"] == kind and status["details"]["group"] == group
    causes = [(c["field"], c["reason"]) for c in status["details"]["causes"]]
    assert (field, reason) in causes, causes
    assert status["message"].startswith(f"{kind}.{group} ")
    assert f"{field}: " in status["message"]


@pytest.mark.parametrize(
    ("field", "reason", "body"), ROLEBINDING_CASES, ids=[f"{c[0]}-{c[1]}" for c in ROLEBINDING_CASES]
)
def test_rolebinding_rule(api: Api, field: str, reason: str, body: dict[str, Any]) -> None:
    response = api.post(rb_path("val"), body)
    _assert_invalid(response, "RoleBinding", "rbac.authorization.core.io", field, reason)


@pytest.mark.parametrize(
    ("field", "reason", "body"), EVENT_CASES, ids=[f"{c[0]}-{c[1]}" for c in EVENT_CASES]
)
def test_event_rule(api: Api, field: str, reason: str, body: dict[str, Any]) -> None:
    response = api.post(ev_path("val"), body)
    _assert_invalid(response, "Event", "events.core.io", field, reason)


def test_valid_objects_pass(api: Api) -> None:
    assert api.post(rb_path("val"), RB).status == 201
    assert api.post(ev_path("val"), EV).status == 201


def test_user_subject_with_namespace_is_accepted(api: Api) -> None:
    # As upstream: the seed makes this an error the authorizer reports, not a validation error.
    body = _with(rolebinding("user-ns"), "subjects", [{"kind": "User", "name": "bob", "namespace": "val"}])
    assert api.post(rb_path("val"), body).status == 201


def test_roleref_is_immutable(api: Api) -> None:
    created = api.post(rb_path("val"), rolebinding("immutable")).json
    changed = _with(created, "roleRef.name", "edit")
    response = api.put(rb_path("val", "immutable"), changed)
    _assert_invalid(response, "RoleBinding", "rbac.authorization.core.io", "roleRef", "FieldValueInvalid")
    assert "cannot change roleRef" in response.json["message"]


@pytest.mark.parametrize(
    ("path", "field", "value"),
    [
        ("action", "action", "Stopped"),
        ("reason", "reason", "Other"),
        ("note", "note", "changed"),
        ("type", "type", "Warning"),
        ("reportingController", "reportingController", "example.com/other"),
        ("reportingInstance", "reportingInstance", "other-1"),
        ("eventTime", "eventTime", "2026-11-22T03:00:00.000000Z"),
        ("regarding.name", "regarding", "web-1"),
    ],
)
def test_event_update_may_change_only_series_and_metadata(
    api: Api, path: str, field: str, value: Any
) -> None:
    name = f"upd-{path.replace('.', '-').lower()}"
    created = api.post(ev_path("val"), event(name, namespace="val")).json
    response = api.put(ev_path("val", name), _with(created, path, value))
    assert response.status == 422, response.body
    assert field in [c["field"] for c in response.json["details"]["causes"]]

    # series and labels may change.
    allowed = _with(created, "series", {"count": 2, "lastObservedTime": "2026-11-22T02:20:00.000000Z"})
    allowed["metadata"]["labels"] = {"seen": "twice"}
    assert api.put(ev_path("val", name), allowed).status == 200
