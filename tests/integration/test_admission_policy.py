"""ValidatingAdmissionPolicies applied standalone, from `--admission-config-file`, as users meet
them: the real kubectl and the official Python client against a server whose policies refuse,
warn and annotate the audit log; params from a ConfigMap of the same file; a file that cannot be
read stops the server with one line; the plugin can be turned off."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.kubectl import RB, Kubectl, rolebinding_yaml
from tests.support.server import ServerProcess, start_server
from tests.support.waiting import wait_until

pytestmark = pytest.mark.tools

GROUPS = ["rbac.authorization.core.io"]
ENFORCED = "guarded"
WARNED = "warned"
PARAMS = "params"


def policy(name: str, validations: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    rules = [{"apiGroups": GROUPS, "apiVersions": ["v1"], "operations": ["*"], "resources": ["rolebindings"]}]
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {"matchConstraints": {"resourceRules": rules}, "validations": validations, **spec},
    }


def binding(name: str, namespace: str, actions: list[str], **spec: Any) -> dict[str, Any]:
    selector = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": f"{name}-{namespace}"},
        "spec": {
            "policyName": name,
            "validationActions": actions,
            "matchResources": {"namespaceSelector": selector},
            **spec,
        },
    }


NO_ADMIN = {
    "expression": "request.operation == 'DELETE' || object.roleRef.name != 'cluster-admin'",
    "message": "no bindings to cluster-admin",
}
KEEP = {
    "expression": "request.operation != 'DELETE' || !oldObject.metadata.name.startsWith('keep')",
    "message": "kept bindings stay",
}
MANIFEST = [
    policy(
        "no-cluster-admin",
        [NO_ADMIN, KEEP],
        auditAnnotations=[{"key": "role", "valueExpression": "object == null ? null : object.roleRef.name"}],
    ),
    binding("no-cluster-admin", ENFORCED, ["Deny"]),
    binding("no-cluster-admin", WARNED, ["Warn", "Audit"]),
    policy(
        "forbidden-roles",
        [
            {
                "expression": "!(object.roleRef.name in params.data.forbidden.split(','))",
                "messageExpression": "'role ' + object.roleRef.name + ' is forbidden here'",
                "reason": "Forbidden",
            }
        ],
        paramKind={"apiVersion": "v1", "kind": "ConfigMap"},
        matchConditions=[{"name": "writes", "expression": "request.operation != 'DELETE'"}],
    ),
    binding(
        "forbidden-roles", PARAMS, ["Deny"], paramRef={"name": "rules", "parameterNotFoundAction": "Deny"}
    ),
    {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "rules", "namespace": PARAMS},
        "data": {"forbidden": "edit,admin"},
    },
]


def rolebinding(name: str, namespace: str, role: str) -> str:
    obj = yaml.safe_load(rolebinding_yaml(name, namespace))
    obj["roleRef"]["name"] = role
    return yaml.safe_dump(obj)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    directory = tmp_path_factory.mktemp("coreio-admission")
    manifest = directory / "admission.yaml"
    manifest.write_text(yaml.safe_dump_all(MANIFEST))
    # At level Request the events of creates name the object (from its body).
    audit_policy = directory / "audit-policy.yaml"
    audit_policy.write_text(
        json.dumps({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "Request"}]})
    )
    args = [
        "--admission-config-file",
        str(manifest),
        "--audit-log-path",
        str(directory / "audit.log"),
        "--audit-policy-file",
        str(audit_policy),
    ]
    process = start_server(directory / "data", args)
    try:
        yield process
    finally:
        process.stop()


def _audit(server: ServerProcess, name: str, verb: str) -> dict[str, Any]:
    path = server.data_dir.parent / "audit.log"

    def logged() -> dict[str, Any] | None:
        for line in path.read_text().splitlines():
            event: dict[str, Any] = json.loads(line)
            ref = event.get("objectRef") or {}
            if event["stage"] == "ResponseComplete" and event["verb"] == verb and ref.get("name") == name:
                return event
        return None

    return wait_until(logged, timeout=10, message=f"an audit event for {verb} {name}")


def test_a_denied_binding_is_refused_in_upstreams_words(kubectl_cli: Kubectl) -> None:
    result = kubectl_cli.run(
        "create", "-f", "-", input=rolebinding("root", ENFORCED, "cluster-admin"), check=False
    )
    assert result.returncode == 1
    # A 422 with causes: kubectl prints the causes, as it does for kube-apiserver's own answer.
    assert result.stderr.strip() == (
        "The rolebindings \"root\" is invalid: : ValidatingAdmissionPolicy 'no-cluster-admin' with binding "
        "'no-cluster-admin-guarded' denied request: no bindings to cluster-admin"
    )
    assert kubectl_cli.run("get", RB, "root", "-n", ENFORCED, check=False).returncode == 1
    # Nothing else is refused, and a dry run is judged as the real write would be.
    kubectl_cli.run("create", "-f", "-", input=rolebinding("viewer", ENFORCED, "view"))
    dry = kubectl_cli.run(
        "create",
        "--dry-run=server",
        "-f",
        "-",
        input=rolebinding("root", ENFORCED, "cluster-admin"),
        check=False,
    )
    assert "denied request: no bindings to cluster-admin" in dry.stderr


def test_an_update_to_a_denied_state_is_refused(kubectl_cli: Kubectl) -> None:
    kubectl_cli.run("create", "-f", "-", input=rolebinding("promoted", ENFORCED, "view"))
    result = kubectl_cli.run(
        "patch",
        RB,
        "promoted",
        "-n",
        ENFORCED,
        "--type=merge",
        "-p",
        '{"roleRef":{"name":"cluster-admin"}}',
        check=False,
    )
    # roleRef is immutable: the kind's validation answers first, as upstream's strategy does.
    assert "roleRef" in result.stderr and "cannot change roleRef" in result.stderr


def test_a_delete_sees_the_stored_object_as_old_object(kubectl_cli: Kubectl) -> None:
    kubectl_cli.run("create", "-f", "-", input=rolebinding("keep-this", ENFORCED, "view"))
    result = kubectl_cli.run("delete", RB, "keep-this", "-n", ENFORCED, check=False)
    assert result.returncode == 1
    assert "denied request: kept bindings stay" in result.stderr
    kubectl_cli.run("create", "-f", "-", input=rolebinding("drop-this", ENFORCED, "view"))
    kubectl_cli.run("delete", RB, "drop-this", "-n", ENFORCED)


def test_warn_and_audit_admit_with_a_warning_and_an_annotation(
    kubectl_cli: Kubectl, server: ServerProcess
) -> None:
    result = kubectl_cli.run("create", "-f", "-", input=rolebinding("warned-root", WARNED, "cluster-admin"))
    assert (
        "Warning: Validation failed for ValidatingAdmissionPolicy 'no-cluster-admin' with binding "
        "'no-cluster-admin-warned': no bindings to cluster-admin" in result.stderr
    )
    assert kubectl_cli.json("get", RB, "warned-root", "-n", WARNED)["roleRef"]["name"] == "cluster-admin"
    event = _audit(server, "warned-root", "create")
    assert json.loads(event["annotations"]["validation.policy.admission.k8s.io/validation_failure"]) == [
        {
            "message": "no bindings to cluster-admin",
            "policy": "no-cluster-admin",
            "binding": "no-cluster-admin-warned",
            "expressionIndex": 0,
            "validationActions": ["Warn", "Audit"],
        }
    ]
    assert event["annotations"]["no-cluster-admin/role"] == "cluster-admin"


def test_params_come_from_the_files_config_map(kubectl_cli: Kubectl) -> None:
    result = kubectl_cli.run("create", "-f", "-", input=rolebinding("editor", PARAMS, "edit"), check=False)
    assert "Error from server (Forbidden)" in result.stderr
    assert "denied request: role edit is forbidden here" in result.stderr
    kubectl_cli.run("create", "-f", "-", input=rolebinding("viewer", PARAMS, "view"))


def test_the_python_client_gets_the_status(server: ServerProcess) -> None:
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    api_client = config.new_client_from_config(str(server.kubeconfig))
    custom = client.CustomObjectsApi(api_client)
    body = yaml.safe_load(rolebinding("py-root", ENFORCED, "cluster-admin"))
    with pytest.raises(ApiException) as caught:
        custom.create_namespaced_custom_object(
            "rbac.authorization.core.io", "v1", ENFORCED, "rolebindings", body
        )
    assert caught.value.status == 422
    status = json.loads(str(caught.value.body))
    assert status["reason"] == "Invalid"
    assert status["details"] == {
        "name": "py-root",
        "group": "rbac.authorization.core.io",
        "kind": "rolebindings",
        "causes": [{"message": status["message"].split(" is forbidden: ", 1)[1]}],
    }


def test_the_plugin_can_be_turned_off(tmp_path: Path, kubectl: Path) -> None:
    manifest = tmp_path / "admission.yaml"
    manifest.write_text(yaml.safe_dump_all(MANIFEST))
    args = [
        "--admission-config-file",
        str(manifest),
        "--disable-admission-plugins",
        "ValidatingAdmissionPolicy",
    ]
    process = start_server(tmp_path / "data", args)
    try:
        Kubectl(kubectl, process.kubeconfig).run(
            "create", "-f", "-", input=rolebinding("root", ENFORCED, "cluster-admin")
        )
    finally:
        process.stop()


def test_a_file_that_cannot_be_read_stops_the_server_with_one_line(tmp_path: Path) -> None:
    manifest = tmp_path / "admission.yaml"
    manifest.write_text("kind: [unclosed")
    with pytest.raises(RuntimeError, match="exited") as caught:
        start_server(tmp_path / "data", ["--admission-config-file", str(manifest)])
    errors = [line for line in str(caught.value).splitlines() if "error:" in line]
    assert len(errors) == 1
    assert errors[0].startswith(f"coreio-apiserver: error: --admission-config-file: {manifest}: ")
