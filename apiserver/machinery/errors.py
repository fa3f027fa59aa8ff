"""API errors as Kubernetes `Status` objects, and field errors as k8s.io/apimachinery formats them.

Everything below the HTTP layer raises `StatusError`; the HTTP layer renders `StatusError.status`.
Messages follow k8s.io/apimachinery/pkg/api/errors so that clients which match on them keep working.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from apiserver.machinery.types import JSON


class FieldErrorType(Enum):
    """The kinds of field.Error upstream; value = (cause reason, text used in messages)."""

    NOT_FOUND = ("FieldValueNotFound", "Not found")
    REQUIRED = ("FieldValueRequired", "Required value")
    DUPLICATE = ("FieldValueDuplicate", "Duplicate value")
    INVALID = ("FieldValueInvalid", "Invalid value")
    NOT_SUPPORTED = ("FieldValueNotSupported", "Unsupported value")
    FORBIDDEN = ("FieldValueForbidden", "Forbidden")
    TOO_LONG = ("FieldValueTooLong", "Too long")
    TOO_MANY = ("FieldValueTooMany", "Too many")
    INTERNAL = ("InternalError", "Internal error")
    TYPE_INVALID = ("FieldValueTypeInvalid", "Invalid value")

    @property
    def reason(self) -> str:
        return self.value[0]

    @property
    def text(self) -> str:
        return self.value[1]


_OMIT = object()
# Types whose message upstream prints without the bad value.
_NO_VALUE_TYPES = {
    FieldErrorType.REQUIRED,
    FieldErrorType.FORBIDDEN,
    FieldErrorType.TOO_LONG,
    FieldErrorType.INTERNAL,
}


def go_quote(value: str) -> str:
    """Approximates Go's %q for a string (double quotes, backslash escapes)."""
    return json.dumps(value, ensure_ascii=False)


@dataclass(frozen=True)
class GoRepr:
    """A bad value printed verbatim: how upstream prints values through String() or %#v (structs,
    slices, times), e.g. `rbac.RoleRef{APIGroup:"...", Kind:"Role", Name:"x"}`."""

    text: str


def _go_value(value: Any) -> str:
    if isinstance(value, GoRepr):
        return value.text
    if value is None:
        # Upstream substitutes the string "null" for a nil value, then quotes it.
        return '"null"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return go_quote(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


@dataclass(frozen=True)
class FieldError:
    """One field.Error: `field` is the JSON path of the offending field, e.g. `subjects[0].kind`."""

    type: FieldErrorType
    field: str
    bad_value: Any = _OMIT
    detail: str = ""

    def body(self) -> str:
        """What upstream's ErrorBody() returns: the cause message."""
        if self.type in _NO_VALUE_TYPES or self.bad_value is _OMIT:
            text = self.type.text
        else:
            text = f"{self.type.text}: {_go_value(self.bad_value)}"
        if self.detail:
            text += f": {self.detail}"
        return text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"


def required(path: str, detail: str = "") -> FieldError:
    return FieldError(FieldErrorType.REQUIRED, path, detail=detail)


def invalid(path: str, value: Any, detail: str = "") -> FieldError:
    return FieldError(FieldErrorType.INVALID, path, value, detail)


def not_supported(path: str, value: Any, supported: list[str]) -> FieldError:
    detail = "supported values: " + ", ".join(go_quote(s) for s in supported) if supported else ""
    return FieldError(FieldErrorType.NOT_SUPPORTED, path, value, detail)


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError(FieldErrorType.FORBIDDEN, path, detail=detail)


def too_long(path: str, value: Any, max_length: int) -> FieldError:
    detail = f"may not be more than {max_length} bytes" if max_length >= 0 else ""
    return FieldError(FieldErrorType.TOO_LONG, path, value, detail)


def duplicate(path: str, value: Any) -> FieldError:
    return FieldError(FieldErrorType.DUPLICATE, path, value)


def not_found(path: str, value: Any) -> FieldError:
    return FieldError(FieldErrorType.NOT_FOUND, path, value)


def aggregate_message(errors: list[str]) -> str:
    """utilerrors.NewAggregate(...).Error(): one message bare, several in brackets, duplicates once."""
    seen: list[str] = []
    for msg in errors:
        if msg not in seen:
            seen.append(msg)
    if len(seen) == 1:
        return seen[0]
    return "[" + ", ".join(seen) + "]"


@dataclass(frozen=True)
class GroupResource:
    group: str
    resource: str

    def __str__(self) -> str:
        return f"{self.resource}.{self.group}" if self.group else self.resource


