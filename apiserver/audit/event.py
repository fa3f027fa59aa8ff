"""audit.k8s.io/v1 Events: one request's event, completed as the request goes on, and written
once for each stage the policy keeps (upstream's WithAudit and its response writer)."""

from __future__ import annotations

import copy
import datetime
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from apiserver.audit.policy import AuditConfig, Level
from apiserver.auth.requestinfo import RequestInfo
from apiserver.machinery.user import UserInfo

REQUEST_RECEIVED = "RequestReceived"
RESPONSE_STARTED = "ResponseStarted"
RESPONSE_COMPLETE = "ResponseComplete"
PANIC = "Panic"
DECISION_ANNOTATION = "authorization.k8s.io/decision"
REASON_ANNOTATION = "authorization.k8s.io/reason"
# The order upstream's Event struct writes its fields in.
_FIELD_ORDER = (
    "kind",
    "apiVersion",
    "level",
    "auditID",
    "stage",
    "requestURI",
    "verb",
    "user",
    "impersonatedUser",
    "sourceIPs",
    "userAgent",
    "objectRef",
    "responseStatus",
    "requestObject",
    "responseObject",
    "requestReceivedTimestamp",
    "stageTimestamp",
    "annotations",
)

# Where each event goes; it may answer with what the request is to wait for (a blocking webhook).
Sink = Callable[[dict[str, Any]], Awaitable[bool] | None]


