"""Differential tests: the same requests to kube-apiserver's built-in twins and to coreio, the same
answers back.

Each case is one sequence of requests, sent once to kube-apiserver's own
`rbac.authorization.k8s.io/v1 rolebindings` (or `events.k8s.io/v1 events`) and once to coreio's
`rbac.authorization.core.io/v1 rolebindings` (or `events.core.io/v1 events`), both through the control
plane's URL with the admin's credentials (the aggregator proxies ours), each side in a namespace of its
own. Request bodies are written with our group names; the upstream side gets them rewritten to
upstream's (apiVersion, roleRef.apiGroup, subjects' apiGroup), and upstream's answers get group names
and the namespace rewritten back to ours, so the two can be compared as they are.

Compared, for every request: the HTTP status, the Warning headers (fieldValidation=Warn), and the body:

- a Status: status, reason, message and details (name, group, kind, uid, causes with reason, message
  and field);
- an object: all of it, with the volatile values masked;
- a list (and a deletecollection's answer): kind, apiVersion, the items' names, and the list's
  metadata.remainingItemCount and whether it carries a continue token.

Masked, because they differ between any two servers by nature: metadata.creationTimestamp,
metadata.deletionTimestamp's value, metadata.managedFields[*].time, the random suffix of a name made
from generateName, a list's resourceVersion and continue token. uids and resourceVersions are not
masked but numbered per side in order of appearance (`<uid1>`, `<rv2>`), also inside messages (a
precondition's message, an object a 422 quotes, whose times are masked too), so a no-op update that
keeps the resourceVersion on one side and bumps it on the other, or a Status naming another object's
uid, still shows.

Mapped as naming only (decided here): for an Event, kube-apiserver validates the internal core Event
that events.k8s.io Events are stored as, so its 422 names the core kind without a group (`Event "x" is
invalid`, no details.group; a failed delete precondition's 409 likewise says `on Event "x"`) and the
core type's fields (`involvedObject`, `message`, `count`, `source`, `firstTimestamp`, `lastTimestamp`,
`namespace`), where coreio says `Event.events.core.io` and names this API's fields (`regarding`, `note`,
`deprecatedCount`, `deprecatedSource`, `deprecatedFirstTimestamp`, `deprecatedLastTimestamp`,
`metadata.namespace`). Upstream's answer is rewritten to those names; the errors, their order, values
and messages must still agree.

A known difference is never hidden: its case is marked xfail (strict, so it fails loudly the day the
difference goes away) with the two answers in the reason.
"""

from __future__ import annotations

import copy
import hashlib
import http.client
import json
import re
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from apiserver.machinery.types import JSON
from tests.support.aggregation import AggregatedCoreio
from tests.support.controlplane import ControlPlane
from tests.support.kubectl import event_body

pytestmark = pytest.mark.e2e


RBAC = "rbac.authorization.core.io"
EVENTS = "events.core.io"
UPSTREAM_GROUPS = {RBAC: "rbac.authorization.k8s.io", EVENTS: "events.k8s.io"}

APPLICATION_JSON = "application/json"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"
USER_AGENT = "differential/1.0"
MASKED = "<masked>"


@dataclass(frozen=True)
class Kind:
    short: str
    resource: str
    group: str

    @property
    def upstream_group(self) -> str:
        return UPSTREAM_GROUPS[self.group]


RB = Kind("rb", "rolebindings", RBAC)
EV = Kind("ev", "events", EVENTS)


