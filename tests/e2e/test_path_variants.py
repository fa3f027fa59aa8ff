"""Path variants through the real aggregator (issue 20): the same odd paths sent to kube-apiserver's
own `events.k8s.io` and `rbac.authorization.k8s.io` and, through the aggregation layer, to coreio's
twins, with the admin's credentials. The aggregator forwards the path as it decoded it (an empty
segment included: it forwarded `namespaces/team-b//events`, which coreio used to serve as the
namespace's list), so the two must answer alike: status, and a Status's reason and message with the
group names swapped."""

from __future__ import annotations

import http.client
import json
from typing import Any

import pytest

from tests.support.aggregation import AggregatedCoreio
from tests.support.controlplane import ControlPlane

pytestmark = pytest.mark.e2e

NAMESPACE = "paths"
TWINS = [
    ("events.k8s.io", "events.core.io", "events"),
    ("rbac.authorization.k8s.io", "rbac.authorization.core.io", "rolebindings"),
]
VARIANTS = [
    "namespaces/{ns}/{plural}",
    "namespaces/{ns}//{plural}",
    "/namespaces/{ns}/{plural}",
    "namespaces/{ns}/./{plural}",
    "namespaces/x/../{ns}/{plural}",
    "namespaces/{ns}/%2e%2e/{plural}",
    "namespaces/{ns}/%2E/{plural}",
    "namespaces/{ns}/{plural}/",
    "namespaces/{ns}/{plural}//",
    "namespaces/{ns}/{plural}/x/",
    "namespaces/{ns}/{plural}/x%2F",
    "namespaces/{ns}/{plural}/a%2Fb",
    "namespaces%2F{ns}%2F{plural}",
    "namespaces/{ns}/{plural}/%2e%2e",
    "namespaces/{ns}/{plural}/.",
    "namespaces/{ns}/{plural}/x/status",
    "namespaces/%2F/{plural}",
    "namespaces/a%2Fb/{plural}",
    "namespaces/{ns}/{plural}/x/y/z",
    "namespaces/{ns}/EVENTS",
    "proxy/namespaces/{ns}/{plural}/x",
    "{plural}/x",
    "namespaces/{ns}",
    "watch/namespaces/{ns}//{plural}",
]


def _ask(plane: ControlPlane, method: str, path: str) -> tuple[int, Any]:
    connection = http.client.HTTPSConnection("127.0.0.1", plane.port, context=plane.ssl_context(), timeout=30)
    try:
        connection.request(method, path, headers={"Accept": "application/json"})
        response = connection.getresponse()
        body = response.read()
    finally:
        connection.close()
    try:
        document = json.loads(body)
    except ValueError:
        return response.status, body.decode(errors="replace")
    if document.get("kind") == "Status":
        return response.status, (document.get("reason"), document.get("message"))
    return response.status, document.get("kind")


@pytest.fixture(scope="module")
def namespace(control_plane: ControlPlane, aggregated_coreio: AggregatedCoreio) -> str:
    control_plane.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    return NAMESPACE


@pytest.mark.parametrize("method", ["GET", "DELETE"])
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize(("upstream", "ours", "plural"), TWINS, ids=["events", "rolebindings"])
def test_coreio_answers_as_kube_apiserver(
    control_plane: ControlPlane,
    namespace: str,
    upstream: str,
    ours: str,
    plural: str,
    variant: str,
    method: str,
) -> None:
    tail = variant.format(ns=namespace, plural=plural)
    if variant.endswith("EVENTS"):
        tail = tail.replace("EVENTS", plural.upper())
    theirs = _ask(control_plane, method, f"/apis/{upstream}/v1/{tail}")
    mine = _ask(control_plane, method, f"/apis/{ours}/v1/{tail}")
    expected = json.dumps(theirs).replace(upstream, ours)
    assert json.dumps(mine) == expected, (method, tail, theirs, mine)
