"""Waiting for the configuration to be read before a request is decided, as upstream's webhook
plugins refuse requests until their informers have synced."""

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


async def wait_ready(source: AdmissionSource, request: AdmissionRequest) -> None:
    """Returns once the source has its configuration; a 403 after READY_WAIT without."""
    try:
        async with asyncio.timeout(READY_WAIT):
            await source.ready()
    except TimeoutError:
        resource = GroupResource(request.group, request.resource)
        raise errors.forbidden_error(
            resource, resource_name(request), "not yet ready to handle request"
        ) from None