# --- requests --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One request, relative to the kind's collection in the side's namespace. `path` and `body` may
    hold `$NS`, `$UID`, `$RV` and `$CONTINUE`: the side's namespace, and the uid and resourceVersion of
    the last object, and the continue token of the last list, that side answered."""

    method: str
    path: str = ""
    body: Any = None
    content_type: str = APPLICATION_JSON
    namespace_suffix: str = ""

    def describe(self) -> str:
        body = self.body if isinstance(self.body, str) or self.body is None else json.dumps(self.body)
        return f"{self.method} {self.path or '/'} {self.content_type} {body or ''}".strip()


Marks = tuple[pytest.MarkDecorator, ...]


@dataclass(frozen=True)
class Case:
    id: str
    kind: Kind
    steps: tuple[Step, ...]
    marks: Marks = ()


def post(body: Any, query: str = "") -> Step:
    return Step("POST", query, body)


def get(name: str, query: str = "") -> Step:
    return Step("GET", f"/{name}{query}")


def put(name: str, body: Any, query: str = "") -> Step:
    return Step("PUT", f"/{name}{query}", body)


def patch(name: str, body: Any, content_type: str, query: str = "") -> Step:
    return Step("PATCH", f"/{name}{query}", body, content_type)


def delete(name: str, options: JSON | None = None, query: str = "") -> Step:
    return Step("DELETE", f"/{name}{query}", options)


def list_all(query: str = "") -> Step:
    return Step("GET", query)


def delete_all(query: str = "") -> Step:
    return Step("DELETE", query)


# --- manifests -------------------------------------------------------------------------------------

DROP = object()


def edit(obj: JSON, changes: dict[str, Any]) -> JSON:
    """A copy of `obj` with each dotted path (list indices as numbers) set, or removed for DROP."""
    result = copy.deepcopy(obj)
    for dotted, value in changes.items():
        *parents, last = dotted.split(".")
        node: Any = result
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        key: Any = int(last) if isinstance(node, list) else last
        if value is DROP:
            del node[key]
        elif isinstance(node, list) and key == len(node):
            node.append(value)
        else:
            node[key] = value
    return result


def rolebinding(name: str, labels: dict[str, str] | None = None) -> JSON:
    return {
        "apiVersion": f"{RBAC}/v1",
        "kind": "RoleBinding",
        "metadata": {"name": name, "labels": labels or {"app": "diff"}},
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "User", "name": "alice", "apiGroup": RBAC}],
    }


def event(name: str, labels: dict[str, str] | None = None) -> JSON:
    body = event_body(name, "$NS")
    del body["metadata"]["namespace"]
    body["metadata"]["labels"] = labels or {"app": "diff"}
    return body


def manifest(kind: Kind, name: str, labels: dict[str, str] | None = None) -> JSON:
    return rolebinding(name, labels) if kind is RB else event(name, labels)


# --- the two sides ---------------------------------------------------------------------------------


@dataclass
class Answer:
    status: int
    text: str
    warnings: list[str]


class Wire:
    """One keep-alive HTTPS connection to the control plane, reopened when the server closed it."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self.context = plane.ssl_context()
        self.connection: http.client.HTTPSConnection | None = None

    def send(self, method: str, path: str, body: str | None, content_type: str) -> Answer:
        headers = {"Accept": APPLICATION_JSON, "User-Agent": USER_AGENT}
        if body is not None:
            headers["Content-Type"] = content_type
        try:
            return self._exchange(method, path, body, headers)
        except (http.client.RemoteDisconnected, ConnectionError):
            self.close()  # the server closed the idle connection: once more on a new one
            return self._exchange(method, path, body, headers)

    def _exchange(self, method: str, path: str, body: str | None, headers: dict[str, str]) -> Answer:
        if self.connection is None:
            self.connection = http.client.HTTPSConnection(
                "127.0.0.1", self.plane.port, context=self.context, timeout=30
            )
        self.connection.request(
            method, path, body=body.encode() if body is not None else None, headers=headers
        )
        response = self.connection.getresponse()
        text = response.read().decode()
        return Answer(response.status, text, response.headers.get_all("Warning") or [])

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
        self.connection = None


@dataclass
class Side:
    """One server's view: which group it is asked in, its namespace, what it answered last, and the
    numbering of the uids and resourceVersions it has shown."""

    upstream: bool
    namespace: str
    our_namespace: str
    last: dict[str, str] = field(default_factory=dict)
    tokens: dict[tuple[str, str], str] = field(default_factory=dict)

    def token(self, what: str, value: str) -> str:
        key = (what, value)
        if key not in self.tokens:
            self.tokens[key] = f"<{what}{sum(1 for w, _ in self.tokens if w == what) + 1}>"
        return self.tokens[key]

    def outgoing(self, text: str) -> str:
        values = {
            "$NS": self.namespace,
            "$UID": self.last.get("uid", ""),
            "$RV": self.last.get("rv", ""),
            "$CONTINUE": urllib.parse.quote(self.last.get("continue", "")),
        }
        for placeholder, value in values.items():
            text = text.replace(placeholder, value)
        if self.upstream:
            for ours, theirs in UPSTREAM_GROUPS.items():
                text = text.replace(ours, theirs)
        return text

    def incoming(self, text: str) -> str:
        if not self.upstream:
            return text
        for ours, theirs in UPSTREAM_GROUPS.items():
            text = text.replace(theirs, ours)
        return text.replace(self.namespace, self.our_namespace)

    def remember(self, body: Any) -> None:
        if not isinstance(body, dict):
            return
        meta = body.get("metadata") or {}
        if body.get("kind") != "Status" and not str(body.get("kind", "")).endswith("List"):
            self.last["uid"] = meta.get("uid", "")
            self.last["rv"] = meta.get("resourceVersion", "")
        elif "continue" in meta:
            self.last["continue"] = meta["continue"]


