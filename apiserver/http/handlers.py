"""Routing of `/apis/...` paths to discovery and to the resource stores, as go-restful does for
kube-apiserver: a known path with a wrong method is 405, an unknown path 404, both as Status."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web

from apiserver.auth.attributes import attributes_from_request, request_user, resource_attributes
from apiserver.auth.authz import AUTHORIZER_KEY
from apiserver.auth.requestinfo import RequestInfo, split_path
from apiserver.http import audit as auditing
from apiserver.http import codec, query, table
from apiserver.http.discovery import Discovery, etag
from apiserver.http.metrics import AGGREGATED_DISCOVERY_KEY, METRICS_KEY
from apiserver.http.responses import (
    NO_CACHE,
    RESOURCE_KIND_KEY,
    list_response,
    negotiate,
    negotiate_stream,
    object_response,
    success_status,
)
from apiserver.http.watchstream import stream_watch, watch_timeout
from apiserver.machinery import errors, formats
from apiserver.machinery.options import DeleteOptions, ListOptions, WriteOptions, delete_options_from_body
from apiserver.machinery.selectors import escape_field_value, parse_field_selector
from apiserver.machinery.types import JSON
from apiserver.patch import JSONPatcher, MergePatcher, Patcher, StrategicMergePatcher
from apiserver.registry.store import ResourceStore, WriteResult

# v2beta1 is gone by default since 1.33 (AggregatedDiscoveryRemoveBetaType): clients fall back.
AGGREGATED_DISCOVERY_VERSIONS = ("apidiscovery.k8s.io/v2",)
# The verb a user must also be allowed to delete an object that no longer decodes.
UNSAFE_DELETE_VERB = "unsafe-delete-ignore-read-errors"
_PATCHERS: dict[str, type[Patcher]] = {
    codec.JSON_PATCH_TYPE: JSONPatcher,
    codec.MERGE_PATCH_TYPE: MergePatcher,
    codec.STRATEGIC_PATCH_TYPE: StrategicMergePatcher,
}


Serve = Callable[[web.Request, "ResourceRoute"], Awaitable[web.StreamResponse]]


@dataclass
class ResourceRoute:
    """The operation a request is served as: read from the request's one RequestInfo, the same
    one authorization judged, never from the path a second time."""

    store: ResourceStore
    verb: str
    namespace: str | None
    name: str | None
    # "status" for a kind's /status, else "".
    subresource: str = ""


# /apis/<group>/<version>/namespaces/<namespace>/<plural>/<name>/status
_STATUS_SEGMENTS = 8


def _status_path(info: RequestInfo, store: ResourceStore) -> bool:
    """Whether a subresource request is one of a kind's /status, on one named object, exactly."""
    return (
        info.subresource == "status"
        and store.kind.status_subresource
        and bool(info.name and info.namespace)
        and info.verb not in ("list", "watch")
        and len(split_path(info.path)) == _STATUS_SEGMENTS
    )


