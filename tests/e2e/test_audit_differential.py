"""coreio's audit events against kube-apiserver's for the same requests: the same writes and reads
of RoleBindings sent to kube-apiserver's own group and to coreio's (through the aggregator, which
passes its Audit-ID on), each side's event for each request compared field by field. The control
plane's policy (tests/support/controlplane.py) logs RoleBinding requests at Metadata without
RequestReceived; the aggregated coreio runs with the same policy.

Compared: stages, level, verb, requestURI, objectRef, user, sourceIPs, userAgent, responseStatus and
the annotations (the authorizer's decision and reason among them); upstream's group and namespace
rewritten to ours. Masked: auditID, timestamps and the objects' uids, which differ between any two
servers; a query string is compared sorted, as the aggregator passes it on re-encoded.
"""

from __future__ import annotations

import http.client
import json
from typing import Any

import pytest

from tests.support.aggregation import AggregatedCoreio
from tests.support.controlplane import ControlPlane
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

JSON = dict[str, Any]
OURS = "rbac.authorization.core.io"
UPSTREAM = "rbac.authorization.k8s.io"
USER_AGENT = "audit-differential/1.0"
MASKED = ("auditID", "requestReceivedTimestamp", "stageTimestamp")


def rolebinding(name: str, role: str = "view") -> JSON:
    return {
        "apiVersion": f"{OURS}/v1",
        "kind": "RoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": OURS, "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": OURS, "kind": "User", "name": "alice"}],
    }


# (method, name, body, content type); a body's name is the object's.
STEPS: list[tuple[str, str, JSON | None, str]] = [
    ("POST", "", rolebinding("audited"), "application/json"),
    ("POST", "", rolebinding("audited"), "application/json"),  # 409 AlreadyExists
    ("GET", "audited", None, ""),
    ("GET", "", None, ""),
    ("PUT", "audited", rolebinding("audited"), "application/json"),
    ("PATCH", "audited", {"metadata": {"labels": {"a": "b"}}}, "application/merge-patch+json"),
    ("PATCH", "audited", {"roleRef": {"name": "edit"}}, "application/merge-patch+json"),  # 422
    ("DELETE", "audited", None, ""),
    ("GET", "audited", None, ""),  # 404
    ("GET", "?watch=true&timeoutSeconds=1", None, ""),  # ResponseStarted, then ResponseComplete
]


class Side:
    def __init__(self, plane: ControlPlane, group: str, namespace: str) -> None:
        self.plane, self.group, self.namespace = plane, group, namespace

    def send(self, method: str, name: str, body: JSON | None, content_type: str) -> str:
        """The request's Audit-ID."""
        base = f"/apis/{self.group}/v1/namespaces/{self.namespace}/rolebindings"
        path = base + (name if name.startswith("?") else f"/{name}" if name else "")
        payload = None if body is None else json.dumps(body).replace(OURS, self.group)
        connection = http.client.HTTPSConnection(
            "127.0.0.1", self.plane.port, context=self.plane.ssl_context(), timeout=30
        )
        try:
            headers = {"User-Agent": USER_AGENT, **({"Content-Type": content_type} if content_type else {})}
            connection.request(method, path, body=payload, headers=headers)
            response = connection.getresponse()
            response.read()
            return response.headers.get("Audit-Id", "")
        finally:
            connection.close()


def _events(events: list[JSON], audit_id: str, side: Side) -> list[JSON]:
    found = []
    for event in events:
        if event.get("auditID") != audit_id:
            continue
        kept = {key: value for key, value in event.items() if key not in MASKED}
        # The aggregator re-encodes the query it passes on (Go's url.Values.Encode sorts it).
        uri, _, query = str(kept.get("requestURI", "")).partition("?")
        kept["requestURI"] = uri + ("?" + "&".join(sorted(query.split("&"))) if query else "")
        for part in ((kept.get("responseStatus") or {}).get("details") or {}, kept.get("objectRef") or {}):
            if "uid" in part:
                part["uid"] = "<uid>"
        text = json.dumps(kept).replace(UPSTREAM, OURS).replace(side.namespace, "<namespace>")
        found.append(json.loads(text))
    return found


def _settled(read: Any, ids: list[str]) -> list[JSON]:
    def written() -> list[JSON] | None:
        events: list[JSON] = read()
        done = {e.get("auditID") for e in events if e.get("stage") == "ResponseComplete"}
        return events if all(audit_id in done for audit_id in ids) else None

    return wait_until(written, timeout=10, interval=0.1, message="the audit events to be written")


def test_the_same_requests_make_the_same_audit_events(
    control_plane: ControlPlane, aggregated_coreio: AggregatedCoreio
) -> None:
    upstream = Side(control_plane, UPSTREAM, "audit-diff-up")
    ours = Side(control_plane, OURS, "audit-diff-co")
    for side in (upstream, ours):
        control_plane.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": side.namespace}})
    sent = [(upstream.send(*step), ours.send(*step)) for step in STEPS]
    theirs = _settled(control_plane.audit_events, [t for t, _ in sent])
    mine = _settled(aggregated_coreio.audit_events, [o for _, o in sent])
    for step, (their_id, our_id) in zip(STEPS, sent, strict=True):
        got, want = _events(mine, our_id, ours), _events(theirs, their_id, upstream)
        assert got == want, f"{step[0]} {step[1]}: {_differences(got, want)}"


def _differences(got: list[JSON], want: list[JSON]) -> str:
    """Each differing field of each event, ours then theirs."""
    if len(got) != len(want):
        return f"{len(got)} events, kube-apiserver wrote {len(want)}: {got} != {want}"
    lines = []
    for ours, theirs in zip(got, want, strict=True):
        for key in sorted(set(ours) | set(theirs)):
            if ours.get(key) != theirs.get(key):
                lines.append(f"{key}: {ours.get(key)!r} != {theirs.get(key)!r}")
    return "; ".join(lines)
