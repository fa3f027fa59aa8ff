"""Waiting for the configuration to be read before a request is decided, as upstream's policy and
webhook plugins refuse requests until their informers have synced; and the Forbidden answer
admission gives (upstream's admission.NewForbidden)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from apiserver.admission.objects import AdmissionSource
from apiserver.admission.request import AdmissionRequest
from apiserver.machinery import errors
from apiserver.machinery.errors import GroupResource

READY_WAIT = 10.0


def resource_name(request: AdmissionRequest) -> str:
    """The name admission's errors give (upstream's extractResourceName)."""
    if request.name:
        return request.name
    meta: Mapping[str, Any] = (request.obj or {}).get("metadata") or {}
    return str(meta.get("name") or meta.get("generateName") or "Unknown")


def forbidden(request: AdmissionRequest, why: str) -> errors.StatusError:
    """`<resource> "<name>" is forbidden: <why>`, named as upstream's admission.NewForbidden names it."""
    return errors.forbidden_error(GroupResource(request.group, request.resource), resource_name(request), why)


async def wait_ready(source: AdmissionSource, request: AdmissionRequest) -> None:
    """Returns once the source has its configuration; a 403 after READY_WAIT without."""
    try:
        async with asyncio.timeout(READY_WAIT):
            await source.ready()
    except TimeoutError:
        raise forbidden(request, "not yet ready to handle request") from None
