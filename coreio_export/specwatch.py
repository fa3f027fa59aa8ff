"""A change of the export's spec, seen as it happens: a watch of the EventExport itself (its name as
field selector), so that the exporter takes up a new spec before its next batch, even when no Event
comes to make it write its status."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from coreio_export.connection import (
    BACKOFF,
    GONE,
    QUICK_END,
    WATCH_SECONDS,
    Api,
    ApiError,
    ExportError,
    transient,
)
from coreio_export.target import ExportGone, Target

log = logging.getLogger("coreio_export")


class _Changed(Exception):
    """The generation moved on."""


async def spec_changed(api: Api, target: Target, generation: int, resource_version: str) -> None:
    """Returns once the export's generation is no longer `generation` (its status moving on changes
    nothing); ExportGone when it is deleted. A watch that falls behind (410) goes on from a list;
    failures of the server are tried again after a growing pause."""
    version, failures = resource_version, 0
    with contextlib.suppress(_Changed):
        while True:
            began = time.monotonic()
            try:
                version = version or await _listed(api, target, generation)
                version = await _watch(api, target, generation, version)
                if time.monotonic() - began >= QUICK_END:
                    failures = 0
                    continue
            except ApiError as exc:
                if exc.status == GONE:
                    version = ""  # the next turn lists anew
                elif not transient(exc):
                    raise
            except ExportError as exc:
                if isinstance(exc, ExportGone) or not transient(exc):
                    raise
                log.warning("%s; watching the EventExport again", exc)
            await asyncio.sleep(BACKOFF[min(failures, len(BACKOFF) - 1)])
            failures += 1


def _selected(target: Target) -> str:
    return f"{target.collection}?fieldSelector=metadata.name%3D{target.name}"


async def _watch(api: Api, target: Target, generation: int, version: str) -> str:
    """One watch from `version`; the version it reached (`_Changed` when the generation moved)."""
    path = f"{_selected(target)}&watch=1&allowWatchBookmarks=true&resourceVersion={version}"
    async with contextlib.aclosing(api.watch(f"{path}&timeoutSeconds={WATCH_SECONDS}")) as changes:
        async for change in changes:
            kind, obj = change.get("type", ""), change.get("object")
            obj = obj if isinstance(obj, dict) else {}
            if kind == "ERROR":
                code = obj.get("code")
                raise ApiError(code if isinstance(code, int) else 500, obj)
            if kind == "DELETED":
                raise target.gone("was deleted")
            meta = obj.get("metadata") or {}
            version = str(meta.get("resourceVersion") or version)
            if kind != "BOOKMARK" and meta.get("generation", generation) != generation:
                raise _Changed
    return version


async def _listed(api: Api, target: Target, generation: int) -> str:
    """The export listed (by its name): the list's resourceVersion, `_Changed`, or ExportGone."""
    listed = await api.get(_selected(target))
    items = [item for item in listed.get("items") or [] if isinstance(item, dict)]
    if not items:
        raise target.gone("was deleted")
    if (items[0].get("metadata") or {}).get("generation", generation) != generation:
        raise _Changed
    return str((listed.get("metadata") or {}).get("resourceVersion") or "")