class ApiHandler:
    """Serves everything under /apis."""

    def __init__(self, stores: list[ResourceStore], discovery: Discovery, min_request_timeout: float) -> None:
        self.stores = {(s.kind.group, s.kind.version, s.kind.plural): s for s in stores}
        self.discovery = discovery
        self.min_request_timeout = min_request_timeout

    # ------------------------------------------------------------------ dispatch

    async def handle(self, request: web.Request) -> web.StreamResponse:
        info = attributes_from_request(request)
        if not info.is_resource_request:
            segments = split_path(info.path)[1:]
            if len(segments) > 2:
                raise errors.route_not_found()
            return self._discovery(request, segments)
        route = self._route(info)
        if route is None:
            raise errors.route_not_found()
        return await self._resource(request, route)

    def _route(self, info: RequestInfo) -> ResourceRoute | None:
        """A served kind's operation, or None (404): the only subresource served is the status of
        a kind that has one, and a name needs a namespace (the kinds are namespaced). Empty, `.`
        and `..` segments name no kind."""
        store = self.stores.get((info.api_group, info.api_version, info.resource))
        if store is None or info.api_prefix != "apis" or info.verb == "proxy":
            return None
        if info.subresource and not _status_path(info, store):
            return None
        if info.name and not info.namespace and info.verb not in ("list", "watch"):
            return None
        return ResourceRoute(store, info.verb, info.namespace or None, info.name or None, info.subresource)

    # ------------------------------------------------------------------ discovery

    def _discovery(self, request: web.Request, segments: list[str]) -> web.StreamResponse:
        if request.method not in ("GET", "HEAD"):
            raise errors.method_not_allowed()
        document: JSON | None
        if not segments:
            aggregated = _aggregated_version(request.headers.get("Accept", ""))
            if aggregated is not None:
                return self._aggregated(request, aggregated)
            document = self.discovery.group_list()
        elif len(segments) == 1:
            document = self.discovery.group(segments[0])
        else:
            document = self.discovery.resource_list(segments[0], segments[1])
        if document is None:
            raise errors.route_not_found()
        return object_response(request, document)

    def _aggregated(self, request: web.Request, api_version: str) -> web.StreamResponse:
        request[AGGREGATED_DISCOVERY_KEY] = True  # counted in the request metrics, as upstream
        document = self.discovery.aggregated(api_version)
        tag = etag(document)
        content_type = (
            f"application/json;g=apidiscovery.k8s.io;v={api_version.split('/')[1]};as=APIGroupDiscoveryList"
        )
        headers = {"ETag": tag, "Cache-Control": NO_CACHE, "Vary": "Accept"}
        if request.headers.get("If-None-Match") == tag:
            return web.Response(status=304, headers=headers)
        response = web.Response(body=codec.encode_json(document), headers=headers)
        response.headers["Content-Type"] = content_type
        return response

    # ------------------------------------------------------------------ resources

    async def _resource(self, request: web.Request, route: ResourceRoute) -> web.StreamResponse:
        # Responses about this kind may be converted (Table, PartialObjectMetadata) on request.
        request[RESOURCE_KIND_KEY] = route.store.kind
        method = request.method
        if method in ("POST", "PUT", "PATCH", "DELETE"):
            # As upstream's write handlers: an unacceptable Accept is refused before anything is written.
            negotiate(request.headers.get("Accept", ""), transforms=True)
        serve = self._verbs(route).get(route.verb)
        if serve is None or (route.verb in ("list", "watch") and method not in ("GET", "HEAD")):
            raise errors.method_not_allowed()
        if route.name is not None and route.verb not in ("list", "watch"):
            _check_name(route.name)
        return await serve(request, route)

    def _verbs(self, route: ResourceRoute) -> dict[str, Serve]:
        """What each verb of the request info is served by, for this route: a collection has no
        get, update or patch; one object no create; both kinds are namespaced, so a write names a
        namespace."""
        if route.verb == "watch":
            return {"watch": self._watch}
        if route.verb == "list":
            return {"list": self._list}
        if route.namespace is None:
            return {}
        if route.subresource:
            return {"get": self._get, "update": self._update, "patch": self._patch}
        if route.name is None:
            return {"create": self._create, "deletecollection": self._delete_collection}
        return {"get": self._get, "update": self._update, "patch": self._patch, "delete": self._delete}

    async def _get(self, request: web.Request, route: ResourceRoute) -> web.StreamResponse:
        name = _name(route)
        fmt = negotiate(request.headers.get("Accept", ""), transforms=True)
        obj = await route.store.get(_ns(route), name)
        return object_response(request, obj, fmt=fmt)

    async def _list(self, request: web.Request, route: ResourceRoute) -> web.StreamResponse:
        fmt = negotiate(request.headers.get("Accept", ""), transforms=True)
        opts = await _list_options(request, route)
        return list_response(request, await route.store.list(route.namespace, opts), fmt)

    async def _watch(self, request: web.Request, route: ResourceRoute) -> web.StreamResponse:
        accept = request.headers.get("Accept", "")
        negotiate(accept, transforms=True)
        opts = await _list_options(request, route, watch=True)
        # Checked before the watch starts (upstream checks them as it begins serving the stream).
        fmt = negotiate_stream(accept)
        transform: table.WatchTransform | None = None
        if fmt.target is not None:
            include_object = table.table_options(fmt.target, request.query)
            transform = table.WatchTransform(route.store.kind, fmt.target, include_object)
        if route.name is not None:
            # /watch/namespaces/<ns>/<plural>/<name> is a watch on that one name: a fieldSelector
            # may only repeat it (upstream's ListResource refuses any other).
            selector = opts.field_selector
            if selector is None or selector.empty:
                pinned = f"metadata.name={escape_field_value(route.name)}"
                opts.field_selector = parse_field_selector(pinned, route.store.kind.selectable_field_names)
            elif selector.requires_exact_match("metadata.name") != route.name:
                raise errors.bad_request("fieldSelector metadata.name doesn't match requested name")
        events = await route.store.watch(route.namespace, opts)
        timeout = watch_timeout(opts.timeout_seconds, self.min_request_timeout)
        metrics = request.config_dict.get(METRICS_KEY)
        if metrics is None:
            return await stream_watch(request, events, timeout, transform)
        with metrics.watching(route.store.kind):
            return await stream_watch(request, metrics.counted(route.store.kind, events), timeout, transform)

    async def _create(self, request: web.Request, route: ResourceRoute) -> web.StreamResponse:
        opts = query.write_options(request.query, "CreateOptions", user_agent=_user_agent(request))
        opts.user = request_user(request)
        _, parsed = await _body(request)
        result = _counted(
            request, route, await route.store.create(_ns(route), parsed.value, opts, parsed.yaml_duplicates)
        )
        return object_response(request, result.obj, status=201, warnings=result.warnings)

    async def _update(self, request: web.Request, route: ResourceRoute) -> web.StreamResponse:
        opts = query.write_options(request.query, "UpdateOptions", user_agent=_user_agent(request))
        opts.user = request_user(request)
        opts.subresource = route.subresource
        _, parsed = await _body(request)
        name = _name(route)
        result = _counted(
            request,
            route,
            await route.store.update(_ns(route), name, parsed.value, opts, parsed.yaml_duplicates),
        )
        return object_response(
            request, result.obj, status=201 if result.created else 200, warnings=result.warnings
        )

    async def _patch(self, request: web.Request, route: ResourceRoute) -> web.StreamResponse:
        content_type = request.headers.get("Content-Type", "")
        media = codec.parse_media_type(content_type).type if content_type else ""
        served = (
            codec.JSON_PATCH_TYPE,
            codec.MERGE_PATCH_TYPE,
            codec.STRATEGIC_PATCH_TYPE,
            codec.APPLY_PATCH_TYPE,
        )
        if media not in served:
            raise errors.unsupported_media_type(list(served))
        opts = query.write_options(
            request.query,
            "PatchOptions",
            patch=True,
            apply=media == codec.APPLY_PATCH_TYPE,
            user_agent=_user_agent(request),
        )
        opts.user = request_user(request)
        opts.subresource = route.subresource
        name = _name(route)
        if media == codec.APPLY_PATCH_TYPE:
            return await self._apply(request, route, opts)
        patch_type = _PATCHERS[media]
        try:
            parsed = await codec.decode_json_off_loop(await request.read())
        except codec.MalformedJSONError as exc:
            raise patch_type.malformed(str(exc), opts.field_validation) from None
        patcher: Patcher
        if patch_type is StrategicMergePatcher:
            schema = route.store.kind.patch_schema
            patcher = StrategicMergePatcher(parsed.value, opts.field_validation, schema)
        else:
            patcher = patch_type(parsed.value, opts.field_validation)
        result = _counted(request, route, await route.store.patch(_ns(route), name, patcher, opts))
        return object_response(request, result.obj, warnings=result.warnings)

    async def _apply(
        self, request: web.Request, route: ResourceRoute, opts: WriteOptions
    ) -> web.StreamResponse:
        """Server-side apply: the body is the applied configuration, in YAML (or JSON)."""
        name = _name(route)
        try:
            _, parsed = await codec.parse_body_off_loop(
                codec.APPLY_PATCH_TYPE, await request.read(), (codec.APPLY_PATCH_TYPE,)
            )
        except errors.StatusError as exc:
            raise errors.bad_request(f"error decoding YAML: {exc.message}") from None
        result = _counted(
            request,
            route,
            await route.store.apply(_ns(route), name, parsed.value, opts, parsed.yaml_duplicates),
        )
        return object_response(
            request, result.obj, status=201 if result.created else 200, warnings=result.warnings
        )

    async def _delete_options(self, request: web.Request) -> DeleteOptions:
        opts = query.delete_options(request.query)
        body = await request.read()
        if body.strip():
            _, parsed = await codec.parse_body_off_loop(request.headers.get("Content-Type", ""), body)
            if parsed.value is not None and not isinstance(parsed.value, dict):
                raise errors.bad_request("the body of a delete must be a DeleteOptions object")
            opts = delete_options_from_body(parsed.value, opts)
        opts.user = request_user(request)
        return opts

    async def _delete(self, request: web.Request, route: ResourceRoute) -> web.StreamResponse:
        name = _name(route)
        opts = await self._delete_options(request)
        if opts.ignore_store_read_error:
            return await self._delete_corrupt(request, route, opts)
        result = await route.store.delete(_ns(route), name, opts)
        if not result.deleted:
            # Finalizers hold it: the object, now carrying deletionTimestamp. As upstream, 202 only
            # for a client that asked for cascading deletion the deprecated way
            # (orphanDependents=false); answering 202 to every held delete would break older clients.
            status = 202 if opts.orphan_dependents is False else 200
            return object_response(request, result.obj, status=status)
        kind = route.store.kind
        details = {
            "name": name,
            "group": kind.group,
            "kind": kind.plural,
            "uid": result.obj["metadata"].get("uid", ""),
        }
        return object_response(request, success_status(details))

    async def _delete_corrupt(
        self, request: web.Request, route: ResourceRoute, opts: DeleteOptions
    ) -> web.StreamResponse:
        """DELETE with ignoreStoreReadErrorWithClusterBreakingPotential: valid options first, then
        upstream's second authorization (the verb unsafe-delete-ignore-read-errors on the object),
        then the removal without reading it. Answered as upstream does, without the object."""
        name = _name(route)
        opts.validate()
        await _authorize_unsafe_delete(request, route)
        kind = route.store.kind
        await route.store.delete_corrupt(_ns(route), name, opts)
        status = success_status({"name": name, "kind": kind.kind})
        status["code"] = 200
        return object_response(request, status)

    async def _delete_collection(self, request: web.Request, route: ResourceRoute) -> web.StreamResponse:
        delete_opts = await self._delete_options(request)
        list_opts = await _list_options(request, route)
        fmt = negotiate(request.headers.get("Accept", ""), transforms=True)
        result = await route.store.delete_collection(route.namespace, list_opts, delete_opts)
        return list_response(request, result, fmt)