def send(wire: Wire, side: Side, kind: Kind, step: Step) -> JSON:
    """The step sent to `side`; its answer in our names and with volatile values masked."""
    group = kind.upstream_group if side.upstream else kind.group
    namespace = side.namespace + step.namespace_suffix
    path = f"/apis/{group}/v1/namespaces/{namespace}/{kind.resource}{side.outgoing(step.path)}"
    if step.body is None:
        body = None
    else:
        body = step.body if isinstance(step.body, str) else json.dumps(step.body)
        body = side.outgoing(body)
    answer = wire.send(step.method, path, body, step.content_type)
    try:
        parsed: Any = json.loads(side.incoming(answer.text))
    except json.JSONDecodeError:
        parsed = side.incoming(answer.text)
    side.remember(parsed)
    return {
        "code": answer.status,
        "warnings": [side.incoming(w) for w in answer.warnings],
        "body": view(parsed, side),
    }


# --- masking and naming ----------------------------------------------------------------------------

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_RV_IN_MESSAGE = re.compile(
    r'(ResourceVersion in (?:the precondition|record) \(|\\"resourceVersion\\":\\")(\d+)'
)
# The volatile times of an object a message quotes (a 422 quoting the patched object).
_TIME_IN_MESSAGE = re.compile(r'(\\"(?:creationTimestamp|deletionTimestamp|time)\\":\\")[^"\\]*')
CORE_EVENT_FIELDS = {
    "involvedObject": "regarding",
    "message": "note",
    "count": "deprecatedCount",
    "source": "deprecatedSource",
    "firstTimestamp": "deprecatedFirstTimestamp",
    "lastTimestamp": "deprecatedLastTimestamp",
    "namespace": "metadata.namespace",
}
_CORE_FIELD_IN_MESSAGE = re.compile(
    r"(?:(?<=is invalid: )|(?<=is invalid: \[)|(?<=, ))(" + "|".join(CORE_EVENT_FIELDS) + r")(?=[.:\[])"
)


def view(body: Any, side: Side) -> Any:
    if not isinstance(body, dict):
        return body
    kind = str(body.get("kind", ""))
    if kind == "Status":
        return status_view(body, side)
    if kind.endswith("List"):
        return list_view(body)
    return object_view(body, side)


def mask_message(message: str, side: Side) -> str:
    message = _UUID.sub(lambda m: side.token("uid", m.group(0)), message)
    message = _TIME_IN_MESSAGE.sub(lambda m: m.group(1) + MASKED, message)
    return _RV_IN_MESSAGE.sub(lambda m: m.group(1) + side.token("rv", m.group(2)), message)


def status_view(status: JSON, side: Side) -> JSON:
    details = copy.deepcopy(status.get("details", {}))
    if "uid" in details:
        details["uid"] = side.token("uid", details["uid"])
    for cause in details.get("causes", []):
        cause["message"] = mask_message(cause.get("message", ""), side)
    result = {
        "status": status.get("status"),
        "reason": status.get("reason"),
        "message": mask_message(status.get("message", ""), side),
        "details": details,
    }
    if side.upstream and details.get("kind") == "Event" and "group" not in details:
        return core_event_names_to_ours(result)
    return result


def core_event_names_to_ours(status: JSON) -> JSON:
    """kube-apiserver's 422 (or precondition 409) for an events.k8s.io Event, which names the internal
    core Event, in the names coreio uses (see the module docstring)."""
    details = status["details"]
    details["group"] = EVENTS
    for cause in details.get("causes", []):
        path = cause.get("field", "")
        root = re.split(r"[.\[]", path, maxsplit=1)[0]
        cause["field"] = CORE_EVENT_FIELDS.get(root, root) + path[len(root) :]
    message = re.sub(r'^Event "|(?<= on )Event "', f'Event.{EVENTS} "', status["message"])
    status["message"] = _CORE_FIELD_IN_MESSAGE.sub(lambda m: CORE_EVENT_FIELDS[m.group(1)], message)
    return status


def list_view(body: JSON) -> JSON:
    meta = body.get("metadata") or {}
    result = {
        "kind": body.get("kind"),
        "apiVersion": body.get("apiVersion"),
        "names": [(item.get("metadata") or {}).get("name") for item in body.get("items") or []],
        "continue": MASKED if meta.get("continue") else "",
    }
    if "remainingItemCount" in meta:
        result["remainingItemCount"] = meta["remainingItemCount"]
    return result


