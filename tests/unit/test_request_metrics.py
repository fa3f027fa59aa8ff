"""The labels of apiserver_request_total, as k8s.io/apiserver's endpoints/metrics gives them: the
verb as reported (LIST, WATCH, APPLY, "other"), dry_run, scope, and which requests count at all."""

from __future__ import annotations

import pytest
from aiohttp.test_utils import make_mocked_request
from multidict import CIMultiDict

from apiserver.http.metrics import AGGREGATED_DISCOVERY_KEY, ServerMetrics
from apiserver.http.responses import RESOURCE_KIND_KEY
from apiserver.resources import KINDS, RoleBindingKind

RB = "/apis/rbac.authorization.core.io/v1"
NS = f"{RB}/namespaces/team/rolebindings"


def labels(
    method: str, path: str, code: int = 200, *, routed: bool = True, headers: dict[str, str] | None = None
) -> tuple[str, ...] | None:
    request = make_mocked_request(method, path, headers=CIMultiDict(headers or {}))
    if routed:
        request[RESOURCE_KIND_KEY] = RoleBindingKind()
    return ServerMetrics(KINDS).request_labels(request, code)


@pytest.mark.parametrize(
    ("method", "path", "headers", "verb", "scope"),
    [
        ("GET", NS, {}, "LIST", "namespace"),
        ("GET", f"{RB}/rolebindings", {}, "LIST", "cluster"),
        ("HEAD", f"{NS}/x", {}, "GET", "resource"),
        ("GET", f"{NS}?fieldSelector=metadata.name%3Dx", {}, "LIST", "namespace"),
        ("GET", f"{NS}?watch=1", {}, "WATCH", "namespace"),
        ("GET", f"{NS}?watch=false", {}, "LIST", "namespace"),
        ("GET", f"{RB}/watch/namespaces/team/rolebindings/x", {}, "WATCH", "resource"),
        ("POST", NS, {}, "POST", "resource"),
        ("PUT", f"{NS}/x", {}, "PUT", "resource"),
        ("PATCH", f"{NS}/x", {"Content-Type": "application/merge-patch+json"}, "PATCH", "resource"),
        ("PATCH", f"{NS}/x", {"Content-Type": "application/apply-patch+yaml"}, "APPLY", "resource"),
        ("DELETE", f"{NS}/x", {}, "DELETE", "resource"),
        ("DELETE", NS, {}, "DELETE", "namespace"),
        ("OPTIONS", NS, {}, "other", "namespace"),
    ],
)
def test_verb_and_scope_as_upstream_reports_them(
    method: str, path: str, headers: dict[str, str], verb: str, scope: str
) -> None:
    found = labels(method, path, headers=headers)
    assert found is not None
    assert (found[0], found[6]) == (verb, scope)
    assert found[2:6] == ("rbac.authorization.core.io", "v1", "rolebindings", "")
    assert found[7] == "apiserver"


@pytest.mark.parametrize(
    ("query", "dry_run"),
    [("", ""), ("?dryRun=All", "All"), ("?dryRun=All&dryRun=All", "All"), ("?dryRun=x", "invalid")],
)
def test_dry_run(query: str, dry_run: str) -> None:
    found = labels("POST", NS + query)
    assert found is not None and found[1] == dry_run


def test_what_is_counted() -> None:
    # Only requests that reached a kind's route (not refused before it: 401, 403) ...
    assert labels("GET", NS, 403, routed=False) is None
    # ... but the in-flight limit's 429s, of served resources only.
    assert labels("GET", NS, 429, routed=False) is not None
    assert labels("GET", "/apis/other.io/v1/namespaces/a/things", 429, routed=False) is None
    # The health probes, without component; not their checks' own paths, nor /metrics.
    assert labels("GET", "/readyz", routed=False) == ("GET", "", "", "", "", "/readyz", "", "")
    assert labels("GET", "/readyz/etcd", routed=False) is None
    assert labels("GET", "/metrics", routed=False) is None
    # Aggregated discovery, not the legacy document.
    assert labels("GET", "/apis", routed=False) is None
    request = make_mocked_request("GET", "/apis")
    request[AGGREGATED_DISCOVERY_KEY] = True
    assert ServerMetrics().request_labels(request, 200) == ("GET", "", "", "", "", "/apis", "", "apiserver")
