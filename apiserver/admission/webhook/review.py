"""The AdmissionReview a webhook is sent and the one it answers, as k8s.io/apiserver writes and
checks them (admission.k8s.io/v1, or v1beta1 for a webhook that lists only that)."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

from apiserver.admission.request import AdmissionRequest, request_object
from apiserver.machinery.types import JSON

GROUP = "admission.k8s.io"
V1 = "v1"
V1BETA1 = "v1beta1"
KIND = "AdmissionReview"
JSON_PATCH = "JSONPatch"


class InvalidResponse(Exception):
    """A review answered that cannot be used; the text is upstream's."""


class UnknownVersions(Exception):
    """The webhook accepts no AdmissionReview version this server sends."""


def review_version(accepted: list[str]) -> str:
    """The first version the webhook lists that upstream knows how to send."""
    for version in accepted:
        if version in (V1, V1BETA1):
            return version
    raise UnknownVersions("webhook does not accept known AdmissionReview versions (v1, v1beta1)")


def review(request: AdmissionRequest, uid: str, version: str = V1) -> JSON:
    """The review sent: every field of the request (the objects null where there are none)."""
    body = request_object(request, uid)
    ordered: JSON = {}
    for key, value in body.items():
        if key == "dryRun":
            ordered["object"] = request.obj
            ordered["oldObject"] = request.old
        ordered[key] = value
    return {"kind": KIND, "apiVersion": f"{GROUP}/{version}", "request": ordered}


@dataclass(frozen=True)
class AdmissionResponse:
    allowed: bool
    result: JSON | None = None
    patch: bytes = b""
    patch_type: str = ""
    audit_annotations: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _patch_bytes(value: Any) -> bytes:
    """`response.patch`: bytes, base64 in JSON (as Go decodes []byte)."""
    if value in (None, ""):
        return b""
    if not isinstance(value, str):
        raise InvalidResponse("json: cannot unmarshal patch into Go struct field of type []uint8")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidResponse(f"illegal base64 data in response.patch: {exc}") from None


def _patch_of(response: JSON, mutating: bool, v1: bool) -> tuple[bytes, str]:
    patch = _patch_bytes(response.get("patch"))
    patch_type = response.get("patchType")
    if not v1:
        return (patch, JSON_PATCH) if mutating and patch else (b"", "")
    if not mutating:
        if patch:
            raise InvalidResponse("validating webhook may not return response.patch")
        if patch_type is not None:
            raise InvalidResponse("validating webhook may not return response.patchType")
        return b"", ""
    if patch and patch_type is None:
        raise InvalidResponse("webhook returned response.patch but not response.patchType")
    if not patch and patch_type is not None:
        raise InvalidResponse("webhook returned response.patchType but not response.patch")
    if patch_type is not None and not patch_type:
        raise InvalidResponse('webhook returned invalid response.patchType of ""')
    return patch, str(patch_type or "")


def verify_response(answer: JSON, uid: str, version: str, *, mutating: bool) -> AdmissionResponse:
    """The usable parts of the review answered (upstream's VerifyAdmissionResponse)."""
    response = answer.get("response")
    if not isinstance(response, dict):
        raise InvalidResponse("webhook response was absent")
    v1 = version == V1
    if v1:
        if str(response.get("uid") or "") != uid:
            raise InvalidResponse(f'expected response.uid="{uid}", got "{response.get("uid") or ""}"')
        api_version = str(answer.get("apiVersion") or f"{GROUP}/{V1}")
        kind = str(answer.get("kind") or KIND)
        if (api_version, kind) != (f"{GROUP}/{V1}", KIND):
            group, _, found = api_version.rpartition("/")
            raise InvalidResponse(
                f"expected webhook response of {GROUP}/{V1}, Kind={KIND}, got {group}/{found}, Kind={kind}"
            )
    patch, patch_type = _patch_of(response, mutating, v1)
    result = response.get("status")
    annotations = response.get("auditAnnotations") or {}
    return AdmissionResponse(
        allowed=response.get("allowed") is True,
        result=result if isinstance(result, dict) else None,
        patch=patch,
        patch_type=patch_type,
        audit_annotations={str(k): str(v) for k, v in annotations.items()}
        if isinstance(annotations, dict)
        else {},
        warnings=[str(w) for w in response.get("warnings") or [] if isinstance(w, str)],
    )
