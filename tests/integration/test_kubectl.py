"""The real kubectl binary against a freshly started standalone server, through the kubeconfig the
server wrote on its first start."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.support.kubectl import EV, RB, Kubectl, event_yaml, rolebinding_yaml
from tests.support.metrics import wait_for_watchers, watchers
from tests.support.server import ServerProcess
from tests.support.waiting import wait_until

pytestmark = pytest.mark.tools


def test_create_get_json_and_yaml(kubectl_cli: Kubectl) -> None:
    created = kubectl_cli.run("create", "-f", "-", input=rolebinding_yaml("readers", "team-a"))
    assert "rolebinding.rbac.authorization.core.io/readers created" in created.stdout

    obj = kubectl_cli.json("get", RB, "readers", "-n", "team-a")
    assert obj["kind"] == "RoleBinding"
    assert obj["apiVersion"] == "rbac.authorization.core.io/v1"
    assert obj["roleRef"] == {"apiGroup": "rbac.authorization.core.io", "kind": "ClusterRole", "name": "view"}
    # The User subject's apiGroup is defaulted by the server.
    assert obj["subjects"] == [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.core.io"}]
    assert obj["metadata"]["uid"]
    assert obj["metadata"]["resourceVersion"].isdigit()
    assert obj["metadata"]["creationTimestamp"].endswith("Z")

    as_yaml = yaml.safe_load(kubectl_cli.run("get", RB, "readers", "-n", "team-a", "-o", "yaml").stdout)
    assert as_yaml["metadata"]["uid"] == obj["metadata"]["uid"]
    assert as_yaml["roleRef"]["name"] == "view"


def test_events_create_and_get(kubectl_cli: Kubectl) -> None:
    kubectl_cli.run("create", "-f", "-", input=event_yaml("started", "team-a"))
    obj = kubectl_cli.json("get", EV, "started", "-n", "team-a")
    assert obj["eventTime"] == "2026-11-22T02:16:41.123456Z"
    assert obj["regarding"]["name"] == "web-0"
    # The short name from discovery works.
    listed = kubectl_cli.json("get", "ev.events.core.io", "-n", "team-a")
    assert [item["metadata"]["name"] for item in listed["items"]] == ["started"]


def test_list_across_namespaces(kubectl_cli: Kubectl) -> None:
    for namespace in ("ns-one", "ns-two"):
        kubectl_cli.run("create", "-f", "-", input=rolebinding_yaml("cross", namespace))
    listed = kubectl_cli.json("get", RB, "--all-namespaces")
    found = {(i["metadata"]["namespace"], i["metadata"]["name"]) for i in listed["items"]}
    assert {("ns-one", "cross"), ("ns-two", "cross")} <= found
    # Items come ordered by namespace, then name.
    keys = [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in listed["items"]]
    assert keys == sorted(keys)
    only_two = kubectl_cli.json("get", RB, "-n", "ns-two")
    assert [i["metadata"]["namespace"] for i in only_two["items"]] == ["ns-two"]


def test_patch_merge_json_and_strategic(kubectl_cli: Kubectl) -> None:
    kubectl_cli.run("create", "-f", "-", input=rolebinding_yaml("patched", "team-b"))
    kubectl_cli.run(
        "patch",
        RB,
        "patched",
        "-n",
        "team-b",
        "--type",
        "merge",
        "-p",
        '{"metadata":{"labels":{"tier":"gold"}}}',
    )
    kubectl_cli.run(
        "patch",
        RB,
        "patched",
        "-n",
        "team-b",
        "--type",
        "json",
        "-p",
        '[{"op":"add","path":"/subjects/-","value":{"kind":"Group","name":"devs"}}]',
    )
    kubectl_cli.run(
        "patch", RB, "patched", "-n", "team-b", "-p", '{"metadata":{"annotations":{"owner":"ops"}}}'
    )
    obj = kubectl_cli.json("get", RB, "patched", "-n", "team-b")
    assert obj["metadata"]["labels"] == {"app": "demo", "tier": "gold"}
    assert obj["metadata"]["annotations"] == {"owner": "ops"}
    assert [s["name"] for s in obj["subjects"]] == ["alice", "devs"]
    assert obj["subjects"][1]["apiGroup"] == "rbac.authorization.core.io"

    # roleRef cannot change: kubectl shows the server's 422.
    refused = kubectl_cli.run(
        "patch",
        RB,
        "patched",
        "-n",
        "team-b",
        "--type",
        "merge",
        "-p",
        '{"roleRef":{"name":"edit"}}',
        check=False,
    )
    assert refused.returncode != 0
    assert "roleRef" in refused.stderr and "cannot change roleRef" in refused.stderr


def test_delete(kubectl_cli: Kubectl) -> None:
    kubectl_cli.run("create", "-f", "-", input=rolebinding_yaml("doomed", "team-c"))
    deleted = kubectl_cli.run("delete", RB, "doomed", "-n", "team-c")
    assert 'rolebinding.rbac.authorization.core.io "doomed" deleted' in deleted.stdout
    missing = kubectl_cli.run("get", RB, "doomed", "-n", "team-c", check=False)
    assert missing.returncode != 0
    assert f'{RB} "doomed" not found' in missing.stderr


def _json_stream(stream: Any, out: list[dict[str, Any]], stop: threading.Event) -> None:
    """Reads kubectl's concatenated (pretty-printed) JSON documents as they arrive."""
    decoder = json.JSONDecoder()
    buffer = ""
    while not stop.is_set():
        chunk = stream.readline()
        if not chunk:
            return
        buffer += chunk
        while True:
            stripped = buffer.lstrip()
            if not stripped:
                buffer = ""
                break
            try:
                value, end = decoder.raw_decode(stripped)
            except ValueError:
                break
            out.append(value)
            buffer = stripped[end:]


@pytest.fixture
def watcher(
    kubectl_cli: Kubectl, server: ServerProcess
) -> Iterator[tuple[list[dict[str, Any]], subprocess.Popen[str]]]:
    """`kubectl get --watch` of RoleBindings, once it has listed and opened its watch."""
    open_before = watchers(server, "RoleBinding")
    process = subprocess.Popen(
        kubectl_cli.command("get", RB, "-n", "watched", "--watch", "--output-watch-events", "-o", "json"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    events: list[dict[str, Any]] = []
    stop = threading.Event()
    reader = threading.Thread(target=_json_stream, args=(process.stdout, events, stop), daemon=True)
    reader.start()
    try:
        wait_for_watchers(server, "RoleBinding", above=open_before)
        yield events, process
    finally:
        stop.set()
        process.terminate()
        process.wait(timeout=10)


def test_watch_sees_changes(
    kubectl_cli: Kubectl, watcher: tuple[list[dict[str, Any]], subprocess.Popen[str]]
) -> None:
    events, process = watcher
    kubectl_cli.run("create", "-f", "-", input=rolebinding_yaml("seen", "watched"))
    kubectl_cli.run("label", RB, "seen", "-n", "watched", "stage=two")
    kubectl_cli.run("delete", RB, "seen", "-n", "watched")
    wait_until(lambda: len(events) >= 3, timeout=20, message="three watch events")
    assert process.poll() is None, process.stderr.read() if process.stderr else ""
    kinds = [(e["type"], e["object"]["metadata"]["name"]) for e in events]
    assert kinds[:3] == [("ADDED", "seen"), ("MODIFIED", "seen"), ("DELETED", "seen")]
    assert events[1]["object"]["metadata"]["labels"]["stage"] == "two"
    revisions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events[:3]]
    assert revisions == sorted(revisions) and len(set(revisions)) == 3