def object_view(body: JSON, side: Side) -> JSON:
    obj = copy.deepcopy(body)
    meta = obj.get("metadata") or {}
    for key in ("creationTimestamp", "deletionTimestamp"):
        if meta.get(key):
            meta[key] = MASKED
    for key, what in (("uid", "uid"), ("resourceVersion", "rv")):
        if meta.get(key):
            meta[key] = side.token(what, meta[key])
    for entry in meta.get("managedFields") or []:
        if "time" in entry:
            entry["time"] = MASKED
    prefix = meta.get("generateName")
    if prefix and str(meta.get("name", "")).startswith(prefix):
        meta["name"] = prefix + MASKED
    return obj


# --- running ---------------------------------------------------------------------------------------


def namespaces(case: Case) -> tuple[str, str]:
    digest = hashlib.sha256(case.id.encode()).hexdigest()[:10]
    return f"diff-{digest}-k8s", f"diff-{digest}-core"


def run_case(wire: Wire, case: Case) -> tuple[list[JSON], list[JSON]]:
    """Each step to kube-apiserver, then to coreio; both sides' answers in order."""
    upstream_ns, our_ns = namespaces(case)
    upstream = Side(True, upstream_ns, our_ns)
    ours = Side(False, our_ns, our_ns)
    upstream_answers, our_answers = [], []
    for step in case.steps:
        upstream_answers.append(send(wire, upstream, case.kind, step))
        our_answers.append(send(wire, ours, case.kind, step))
    return upstream_answers, our_answers


def assert_same(case: Case, upstream: list[JSON], ours: list[JSON]) -> None:
    for index, (theirs, mine) in enumerate(zip(upstream, ours, strict=True)):
        if theirs != mine:
            raise AssertionError(
                f"step {index + 1} of {case.id}: {case.steps[index].describe()}\n"
                f"kube-apiserver: {json.dumps(theirs, sort_keys=True)}\n"
                f"coreio:         {json.dumps(mine, sort_keys=True)}"
            )


# --- cases -----------------------------------------------------------------------------------------
#
# Behaviour that depends on the kind (validation, garbage collection on delete, defaults, the patch
# schema, field selectors, immutability) is asked of both kinds; request handling coreio shares
# between them (options, selectors, tokens, decoding) of one kind each, alternating.

BOTH = (RB, EV)


def differs(kube_apiserver: str, coreio: str) -> Marks:
    """A known difference: fails the day coreio answers as kube-apiserver does."""
    reason = f"kube-apiserver: {kube_apiserver}; coreio: {coreio}"
    return (pytest.mark.xfail(strict=True, raises=AssertionError, reason=reason),)


def case(kind: Kind, name: str, *steps: Step, marks: Marks = ()) -> Case:
    return Case(f"{kind.short}-{name}", kind, steps, marks)


def one(kind: Kind) -> JSON:
    return manifest(kind, "one")


def relabeled(kind: Kind, **meta: Any) -> JSON:
    return edit(
        one(kind), {"metadata.labels": {"app": "changed"}, **{f"metadata.{k}": v for k, v in meta.items()}}
    )


# A namespace the wire fixture deletes before the cases run: with no namespace controller in the
# control plane its `kubernetes` finalizer stays, so it is Terminating for the whole module.
TERMINATING = "-terminating"


def crud_cases() -> list[Case]:
    rb, ev = one(RB), one(EV)
    cases = [
        c
        for kind in BOTH
        for c in (
            case(kind, "create", post(one(kind)), get("one")),
            case(kind, "update", post(one(kind)), put("one", relabeled(kind)), get("one")),
            case(kind, "update-unchanged", post(one(kind)), put("one", one(kind))),
        )
    ]
    return [
        *cases,
        case(RB, "create-twice", post(rb), post(rb)),
        case(
            RB,
            "create-generate-name",
            post(edit(rb, {"metadata.name": DROP, "metadata.generateName": "gen-"})),
        ),
        case(EV, "create-without-name", post(edit(ev, {"metadata.name": DROP}))),
        case(RB, "create-namespace-mismatch", post(edit(rb, {"metadata.namespace": "elsewhere"}))),
        case(EV, "create-bad-finalizer", post(edit(ev, {"metadata.finalizers": ["hold"]}))),
        case(
            RB,
            "create-in-missing-namespace",
            Step("POST", "", rb, namespace_suffix="-x"),
        ),
        case(
            EV,
            "create-in-terminating-namespace",
            Step("POST", "", ev, namespace_suffix=TERMINATING),
        ),
        case(EV, "get-missing", get("absent")),
        case(RB, "update-creates", put("one", rb)),
        case(EV, "update-name-mismatch", post(ev), put("other", ev)),
        case(EV, "update-stale-resource-version", post(ev), put("one", relabeled(EV, resourceVersion="1"))),
        case(
            RB, "update-current-resource-version", post(rb), put("one", relabeled(RB, resourceVersion="$RV"))
        ),
    ]