def micro_time(moment: datetime.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def audited_user(user: UserInfo) -> dict[str, Any]:
    audited: dict[str, Any] = {"username": user.name}
    if user.uid:
        audited["uid"] = user.uid
    audited["groups"] = list(user.groups)
    if user.extra:
        audited["extra"] = {k: list(v) for k, v in user.extra.items()}
    return audited


def object_ref(info: RequestInfo) -> dict[str, str] | None:
    if not info.is_resource_request:
        return None
    ref = {
        "resource": info.resource,
        "namespace": info.namespace,
        "name": info.name,
        "apiGroup": info.api_group,
        "apiVersion": info.api_version,
        "subresource": info.subresource,
    }
    return {k: v for k, v in ref.items() if v}


def without_managed_fields(body: Any) -> Any:
    """`body` (an object, or a list of them) with no metadata.managedFields; `body` itself when it
    has none, a copy otherwise."""
    if not isinstance(body, dict):
        return body
    items = body.get("items")
    if isinstance(items, list) and any(_has_managed_fields(item) for item in items):
        return {**body, "items": [without_managed_fields(item) for item in items]}
    if not _has_managed_fields(body):
        return body
    stripped = copy.copy(body)
    stripped["metadata"] = {k: v for k, v in body["metadata"].items() if k != "managedFields"}
    return stripped


def _has_managed_fields(body: Any) -> bool:
    return (
        isinstance(body, dict)
        and isinstance(body.get("metadata"), dict)
        and "managedFields" in body["metadata"]
    )


@dataclass
class RequestAudit:
    """One request's event, and the stages it has been written at."""

    config: AuditConfig
    event: dict[str, Any]
    sink: Sink
    long_running: bool = False
    started: bool = False
    annotations: dict[str, str] = field(default_factory=dict)
    # The sink's deliveries not yet awaited (only a blocking webhook's).
    pending: list[Awaitable[bool]] = field(default_factory=list)

    @property
    def level(self) -> Level:
        return self.config.level

    def annotate(self, key: str, value: str) -> None:
        self.annotations.setdefault(key, value)

    def annotate_decision(self, allowed: bool, reason: str) -> None:
        """The authorizer's word, as upstream's authorization filter records it."""
        self.annotate(DECISION_ANNOTATION, "allow" if allowed else "forbid")
        self.annotate(REASON_ANNOTATION, reason)

    def set_request_object(self, body: Any) -> None:
        """The request's body, at the levels that keep it."""
        if self.level < Level.REQUEST or body is None:
            return
        self.event["requestObject"] = self._kept(body)

    def complete_object_ref(self, body: Any) -> None:
        """A create's or update's object completes objectRef (namespace, name, uid,
        resourceVersion), at every level, as upstream's LogRequestObject does."""
        ref = self.event.get("objectRef")
        metadata = body.get("metadata") if isinstance(body, dict) else None
        if ref is not None and isinstance(metadata, dict):
            for key in ("namespace", "name", "uid", "resourceVersion"):
                if not ref.get(key) and isinstance(metadata.get(key), str) and metadata[key]:
                    ref[key] = metadata[key]

    def set_response_object(self, body: Any) -> None:
        if self.level >= Level.REQUEST_RESPONSE and body is not None:
            self.event["responseObject"] = self._kept(body)

    def set_status(self, code: int, status: Mapping[str, Any] | None = None) -> None:
        """The answer's code, and what a Status body says (as upstream copies it)."""
        answer: dict[str, Any] = {"metadata": {}}
        for key in ("status", "message", "reason", "details"):
            if status and status.get(key):
                answer[key] = status[key]
        answer["code"] = code
        self.event["responseStatus"] = answer

    def _kept(self, body: Any) -> Any:
        return without_managed_fields(body) if self.config.omit_managed_fields else body

    def write(self, stage: str, now: datetime.datetime | None = None) -> None:
        """The event at `stage`, unless the policy omits it."""
        if stage == RESPONSE_STARTED:
            self.started = True
        if stage in self.config.omit_stages:
            return
        fields = dict(self.event, stage=stage)
        if stage == REQUEST_RECEIVED:
            fields["stageTimestamp"] = fields["requestReceivedTimestamp"]
        else:
            fields["stageTimestamp"] = micro_time(now or datetime.datetime.now(datetime.UTC))
        if self.annotations:
            fields["annotations"] = dict(self.annotations)
        delivery = self.sink({key: fields[key] for key in _FIELD_ORDER if key in fields})
        if delivery is not None:
            self.pending.append(delivery)

    async def delivered(self) -> bool:
        """Once the events written so far are delivered, where the sink makes the request wait for
        them (upstream's blocking backends): False when one failed and the request must not go on."""
        if not self.pending:
            return True
        pending, self.pending = self.pending, []
        results = [await delivery for delivery in pending]
        return all(results)

    def finish(self, code: int) -> None:
        """ResponseComplete, after ResponseStarted for a long-running request that never wrote its
        headers; the code is the answer's unless a Status was set."""
        if "responseStatus" not in self.event:
            self.set_status(code)
        if self.long_running and not self.started:
            self.write(RESPONSE_STARTED)
        self.write(RESPONSE_COMPLETE)

    def panic(self, exc: BaseException) -> None:
        self.event["responseStatus"] = {
            "metadata": {},
            "status": "Failure",
            "message": f"APIServer panic'd: {exc}",
            "reason": "InternalError",
            "code": 500,
        }
        self.write(PANIC)


@dataclass(frozen=True)
class RequestFacts:
    """What the event says of the request itself."""

    audit_id: str
    request_uri: str
    source_ips: list[str]
    user_agent: str
    received: datetime.datetime


def new_audit(
    config: AuditConfig, facts: RequestFacts, user: UserInfo | None, info: RequestInfo, sink: Sink
) -> RequestAudit:
    event: dict[str, Any] = {
        "kind": "Event",
        "apiVersion": "audit.k8s.io/v1",
        "level": config.level.wire,
        "auditID": facts.audit_id,
        "stage": REQUEST_RECEIVED,
        "requestURI": facts.request_uri,
        "verb": info.verb,
        "user": audited_user(user) if user is not None else {},
        "sourceIPs": facts.source_ips,
        "userAgent": facts.user_agent,
    }
    ref = object_ref(info)
    if ref is not None:
        event["objectRef"] = ref
    event["requestReceivedTimestamp"] = micro_time(facts.received)
    return RequestAudit(config, event, sink)
