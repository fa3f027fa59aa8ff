"""Server-side apply and managedFields through the real server: with the real kubectl (apply
--server-side, conflicts, --force-conflicts, pruning, the client-side to server-side upgrade,
--show-managed-fields) and over HTTPS for the exact wire answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.api import Api, ev_path, event, rb_path, rolebinding
from tests.support.kubectl import RB, Kubectl

APPLY = "application/apply-patch+yaml"
GROUP = "rbac.authorization.core.io"
API_VERSION = f"{GROUP}/v1"
ALICE = {"kind": "User", "name": "alice"}
FIELD_MANAGER_REQUIRED = "fieldManager: Required value: is required for apply patch"


def manifest(
    name: str,
    namespace: str,
    *,
    labels: dict[str, str] | None = None,
    subjects: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "RoleBinding",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels if labels is not None else {"app": "demo"},
        },
        "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "view"},
        "subjects": subjects if subjects is not None else [ALICE],
    }


def write(tmp_path: Path, obj: dict[str, Any], name: str = "rb.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(obj))
    return str(path)


def managed_fields(kubectl_cli: Kubectl, name: str, namespace: str) -> dict[tuple[str, str], dict[str, Any]]:
    obj = kubectl_cli.json("get", RB, name, "-n", namespace, "--show-managed-fields")
    return {(e["manager"], e["operation"]): e for e in obj["metadata"].get("managedFields", [])}


# ----------------------------------------------------------------------------- kubectl


@pytest.mark.tools
def test_kubectl_server_side_apply_conflicts_and_force(kubectl_cli: Kubectl, tmp_path: Path) -> None:
    applied = kubectl_cli.run("apply", "--server-side", "-f", write(tmp_path, manifest("ssa", "ssa-one")))
    assert "rolebinding.rbac.authorization.core.io/ssa serverside-applied" in applied.stdout
    entries = managed_fields(kubectl_cli, "ssa", "ssa-one")
    assert set(entries) == {("kubectl", "Apply")}
    entry = entries[("kubectl", "Apply")]
    assert entry["apiVersion"] == API_VERSION and entry["fieldsType"] == "FieldsV1"
    assert entry["fieldsV1"] == {"f:metadata": {"f:labels": {"f:app": {}}}, "f:roleRef": {}, "f:subjects": {}}

    # Another manager changing the subjects conflicts with kubectl, as kubectl reports it.
    other = manifest("ssa", "ssa-one", labels={}, subjects=[{"kind": "Group", "name": "devs"}])
    refused = kubectl_cli.run(
        "apply",
        "--server-side",
        "--field-manager=other",
        "-f",
        write(tmp_path, other, "other.yaml"),
        check=False,
    )
    assert refused.returncode != 0
    assert 'Apply failed with 1 conflict: conflict with "kubectl": .subjects' in refused.stderr
    assert "Please review the fields above--they currently have other managers" in refused.stderr
    assert kubectl_cli.json("get", RB, "ssa", "-n", "ssa-one")["subjects"][0]["name"] == "alice"

    # --force-conflicts takes the subjects over.
    kubectl_cli.run(
        "apply",
        "--server-side",
        "--field-manager=other",
        "--force-conflicts",
        "-f",
        str(tmp_path / "other.yaml"),
    )
    obj = kubectl_cli.json("get", RB, "ssa", "-n", "ssa-one")
    assert [s["name"] for s in obj["subjects"]] == ["devs"]
    entries = managed_fields(kubectl_cli, "ssa", "ssa-one")
    # other owns what its file sets (an empty labels map included); roleRef, applied by both with
    # the same value, is shared; the subjects are other's alone now.
    assert entries[("other", "Apply")]["fieldsV1"] == {
        "f:metadata": {"f:labels": {}},
        "f:roleRef": {},
        "f:subjects": {},
    }
    assert entries[("kubectl", "Apply")]["fieldsV1"] == {
        "f:metadata": {"f:labels": {"f:app": {}}},
        "f:roleRef": {},
    }


@pytest.mark.tools
def test_kubectl_apply_removes_what_the_file_no_longer_sets(kubectl_cli: Kubectl, tmp_path: Path) -> None:
    path = write(tmp_path, manifest("pruned", "ssa-two", labels={"app": "demo", "tier": "gold"}))
    kubectl_cli.run("apply", "--server-side", "-f", path)
    kubectl_cli.run("label", RB, "pruned", "-n", "ssa-two", "owner=ops")
    assert kubectl_cli.json("get", RB, "pruned", "-n", "ssa-two")["metadata"]["labels"] == {
        "app": "demo",
        "tier": "gold",
        "owner": "ops",
    }
    kubectl_cli.run("apply", "--server-side", "-f", write(tmp_path, manifest("pruned", "ssa-two")))
    # tier was only the applier's: gone; owner belongs to kubectl-label: kept.
    assert kubectl_cli.json("get", RB, "pruned", "-n", "ssa-two")["metadata"]["labels"] == {
        "app": "demo",
        "owner": "ops",
    }


@pytest.mark.tools
def test_kubectl_create_and_label_are_update_entries(kubectl_cli: Kubectl, tmp_path: Path) -> None:
    kubectl_cli.run("create", "-f", write(tmp_path, manifest("made", "ssa-three")))
    kubectl_cli.run("label", RB, "made", "-n", "ssa-three", "stage=two")
    shown = kubectl_cli.run(
        "get", RB, "made", "-n", "ssa-three", "-o", "yaml", "--show-managed-fields"
    ).stdout
    entries = {(e["manager"], e["operation"]): e for e in yaml.safe_load(shown)["metadata"]["managedFields"]}
    assert set(entries) == {("kubectl-create", "Update"), ("kubectl-label", "Update")}
    assert entries[("kubectl-create", "Update")]["fieldsV1"] == {
        "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
        "f:roleRef": {},
        "f:subjects": {},
    }
    assert entries[("kubectl-label", "Update")]["fieldsV1"] == {"f:metadata": {"f:labels": {"f:stage": {}}}}
    assert all(e["time"].endswith("Z") for e in entries.values())
    # Without the flag kubectl hides them.
    hidden = yaml.safe_load(kubectl_cli.run("get", RB, "made", "-n", "ssa-three", "-o", "yaml").stdout)
    assert "managedFields" not in hidden["metadata"]

    # Apply and Update entries side by side once kubectl applies to it.
    kubectl_cli.run(
        "apply",
        "--server-side",
        "--force-conflicts",
        "-f",
        write(tmp_path, manifest("made", "ssa-three"), "again.yaml"),
    )
    shown = kubectl_cli.run(
        "get", RB, "made", "-n", "ssa-three", "-o", "yaml", "--show-managed-fields"
    ).stdout
    operations = [(e["manager"], e["operation"]) for e in yaml.safe_load(shown)["metadata"]["managedFields"]]
    assert operations[0] == ("kubectl", "Apply")
    assert ("kubectl-label", "Update") in operations


@pytest.mark.tools
def test_kubectl_client_side_apply_upgrades_to_server_side(kubectl_cli: Kubectl, tmp_path: Path) -> None:
    # Subjects spelled out with their apiGroup: the last-applied annotation must match the live
    # object for kubectl's earlier ownership to count (upstream compares before defaulting).
    alice = {"kind": "User", "apiGroup": GROUP, "name": "alice"}
    kubectl_cli.run("apply", "-f", write(tmp_path, manifest("upgraded", "ssa-four", subjects=[alice])))
    entries = managed_fields(kubectl_cli, "upgraded", "ssa-four")
    assert set(entries) == {("kubectl-client-side-apply", "Update")}
    assert (
        "f:kubectl.kubernetes.io/last-applied-configuration"
        in (entries[("kubectl-client-side-apply", "Update")]["fieldsV1"]["f:metadata"]["f:annotations"])
    )
    bob = {"kind": "User", "apiGroup": GROUP, "name": "bob"}
    changed = manifest("upgraded", "ssa-four", subjects=[bob])
    # The subjects belong to kubectl-client-side-apply: kubectl (and only kubectl) takes them over.
    refused = kubectl_cli.run(
        "apply",
        "--server-side",
        "--field-manager=stranger",
        "-f",
        write(tmp_path, changed, "changed.yaml"),
        check=False,
    )
    assert 'conflict with "kubectl-client-side-apply" using rbac.authorization.core.io/v1' in refused.stderr
    kubectl_cli.run("apply", "--server-side", "-f", str(tmp_path / "changed.yaml"))
    obj = kubectl_cli.json("get", RB, "upgraded", "-n", "ssa-four", "--show-managed-fields")
    assert obj["subjects"] == [bob]
    managers = {(e["manager"], e["operation"]) for e in obj["metadata"]["managedFields"]}
    # kubectl migrated the client-side entry into its own Apply entry.
    assert ("kubectl", "Apply") in managers and ("kubectl-client-side-apply", "Update") not in managers
    # The server keeps the annotation following kubectl's server-side applies.
    last_applied = obj["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
    assert yaml.safe_load(last_applied)["subjects"] == [bob]


@pytest.mark.tools
def test_kubectl_server_dry_run_apply(kubectl_cli: Kubectl, tmp_path: Path) -> None:
    result = kubectl_cli.run(
        "apply", "--server-side", "--dry-run=server", "-f", write(tmp_path, manifest("dry", "ssa-five"))
    )
    assert "serverside-applied (server dry run)" in result.stdout
    missing = kubectl_cli.run("get", RB, "dry", "-n", "ssa-five", check=False)
    assert missing.returncode != 0 and "not found" in missing.stderr


# ----------------------------------------------------------------------------- HTTPS


def apply_path(namespace: str, name: str, manager: str | None, **params: str) -> str:
    query = {**({"fieldManager": manager} if manager is not None else {}), **params}
    return rb_path(namespace, name) + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


def test_apply_creates_then_is_a_no_op(api: Api) -> None:
    body = rolebinding("created", subjects=[{**ALICE, "apiGroup": GROUP}])
    created = api.patch(apply_path("ssa-api", "created", "tool"), body, content_type=APPLY)
    assert created.status == 201, created.body
    obj = created.json
    assert obj["metadata"]["uid"] and obj["metadata"]["namespace"] == "ssa-api"
    (entry,) = obj["metadata"]["managedFields"]
    assert entry == {
        "manager": "tool",
        "operation": "Apply",
        "apiVersion": API_VERSION,
        "time": entry["time"],
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:roleRef": {}, "f:subjects": {}},
    }
    again = api.patch(apply_path("ssa-api", "created", "tool"), body, content_type=APPLY)
    assert again.status == 200
    assert again.json["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]
    assert again.json["metadata"]["managedFields"] == obj["metadata"]["managedFields"]


def test_apply_accepts_yaml(api: Api) -> None:
    text = yaml.safe_dump(rolebinding("from-yaml", metadata={"name": "from-yaml", "labels": {"a": "b"}}))
    response = api.request(
        "PATCH", apply_path("ssa-api", "from-yaml", "tool"), raw=text.encode(), content_type=APPLY
    )
    assert response.status == 201, response.body
    assert response.json["metadata"]["labels"] == {"a": "b"}


def test_apply_conflict_is_409_with_causes(api: Api) -> None:
    assert (
        api.patch(
            apply_path("ssa-api", "contested", "first"), rolebinding("contested"), content_type=APPLY
        ).status
        == 201
    )
    other = {
        "apiVersion": API_VERSION,
        "kind": "RoleBinding",
        "subjects": [{"kind": "Group", "name": "devs"}],
    }
    refused = api.patch(apply_path("ssa-api", "contested", "second"), other, content_type=APPLY)
    assert refused.status == 409
    assert refused.json == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'Apply failed with 1 conflict: conflict with "first": .subjects',
        "reason": "Conflict",
        "details": {
            "causes": [
                {"reason": "FieldManagerConflict", "message": 'conflict with "first"', "field": ".subjects"}
            ]
        },
        "code": 409,
    }
    # An Update owner is named with the version it wrote.
    api.patch(
        rb_path("ssa-api", "contested") + "?fieldManager=editor",
        {
            "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "view"},
            "subjects": [ALICE, {"kind": "User", "name": "carol"}],
        },
    )
    refused = api.patch(apply_path("ssa-api", "contested", "second"), other, content_type=APPLY)
    assert refused.json["message"] == (
        f'Apply failed with 1 conflict: conflict with "editor" using {API_VERSION}: .subjects'
    )
    assert refused.json["details"]["causes"] == [
        {
            "reason": "FieldManagerConflict",
            "message": f'conflict with "editor" using {API_VERSION}',
            "field": ".subjects",
        }
    ]
    forced = api.patch(apply_path("ssa-api", "contested", "second", force="true"), other, content_type=APPLY)
    assert forced.status == 200
    assert forced.json["subjects"] == [{"kind": "Group", "apiGroup": GROUP, "name": "devs"}]


def test_apply_requires_a_field_manager(api: Api) -> None:
    refused = api.patch(apply_path("ssa-api", "nobody", None), rolebinding("nobody"), content_type=APPLY)
    assert refused.status == 422
    assert refused.json == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'PatchOptions.meta.k8s.io "" is invalid: ' + FIELD_MANAGER_REQUIRED,
        "reason": "Invalid",
        "details": {
            "group": "meta.k8s.io",
            "kind": "PatchOptions",
            "causes": [
                {
                    "reason": "FieldValueRequired",
                    "message": "Required value: is required for apply patch",
                    "field": "fieldManager",
                }
            ],
        },
        "code": 422,
    }
    # force is for apply patches only.
    api.post(rb_path("ssa-api"), rolebinding("forced-merge"))
    forbidden = api.patch(
        rb_path("ssa-api", "forced-merge") + "?force=true", {"metadata": {"labels": {"a": "b"}}}
    )
    assert forbidden.status == 422
    assert forbidden.json["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch'
    )


def test_apply_dry_run_does_not_persist(api: Api) -> None:
    dry = api.patch(
        apply_path("ssa-api", "dry", "tool", dryRun="All"), rolebinding("dry"), content_type=APPLY
    )
    assert dry.status == 201
    assert dry.json["metadata"]["managedFields"][0]["manager"] == "tool"
    assert api.get(rb_path("ssa-api", "dry")).status == 404


def test_apply_refuses_bad_configurations(api: Api) -> None:
    wrong_kind = api.patch(
        apply_path("ssa-api", "bad", "tool"), {"apiVersion": "v1", "kind": "ConfigMap"}, content_type=APPLY
    )
    assert (wrong_kind.status, wrong_kind.json["message"]) == (
        400,
        "invalid object type: /v1, Kind=ConfigMap",
    )
    unknown = api.patch(
        apply_path("ssa-api", "bad", "tool", fieldValidation="Strict"),
        {**rolebinding("bad"), "spec": {"foo": 1}},
        content_type=APPLY,
    )
    assert unknown.status == 400
    assert unknown.json["message"] == (
        "failed to create typed patch object (/bad; rbac.authorization.core.io/v1, Kind=RoleBinding): "
        ".spec: field not declared in schema"
    )
    with_managed = api.patch(
        apply_path("ssa-api", "bad", "tool"),
        {**rolebinding("bad"), "metadata": {"name": "bad", "managedFields": []}},
        content_type=APPLY,
    )
    assert (with_managed.status, with_managed.json["message"]) == (400, "metadata.managedFields must be nil")
    listed = api.request("PATCH", apply_path("ssa-api", "bad", "tool"), raw=b"- a\n", content_type=APPLY)
    assert listed.status == 400
    assert listed.json["message"] == (
        "error decoding YAML: error unmarshaling JSON: while decoding JSON: "
        "json: cannot unmarshal array into Go value of type map[string]interface {}"
    )
    renamed = api.patch(apply_path("ssa-api", "bad", "tool"), rolebinding("other-name"), content_type=APPLY)
    assert (renamed.status, renamed.json["message"]) == (
        400,
        "the name of the object (other-name) does not match the name on the URL (bad)",
    )
    # Invalid objects are still invalid.
    invalid = api.patch(
        apply_path("ssa-api", "bad", "tool"),
        rolebinding("bad", subjects=[{"kind": "Robot", "name": "x"}]),
        content_type=APPLY,
    )
    assert invalid.status == 422


def test_patch_media_types_include_apply(api: Api) -> None:
    api.post(rb_path("ssa-api"), rolebinding("media"))
    refused = api.patch(rb_path("ssa-api", "media"), {}, content_type="text/plain")
    assert refused.status == 415
    assert refused.json["message"].endswith(
        "application/json-patch+json, application/merge-patch+json, "
        "application/strategic-merge-patch+json, application/apply-patch+yaml"
    )


def test_update_entries_name_the_user_agent(api: Api) -> None:
    created = api.post(
        rb_path("ssa-api"), rolebinding("agent"), headers={"User-Agent": "my-tool/1.2 (linux)"}
    )
    assert created.status == 201
    assert [(e["manager"], e["operation"]) for e in created.json["metadata"]["managedFields"]] == [
        ("my-tool", "Update")
    ]
    # fieldManager wins over the User-Agent; a change moves the changed field to its manager.
    patched = api.patch(
        rb_path("ssa-api", "agent") + "?fieldManager=labeller",
        {"metadata": {"labels": {"x": "y"}}},
        headers={"User-Agent": "my-tool/1.2"},
    )
    entries = {e["manager"]: e["fieldsV1"] for e in patched.json["metadata"]["managedFields"]}
    assert entries["labeller"] == {"f:metadata": {"f:labels": {".": {}, "f:x": {}}}}
    # A patch that changes nothing writes nothing.
    again = api.patch(
        rb_path("ssa-api", "agent") + "?fieldManager=other", {"metadata": {"labels": {"x": "y"}}}
    )
    assert again.json["metadata"]["resourceVersion"] == patched.json["metadata"]["resourceVersion"]
    assert again.json["metadata"]["managedFields"] == patched.json["metadata"]["managedFields"]


def test_sent_managed_fields_replace_or_reset(api: Api) -> None:
    created = api.post(rb_path("ssa-api") + "?fieldManager=creator", rolebinding("reset")).json
    replaced = dict(created)
    replaced["metadata"] = {
        **created["metadata"],
        "managedFields": [
            {
                "manager": "imported",
                "operation": "Apply",
                "apiVersion": API_VERSION,
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:subjects": {}},
            }
        ],
    }
    updated = api.put(rb_path("ssa-api", "reset"), replaced)
    assert updated.status == 200, updated.body
    assert [(e["manager"], e["operation"]) for e in updated.json["metadata"]["managedFields"]] == [
        ("imported", "Apply")
    ]
    cleared = api.patch(rb_path("ssa-api", "reset"), {"metadata": {"managedFields": []}})
    assert cleared.status == 200
    assert "managedFields" not in cleared.json["metadata"]


def test_events_are_tracked_and_applied(api: Api) -> None:
    created = api.post(ev_path("ssa-api") + "?fieldManager=recorder", event("tracked", "ssa-api"))
    assert created.status == 201, created.body
    (entry,) = created.json["metadata"]["managedFields"]
    assert entry["manager"] == "recorder"
    assert entry["fieldsV1"]["f:regarding"] == {}
    config = {
        "apiVersion": "events.core.io/v1",
        "kind": "Event",
        "metadata": {"name": "tracked"},
        "note": "changed",
    }
    refused = api.patch(ev_path("ssa-api", "tracked") + "?fieldManager=other", config, content_type=APPLY)
    assert refused.status == 409
    assert refused.json["message"] == (
        'Apply failed with 1 conflict: conflict with "recorder" using events.core.io/v1: .note'
    )
