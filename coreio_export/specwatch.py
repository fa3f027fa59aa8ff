"""A change of the export's spec, seen as it happens: a watch of the EventExport itself (its name as
field selector), so that the exporter takes up a new spec before its next batch, even when no Event
comes to make it write its status."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from coreio_export.connection import BACKOFF, Api, ApiError, ExportError, transient
from coreio_export.target import ExportGone, Target

NOT_FOUND = 404
GONE = 410
WATCH_SECONDS = 300
log = logging.getLogger("coreio_export")


async def spec_changed(api: Api, target: Target, generation: int, resource_version: str) -> None:
    """Returns once the export's generation is no longer `generation` (its status moving on changes
    nothing); ExportGone when it is deleted. Failures of the server are tried again."""
    version, failures = resource_version, 0
    with contextlib.suppress(_Changed):
        while True:
            try:
                version = await _watch(api, target, generation, version)
                failures = 0
            except ApiError as exc:
                if exc.status == GONE:
                    version = await _reread(api, target, generation)
                    continue
                if not transient(exc):
                    raise
                await _pause(exc, failures)
                failures += 1
            except ExportError as exc:
                if isinstance(exc, ExportGone) or not transient(exc):
                    raise
                await _pause(exc, failures)
                failures += 1


async def _pause(error: ExportError, failures: int) -> None:
    log.warning("%s; watching the EventExport again", error)
    await asyncio.sleep(BACKOFF[min(failures, len(BACKOFF) - 1)])


async def _watch(api: Api, target: Target, generation: int, version: str) -> str:
    """One watch from `version`; the version it reached (`_Changed` when the generation moved)."""
    path = (
        f"{target.collection}?watch=1&fieldSelector=metadata.name%3D{target.name}"
        f"&allowWatchBookmarks=true&resourceVersion={version}&timeoutSeconds={WATCH_SECONDS}"
    )
    async with contextlib.aclosing(api.watch(path)) as changes:
        async for change in changes:
            kind, obj = change.get("type", ""), change.get("object") or {}
            if kind == "ERROR":
                raise ApiError(int(obj.get("code") or 500), obj)
            if kind == "DELETED":
                raise target.gone("was deleted")
            meta = obj.get("metadata") or {}
            version = str(meta.get("resourceVersion") or version)
            if kind != "BOOKMARK" and meta.get("generation", generation) != generation:
                raise _Changed
    return version


async def _reread(api: Api, target: Target, generation: int) -> str:
    """The export read again (its watch fell behind): its resourceVersion, or `_Changed`."""
    try:
        export = await api.get(target.path)
    except ApiError as exc:
        if exc.status == NOT_FOUND:
            raise target.gone("was deleted") from None
        raise
    meta = export.get("metadata") or {}
    if meta.get("generation", generation) != generation:
        raise _Changed
    return str(meta.get("resourceVersion") or "")


class _Changed(Exception):
    """The generation moved on."""