LABEL_PATCH = {"metadata": {"labels": {"tier": "gold", "app": None}}}
MANAGER = "?fieldManager=tester"


def apply_cases() -> list[Case]:
    def applied(kind: Kind) -> JSON:
        return edit(one(kind), {"metadata.labels": {"tier": "applied"}})

    def posted(kind: Kind) -> JSON:
        return edit(one(kind), {"metadata.labels": {"tier": "posted"}})

    return [
        *(case(kind, "apply-create", patch("one", one(kind), APPLY, MANAGER), get("one")) for kind in BOTH),
        case(
            RB,
            "apply-update",
            patch("one", one(RB), APPLY, MANAGER),
            patch("one", applied(RB), APPLY, MANAGER),
        ),
        case(EV, "apply-conflict", post(posted(EV)), patch("one", applied(EV), APPLY, MANAGER)),
        case(RB, "apply-force", post(posted(RB)), patch("one", applied(RB), APPLY, f"{MANAGER}&force=true")),
        case(RB, "apply-without-field-manager", patch("one", one(RB), APPLY)),
        case(EV, "apply-without-kind", patch("one", edit(one(EV), {"kind": DROP}), APPLY, MANAGER)),
    ]


def patch_cases() -> list[Case]:
    rb, ev = one(RB), one(EV)
    add_label = [{"op": "add", "path": "/metadata/labels/tier", "value": "gold"}]
    failed_test = [{"op": "test", "path": "/metadata/name", "value": "x"}]
    return [
        *(case(kind, "patch-merge", post(one(kind)), patch("one", LABEL_PATCH, MERGE)) for kind in BOTH),
        *(
            case(kind, "patch-strategic", post(one(kind)), patch("one", LABEL_PATCH, STRATEGIC))
            for kind in BOTH
        ),
        case(RB, "patch-json", post(rb), patch("one", add_label, JSON_PATCH)),
        case(EV, "patch-json-failed-test", post(ev), patch("one", failed_test, JSON_PATCH)),
        case(EV, "patch-json-not-a-list", post(ev), patch("one", {"op": "add"}, JSON_PATCH)),
        case(EV, "patch-missing-object", patch("absent", LABEL_PATCH, MERGE)),
        case(RB, "force-on-merge-patch", post(rb), patch("one", LABEL_PATCH, MERGE, "?force=true")),
        case(
            RB,
            "patch-malformed-merge",
            post(rb),
            patch("one", '{"metadata":', MERGE),
        ),
    ]


def finalizer_cases() -> list[Case]:
    def held(kind: Kind) -> JSON:
        return edit(one(kind), {"metadata.finalizers": ["example.com/hold"]})

    def deleted(kind: Kind) -> tuple[Step, ...]:
        return post(held(kind)), delete("one"), get("one")

    release = patch("one", {"metadata": {"finalizers": None}}, MERGE)
    # The delete a finalizer holds, and then the release of that finalizer, in a case of its own.
    held_cases = [case(kind, "delete-with-finalizer", *deleted(kind)) for kind in BOTH]
    released = [
        case(
            kind,
            "delete-with-finalizer-released",
            *deleted(kind),
            release,
            get("one"),
        )
        for kind in BOTH
    ]
    return held_cases + released


