"""The Installation CRD refuses at admission what the operator would refuse (CEL, Kubernetes
1.29+), as the real kube-apiserver applies it: a name that cannot name a Service, SQLite with more
than one replica, a resource quantity the Deployment would be refused for. Each refusal names the
field, as `kubectl apply` shows it."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from apiserver.machinery.types import JSON
from tests.support import gobuild
from tests.support.cert_manager_crds import cert_manager_crds
from tests.support.controlplane import ControlPlane, skip_without_control_plane, start_control_plane

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "charts" / "coreio" / "crds" / "installations.operator.core.io.yaml"


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    skip_without_control_plane()
    directory = Path(tempfile.mkdtemp(prefix="coreio-crd-"))
    plane = start_control_plane(directory / "cp")
    try:
        plane.run("apply", "-f", str(CRD))
        plane.run(
            "wait", "--for=condition=Established", "crd/installations.operator.core.io", "--timeout=60s"
        )
        yield plane
    finally:
        plane.stop()
        if not os.environ.get("COREIO_KEEP_CONTROLPLANE"):
            shutil.rmtree(directory, ignore_errors=True)


def _installation(name: str, spec: JSON) -> JSON:
    return {
        "apiVersion": "operator.core.io/v1alpha1",
        "kind": "Installation",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def _create(plane: ControlPlane, obj: JSON) -> tuple[int, str]:
    done = plane.run("create", "-f", "-", input=json.dumps(obj), check=False)
    return done.returncode, done.stderr.strip()


@pytest.mark.parametrize(
    ("name", "spec", "expected"),
    [
        (
            "1coreio",
            {},
            'The Installation "1coreio" is invalid: <nil>: Invalid value: "object": metadata.name must be'
            " a DNS-1035 label (lowercase letters, digits and '-', starting with a letter, at most 63): it"
            " names the Service",
        ),
        (
            "core.io",
            {},
            'The Installation "core.io" is invalid: <nil>: Invalid value: "object": metadata.name must be a'
            " DNS-1035 label",
        ),
        (
            "coreio-export-warnings",
            {},
            'The Installation "coreio-export-warnings" is invalid: <nil>: Invalid value: "object":'
            " metadata.name must not start with coreio-export-: the exporters of EventExports are named so",
        ),
        (
            "three",
            {"replicas": 3},
            'The Installation "three" is invalid: spec.replicas: Forbidden: embedded SQLite allows one'
            " replica only: use etcd storage for more",
        ),
        (
            "greedy",
            {"resources": {"requests": {"cpu": "lots"}}},
            'The Installation "greedy" is invalid: spec.resources.requests: Invalid value: "object": every'
            " request must be a resource quantity, e.g. 100m or 128Mi",
        ),
        (
            "unbounded",
            {"resources": {"limits": {"memory": "1 GB"}}},
            'The Installation "unbounded" is invalid: spec.resources.limits: Invalid value: "object": every'
            " limit must be a resource quantity, e.g. 100m or 128Mi",
        ),
    ],
)
def test_what_the_operator_would_refuse_is_refused_at_admission(
    plane: ControlPlane, name: str, spec: JSON, expected: str
) -> None:
    code, stderr = _create(plane, _installation(name, spec))
    assert code != 0
    assert stderr.startswith(expected), stderr


@pytest.mark.parametrize(
    ("name", "spec"),
    [
        ("coreio", {}),
        (
            "on-etcd",
            {"replicas": 3, "storage": {"type": "etcd", "etcd": {"endpoints": ["https://etcd:2379"]}}},
        ),
        (
            "sized",
            {"resources": {"requests": {"cpu": "250m", "memory": "1.5Gi"}, "limits": {"memory": "2G"}}},
        ),
    ],
)
def test_what_the_operator_serves_is_accepted(plane: ControlPlane, name: str, spec: JSON) -> None:
    code, stderr = _create(plane, _installation(name, spec))
    assert code == 0, stderr
    plane.run("delete", "installation", name, "-n", "default")


def test_scaling_an_sqlite_installation_is_refused_too(plane: ControlPlane) -> None:
    assert _create(plane, _installation("scaled", {}))[0] == 0
    patched = plane.run(
        "patch", "installation", "scaled", "-n", "default", "--type=merge", "-p", '{"spec":{"replicas":2}}',
        check=False,
    )  # fmt: skip
    assert patched.returncode != 0 and "embedded SQLite allows one replica only" in patched.stderr
    plane.run("delete", "installation", "scaled", "-n", "default")


RECIPE = ROOT / "docs" / "cert-manager.yaml"


def test_the_cert_manager_recipe_fits_cert_managers_schemas_and_the_installation(plane: ControlPlane) -> None:
    """docs/cert-manager.yaml against cert-manager's own CRDs (its release's, from the Go module
    proxy): kube-apiserver accepts every object with strict field validation, refuses a misspelt
    field the same way, and the Certificate names what the operator verifies (the Service of the
    chart's default Installation) and a Secret the Installation's spec accepts."""
    try:
        crds = cert_manager_crds()
    except gobuild.GoUnavailable as exc:
        pytest.skip(str(exc))
    plane.apply(*crds)
    for crd in crds:
        plane.run("wait", "--for=condition=Established", f"crd/{crd['metadata']['name']}", "--timeout=60s")
    plane.run("create", "namespace", "coreio-system")
    done = plane.run("apply", "--dry-run=server", "-f", str(RECIPE), check=False)
    assert done.returncode == 0, done.stderr
    objects = list(yaml.safe_load_all(RECIPE.read_text()))
    assert {o["kind"] for o in objects} == {"Issuer", "Certificate"}
    serving = next(o for o in objects if o["kind"] == "Certificate" and not o["spec"].get("isCA"))
    misspelt = {**serving, "spec": {**serving["spec"], "dnsName": serving["spec"]["dnsNames"]}}
    refused = plane.run("apply", "--dry-run=server", "-f", "-", input=json.dumps(misspelt), check=False)
    assert refused.returncode != 0 and 'unknown field "spec.dnsName"' in refused.stderr
    assert "coreio.coreio-system.svc" in serving["spec"]["dnsNames"]
    installation = _installation("coreio", {"certificates": {"secretName": serving["spec"]["secretName"]}})
    installation["metadata"]["namespace"] = "coreio-system"
    code, stderr = _create(plane, installation)
    assert code == 0, stderr
    plane.run("delete", "namespace", "coreio-system", "--wait=false")
