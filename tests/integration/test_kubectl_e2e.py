"""The real kubectl through a user's everyday commands, asserting what the user sees: describe,
create, client-side apply (and its last-applied-configuration), diff, patch, edit, label, annotate,
delete (one, --all, waiting on a finalizer, --cascade), server-side dry runs, explain, discovery and raw gets.
`get`, `get -o wide` and `get -w` live in test_table_kubectl.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.kubectl import EV, RB, Kubectl, event_body
from tests.support.metrics import requests_answered
from tests.support.server import ServerProcess
from tests.support.waiting import wait_until

pytestmark = pytest.mark.tools

SUBJECTS = [
    {"kind": "User", "name": "alice"},
    {"kind": "Group", "name": "devs"},
    {"kind": "ServiceAccount", "name": "bot", "namespace": "ci"},
]


def rolebinding(
    name: str,
    namespace: str,
    *,
    labels: dict[str, str] | None = None,
    subjects: list[dict[str, str]] | None = None,
    finalizers: list[str] | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels is not None:
        metadata["labels"] = labels
    if finalizers:
        metadata["finalizers"] = finalizers
    return {
        "apiVersion": "rbac.authorization.core.io/v1",
        "kind": "RoleBinding",
        "metadata": metadata,
        "roleRef": {"apiGroup": "rbac.authorization.core.io", "kind": "ClusterRole", "name": "view"},
        "subjects": subjects if subjects is not None else SUBJECTS,
    }


def event(
    name: str,
    namespace: str,
    *,
    labels: dict[str, str] | None = None,
    finalizers: list[str] | None = None,
) -> dict[str, Any]:
    body = event_body(name, namespace)
    if labels is not None:
        body["metadata"]["labels"] = labels
    if finalizers:
        body["metadata"]["finalizers"] = finalizers
    return body


def dump(*objects: dict[str, Any]) -> str:
    return yaml.safe_dump_all(objects)


def write(path: Path, *objects: dict[str, Any]) -> str:
    path.write_text(dump(*objects))
    return str(path)


def described(output: str) -> dict[str, str]:
    """`kubectl describe`'s `Key:  value` lines as a mapping of the first value seen for each key
    (indentation dropped)."""
    fields: dict[str, str] = {}
    for line in output.splitlines():
        match = re.match(r"^\s*([A-Z][A-Za-z ]*):\s*(.*)$", line)
        if match:
            fields.setdefault(match.group(1), match.group(2).strip())
    return fields


def not_found(kubectl_cli: Kubectl, resource: str, name: str, namespace: str) -> bool:
    result = kubectl_cli.run("get", resource, name, "-n", namespace, check=False)
    return result.returncode == 1 and "NotFound" in result.stderr


# ----------------------------------------------------------------------------- describe


def test_describe_rolebinding(kubectl_cli: Kubectl) -> None:
    kubectl_cli.run("create", "-f", "-", input=dump(rolebinding("readers", "desc", labels={"app": "demo"})))
    out = kubectl_cli.run("describe", RB, "readers", "-n", "desc").stdout
    fields = described(out)
    assert fields["Name"] == "readers"
    assert fields["Namespace"] == "desc"
    assert fields["Labels"] == "app=demo"
    assert fields["Annotations"] == "<none>"
    assert fields["API Version"] == "rbac.authorization.core.io/v1"
    assert fields["Kind"] == "RoleBinding"
    # The nested roleRef and each subject, the defaulted apiGroup of User and Group included.
    role_ref = out[out.index("Role Ref:") : out.index("Subjects:")]
    assert described(role_ref) == {
        "Role Ref": "",
        "API Group": "rbac.authorization.core.io",
        "Kind": "ClusterRole",
        "Name": "view",
    }
    subjects = out[out.index("Subjects:") :]
    assert re.findall(r"^\s+Name:\s+(\S+)$", subjects, re.M) == ["alice", "devs", "bot"]
    assert re.findall(r"^\s+Kind:\s+(\S+)$", subjects, re.M) == ["User", "Group", "ServiceAccount"]
    assert subjects.count("API Group:  rbac.authorization.core.io") == 2
    assert re.search(r"^\s+Namespace:\s+ci$", subjects, re.M)
    assert re.search(r"^\s+UID:\s+[0-9a-f-]{36}$", out, re.M)
    assert re.search(r"^\s+Creation Timestamp:\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", out, re.M)


def test_describe_event(kubectl_cli: Kubectl) -> None:
    kubectl_cli.run("create", "-f", "-", input=dump(event("web-0.started", "desc")))
    out = kubectl_cli.run("describe", EV, "web-0.started", "-n", "desc").stdout
    fields = described(out)
    assert fields["Name"] == "web-0.started"
    assert fields["Namespace"] == "desc"
    assert fields["Kind"] == "Event"
    assert fields["Reason"] == "Started"
    assert fields["Action"] == "Scheduled"
    assert fields["Note"] == "container started"
    assert fields["Type"] == "Normal"
    assert fields["Event Time"] == "2026-11-22T02:16:41.123456Z"
    assert fields["Reporting Controller"] == "example.com/controller"
    assert fields["Reporting Instance"] == "controller-1"
    regarding = described(out[out.index("Regarding:") :])
    assert (regarding["Kind"], regarding["API Version"]) == ("Pod", "v1")
    # describe by short name, all of a namespace.
    assert "web-0.started" in kubectl_cli.run("describe", "ev.events.core.io", "-n", "desc").stdout


# ----------------------------------------------------------------------------- create, replace


def test_create_twice_is_already_exists(kubectl_cli: Kubectl) -> None:
    manifest = dump(rolebinding("once", "create"), event("once", "create"))
    out = kubectl_cli.run("create", "-f", "-", input=manifest).stdout
    assert out.splitlines() == [
        "rolebinding.rbac.authorization.core.io/once created",
        "event.events.core.io/once created",
    ]
    again = kubectl_cli.run("create", "-f", "-", input=manifest, check=False)
    assert again.returncode == 1
    assert (
        'Error from server (AlreadyExists): error when creating "STDIN": '
        'rolebindings.rbac.authorization.core.io "once" already exists'
    ) in again.stderr
    assert 'events.events.core.io "once" already exists' in again.stderr


def test_create_invalid_shows_the_field(kubectl_cli: Kubectl) -> None:
    bad = rolebinding("bad", "create")
    bad["subjects"] = [{"kind": "Robot", "name": "r2"}]
    result = kubectl_cli.run("create", "-f", "-", input=dump(bad), check=False)
    assert result.returncode == 1
    assert 'The RoleBinding "bad" is invalid' in result.stderr
    assert 'subjects[0].kind: Unsupported value: "Robot"' in result.stderr
    assert not_found(kubectl_cli, RB, "bad", "create")


def test_replace(kubectl_cli: Kubectl, tmp_path: Path) -> None:
    kubectl_cli.run("create", "-f", "-", input=dump(rolebinding("swap", "create")))
    path = write(
        tmp_path / "rb.yaml", rolebinding("swap", "create", subjects=[{"kind": "User", "name": "zed"}])
    )
    assert kubectl_cli.run("replace", "-f", path).stdout.strip() == (
        "rolebinding.rbac.authorization.core.io/swap replaced"
    )
    assert kubectl_cli.json("get", RB, "swap", "-n", "create")["subjects"] == [
        {"apiGroup": "rbac.authorization.core.io", "kind": "User", "name": "zed"}
    ]


def test_replace_force_recreates(kubectl_cli: Kubectl, tmp_path: Path) -> None:
    first = kubectl_cli.json("create", "-f", "-", input=dump(rolebinding("again", "create")))
    path = write(
        tmp_path / "rb.yaml", rolebinding("again", "create", subjects=[{"kind": "Group", "name": "g"}])
    )
    out = kubectl_cli.run("replace", "--force", "-f", path).stdout
    assert out.splitlines() == [
        'rolebinding.rbac.authorization.core.io "again" deleted',
        "rolebinding.rbac.authorization.core.io/again replaced",
    ]
    second = kubectl_cli.json("get", RB, "again", "-n", "create")
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    assert [s["name"] for s in second["subjects"]] == ["g"]


# ----------------------------------------------------------------------------- client-side apply


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def test_apply_twice_with_edits(kubectl_cli: Kubectl, tmp_path: Path) -> None:
    path = tmp_path / "rb.yaml"
    first = rolebinding("applied", "apply", labels={"app": "demo", "tier": "one"})
    assert kubectl_cli.run("apply", "-f", write(path, first)).stdout.strip() == (
        "rolebinding.rbac.authorization.core.io/applied created"
    )
    live = kubectl_cli.json("get", RB, "applied", "-n", "apply")
    assert json.loads(live["metadata"]["annotations"][LAST_APPLIED]) == {
        **first,
        "metadata": {**first["metadata"], "annotations": {}},
    }

    # Someone else adds a label the file never had: apply must keep it.
    kubectl_cli.run("label", RB, "applied", "-n", "apply", "owner=ops")
    second = rolebinding(
        "applied",
        "apply",
        labels={"app": "demo", "stage": "two"},  # tier dropped, stage added
        # apiGroup spelled out: the server defaults it for Users, and a file without it differs
        # from the live list (an atomic list), so every apply would be "configured", as upstream.
        subjects=[
            {"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.core.io"},
            {"kind": "User", "name": "carol", "apiGroup": "rbac.authorization.core.io"},
        ],
    )
    assert kubectl_cli.run("apply", "-f", write(path, second)).stdout.strip() == (
        "rolebinding.rbac.authorization.core.io/applied configured"
    )
    live = kubectl_cli.json("get", RB, "applied", "-n", "apply")
    assert live["metadata"]["labels"] == {"app": "demo", "stage": "two", "owner": "ops"}
    assert [(s["kind"], s["name"]) for s in live["subjects"]] == [("User", "alice"), ("User", "carol")]
    # As kube-apiserver: a RoleBinding carries no generation, however often it changes.
    assert "generation" not in live["metadata"]

    viewed = yaml.safe_load(
        kubectl_cli.run("apply", "view-last-applied", f"{RB}/applied", "-n", "apply").stdout
    )
    assert viewed == {**second, "metadata": {**second["metadata"], "annotations": {}}}

    assert kubectl_cli.run("apply", "-f", str(path)).stdout.strip() == (
        "rolebinding.rbac.authorization.core.io/applied unchanged"
    )


def test_apply_events(kubectl_cli: Kubectl, tmp_path: Path) -> None:
    path = tmp_path / "ev.yaml"
    out = kubectl_cli.run("apply", "-f", write(path, event("web-0.pulled", "apply", labels={"a": "1"})))
    assert out.stdout.strip() == "event.events.core.io/web-0.pulled created"
    changed = event("web-0.pulled", "apply", labels={"b": "2"})
    changed["series"] = {"count": 2, "lastObservedTime": "2026-11-22T02:17:41.000001Z"}
    out = kubectl_cli.run("apply", "-f", write(path, changed))
    assert out.stdout.strip() == "event.events.core.io/web-0.pulled configured"
    live = kubectl_cli.json("get", EV, "web-0.pulled", "-n", "apply")
    assert live["metadata"]["labels"] == {"b": "2"}
    assert live["series"] == {"count": 2, "lastObservedTime": "2026-11-22T02:17:41.000001Z"}

    # An Event's note is immutable: apply shows the server's 422.
    changed["note"] = "something else"
    refused = kubectl_cli.run("apply", "-f", write(path, changed), check=False)
    assert refused.returncode == 1
    assert 'note: Invalid value: "something else": field is immutable' in refused.stderr


# ----------------------------------------------------------------------------- diff


def test_diff(kubectl_cli: Kubectl, tmp_path: Path) -> None:
    path = tmp_path / "rb.yaml"
    original = rolebinding("diffed", "diff", labels={"app": "demo", "tier": "one"})
    kubectl_cli.run("apply", "-f", write(path, original))
    before = kubectl_cli.json("get", RB, "diffed", "-n", "diff")

    same = kubectl_cli.run("diff", "-f", str(path), check=False)
    assert (same.returncode, same.stdout, same.stderr) == (0, "", "")

    edited = rolebinding("diffed", "diff", labels={"app": "demo"}, subjects=SUBJECTS[:1])
    changed = kubectl_cli.run("diff", "-f", write(path, edited), check=False)
    assert changed.returncode == 1, changed.stderr
    removed = [line for line in changed.stdout.splitlines() if line.startswith("-") and "---" not in line]
    added = [line for line in changed.stdout.splitlines() if line.startswith("+") and "+++" not in line]
    assert "-    tier: one" in removed
    assert "-  name: devs" in removed and "-  name: bot" in removed
    assert "+    tier: one" not in added
    # The dry run stored nothing.
    assert kubectl_cli.json("get", RB, "diffed", "-n", "diff") == before

    # A file naming an object that does not exist yet: everything is new, nothing is created.
    fresh = kubectl_cli.run("diff", "-f", write(path, event("web-1.created", "diff")), check=False)
    assert fresh.returncode == 1, fresh.stderr
    assert "+kind: Event" in fresh.stdout and "+note: container started" in fresh.stdout
    assert not_found(kubectl_cli, EV, "web-1.created", "diff")


def test_diff_server_side(kubectl_cli: Kubectl, tmp_path: Path) -> None:
    path = tmp_path / "ev.yaml"
    kubectl_cli.run("apply", "--server-side", "-f", write(path, event("web-2.started", "diff-ssa")))
    same = kubectl_cli.run("diff", "--server-side", "-f", str(path), check=False)
    assert (same.returncode, same.stdout) == (0, ""), same.stderr
    changed = kubectl_cli.run(
        "diff",
        "--server-side",
        "-f",
        write(path, event("web-2.started", "diff-ssa", labels={"diff": "me"})),
        check=False,
    )
    assert changed.returncode == 1, changed.stderr
    assert "+    diff: me" in changed.stdout


# ----------------------------------------------------------------------------- patch


def test_patch_events_three_ways(kubectl_cli: Kubectl) -> None:
    kubectl_cli.run("create", "-f", "-", input=dump(event("web-0.patched", "patch", labels={"a": "1"})))
    merge = kubectl_cli.run(
        "patch",
        EV,
        "web-0.patched",
        "-n",
        "patch",
        "--type",
        "merge",
        "-p",
        '{"metadata":{"labels":{"a":null,"b":"2"}}}',
    )
    assert merge.stdout.strip() == "event.events.core.io/web-0.patched patched"
    kubectl_cli.run(
        "patch",
        EV,
        "web-0.patched",
        "-n",
        "patch",
        "--type",
        "json",
        "-p",
        '[{"op":"add","path":"/series","value":{"count":3,"lastObservedTime":"2026-11-22T02:20:00.000000Z"}}]',
    )
    kubectl_cli.run(
        "patch", EV, "web-0.patched", "-n", "patch", "-p", '{"metadata":{"annotations":{"checked":"yes"}}}'
    )
    live = kubectl_cli.json("get", EV, "web-0.patched", "-n", "patch")
    assert live["metadata"]["labels"] == {"b": "2"}
    assert live["metadata"]["annotations"] == {"checked": "yes"}
    assert live["series"] == {"count": 3, "lastObservedTime": "2026-11-22T02:20:00.000000Z"}

    same = kubectl_cli.run(
        "patch",
        EV,
        "web-0.patched",
        "-n",
        "patch",
        "--type",
        "merge",
        "-p",
        '{"metadata":{"labels":{"b":"2"}}}',
    )
    assert same.stdout.strip() == "event.events.core.io/web-0.patched patched (no change)"

    failed = kubectl_cli.run(
        "patch",
        EV,
        "web-0.patched",
        "-n",
        "patch",
        "--type",
        "json",
        "-p",
        '[{"op":"test","path":"/reason","value":"Other"}]',
        check=False,
    )
    assert failed.returncode == 1
    # upstream answers a JSON patch that does not apply with a generic 422, worded by kubectl so:
    assert failed.stderr.strip() == (
        "The request is invalid: the server rejected our request due to an error in our request"
    )


def test_patch_strategic_subjects(kubectl_cli: Kubectl) -> None:
    kubectl_cli.run("create", "-f", "-", input=dump(rolebinding("smp", "patch")))
    # subjects has no patch strategy upstream: a strategic merge patch replaces the list.
    kubectl_cli.run("patch", RB, "smp", "-n", "patch", "-p", '{"subjects":[{"kind":"Group","name":"ops"}]}')
    live = kubectl_cli.json("get", RB, "smp", "-n", "patch")
    assert live["subjects"] == [{"apiGroup": "rbac.authorization.core.io", "kind": "Group", "name": "ops"}]


# ----------------------------------------------------------------------------- edit


@pytest.fixture
def editor(tmp_path: Path) -> dict[str, str]:
    """KUBE_EDITOR: a small script replacing $EDIT_FROM with $EDIT_TO in the file kubectl opens."""
    script = tmp_path / "edit.py"
    script.write_text(
        "import os, sys, pathlib\n"
        "path = pathlib.Path(sys.argv[-1])\n"
        "path.write_text(path.read_text().replace(os.environ['EDIT_FROM'], os.environ['EDIT_TO']))\n"
    )
    return {"KUBE_EDITOR": f"{sys.executable} {script}"}


def test_edit(kubectl_cli: Kubectl, editor: dict[str, str]) -> None:
    kubectl_cli.run("create", "-f", "-", input=dump(rolebinding("edited", "edit", labels={"app": "demo"})))
    out = kubectl_cli.run(
        "edit",
        RB,
        "edited",
        "-n",
        "edit",
        env={**editor, "EDIT_FROM": "name: alice", "EDIT_TO": "name: carol"},
    )
    assert out.stdout.strip() == "rolebinding.rbac.authorization.core.io/edited edited"
    live = kubectl_cli.json("get", RB, "edited", "-n", "edit")
    assert [s["name"] for s in live["subjects"]] == ["carol", "devs", "bot"]

    # An editor that changes nothing: kubectl says so and sends nothing.
    untouched = kubectl_cli.run(
        "edit", RB, "edited", "-n", "edit", env={**editor, "EDIT_FROM": "x", "EDIT_TO": "x"}
    )
    assert "Edit cancelled, no changes made." in untouched.stderr
    assert (
        kubectl_cli.json("get", RB, "edited", "-n", "edit")["metadata"]["resourceVersion"]
        == (live["metadata"]["resourceVersion"])
    )

    # Events are edited the same way (-o json editing, a label).
    kubectl_cli.run("create", "-f", "-", input=dump(event("web-0.edited", "edit", labels={"a": "1"})))
    kubectl_cli.run(
        "edit",
        EV,
        "web-0.edited",
        "-n",
        "edit",
        "-o",
        "json",
        env={**editor, "EDIT_FROM": '"a": "1"', "EDIT_TO": '"a": "2"'},
    )
    assert kubectl_cli.json("get", EV, "web-0.edited", "-n", "edit")["metadata"]["labels"] == {"a": "2"}


def test_edit_refused_by_validation(kubectl_cli: Kubectl, editor: dict[str, str]) -> None:
    kubectl_cli.run("create", "-f", "-", input=dump(rolebinding("locked", "edit")))
    refused = kubectl_cli.run(
        "edit",
        RB,
        "locked",
        "-n",
        "edit",
        env={**editor, "EDIT_FROM": "name: view", "EDIT_TO": "name: admin"},
        check=False,
    )
    assert refused.returncode == 1
    assert 'error: rolebindings.rbac.authorization.core.io "locked" is invalid' in refused.stderr
    # kubectl keeps the edited copy, the server's causes written into its header.
    copy = re.search(r'A copy of your changes has been stored to "([^"]+)"', refused.stderr)
    assert copy is not None
    kept = Path(copy.group(1))
    try:
        assert "roleRef: Invalid value" in kept.read_text() and "cannot change roleRef" in kept.read_text()
    finally:
        kept.unlink(missing_ok=True)
    assert kubectl_cli.json("get", RB, "locked", "-n", "edit")["roleRef"]["name"] == "view"


# ----------------------------------------------------------------------------- label, annotate


def test_label_and_annotate(kubectl_cli: Kubectl) -> None:
    kubectl_cli.run("create", "-f", "-", input=dump(rolebinding("tagged", "tags", labels={"app": "demo"})))
    assert kubectl_cli.run("label", RB, "tagged", "-n", "tags", "tier=gold").stdout.strip() == (
        "rolebinding.rbac.authorization.core.io/tagged labeled"
    )
    clash = kubectl_cli.run("label", RB, "tagged", "-n", "tags", "tier=silver", check=False)
    assert clash.returncode == 1
    assert "'tier' already has a value (gold), and --overwrite is false" in clash.stderr
    kubectl_cli.run("label", RB, "tagged", "-n", "tags", "tier=silver", "--overwrite")
    assert kubectl_cli.run("label", RB, "tagged", "-n", "tags", "app-").stdout.strip() == (
        "rolebinding.rbac.authorization.core.io/tagged unlabeled"
    )
    assert kubectl_cli.json("get", RB, "tagged", "-n", "tags")["metadata"]["labels"] == {"tier": "silver"}
    # Label selectors see the change.
    names = kubectl_cli.run("get", RB, "-n", "tags", "-l", "tier=silver", "-o", "name").stdout.split()
    assert names == ["rolebinding.rbac.authorization.core.io/tagged"]

    kubectl_cli.run("create", "-f", "-", input=dump(event("web-0.tagged", "tags")))
    assert kubectl_cli.run("annotate", EV, "web-0.tagged", "-n", "tags", "owner=ops").stdout.strip() == (
        "event.events.core.io/web-0.tagged annotated"
    )
    clash = kubectl_cli.run("annotate", EV, "web-0.tagged", "-n", "tags", "owner=dev", check=False)
    assert clash.returncode == 1 and "--overwrite is false" in clash.stderr
    kubectl_cli.run("annotate", EV, "web-0.tagged", "-n", "tags", "owner=dev", "ticket=42", "--overwrite")
    live = kubectl_cli.json("get", EV, "web-0.tagged", "-n", "tags")
    assert live["metadata"]["annotations"] == {"owner": "dev", "ticket": "42"}
    kubectl_cli.run("annotate", EV, "web-0.tagged", "-n", "tags", "owner-")
    assert kubectl_cli.json("get", EV, "web-0.tagged", "-n", "tags")["metadata"]["annotations"] == {
        "ticket": "42"
    }
    # Every Event of the namespace at once.
    kubectl_cli.run("label", EV, "--all", "-n", "tags", "swept=yes")
    assert kubectl_cli.json("get", EV, "web-0.tagged", "-n", "tags")["metadata"]["labels"] == {"swept": "yes"}


# ----------------------------------------------------------------------------- delete


def test_delete_by_file_and_all(kubectl_cli: Kubectl, tmp_path: Path) -> None:
    objects = [rolebinding(f"rb-{i}", "sweep") for i in range(3)] + [
        event(f"ev-{i}", "sweep") for i in range(2)
    ]
    kubectl_cli.run("create", "-f", "-", input=dump(*objects))
    kubectl_cli.run("create", "-f", "-", input=dump(rolebinding("rb-0", "kept")))

    path = write(tmp_path / "one.yaml", objects[0])
    assert kubectl_cli.run("delete", "-f", path).stdout.strip() == (
        'rolebinding.rbac.authorization.core.io "rb-0" deleted'
    )
    out = kubectl_cli.run("delete", RB, "--all", "-n", "sweep").stdout
    assert out.splitlines() == [
        'rolebinding.rbac.authorization.core.io "rb-1" deleted',
        'rolebinding.rbac.authorization.core.io "rb-2" deleted',
    ]
    # Only rolebindings, only in that namespace.
    assert kubectl_cli.run("get", RB, "-n", "sweep", "-o", "name").stdout == ""
    assert len(kubectl_cli.json("get", EV, "-n", "sweep")["items"]) == 2
    assert kubectl_cli.json("get", RB, "rb-0", "-n", "kept")["metadata"]["name"] == "rb-0"

    missing = kubectl_cli.run("delete", RB, "rb-0", "-n", "sweep", check=False)
    assert missing.returncode == 1
    assert 'Error from server (NotFound): rolebindings.rbac.authorization.core.io "rb-0" not found' in (
        missing.stderr
    )
    assert kubectl_cli.run("delete", RB, "rb-0", "-n", "sweep", "--ignore-not-found").returncode == 0

    # Selected by label, across kinds.
    kubectl_cli.run("label", EV, "ev-0", "-n", "sweep", "drop=yes")
    out = kubectl_cli.run("delete", f"{EV},{RB}", "-n", "sweep", "-l", "drop=yes").stdout
    assert out.strip() == 'event.events.core.io "ev-0" deleted'
    assert [i["metadata"]["name"] for i in kubectl_cli.json("get", EV, "-n", "sweep")["items"]] == ["ev-1"]


def test_wait_for_delete_until_finalizer_goes(kubectl_cli: Kubectl) -> None:
    kubectl_cli.run("create", "-f", "-", input=dump(event("held", "final", finalizers=["example.com/hold"])))
    out = kubectl_cli.run("delete", EV, "held", "-n", "final", "--wait=false").stdout
    assert out.strip() == 'event.events.core.io "held" deleted'
    live = kubectl_cli.json("get", EV, "held", "-n", "final")
    assert live["metadata"]["deletionTimestamp"].endswith("Z")
    assert live["metadata"]["finalizers"] == ["example.com/hold"]

    release_after = 1.5

    def release() -> None:
        time.sleep(release_after)  # kubectl must still be waiting then (elapsed is checked)
        kubectl_cli.run(
            "patch",
            EV,
            "held",
            "-n",
            "final",
            "--type",
            "json",
            "-p",
            '[{"op":"remove","path":"/metadata/finalizers"}]',
        )

    releaser = threading.Thread(target=release, daemon=True)
    started = time.monotonic()
    releaser.start()
    waited = kubectl_cli.run("wait", "--for=delete", f"{EV}/held", "-n", "final", "--timeout=30s")
    elapsed = time.monotonic() - started
    releaser.join(10)
    assert waited.stdout.strip() == "event.events.core.io/held condition met"
    assert elapsed >= release_after - 0.2
    assert not_found(kubectl_cli, EV, "held", "final")


def test_delete_waits_for_a_held_rolebinding(kubectl_cli: Kubectl) -> None:
    # The server answers the held delete 200 with the marked object; kubectl then waits for it to go.
    held = rolebinding("held", "final", finalizers=["example.com/hold"])
    kubectl_cli.run("create", "-f", "-", input=dump(held))
    release_after = 1.5

    def release() -> None:
        time.sleep(release_after)  # kubectl must still be waiting then (elapsed is checked)
        kubectl_cli.run(
            "patch", RB, "held", "-n", "final", "--type=merge", "-p", '{"metadata":{"finalizers":null}}'
        )

    releaser = threading.Thread(target=release, daemon=True)
    started = time.monotonic()
    releaser.start()
    out = kubectl_cli.run("delete", RB, "held", "-n", "final").stdout
    elapsed = time.monotonic() - started
    releaser.join(10)
    assert out.strip() == 'rolebinding.rbac.authorization.core.io "held" deleted'
    assert elapsed >= release_after - 0.2
    assert not_found(kubectl_cli, RB, "held", "final")


def test_delete_cascade_leaves_a_rolebinding_to_the_garbage_collector(kubectl_cli: Kubectl) -> None:
    # --cascade=orphan/foreground set the collector's finalizer, which holds the binding (as upstream).
    kubectl_cli.run("create", "-f", "-", input=dump(rolebinding("cascaded", "final")))
    out = kubectl_cli.run("delete", RB, "cascaded", "-n", "final", "--cascade=orphan", "--wait=false")
    assert out.stdout.strip() == 'rolebinding.rbac.authorization.core.io "cascaded" deleted'
    live = kubectl_cli.json("get", RB, "cascaded", "-n", "final")
    assert live["metadata"]["finalizers"] == ["orphan"] and live["metadata"]["deletionTimestamp"]
    kubectl_cli.run("delete", RB, "cascaded", "-n", "final", "--cascade=foreground", "--wait=false")
    live = kubectl_cli.json("get", RB, "cascaded", "-n", "final")
    assert live["metadata"]["finalizers"] == ["foregroundDeletion"]
    kubectl_cli.run(
        "patch", RB, "cascaded", "-n", "final", "--type=merge", "-p", '{"metadata":{"finalizers":null}}'
    )
    assert not_found(kubectl_cli, RB, "cascaded", "final")


def test_wait_for_create_and_jsonpath(kubectl_cli: Kubectl, server: ServerProcess) -> None:
    def later(*args: str, input: str | None = None) -> threading.Thread:
        """Runs kubectl with `args` once the `kubectl wait` started next has looked at the Event."""
        looked_before = requests_answered(server, "events")

        def act() -> None:
            wait_until(
                lambda: requests_answered(server, "events") > looked_before,
                timeout=20,
                message="kubectl wait to look at the Event",
            )
            kubectl_cli.run(*args, input=input)

        thread = threading.Thread(target=act, daemon=True)
        thread.start()
        return thread

    creator = later("create", "-f", "-", input=dump(event("awaited", "waits")))
    out = kubectl_cli.run("wait", "--for=create", f"{EV}/awaited", "-n", "waits", "--timeout=20s").stdout
    creator.join(10)
    assert out.strip() == "event.events.core.io/awaited condition met"

    labeler = later("label", EV, "awaited", "-n", "waits", "ready=yes")
    out = kubectl_cli.run(
        "wait", "--for=jsonpath={.metadata.labels.ready}=yes", f"{EV}/awaited", "-n", "waits", "--timeout=20s"
    ).stdout
    labeler.join(10)
    assert out.strip() == "event.events.core.io/awaited condition met"


def test_wait_for_delete_times_out(kubectl_cli: Kubectl) -> None:
    kubectl_cli.run(
        "create", "-f", "-", input=dump(rolebinding("stuck", "final", finalizers=["example.com/hold"]))
    )
    kubectl_cli.run("delete", RB, "stuck", "-n", "final", "--wait=false")
    timed_out = kubectl_cli.run(
        "wait", "--for=delete", f"{RB}/stuck", "-n", "final", "--timeout=2s", check=False
    )
    assert timed_out.returncode == 1
    assert "timed out waiting for the condition" in timed_out.stderr
    kubectl_cli.run(
        "patch", RB, "stuck", "-n", "final", "--type", "merge", "-p", '{"metadata":{"finalizers":null}}'
    )
    assert not_found(kubectl_cli, RB, "stuck", "final")


# ----------------------------------------------------------------------------- --dry-run=server


def test_dry_run_server_stores_nothing(kubectl_cli: Kubectl, tmp_path: Path) -> None:
    created = kubectl_cli.run(
        "create", "-f", "-", "--dry-run=server", "-o", "json", input=dump(event("dry", "dry"))
    )
    shown = json.loads(created.stdout)
    assert shown["metadata"]["uid"] and shown["metadata"]["creationTimestamp"]
    assert not_found(kubectl_cli, EV, "dry", "dry")
    out = kubectl_cli.run(
        "create", "-f", "-", "--dry-run=server", input=dump(rolebinding("dry", "dry"))
    ).stdout
    assert out.strip() == "rolebinding.rbac.authorization.core.io/dry created (server dry run)"
    assert not_found(kubectl_cli, RB, "dry", "dry")

    path = tmp_path / "rb.yaml"
    out = kubectl_cli.run("apply", "--dry-run=server", "-f", write(path, rolebinding("dry", "dry"))).stdout
    assert out.strip() == "rolebinding.rbac.authorization.core.io/dry created (server dry run)"
    assert not_found(kubectl_cli, RB, "dry", "dry")

    kubectl_cli.run("apply", "-f", str(path))
    before = kubectl_cli.json("get", RB, "dry", "-n", "dry")
    out = kubectl_cli.run(
        "apply", "--dry-run=server", "-f", write(path, rolebinding("dry", "dry", labels={"new": "label"}))
    ).stdout
    assert out.strip() == "rolebinding.rbac.authorization.core.io/dry configured (server dry run)"
    patched = kubectl_cli.json(
        "patch",
        RB,
        "dry",
        "-n",
        "dry",
        "--dry-run=server",
        "--type",
        "merge",
        "-p",
        '{"metadata":{"labels":{"x":"y"}}}',
    )
    assert patched["metadata"]["labels"] == {"x": "y"}  # the answer shows the patch applied...
    out = kubectl_cli.run("delete", RB, "dry", "-n", "dry", "--dry-run=server").stdout
    assert out.strip() == 'rolebinding.rbac.authorization.core.io "dry" deleted (server dry run)'
    out = kubectl_cli.run("delete", RB, "--all", "-n", "dry", "--dry-run=server").stdout
    assert out.strip() == 'rolebinding.rbac.authorization.core.io "dry" deleted (server dry run)'
    assert kubectl_cli.json("get", RB, "dry", "-n", "dry") == before  # ...and nothing changed


def test_dry_run_server_still_validates(kubectl_cli: Kubectl) -> None:
    bad = event("dry-bad", "dry")
    bad["type"] = "Sideways"
    result = kubectl_cli.run("create", "--dry-run=server", "-f", "-", input=dump(bad), check=False)
    assert result.returncode == 1
    # upstream's own wording for an Event's type.
    assert 'The Event "dry-bad" is invalid: type: Invalid value: "": has invalid value: Sideways' in (
        result.stderr
    )


# ----------------------------------------------------------------------------- discovery, explain, raw


def test_api_resources(kubectl_cli: Kubectl) -> None:
    out = kubectl_cli.run("api-resources", "--api-group=events.core.io").stdout
    assert [line.split() for line in out.splitlines()] == [
        ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"],
        ["events", "ev", "events.core.io/v1", "true", "Event"],
    ]
    out = kubectl_cli.run("api-resources", "--api-group=rbac.authorization.core.io", "-o", "wide").stdout
    header, *rows = (line.split() for line in out.splitlines())
    assert header == ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND", "VERBS", "CATEGORIES"]
    version = "rbac.authorization.core.io/v1"
    # The RoleBindings, and beside them the create-only access reviews kubectl coreio asks.
    assert rows == [
        ["accessexplanations", version, "true", "AccessExplanation", "create"],
        ["resourceaccessreviews", version, "true", "ResourceAccessReview", "create"],
        ["rolebindingreviews", version, "true", "RoleBindingReview", "create"],
        [
            "rolebindings",
            version,
            "true",
            "RoleBinding",
            "create,delete,deletecollection,get,list,patch,update,watch",
        ],
    ]
    names = kubectl_cli.run("api-resources", "--namespaced=true", "--verbs=list", "-o", "name").stdout.split()
    assert names == ["events.events.core.io", "rolebindings.rbac.authorization.core.io"]


def test_api_versions(kubectl_cli: Kubectl) -> None:
    versions = kubectl_cli.run("api-versions").stdout.split()
    assert {"events.core.io/v1", "rbac.authorization.core.io/v1"} <= set(versions)


def test_namespaces_are_implicit(kubectl_cli: Kubectl) -> None:
    kubectl_cli.run("create", "-f", "-", input=dump(event("somewhere", "implicit-ns")))
    names = kubectl_cli.run("get", "namespaces", "-o", "name").stdout.split()
    assert {"namespace/default", "namespace/implicit-ns"} <= set(names)
    # Any namespace can be read, holding objects or not.
    assert kubectl_cli.json("get", "namespace", "never-used")["status"] == {"phase": "Active"}


def test_namespaces_watch_sees_a_new_namespace(kubectl_cli: Kubectl) -> None:
    process = subprocess.Popen(
        kubectl_cli.command("get", "namespaces", "--watch", "-o", "name"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(process.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        wait_until(lambda: any("namespace/default" in line for line in lines), timeout=20, message="the list")
        kubectl_cli.run("create", "-f", "-", input=dump(rolebinding("first", "brand-new-ns")))
        wait_until(lambda: any("brand-new-ns" in line for line in lines), timeout=20, message="brand-new-ns")
    finally:
        process.terminate()
        process.wait(10)
    names = [line.strip() for line in lines]
    # Listed first (default always), then the one that came into use while watching, once.
    assert "namespace/default" in names[:-1]
    assert names[-1] == "namespace/brand-new-ns" and names.count("namespace/brand-new-ns") == 1


def test_explain(kubectl_cli: Kubectl) -> None:
    out = kubectl_cli.run(
        "explain", "rolebindings.roleRef", "--api-version=rbac.authorization.core.io/v1"
    ).stdout
    assert "KIND:       RoleBinding" in out and "VERSION:    v1" in out
    assert re.search(r"^\s+apiGroup\s+<string> -required-", out, re.M)
    out = kubectl_cli.run("explain", "ev.series", "--api-version=events.core.io/v1").stdout
    assert "GROUP:      events.core.io" in out
    assert re.search(r"^\s+lastObservedTime\s+<string> -required-", out, re.M)


def test_get_raw(kubectl_cli: Kubectl) -> None:
    kubectl_cli.run("create", "-f", "-", input=dump(event("raw", "raw")))
    got = json.loads(
        kubectl_cli.run("get", "--raw", "/apis/events.core.io/v1/namespaces/raw/events/raw").stdout
    )
    assert (got["kind"], got["metadata"]["name"], got["note"]) == ("Event", "raw", "container started")
    listed = json.loads(kubectl_cli.run("get", "--raw", "/apis/events.core.io/v1/events?limit=1").stdout)
    assert listed["kind"] == "EventList" and len(listed["items"]) == 1
    assert json.loads(kubectl_cli.run("get", "--raw", "/version").stdout)["major"] == "1"
    missing = kubectl_cli.run(
        "get", "--raw", "/apis/events.core.io/v1/namespaces/raw/events/none", check=False
    )
    assert missing.returncode == 1
    assert "Error from server (NotFound)" in missing.stderr