def delete_cases() -> list[Case]:
    def deleting(
        kind: Kind, name: str, options: JSON | None = None, query: str = "", marks: Marks = ()
    ) -> Case:
        return case(kind, name, post(one(kind)), delete("one", options, query), get("one"), marks=marks)

    zero_uid = "00000000-0000-0000-0000-000000000000"
    return [
        *(deleting(kind, "delete-foreground", {"propagationPolicy": "Foreground"}) for kind in BOTH),
        *(deleting(kind, "delete-orphan", {"propagationPolicy": "Orphan"}) for kind in BOTH),
        deleting(RB, "delete-orphan-dependents", {"orphanDependents": True}),
        deleting(EV, "delete"),
        case(RB, "delete-missing", delete("absent")),
        deleting(EV, "delete-bad-propagation", {"propagationPolicy": "Sometimes"}),
        deleting(RB, "delete-orphan-dependents-false", {"orphanDependents": False}),
        deleting(
            RB, "delete-orphan-and-propagation", {"orphanDependents": True, "propagationPolicy": "Background"}
        ),
        deleting(RB, "delete-uid-precondition", {"preconditions": {"uid": "$UID"}}),
        deleting(EV, "delete-wrong-uid-precondition", {"preconditions": {"uid": zero_uid}}),
        deleting(EV, "delete-resource-version-precondition", {"preconditions": {"resourceVersion": "$RV"}}),
        deleting(
            EV, "delete-stale-resource-version-precondition", {"preconditions": {"resourceVersion": "1"}}
        ),
        deleting(RB, "delete-dry-run", {"dryRun": ["All"]}),
        deleting(EV, "delete-dry-run-query", query="?dryRun=All"),
        deleting(RB, "delete-bad-dry-run", query="?dryRun=Maybe"),
    ]


def seeded(kind: Kind) -> tuple[Step, ...]:
    objects = [
        manifest(kind, "a", {"tier": "gold"}),
        manifest(kind, "b", {"tier": "silver"}),
        manifest(kind, "c", {"app": "diff"}),
    ]
    if kind is EV:
        objects[1] = edit(objects[1], {"type": "Warning", "reason": "Failed"})
        objects[2] = edit(objects[2], {"regarding.name": "web-1"})
    return tuple(post(obj) for obj in objects)


def list_cases() -> list[Case]:
    return [
        *(case(k, "list-label-equals", *seeded(k), list_all("?labelSelector=tier%3Dgold")) for k in BOTH),
        *(
            case(
                k,
                "list-limit-continue",
                *seeded(k),
                list_all("?limit=2"),
                list_all("?limit=2&continue=$CONTINUE"),
            )
            for k in BOTH
        ),
        *(
            case(k, "delete-collection-label", *seeded(k), delete_all("?labelSelector=tier"), list_all())
            for k in BOTH
        ),
        case(
            EV,
            "list-label-set-based",
            *seeded(EV),
            list_all("?labelSelector=!tier"),
            list_all("?labelSelector=tier+in+(gold,silver)"),
        ),
        case(RB, "list-bad-label-selector", list_all("?labelSelector=tier%3D%3D%3Dgold")),
        case(RB, "list-unsupported-field", list_all("?fieldSelector=roleRef.name%3Dview")),
        case(EV, "list-bad-continue", list_all("?limit=1&continue=not-a-token")),
        case(
            EV,
            "delete-collection-dry-run",
            *seeded(EV),
            delete_all("?dryRun=All&labelSelector=tier"),
            list_all(),
        ),
    ]


def field_validation_cases() -> list[Case]:
    def unknown(kind: Kind) -> JSON:
        return edit(one(kind), {"bogus": 1, "metadata.alsoBogus": "x"})

    def duplicated(kind: Kind) -> str:
        return json.dumps(one(kind))[:-1] + f', "kind": "{one(kind)["kind"]}"}}'

    def mode(kind: Kind, value: str, marks: Marks = ()) -> Case:
        query = f"?fieldValidation={value}" if value else ""
        return case(
            kind,
            f"field-validation-{value.lower() or 'default'}",
            post(unknown(kind), query),
            get("one"),
            marks=marks,
        )

    return [
        *(mode(kind, "Warn") for kind in BOTH),
        *(mode(kind, "Strict") for kind in BOTH),
        mode(EV, ""),
        mode(RB, "Ignore"),
        case(EV, "field-validation-unsupported-mode", post(unknown(EV), "?fieldValidation=Loud")),
        case(RB, "field-validation-duplicate-warn", post(duplicated(RB), "?fieldValidation=Warn")),
        case(
            EV,
            "field-validation-duplicate-strict",
            post(duplicated(EV), "?fieldValidation=Strict"),
        ),
        case(
            RB,
            "field-validation-update-strict",
            post(one(RB)),
            put("one", unknown(RB), "?fieldValidation=Strict"),
        ),
        case(
            EV,
            "field-validation-merge-patch-warn",
            post(one(EV)),
            patch("one", {"bogus": 1}, MERGE, "?fieldValidation=Warn"),
        ),
        case(
            RB,
            "field-validation-merge-patch-strict",
            post(one(RB)),
            patch("one", {"bogus": 1}, MERGE, "?fieldValidation=Strict"),
        ),
        *(apply_strict(kind) for kind in BOTH),
    ]