@dataclass
class StatusError(Exception):
    """An API error carrying the `Status` body and HTTP code it is answered with."""

    code: int
    reason: str
    message: str
    details: JSON | None = None
    headers: dict[str, str] = field(default_factory=dict)
    # ListMeta of the Status (the inconsistent-continue token of a 410 on a paginated list).
    list_meta: JSON | None = None

    def __post_init__(self) -> None:
        super().__init__(self.message)
        # As upstream's error writer: a Status that says when to retry says it in Retry-After too.
        retry = (self.details or {}).get("retryAfterSeconds")
        if isinstance(retry, int) and retry > 0:
            self.headers.setdefault("Retry-After", str(retry))

    @property
    def status(self) -> JSON:
        body: JSON = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": dict(self.list_meta or {}),
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        if self.details:
            body["details"] = self.details
        body["code"] = self.code
        return body


def _details(name: str, gr: GroupResource, **extra: Any) -> JSON:
    details: JSON = {}
    if name:
        details["name"] = name
    if gr.group:
        details["group"] = gr.group
    details["kind"] = gr.resource
    details.update({k: v for k, v in extra.items() if v})
    return details


def not_found_error(gr: GroupResource, name: str) -> StatusError:
    return StatusError(404, "NotFound", f'{gr} "{name}" not found', _details(name, gr))


def already_exists_error(gr: GroupResource, name: str) -> StatusError:
    return StatusError(409, "AlreadyExists", f'{gr} "{name}" already exists', _details(name, gr))


def conflict_error(gr: GroupResource, name: str, why: str) -> StatusError:
    return StatusError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {gr} "{name}": {why}',
        _details(name, gr),
    )


MODIFIED_CONFLICT = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def modified_conflict_error(gr: GroupResource, name: str) -> StatusError:
    return conflict_error(gr, name, MODIFIED_CONFLICT)


def invalid_error(group: str, kind: str, name: str, errors: list[FieldError]) -> StatusError:
    qualified = f"{kind}.{group}" if group else kind
    causes = [{"reason": e.type.reason, "message": e.body(), "field": e.field} for e in errors]
    message = f'{qualified} "{name}" is invalid'
    if errors:
        message += ": " + aggregate_message([str(e) for e in errors])
    details: JSON = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    details["kind"] = kind
    details["causes"] = causes
    return StatusError(422, "Invalid", message, details)


def bad_request(message: str) -> StatusError:
    return StatusError(400, "BadRequest", message)


def unauthorized(message: str = "Unauthorized") -> StatusError:
    return StatusError(401, "Unauthorized", message)


def forbidden_error(gr: GroupResource, name: str, why: str) -> StatusError:
    message = f'{gr} "{name}" is forbidden: {why}' if name else f"{gr} is forbidden: {why}"
    return StatusError(403, "Forbidden", message, _details(name, gr))


def route_not_found() -> StatusError:
    """A path no route serves, in go-restful's words."""
    return StatusError(404, "NotFound", "the server could not find the requested resource", {})


def method_not_allowed() -> StatusError:
    return StatusError(
        405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
    )


def not_acceptable(accepted: list[str]) -> StatusError:
    return StatusError(
        406, "NotAcceptable", "only the following media types are accepted: " + ", ".join(accepted)
    )


def unsupported_media_type(accepted: list[str]) -> StatusError:
    """As upstream's NewUnsupportedMediaTypeError."""
    listed = ", ".join(accepted)
    message = f"the body of the request was in an unknown format - accepted media types include: {listed}"
    return StatusError(415, "UnsupportedMediaType", message)


def too_large(message: str = "the request is too large") -> StatusError:
    return StatusError(413, "RequestEntityTooLarge", message)


def expired(message: str) -> StatusError:
    return StatusError(410, "Expired", message)


def gone(message: str) -> StatusError:
    return StatusError(410, "Gone", message)


def too_many_requests(retry_after: int = 1) -> StatusError:
    return StatusError(
        429,
        "TooManyRequests",
        "Too many requests, please try again later.",
        {"retryAfterSeconds": retry_after},
        {"Retry-After": str(retry_after)},
    )


def timeout_error(message: str, retry_after: int = 0) -> StatusError:
    """As upstream's NewTimeoutError."""
    details: JSON | None = {"retryAfterSeconds": retry_after} if retry_after else None
    return StatusError(504, "Timeout", f"Timeout: {message}", details)


def service_unavailable(message: str) -> StatusError:
    return StatusError(503, "ServiceUnavailable", message)


def storage_unavailable(exc: Exception) -> StatusError:
    """The storage could not be reached: 503, whichever operation found out."""
    return service_unavailable(f"storage is unavailable: {exc}")


def internal_error(message: str) -> StatusError:
    return StatusError(
        500, "InternalError", f"Internal error occurred: {message}", {"causes": [{"message": message}]}
    )
