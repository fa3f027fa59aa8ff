"""EventExports (events.core.io/v1alpha1) as their users meet them, with the real kubectl, on
SQLite and on etcd: served only once --runtime-config enables the alpha version; applied with their
defaults; printed with their columns; explained; refused with each mistake named; their status kept
from writes of the object; and written only by authors who may read what they export."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.api import Api, rolebinding
from tests.support.kubectl import Kubectl, as_user
from tests.support.metrics import wait_for_bindings
from tests.support.server import BACKENDS, ServerProcess, backend_args, free_port

pytestmark = pytest.mark.tools

GROUP_VERSION = "events.core.io/v1alpha1"
EXPORTS = "eventexports.events.core.io"


def export(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "EventExport",
        "metadata": {"name": name},
        "spec": {
            "match": [{"type": "Warning"}],
            "sink": {"webhook": {"url": "https://hooks.example.com/k8s"}},
        }
        | spec,
    }


@pytest.fixture(scope="module", params=BACKENDS)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    process = ServerProcess(
        tmp_path_factory.mktemp(f"exports-{request.param}"),
        free_port(),
        [*backend_args(request, request.param), f"--runtime-config={GROUP_VERSION}=true"],
    )
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def admin(server: ServerProcess) -> Api:
    return Api(server)


def namespace() -> str:
    return f"ns-{uuid.uuid4().hex[:6]}"


def test_applied_with_defaults_and_printed_with_its_columns(kubectl_cli: Kubectl) -> None:
    ns = namespace()
    created = kubectl_cli.run("apply", "-n", ns, "-f", "-", input=json.dumps(export("warnings")))
    assert created.stdout == "eventexport.events.core.io/warnings created\n"
    stored = kubectl_cli.json("get", EXPORTS, "warnings", "-n", ns)
    assert stored["metadata"]["generation"] == 1
    assert stored["spec"]["batch"] == {"maxEvents": 100, "maxWait": "1s"}
    assert (stored["spec"]["series"], stored["spec"]["maxLag"]) == ("Every", "1h")
    assert stored["spec"]["sink"]["webhook"]["format"] == "JSON"
    table = kubectl_cli.run("get", EXPORTS, "-n", ns).stdout.splitlines()
    assert table[0].split() == ["NAME", "SINK", "POSITION", "LAG", "READY", "AGE"]
    assert table[1].split()[:5] == ["warnings", "webhook", "<none>", "<none>", "<none>"]
    explained = kubectl_cli.run("explain", "eventexport.spec.sink.webhook").stdout
    assert f"VERSION:    {GROUP_VERSION.split('/')[1]}" in explained
    for field in ("url\t<string> -required-", "format\t<string>", "headersFrom\t<SecretReference>"):
        assert field in explained, explained


def test_each_mistake_is_named(kubectl_cli: Kubectl) -> None:
    bad = export("bad", namespaces=["*", "shop"], maxLag="10s")
    bad["spec"]["sink"]["jsonLines"] = {"path": "relative.jsonl"}
    refused = kubectl_cli.run("create", "-n", namespace(), "-f", "-", input=json.dumps(bad), check=False)
    assert refused.returncode == 1
    assert refused.stderr == (
        'The EventExport "bad" is invalid: \n'
        '* spec.namespaces: Invalid value: "*": must be the only entry when given\n'
        '* spec.sink: Invalid value: "webhook, jsonLines": exactly one sink must be given\n'
        '* spec.maxLag: Invalid value: "10s": must be at least 60s\n'
    )


def test_the_status_is_kept_from_writes_of_the_object(admin: Api, kubectl_cli: Kubectl) -> None:
    ns = namespace()
    path = f"/apis/{GROUP_VERSION}/namespaces/{ns}/eventexports"
    body = export("kept") | {"status": {"position": "99"}}
    created = admin.post(path, body)
    assert created.status == 201, created.body
    assert "status" not in created.json
    changed = created.json
    changed["spec"]["maxLag"] = "2h"
    changed["status"] = {"position": "1000"}
    updated = admin.put(f"{path}/kept", changed)
    assert updated.status == 200, updated.body
    assert "status" not in updated.json and updated.json["metadata"]["generation"] == 2


def test_only_authors_who_may_read_what_it_exports_write_one(
    admin: Api, kubectl_cli: Kubectl, server: ServerProcess
) -> None:
    ns = namespace()
    for user, role in (("ada", "admin"), ("eve", "edit")):
        binding = rolebinding(f"{user}-{role}")
        binding["roleRef"]["name"] = role
        binding["subjects"] = [{"kind": "User", "name": user}]
        assert (
            admin.post(f"/apis/rbac.authorization.core.io/v1/namespaces/{ns}/rolebindings", binding).status
            == 201
        )
    wait_for_bindings(server)
    ada, eve = as_user(kubectl_cli, server, "ada"), as_user(kubectl_cli, server, "eve")

    own = ada.run("create", "-n", ns, "-f", "-", input=json.dumps(export("own")), check=False)
    assert own.stdout == "eventexport.events.core.io/own created\n", own.stderr
    everything = export("everything", namespaces=["*"])
    refused = ada.run("create", "-n", ns, "-f", "-", input=json.dumps(everything), check=False)
    assert refused.stderr == (
        f'Error from server (Forbidden): error when creating "STDIN": {EXPORTS} "everything" is forbidden:'
        ' user "ada" cannot list events cluster-wide, which it would export\n'
    )
    with_secret = export("hook", sink={"webhook": {"url": "https://h.example", "headersFrom": {"name": "t"}}})
    secret = ada.run("create", "-n", ns, "-f", "-", input=json.dumps(with_secret), check=False)
    assert secret.stdout == "eventexport.events.core.io/hook created\n", secret.stderr  # admin gets Secrets
    # edit may not write exports at all: they send Events out of the cluster ...
    denied = eve.run("create", "-n", ns, "-f", "-", input=json.dumps(export("eves")), check=False)
    assert denied.stderr.startswith(
        f'Error from server (Forbidden): error when creating "STDIN": {EXPORTS} is forbidden: User "eve"'
        f' cannot create resource "eventexports" in API group "events.core.io" in the namespace "{ns}"'
    ), denied.stderr
    assert [item["metadata"]["name"] for item in ada.json("get", EXPORTS, "-n", ns)["items"]] == [
        "hook",
        "own",
    ]
    # ... nor read them: a webhook's URL may hold a token.
    unread = eve.run("get", EXPORTS, "-n", ns, check=False)
    assert unread.stderr == (
        f'Error from server (Forbidden): {EXPORTS} is forbidden: User "eve" cannot list resource'
        f' "eventexports" in API group "events.core.io" in the namespace "{ns}"\n'
    )


def test_the_alpha_version_is_not_served_unless_enabled(tmp_path: Path, kubectl: Path) -> None:
    plain = ServerProcess(tmp_path / "data", free_port(), [])
    plain.start()
    try:
        resources = Kubectl(kubectl, plain.kubeconfig).run("api-resources").stdout
        assert "events.core.io/v1 " in resources and "eventexports" not in resources
        api = Api(plain)
        assert api.get(f"/apis/{GROUP_VERSION}").status == 404
        assert api.get(f"/apis/{GROUP_VERSION}/namespaces/default/eventexports").status == 404
        group = api.get("/apis/events.core.io").json
        assert [version["version"] for version in group["versions"]] == ["v1"]
        assert f"apis/{GROUP_VERSION}" not in api.get("/openapi/v3").json["paths"]
    finally:
        plain.stop()