def apply_strict(kind: Kind) -> Case:
    named = ".bogus" if kind is EV else ".metadata.alsoBogus and .bogus"
    marks = differs(
        f'500 (no reason) "failed to create typed patch object ...": {named} "field not declared in schema"',
        "400 BadRequest, the same message naming .metadata.alsoBogus and .bogus",
    )
    body = edit(one(kind), {"bogus": 1, "metadata.alsoBogus": "x"})
    return case(
        kind,
        "field-validation-apply-strict",
        patch("one", body, APPLY, f"{MANAGER}&fieldValidation=Strict"),
        marks=marks,
    )


def dry_run_cases() -> list[Case]:
    rb, ev = one(RB), one(EV)
    return [
        case(RB, "dry-run-create", post(rb, "?dryRun=All"), get("one")),
        case(RB, "dry-run-update", post(rb), put("one", relabeled(RB), "?dryRun=All"), get("one")),
        case(EV, "dry-run-patch", post(ev), patch("one", LABEL_PATCH, MERGE, "?dryRun=All"), get("one")),
        case(EV, "dry-run-bad-value", post(ev, "?dryRun=Maybe")),
    ]


def rolebinding_validation_cases() -> list[Case]:
    rb = one(RB)

    def posting(name: str, changes: dict[str, Any], marks: Marks = ()) -> Case:
        return case(RB, name, post(edit(rb, changes)), marks=marks)

    return [
        posting("invalid-name", {"metadata.name": "a/b"}),
        posting("invalid-role-ref-kind", {"roleRef.kind": "Pod"}),
        posting("invalid-role-ref-api-group", {"roleRef.apiGroup": "example.com"}),
        posting("invalid-role-ref-empty-name", {"roleRef.name": ""}),
        posting("invalid-role-ref-name", {"roleRef.name": "a/b"}),
        posting("invalid-role-ref-missing", {"roleRef": DROP}),
        posting("invalid-subject-kind", {"subjects.0.kind": "Robot"}),
        posting("invalid-subject-empty-user", {"subjects.0.name": ""}),
        posting("invalid-subject-api-group", {"subjects.0.apiGroup": "example.com"}),
        posting(
            "invalid-service-account-api-group",
            {"subjects.0": {"kind": "ServiceAccount", "name": "sa", "apiGroup": RBAC}},
        ),
        posting(
            "invalid-service-account-name", {"subjects.0": {"kind": "ServiceAccount", "name": "Bad_Name"}}
        ),
        posting(
            "service-account-without-namespace", {"subjects.0": {"kind": "ServiceAccount", "name": "sa"}}
        ),
        posting("role-ref-api-group-defaulted", {"roleRef.apiGroup": DROP}),
        posting(
            "subject-api-group-defaulted",
            {"subjects.0.apiGroup": DROP, "subjects.1": {"kind": "Group", "name": "devs"}},
        ),
        case(RB, "update-role-ref", post(rb), put("one", edit(rb, {"roleRef.name": "edit"}))),
        case(RB, "update-bad-subject", post(rb), put("one", edit(rb, {"subjects.0.kind": "Robot"}))),
        case(RB, "patch-role-ref", post(rb), patch("one", {"roleRef": {"kind": "Role"}}, MERGE)),
        case(
            RB,
            "patch-subjects-strategic",
            post(rb),
            patch("one", {"subjects": [{"kind": "Group", "name": "devs"}]}, STRATEGIC),
        ),
    ]


SERIES_TIME = "2026-11-22T02:20:00.000000Z"


def event_validation_cases() -> list[Case]:
    ev = one(EV)

    def posting(name: str, changes: dict[str, Any], marks: Marks = ()) -> Case:
        return case(EV, name, post(edit(ev, changes)), marks=marks)

    return [
        posting("invalid-name", {"metadata.name": "Bad_Name"}),
        posting("invalid-event-time-missing", {"eventTime": DROP}),
        posting(
            "invalid-event-time-missing-regarding-elsewhere", {"eventTime": DROP, "regarding.namespace": "x"}
        ),
        posting("invalid-series-count", {"series": {"count": 1, "lastObservedTime": SERIES_TIME}}),
        posting("invalid-series-without-last-observed", {"series": {"count": 2}}),
        posting("invalid-regarding-missing", {"regarding": DROP}),
        posting("invalid-type", {"type": "Bogus"}),
        posting("invalid-note-too-long", {"note": "n" * 1025}),
        posting(
            "invalid-reason-action-instance-too-long",
            {"reason": "r" * 129, "action": "a" * 129, "reportingInstance": "i" * 129},
        ),
        posting(
            "invalid-reporting-fields-missing",
            {"reason": DROP, "action": DROP, "reportingInstance": DROP, "reportingController": DROP},
        ),
        posting("invalid-reporting-controller", {"reportingController": "not a name!"}),
        posting(
            "invalid-deprecated-fields-set",
            {
                "deprecatedCount": 3,
                "deprecatedSource": {"component": "c"},
                "deprecatedFirstTimestamp": "2026-11-22T02:16:41Z",
                "deprecatedLastTimestamp": "2026-11-22T02:16:41Z",
            },
        ),
        *event_time_cases(),
        *event_update_cases(),
    ]


