"""Helm 4 with a small chart of our two kinds, made by the test: lint, template, and the rendered
manifests applied to a started server with kubectl (server-side and client-side apply), then
re-rendered with other values and applied again. `helm install` needs a cluster (its release
storage lives in core Secrets), so the server is reached through kubectl only."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.helm import Helm
from tests.support.kubectl import EV, RB, Kubectl

pytestmark = pytest.mark.tools

CHART_YAML = """\
apiVersion: v2
name: access
description: A RoleBinding and an Event of coreio's groups
type: application
version: 0.1.0
appVersion: "1.0"
"""

VALUES_YAML = """\
bindingName: readers
role: view
subjects:
  - kind: User
    name: alice
  - kind: Group
    name: devs
event:
  name: access.granted
  reason: Granted
  note: access granted to readers
  eventTime: "2026-11-22T02:16:41.123456Z"
"""

HELPERS_TPL = """\
{{- define "access.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}
"""

ROLEBINDING_TPL = """\
apiVersion: rbac.authorization.core.io/v1
kind: RoleBinding
metadata:
  name: {{ .Values.bindingName }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "access.labels" . | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.core.io
  kind: ClusterRole
  name: {{ .Values.role }}
subjects:
{{- range .Values.subjects }}
  - kind: {{ .kind }}
    name: {{ .name }}
    {{- if eq .kind "ServiceAccount" }}
    namespace: {{ .namespace | default $.Release.Namespace }}
    {{- else }}
    apiGroup: rbac.authorization.core.io
    {{- end }}
{{- end }}
"""

EVENT_TPL = """\
apiVersion: events.core.io/v1
kind: Event
metadata:
  name: {{ .Values.event.name }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "access.labels" . | nindent 4 }}
eventTime: {{ .Values.event.eventTime | quote }}
action: Bind
reason: {{ .Values.event.reason }}
note: {{ .Values.event.note | quote }}
type: Normal
reportingController: example.com/access-chart
reportingInstance: access-chart-1
regarding:
  apiVersion: rbac.authorization.core.io/v1
  kind: RoleBinding
  name: {{ .Values.bindingName }}
  namespace: {{ .Release.Namespace }}
"""


@pytest.fixture(scope="module")
def chart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("chart") / "access"
    (root / "templates").mkdir(parents=True)
    (root / "Chart.yaml").write_text(CHART_YAML)
    (root / "values.yaml").write_text(VALUES_YAML)
    (root / "templates" / "_helpers.tpl").write_text(HELPERS_TPL)
    (root / "templates" / "rolebinding.yaml").write_text(ROLEBINDING_TPL)
    (root / "templates" / "event.yaml").write_text(EVENT_TPL)
    return root


@pytest.fixture(scope="module")
def helm_cli(helm: Path, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(helm, tmp_path_factory.mktemp("helm-home"))


def render(helm_cli: Helm, chart: Path, release: str, namespace: str, *sets: str) -> str:
    """`helm template`; each of `sets` is `--set`'s `path=value`, or `--set-json`'s when the value
    starts with `[` or `{`."""
    args = ["template", release, str(chart), "--namespace", namespace]
    for value in sets:
        is_json = value.partition("=")[2][:1] in ("[", "{")
        args += ["--set-json" if is_json else "--set", value]
    return helm_cli.run(*args).stdout


def documents(manifest: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(manifest) if doc]


# ----------------------------------------------------------------------------- without a server


def test_lint(helm_cli: Helm, chart: Path) -> None:
    result = helm_cli.run("lint", str(chart), "--strict")
    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout


def test_template_renders_both_kinds(helm_cli: Helm, chart: Path) -> None:
    docs = documents(render(helm_cli, chart, "demo", "helm-a"))
    assert [(d["apiVersion"], d["kind"], d["metadata"]["name"]) for d in docs] == [
        # Helm's install order: kinds it knows (RoleBinding) before those it does not.
        ("rbac.authorization.core.io/v1", "RoleBinding", "readers"),
        ("events.core.io/v1", "Event", "access.granted"),
    ]
    binding, event = docs
    assert binding["subjects"] == [
        {"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.core.io"},
        {"kind": "Group", "name": "devs", "apiGroup": "rbac.authorization.core.io"},
    ]
    assert binding["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
    assert event["regarding"]["name"] == "readers"
    assert event["eventTime"] == "2026-11-22T02:16:41.123456Z"


# ----------------------------------------------------------------------------- against the server


@pytest.fixture
def cleanup(kubectl_cli: Kubectl) -> Iterator[list[str]]:
    namespaces: list[str] = []
    yield namespaces
    for namespace in namespaces:
        kubectl_cli.run("delete", f"{RB},{EV}", "--all", "-n", namespace, check=False)


def live(kubectl_cli: Kubectl, namespace: str) -> tuple[dict[str, Any], dict[str, Any]]:
    binding = kubectl_cli.json("get", RB, "readers", "-n", namespace, "--show-managed-fields")
    event = kubectl_cli.json("get", EV, "access.granted", "-n", namespace, "--show-managed-fields")
    return binding, event


def test_rendered_chart_applied_server_side(
    helm_cli: Helm, chart: Path, kubectl_cli: Kubectl, cleanup: list[str]
) -> None:
    namespace = "helm-ssa"
    cleanup.append(namespace)
    manifest = render(helm_cli, chart, "demo", namespace)
    out = kubectl_cli.run("apply", "--server-side", "-f", "-", input=manifest).stdout
    assert out.splitlines() == [
        "rolebinding.rbac.authorization.core.io/readers serverside-applied",
        "event.events.core.io/access.granted serverside-applied",
    ]
    binding, event = live(kubectl_cli, namespace)
    assert [s["name"] for s in binding["subjects"]] == ["alice", "devs"]
    assert binding["metadata"]["labels"]["app.kubernetes.io/instance"] == "demo"
    assert event["note"] == "access granted to readers"
    managers = {entry["manager"] for entry in binding["metadata"]["managedFields"]}
    assert managers == {"kubectl"}

    # Other values: another subject list, another role name is refused (roleRef is immutable).
    manifest = render(
        helm_cli,
        chart,
        "demo",
        namespace,
        "subjects[0].kind=ServiceAccount",
        "subjects[0].name=deployer",
        "subjects[1].kind=User",
        "subjects[1].name=bob",
    )
    out = kubectl_cli.run("apply", "--server-side", "-f", "-", input=manifest).stdout
    assert "rolebinding.rbac.authorization.core.io/readers serverside-applied" in out
    binding, _ = live(kubectl_cli, namespace)
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "deployer", "namespace": namespace},
        {"kind": "User", "name": "bob", "apiGroup": "rbac.authorization.core.io"},
    ]
    # As kube-apiserver: a RoleBinding carries no generation, however often it changes.
    assert "generation" not in binding["metadata"]

    refused = kubectl_cli.run(
        "apply",
        "--server-side",
        "-f",
        "-",
        input=render(helm_cli, chart, "demo", namespace, "role=edit"),
        check=False,
    )
    assert refused.returncode == 1
    assert "cannot change roleRef" in refused.stderr


def test_rendered_chart_applied_client_side(
    helm_cli: Helm, chart: Path, kubectl_cli: Kubectl, cleanup: list[str]
) -> None:
    namespace = "helm-csa"
    cleanup.append(namespace)
    out = kubectl_cli.run("apply", "-f", "-", input=render(helm_cli, chart, "demo", namespace)).stdout
    assert out.splitlines() == [
        "rolebinding.rbac.authorization.core.io/readers created",
        "event.events.core.io/access.granted created",
    ]
    again = kubectl_cli.run("apply", "-f", "-", input=render(helm_cli, chart, "demo", namespace)).stdout
    assert again.splitlines() == [
        "rolebinding.rbac.authorization.core.io/readers unchanged",
        "event.events.core.io/access.granted unchanged",
    ]
    # A new release name relabels both; a shorter subject list drops the second subject.
    manifest = render(helm_cli, chart, "renamed", namespace, 'subjects=[{"kind":"User","name":"carol"}]')
    changed = kubectl_cli.run("apply", "-f", "-", input=manifest).stdout
    assert changed.splitlines() == [
        "rolebinding.rbac.authorization.core.io/readers configured",
        "event.events.core.io/access.granted configured",
    ]
    binding, event = live(kubectl_cli, namespace)
    assert binding["subjects"] == [
        {"kind": "User", "name": "carol", "apiGroup": "rbac.authorization.core.io"}
    ]
    assert binding["metadata"]["labels"]["app.kubernetes.io/instance"] == "renamed"
    assert event["metadata"]["labels"]["app.kubernetes.io/instance"] == "renamed"
    last_applied = json.loads(
        binding["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
    )
    assert last_applied["subjects"] == binding["subjects"]