async def _authorize_unsafe_delete(request: web.Request, route: ResourceRoute) -> None:
    """Whether the user may also do `unsafe-delete-ignore-read-errors` on the object; refused with
    upstream's admission Forbidden wording."""
    kind = route.store.kind
    gr = errors.GroupResource(kind.group, kind.plural)
    name = route.name or ""
    authorizer = request.get(AUTHORIZER_KEY)
    user = request_user(request)
    if authorizer is None or user is None:
        raise errors.internal_error("no authorizer provided, unable to authorize unsafe delete")
    info = resource_attributes(
        UNSAFE_DELETE_VERB,
        api_group=kind.group,
        api_version=kind.version,
        resource=kind.plural,
        namespace=route.namespace or "",
        name=name,
    )
    decision = await authorizer.authorize(user, info)
    if not decision.allowed:
        why = f"not permitted to do {errors.go_quote(UNSAFE_DELETE_VERB)}, reason: {decision.reason}"
        raise errors.forbidden_error(gr, name, why)


async def _body(request: web.Request) -> tuple[str, codec.ParsedBody]:
    """A create's or update's body, decoded (off the event loop when large); it names the
    object of the request's audit event."""
    decoded = await codec.parse_body_off_loop(request.headers.get("Content-Type", ""), await request.read())
    auditing.request_object(request, decoded[1].value)
    return decoded