def event_time_cases() -> list[Case]:
    ev = one(EV)
    return [
        case(
            EV,
            "invalid-event-time-format",
            post(edit(ev, {"eventTime": "yesterday"})),
        ),
        case(
            EV,
            "event-time-without-fraction",
            post(edit(ev, {"eventTime": "2026-11-22T02:16:41Z"})),
        ),
    ]


def event_update_cases() -> list[Case]:
    ev = one(EV)
    changed = {"regarding.name": "web-9", "action": "Other", "type": "Warning", "reportingInstance": "x"}
    selectors = (
        "?fieldSelector=type%3DWarning",
        "?fieldSelector=reason%3DStarted,regarding.name%3Dweb-0",
        "?fieldSelector=reportingController%3Dexample.com%2Fcontroller",
        "?fieldSelector=metadata.name!%3Db",
    )
    return [
        case(EV, "update-note", post(ev), put("one", edit(ev, {"note": "changed"}))),
        case(EV, "update-immutable-fields", post(ev), put("one", edit(ev, changed))),
        case(
            EV,
            "update-series",
            post(ev),
            patch("one", {"series": {"count": 2, "lastObservedTime": SERIES_TIME}}, MERGE),
        ),
        case(
            EV,
            "update-series-count",
            post(ev),
            patch("one", {"series": {"count": 1, "lastObservedTime": SERIES_TIME}}, MERGE),
        ),
        case(EV, "list-field-selectors", *seeded(EV), *(list_all(s) for s in selectors)),
        case(EV, "list-core-field-label", list_all("?fieldSelector=involvedObject.name%3Dweb-0")),
    ]


def all_cases() -> list[Case]:
    builders = (
        crud_cases,
        apply_cases,
        patch_cases,
        finalizer_cases,
        delete_cases,
        list_cases,
        field_validation_cases,
        dry_run_cases,
        rolebinding_validation_cases,
        event_validation_cases,
    )
    return [c for build in builders for c in build()]


CASES = all_cases()


# --- the test --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wire(aggregated_coreio: AggregatedCoreio, control_plane: ControlPlane) -> Iterator[Wire]:
    """One connection for the module, and every case's two namespaces made in one kubectl call."""
    items = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        for c in CASES
        for name in namespaces(c)
    ]
    terminating = [
        f"{name}{TERMINATING}"
        for c in CASES
        if any(step.namespace_suffix == TERMINATING for step in c.steps)
        for name in namespaces(c)
    ]
    items += [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}} for name in terminating]
    document = {"apiVersion": "v1", "kind": "List", "items": items}
    control_plane.run("create", "-f", "-", input=json.dumps(document))
    if terminating:
        control_plane.run("delete", "namespace", "--wait=false", *terminating)
    connection = Wire(control_plane)
    try:
        yield connection
    finally:
        connection.close()


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id, marks=c.marks) for c in CASES])
def test_same_answers(wire: Wire, case: Case) -> None:
    upstream, ours = run_case(wire, case)
    assert_same(case, upstream, ours)


# A watch of one named object is served under /watch/, which a Case's steps (paths relative to the
# kind's collection) cannot reach: the same requests, sent to both sides here.
NAMED_WATCH_SELECTORS = (
    "metadata.name%3Dother",
    "metadata.namespace%3Ddefault",
    "metadata.name!%3Done",
)


@pytest.mark.parametrize("selector", NAMED_WATCH_SELECTORS)
def test_named_watch_with_another_field_selector(wire: Wire, selector: str) -> None:
    answers = []
    for side in (Side(True, "default", "default"), Side(False, "default", "default")):
        group = RB.upstream_group if side.upstream else RB.group
        path = f"/apis/{group}/v1/watch/namespaces/default/{RB.resource}/one?fieldSelector={selector}"
        answer = wire.send("GET", path, None, APPLICATION_JSON)
        answers.append({"code": answer.status, "body": view(json.loads(side.incoming(answer.text)), side)})
    assert answers[0] == answers[1]
    assert answers[0]["code"] == 400
