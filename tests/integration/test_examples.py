"""Every manifest in examples/ applies to a standalone server with the real kubectl (server-side
apply, as `helm template | kubectl apply --server-side` would), and grants what its comments say."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.support.kubectl import Kubectl
from tests.support.metrics import wait_for_bindings
from tests.support.server import ServerProcess, start_server

pytestmark = pytest.mark.tools

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ROLES_FILE = EXAMPLES / "roles-file.yaml"  # read by the server, not applied
MANIFESTS = sorted(path for path in EXAMPLES.glob("*.yaml") if path != ROLES_FILE)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    process = start_server(
        tmp_path_factory.mktemp("coreio-examples"), ["--authorization-roles-file", str(ROLES_FILE)]
    )
    try:
        yield process
    finally:
        process.stop()


def test_there_are_examples_of_both_kinds() -> None:
    kinds = {yaml.safe_load(path.read_text())["kind"] for path in MANIFESTS}
    assert kinds == {"RoleBinding", "Event"}


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda path: path.name)
def test_each_example_applies(kubectl_cli: Kubectl, manifest: Path) -> None:
    obj = yaml.safe_load(manifest.read_text())
    applied = kubectl_cli.run("apply", "--server-side", "-f", str(manifest))
    kind = f"{obj['kind'].lower()}.{obj['apiVersion'].split('/')[0]}"
    assert applied.stdout == f"{kind}/{obj['metadata']['name']} serverside-applied\n"
    namespace = obj["metadata"]["namespace"]
    stored = kubectl_cli.json("get", kind, obj["metadata"]["name"], "-n", namespace, "--show-managed-fields")
    assert stored["metadata"]["managedFields"][0]["manager"] == "kubectl"


def test_the_examples_grant_what_they_say(kubectl_cli: Kubectl, server: ServerProcess) -> None:
    for manifest in MANIFESTS:
        kubectl_cli.run("apply", "--server-side", "-f", str(manifest))
    wait_for_bindings(server)  # every worker's binding index follows the store's watch

    def can(*args: str) -> str:
        return kubectl_cli.run("auth", "can-i", *args, "-n", "team-a", check=False).stdout.strip()

    assert can("list", "events.events.core.io", "--as", "alice") == "yes"
    assert can("create", "events.events.core.io", "--as", "alice") == "no"
    assert can("list", "events.events.core.io", "--as", "someone", "--as-group", "auditors") == "yes"
    assert can("list", "events.events.core.io", "--as", "system:serviceaccount:team-a:reporter") == "yes"
    assert can("create", "events.events.core.io", "--as", "dan", "--as-group", "deployers") == "yes"
    assert (
        can("delete", "rolebindings.rbac.authorization.core.io", "--as", "dan", "--as-group", "deployers")
        == "no"
    )
