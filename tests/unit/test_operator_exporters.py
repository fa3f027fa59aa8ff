"""What the operator deploys for an EventExport (apiserver_operator/exporters.py): valid Kubernetes
1.33 objects, an exporter that runs with the flags coreio-export takes, and rights limited to what
that exporter uses."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.machinery.types import JSON
from apiserver_operator import children, exporters
from apiserver_operator.children import Installation
from apiserver_operator.exporters import Export
from apiserver_operator.spec import parse_spec
from coreio_export.cli import parser
from tests.support.manifests import validate_manifests

UID = "0c7a8f1e-0000-4000-8000-000000000001"


def _installation(spec: JSON | None = None) -> Installation:
    given = spec or {"eventExport": {"enabled": True}}
    return Installation("coreio-system", "coreio", UID, parse_spec({"image": "coreio:1", **given}))


def _export(namespace: str = "team", name: str = "to-hook", **spec: Any) -> Export:
    obj = {"metadata": {"namespace": namespace, "name": name, "uid": "e-1"}, "spec": spec}
    return Export.of(obj)


def _kind(objects: list[JSON], kind: str) -> list[JSON]:
    return [obj for obj in objects if obj["kind"] == kind]


WEBHOOK = {"webhook": {"url": "https://hook.example/in", "headersFrom": {"name": "hook-token"}}}


def test_every_rendered_object_validates_against_kubernetes_1_33() -> None:
    inst = _installation()
    exports = [_export(sink=WEBHOOK, namespaces=["team", "other"]), _export(name="all", namespaces=["*"])]
    rendered = [obj for export in exports for obj in exporters.objects(inst, export)]
    rendered += [exporters.events_reader(inst), exporters.all_namespaces_binding(inst, exports)]
    validate_manifests(rendered)


def test_the_deployment_runs_coreio_export_elected_with_the_installations_image() -> None:
    inst = _installation({"eventExport": {"enabled": True, "exporters": {"replicas": 3}}})
    deployment = exporters.deployment(inst, _export())
    assert deployment["spec"]["replicas"] == 3
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "coreio:1"
    assert container["command"] == ["coreio-export"]
    args = parser().parse_args(container["args"])  # flags coreio-export takes
    assert (args.name, args.namespace, args.leader_elect) == ("to-hook", "team", True)
    assert args.metrics_bind_address == f"0.0.0.0:{exporters.METRICS_PORT}"
    assert container["resources"] == {
        "requests": {"cpu": "50m", "memory": "96Mi"},
        "limits": {"memory": "256Mi"},
    }


def test_exporter_pods_are_never_selected_by_the_api_servers_service_or_deployment() -> None:
    inst = _installation()
    pod_labels = exporters.deployment(inst, _export())["spec"]["template"]["metadata"]["labels"]
    for selector in (children.service(inst)["spec"]["selector"], children.selector(inst)):
        assert not all(pod_labels.get(key) == value for key, value in selector.items())


def test_the_role_grants_its_status_lease_and_secrets_by_name_and_nothing_else() -> None:
    rules = exporters.role(_installation(), _export(sink=WEBHOOK))["rules"]
    by_name = {(rule["resources"][0], tuple(rule["verbs"])): rule.get("resourceNames") for rule in rules}
    assert by_name == {
        ("eventexports", ("get", "list", "watch")): ["to-hook"],  # lists by a metadata.name selector
        ("eventexports/status", ("patch",)): ["to-hook"],
        ("leases", ("get", "update")): ["coreio-export-to-hook"],  # created by the operator
        ("secrets", ("get",)): ["hook-token"],
    }
    no_secret = exporters.role(_installation(), _export())["rules"]
    assert not any("secrets" in rule["resources"] for rule in no_secret)


def test_events_are_granted_where_they_are_exported() -> None:
    inst = _installation()
    listed = _export(namespaces=["team", "other"])
    bindings = exporters.events_bindings(inst, listed)
    assert [(b["metadata"]["namespace"], b["metadata"]["name"]) for b in bindings] == [
        ("team", "coreio-export:team:to-hook"),
        ("other", "coreio-export:team:to-hook"),
    ]
    assert {b["roleRef"]["name"] for b in bindings} == {exporters.EVENTS_READER}
    # Owned by the export only where it lives: an ownerReference cannot cross namespaces.
    assert ["ownerReferences" in b["metadata"] for b in bindings] == [True, False]
    own = _export()  # no namespaces: its own
    assert [b["metadata"]["namespace"] for b in exporters.events_bindings(inst, own)] == ["team"]
    everything = _export(name="all", namespaces=["*"])
    assert exporters.events_bindings(inst, everything) == []
    binding = exporters.all_namespaces_binding(inst, [listed, everything])
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "coreio-export-all", "namespace": "team"}
    ]
    assert exporters.events_reader(inst)["rules"] == [
        {"apiGroups": ["events.core.io"], "resources": ["events"], "verbs": ["list", "watch"]}
    ]


def test_the_operator_creates_the_lease_held_by_no_one_so_the_exporter_needs_no_create() -> None:
    lease = exporters.lease(_installation(), _export())
    assert lease["metadata"]["name"] == "coreio-export-to-hook"
    assert "spec" not in lease  # the exporters' to write; the operator's apply owns none of it
    assert lease["metadata"]["ownerReferences"][0]["kind"] == "EventExport"


@pytest.mark.parametrize("name", ["a" * 60, "b" * 253])
def test_a_long_export_name_gets_a_short_stable_workload_name(name: str) -> None:
    export = _export(name=name)
    assert len(export.workload) <= exporters.MAX_NAME
    assert export.workload == _export(name=name).workload
    assert export.workload != _export(name=name[:-1] + "z").workload
    validate_manifests(exporters.objects(_installation(), export))
    assert len(exporters.lease(_installation(), export)["metadata"]["name"]) <= 253