async def _list_options(request: web.Request, route: ResourceRoute, *, watch: bool = False) -> ListOptions:
    """The list's options; selectors of a long query string (up to a 1 MiB request line) are
    parsed off the event loop."""
    parse = functools.partial(query.list_options, request.query, route.store.kind, watch=watch)
    return await codec.off_loop(len(request.query_string), parse)


def _check_name(name: str) -> None:
    """As upstream's storage key functions: a name in the URL that cannot be one path segment of a
    key (`..`, `a/b` from `a%2Fb`, `%`) is refused before anything is looked up."""
    if problems := formats.is_valid_path_segment_name(name):
        raise errors.bad_request(f"Name parameter invalid: {errors.go_quote(name)}: {';'.join(problems)}")


def _counted(request: web.Request, route: ResourceRoute, result: WriteResult) -> WriteResult:
    """`result`, its stored object counted in the server's metrics (Events: eventmetrics)."""
    metrics = request.config_dict.get(METRICS_KEY)
    if metrics is not None and result.stored:
        metrics.stored(route.store.kind, result.obj)
    return result


def _user_agent(request: web.Request) -> str:
    return request.headers.get("User-Agent", "")


def _name(route: ResourceRoute) -> str:
    """The object's name (checked by `_resource` before anything is read)."""
    assert route.name is not None
    return route.name


def _ns(route: ResourceRoute) -> str:
    assert route.namespace is not None
    return route.namespace


def _aggregated_version(accept: str) -> str | None:
    """The apidiscovery version an Accept header asks for first, or None for legacy discovery."""
    for media in codec.parse_accept(accept):
        if (
            media.params.get("as") == "APIGroupDiscoveryList"
            and media.params.get("g") == "apidiscovery.k8s.io"
        ):
            api_version = f"apidiscovery.k8s.io/{media.params.get('v', '')}"
            if api_version in AGGREGATED_DISCOVERY_VERSIONS:
                return api_version
            continue
        if media.type in (codec.JSON_TYPE, "*/*", "application/*"):
            return None
    return None
