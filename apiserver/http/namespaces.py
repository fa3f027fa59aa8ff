"""Standalone mode's implicit namespaces: the core `v1` group with one read-only resource.

With no kube-apiserver beside it, every namespace exists implicitly. Clients still look for the
core `namespaces` resource: kubectl reads a namespace after a 404 to tell a missing object from a
missing namespace, and kopf will not start until discovery lists `namespaces`; scoped to some
namespaces, it lists and watches them to learn which exist. So this serves `/api`, `/api/v1` and
get, list and watch of namespaces, where a namespace is listed once it holds an object of a served
kind (and `default` always). Namespaces are never deleted; watches see each one ADDED once.

Aggregated into a cluster, kube-apiserver serves the core group and none of this is routed.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import AsyncIterator, Iterable

from aiohttp import web

from apiserver.auth.attributes import attributes_from_request
from apiserver.http import query
from apiserver.http.responses import object_response
from apiserver.http.watchstream import stream_watch, watch_timeout
from apiserver.machinery import errors
from apiserver.machinery.selectors import (
    FieldSelector,
    LabelSelector,
    parse_field_selector,
    parse_label_selector,
)
from apiserver.machinery.types import JSON
from apiserver.registry.storage_errors import status_error
from apiserver.registry.store import ResourceStore, WatchEventOut
from apiserver.storage.interface import EventType, Storage, StorageError, StorageUnavailableError

DEFAULT_NAMESPACE = "default"
NAME_LABEL = "kubernetes.io/metadata.name"
# The common root of every served kind's keys (/registry/<group>/<plural>/<namespace>/<name>).
REGISTRY_ROOT = "/registry/"


def _storage_version_hash() -> str:
    digest = hashlib.sha256(b"/v1/Namespace").digest()
    return base64.b64encode(digest[:8]).decode()


def api_versions() -> JSON:
    return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": None}


def resource_list() -> JSON:
    return {
        "kind": "APIResourceList",
        "groupVersion": "v1",
        "resources": [
            {
                "name": "namespaces",
                "singularName": "namespace",
                "namespaced": False,
                "kind": "Namespace",
                "verbs": ["get", "list", "watch"],
                "shortNames": ["ns"],
                "storageVersionHash": _storage_version_hash(),
            }
        ],
    }


def namespace_object(name: str, resource_version: str = "") -> JSON:
    meta: JSON = {"name": name}
    if resource_version:
        meta["resourceVersion"] = resource_version
    meta["labels"] = {NAME_LABEL: name}
    return {
        "kind": "Namespace",
        "apiVersion": "v1",
        "metadata": meta,
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


class ImplicitNamespaces:
    """Answers /api, /api/v1 and /api/v1/namespaces[/<name>] from the keys the stores hold."""

    def __init__(self, stores: list[ResourceStore], storage: Storage, min_request_timeout: float) -> None:
        self.prefixes = tuple(store.prefix(None) for store in stores)
        self.storage = storage
        self.min_request_timeout = min_request_timeout

    def _namespace_of(self, key: str) -> str | None:
        for prefix in self.prefixes:
            if key.startswith(prefix):
                namespace, _, _ = key[len(prefix) :].partition("/")
                return namespace or None
        return None

    async def _names_at(self, revision: int) -> tuple[set[str], int]:
        """The namespaces holding objects at `revision` (0: now), and the revision read."""
        names = {DEFAULT_NAMESPACE}
        read_at = revision
        for prefix in self.prefixes:
            page = await self.storage.list(prefix, revision=read_at)
            read_at = page.revision
            names.update(ns for kv in page.items if (ns := self._namespace_of(kv.key)) is not None)
        return names, read_at

    # ------------------------------------------------------------------ handlers

    async def api(self, request: web.Request) -> web.StreamResponse:
        return object_response(request, api_versions())

    async def api_v1(self, request: web.Request) -> web.StreamResponse:
        return object_response(request, resource_list())

    async def get(self, request: web.Request) -> web.StreamResponse:
        # The name authorization was asked about (an encoded slash is a slash there too).
        info = attributes_from_request(request)
        if info.resource != "namespaces" or info.subresource:
            raise errors.route_not_found()
        return object_response(request, namespace_object(info.name))

    async def collection(self, request: web.Request) -> web.StreamResponse:
        if query.parse_bool(request.query, "watch"):
            return await self._watch(request)
        labels, fields = _selectors(request)
        try:
            names, revision = await self._names_at(0)
        except StorageUnavailableError as exc:
            raise _unavailable(exc) from exc
        items = [namespace_object(n) for n in sorted(names) if _selected(n, labels, fields)]
        return object_response(
            request,
            {
                "kind": "NamespaceList",
                "apiVersion": "v1",
                "metadata": {"resourceVersion": str(revision)},
                "items": items,
            },
        )

    async def _watch(self, request: web.Request) -> web.StreamResponse:
        labels, fields = _selectors(request)
        rv = request.query.get("resourceVersion") or ""
        timeout_text = request.query.get("timeoutSeconds") or ""
        timeout = int(timeout_text) if timeout_text.isascii() and timeout_text.isdigit() else None
        if rv in ("", "0"):
            try:
                names, revision = await self._names_at(0)
            except StorageUnavailableError as exc:
                raise _unavailable(exc) from exc
            initial = sorted(names)
        else:
            if not (rv.isascii() and rv.isdigit()):
                raise errors.bad_request(f'invalid resource version: "{rv}"')
            revision = int(rv)
            initial = []
        events = self._events(revision, initial, labels, fields)
        return await stream_watch(request, events, watch_timeout(timeout, self.min_request_timeout))

    async def _events(
        self,
        revision: int,
        initial: Iterable[str],
        labels: LabelSelector | None,
        fields: FieldSelector | None,
    ) -> AsyncIterator[WatchEventOut]:
        initial = list(initial)
        for name in initial:
            if _selected(name, labels, fields):
                yield WatchEventOut("ADDED", namespace_object(name, str(revision)))
        try:
            known = set(initial) or (await self._names_at(revision))[0]
        except StorageError as exc:
            yield _error(exc)
            return
        changes = self.storage.watch(REGISTRY_ROOT, after_revision=revision)
        try:
            async for change in changes:
                if change.type is not EventType.PUT:
                    continue
                found = self._namespace_of(change.key)
                if found is None or found in known:
                    continue
                known.add(found)
                if _selected(found, labels, fields):
                    yield WatchEventOut("ADDED", namespace_object(found, str(change.revision)))
        except StorageError as exc:
            yield _error(exc)
        finally:
            await changes.aclose()


def _unavailable(exc: StorageUnavailableError) -> errors.StatusError:
    return status_error(exc)


def _error(exc: StorageError) -> WatchEventOut:
    return WatchEventOut("ERROR", status_error(exc).status)


def _selectors(request: web.Request) -> tuple[LabelSelector | None, FieldSelector | None]:
    label = request.query.get("labelSelector")
    field = request.query.get("fieldSelector")
    labels = parse_label_selector(label) if label else None
    fields = parse_field_selector(field, ("metadata.name",)) if field else None
    return labels, fields


def _selected(name: str, labels: LabelSelector | None, fields: FieldSelector | None) -> bool:
    if labels is not None and not labels.matches({NAME_LABEL: name}):
        return False
    return fields is None or fields.matches({"metadata.name": name})
