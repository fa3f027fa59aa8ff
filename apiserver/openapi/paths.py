"""The operations of the documents: query parameters, operation ids and tags, and every route of
a served kind (list, create, read, replace, patch, delete, deletecollection, watch) as
kube-apiserver's installer names and documents them, plus the discovery routes."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from apiserver.machinery.mediatypes import (
    APPLY_PATCH_TYPE,
    JSON_PATCH_TYPE,
    JSON_TYPE,
    MERGE_PATCH_TYPE,
    STRATEGIC_PATCH_TYPE,
    WATCH_STREAM_TYPE,
    YAML_TYPE,
)
from apiserver.machinery.types import JSON
from apiserver.openapi.builder import gvk
from apiserver.openapi.models import META_PREFIX
from apiserver.resources.base import ResourceKind

# ----------------------------------------------------------------------------- names


def operation_id_part(text: str, *, capitalize: bool) -> str:
    """Upstream's ToValidOperationID: letters kept, other characters dropped and the next letter
    capitalized (rbac.authorization.core.io -> RbacAuthorizationCoreIo)."""
    out: list[str] = []
    upper = capitalize
    for i, ch in enumerate(text):
        if ch.isalpha() or ch == "_" or (i != 0 and ch.isdigit()):
            out.append(ch.upper() if upper else ch)
            upper = False
        else:
            upper = True
    return "".join(out)


def _group_id(group: str) -> str:
    # kube-apiserver trims ".k8s.io"; our groups keep their full name.
    return group.removesuffix(".k8s.io")


def operation_id(verb: str, rest: str, group: str, version: str = "") -> str:
    """As GetOperationIDAndTags builds it: verb, group, version, then the rest of the route's name."""
    out = verb + operation_id_part(_group_id(group), capitalize=True)
    if version:
        out += operation_id_part(version, capitalize=True)
    return out + rest


def tag(group: str, version: str = "") -> str:
    out = operation_id_part(_group_id(group), capitalize=False)
    return out + "_" + operation_id_part(version, capitalize=False) if version else out


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


# ----------------------------------------------------------------------------- parameters


@dataclass(frozen=True)
class Param:
    name: str
    type: str  # "string", "boolean", "integer"
    description: str
    location: str = "query"


def _q(name: str, type_: str, description: str) -> Param:
    return Param(name, type_, description)


P_ALLOW_WATCH_BOOKMARKS = _q(
    "allowWatchBookmarks",
    "boolean",
    'allowWatchBookmarks asks for watch events of type "BOOKMARK". The server sends them at its '
    "discretion: clients must not rely on their timing or on getting any. Ignored unless this is a watch.",
)
P_ALLOW_WATCH_BOOKMARKS_SEED = _q(
    "allowWatcokmarks",
    "boolean",
    "The interface document's spelling of allowWatchBookmarks; the server treats both alike.",
)
P_CONTINUE = _q(
    "continue",
    "string",
    "The continue token of a previous list response, asking for the next chunk of the same list (same "
    "query otherwise). A token that has expired answers 410 Gone carrying a new token, which continues "
    "from the latest data instead of the first list's snapshot. Not supported for watches.",
)
P_DRY_RUN = _q(
    "dryRun",
    "string",
    "When present, the request is processed but nothing is persisted. Valid values: All (every dry-run "
    "stage runs). An unknown value fails the request.",
)
P_FIELD_MANAGER = _q(
    "fieldManager",
    "string",
    "The name of the actor making these changes, recorded in managedFields. At most 128 characters, "
    "printable characters only.",
)
P_FIELD_MANAGER_PATCH = _q(
    "fieldManager",
    "string",
    P_FIELD_MANAGER.description + " Required for apply patches (application/apply-patch+yaml), optional "
    "for the other patch types.",
)
P_FIELD_SELECTOR = _q(
    "fieldSelector", "string", "A selector restricting the objects by their fields. Defaults to everything."
)
P_FIELD_VALIDATION = _q(
    "fieldValidation",
    "string",
    "How the server treats unknown and duplicate fields in the body of a POST, PUT or PATCH. Ignore: "
    "they are dropped silently. Warn (the default): they are dropped and each is reported in a Warning "
    "header. Strict: the request fails with BadRequest naming all of them.",
)
P_FORCE = _q(
    "force",
    "boolean",
    "force makes an apply patch take over fields that other managers own. Must be unset for the other "
    "patch types.",
)
P_GRACE_PERIOD = _q(
    "gracePeriodSeconds",
    "integer",
    "The number of seconds before the object should be deleted; non-negative, zero means immediately. "
    "Unset uses the default of the type.",
)
P_IGNORE_STORE_READ_ERROR = _q(
    "ignoreStoreReadErrorWithClusterBreakingPotential",
    "boolean",
    "If true, an object that cannot be read from storage (it cannot be decoded, for instance) is deleted "
    "anyway, bypassing the normal deletion flow. This may break the cluster: use it only to remove a "
    "corrupt object.",
)
P_LABEL_SELECTOR = _q(
    "labelSelector", "string", "A selector restricting the objects by their labels. Defaults to everything."
)
P_LIMIT = _q(
    "limit",
    "integer",
    "The most items one list response may hold. When more remain, metadata.continue carries a token for "
    "the next chunk; all chunks come from one consistent snapshot. A response may hold fewer items, even "
    "none, and still have more: only an empty continue means the end. Not supported for watches.",
)
P_ORPHAN_DEPENDENTS = _q(
    "orphanDependents",
    "boolean",
    'Deprecated: use propagationPolicy. Whether the dependents are orphaned (the "orphan" finalizer is '
    "added to or removed from the object). Cannot be combined with propagationPolicy.",
)
P_PRETTY = _q(
    "pretty",
    "string",
    "If 'true', the output is pretty printed. Defaults to 'false' unless the user agent is a browser or "
    "a command-line HTTP tool (curl, wget).",
)
P_PROPAGATION_POLICY = _q(
    "propagationPolicy",
    "string",
    "Whether and how dependents are garbage collected: 'Orphan', 'Background' or 'Foreground'. Cannot be "
    "combined with orphanDependents.",
)
P_RESOURCE_VERSION = _q(
    "resourceVersion",
    "string",
    "Which resource versions the request may be served from. Unset: the most recent data (a consistent "
    'read). "0": any version. Otherwise data at least as new as this one (or exactly it, with '
    "resourceVersionMatch=Exact). A watch starts after it. Defaults to unset.",
)
P_RESOURCE_VERSION_MATCH = _q(
    "resourceVersionMatch",
    "string",
    "How resourceVersion applies to a list: NotOlderThan or Exact. Should be set whenever a list sets "
    "resourceVersion. Defaults to unset.",
)
P_SEND_INITIAL_EVENTS = _q(
    "sendInitialEvents",
    "boolean",
    "With watch=true, the stream starts with synthetic ADDED events for the current objects, then a "
    'BOOKMARK annotated "k8s.io/initial-events-end": "true", then the changes. Requires '
    "resourceVersionMatch=NotOlderThan and allowWatchBookmarks=true.",
)
P_TIMEOUT_SECONDS = _q(
    "timeoutSeconds", "integer", "Timeout of the list or watch call, whatever the activity."
)
P_WATCH = _q(
    "watch",
    "boolean",
    "Watch for changes to the described resources and return them as a stream of add, update and remove "
    "notifications. Set resourceVersion to start after a known version.",
)
P_NAMESPACE = Param(
    "namespace", "string", "object name and auth scope, such as for teams and projects", "path"
)

LIST_PARAMS = (
    P_ALLOW_WATCH_BOOKMARKS,
    P_ALLOW_WATCH_BOOKMARKS_SEED,
    P_CONTINUE,
    P_FIELD_SELECTOR,
    P_LABEL_SELECTOR,
    P_LIMIT,
    P_RESOURCE_VERSION,
    P_RESOURCE_VERSION_MATCH,
    P_SEND_INITIAL_EVENTS,
    P_TIMEOUT_SECONDS,
    P_WATCH,
)
WRITE_PARAMS = (P_DRY_RUN, P_FIELD_MANAGER, P_FIELD_VALIDATION)
PATCH_PARAMS = (P_DRY_RUN, P_FIELD_MANAGER_PATCH, P_FIELD_VALIDATION, P_FORCE)
DELETE_PARAMS = (
    P_DRY_RUN,
    P_GRACE_PERIOD,
    P_IGNORE_STORE_READ_ERROR,
    P_ORPHAN_DEPENDENTS,
    P_PROPAGATION_POLICY,
)
DELETE_COLLECTION_PARAMS = (
    *DELETE_PARAMS,
    P_CONTINUE,
    P_FIELD_SELECTOR,
    P_LABEL_SELECTOR,
    P_LIMIT,
    P_RESOURCE_VERSION,
    P_RESOURCE_VERSION_MATCH,
    P_SEND_INITIAL_EVENTS,
    P_TIMEOUT_SECONDS,
)

OBJECT_TYPES = (JSON_TYPE, YAML_TYPE)
LIST_TYPES = (JSON_TYPE, WATCH_STREAM_TYPE, YAML_TYPE)
PATCH_BODY_TYPES = (APPLY_PATCH_TYPE, JSON_PATCH_TYPE, MERGE_PATCH_TYPE, STRATEGIC_PATCH_TYPE)
_STATUS = META_PREFIX + "Status"


# ----------------------------------------------------------------------------- operations


@dataclass(frozen=True)
class Operation:
    method: str  # get, post, put, patch, delete
    operation_id: str
    description: str
    tag: str
    responses: tuple[tuple[str, str], ...]  # (code, definition name)
    produces: tuple[str, ...] = OBJECT_TYPES
    params: tuple[Param, ...] = ()
    body: str = ""  # definition name of the request body
    body_required: bool = True
    consumes: tuple[str, ...] = ("*/*",)
    action: str = ""
    gvk: JSON | None = None


@dataclass(frozen=True)
class PathItem:
    path: str
    operations: tuple[Operation, ...]
    params: tuple[Param, ...] = ()


def _sorted(params: Iterable[Param]) -> tuple[Param, ...]:
    return tuple(sorted(params, key=lambda p: p.name))


@dataclass(frozen=True)
class KindRoutes:
    """The routes of one namespaced kind, named and documented as kube-apiserver's installer does."""

    kind: ResourceKind
    object_name: str  # definition name of the kind
    list_name: str  # definition name of its list

    @property
    def base(self) -> str:
        return f"/apis/{self.kind.group}/{self.kind.version}"

    @property
    def collection(self) -> str:
        return f"{self.base}/namespaces/{{namespace}}/{self.kind.plural}"

    @property
    def name_param(self) -> Param:
        return Param("name", "string", f"name of the {self.kind.kind}", "path")

    def op(self, method: str, verb: str, rest: str, description: str, action: str, **kw: Any) -> Operation:
        k = self.kind
        return Operation(
            method,
            operation_id(verb, rest, k.group, k.version),
            description,
            tag(k.group, k.version),
            action=action,
            gvk=gvk(k.group, k.version, k.kind),
            **kw,
        )

    def list_all(self) -> PathItem:
        k = self.kind.kind
        return PathItem(
            f"{self.base}/{self.kind.plural}",
            (
                self.op(
                    "get",
                    "list",
                    f"{k}ForAllNamespaces",
                    f"list or watch objects of kind {k}",
                    "list",
                    responses=(("200", self.list_name),),
                    produces=LIST_TYPES,
                ),
            ),
            _sorted((*LIST_PARAMS, P_PRETTY)),
        )

    def namespaced_collection(self) -> PathItem:
        k, obj = self.kind.kind, self.object_name
        return PathItem(
            self.collection,
            (
                self.op(
                    "get",
                    "list",
                    f"Namespaced{k}",
                    f"list or watch objects of kind {k}",
                    "list",
                    responses=(("200", self.list_name),),
                    produces=LIST_TYPES,
                    params=_sorted(LIST_PARAMS),
                ),
                self.op(
                    "post",
                    "create",
                    f"Namespaced{k}",
                    f"create {_article(k)} {k}",
                    "post",
                    responses=(("200", obj), ("201", obj), ("202", obj)),
                    params=_sorted(WRITE_PARAMS),
                    body=obj,
                ),
                self.op(
                    "delete",
                    "delete",
                    f"CollectionNamespaced{k}",
                    f"delete collection of {k}",
                    "deletecollection",
                    responses=(("200", _STATUS),),
                    params=_sorted(DELETE_COLLECTION_PARAMS),
                    body=META_PREFIX + "DeleteOptions",
                    body_required=False,
                ),
            ),
            (P_NAMESPACE, P_PRETTY),
        )

    def namespaced_object(self) -> PathItem:
        k = self.kind.kind
        return PathItem(
            f"{self.collection}/{{name}}",
            (
                *self.read_replace_patch(f"Namespaced{k}", f"the specified {k}"),
                self.op(
                    "delete",
                    "delete",
                    f"Namespaced{k}",
                    f"delete {_article(k)} {k}",
                    "delete",
                    responses=(("200", _STATUS), ("202", _STATUS)),
                    params=_sorted(DELETE_PARAMS),
                    body=META_PREFIX + "DeleteOptions",
                    body_required=False,
                ),
            ),
            (self.name_param, P_NAMESPACE, P_PRETTY),
        )

    def read_replace_patch(self, rest: str, what: str) -> tuple[Operation, ...]:
        """get, put and patch of one object (`what`: "the specified Kind", or its status)."""
        obj = self.object_name
        return (
            self.op("get", "read", rest, f"read {what}", "get", responses=(("200", obj),)),
            self.op(
                "put",
                "replace",
                rest,
                f"replace {what}",
                "put",
                responses=(("200", obj), ("201", obj)),
                params=_sorted(WRITE_PARAMS),
                body=obj,
            ),
            self.op(
                "patch",
                "patch",
                rest,
                f"partially update {what}",
                "patch",
                responses=(("200", obj), ("201", obj)),
                params=_sorted(PATCH_PARAMS),
                body=META_PREFIX + "Patch",
                consumes=PATCH_BODY_TYPES,
            ),
        )

    def namespaced_status(self) -> PathItem:
        """/status of a kind that serves it: read, replace and patch (server-side apply too)."""
        k = self.kind.kind
        return PathItem(
            f"{self.collection}/{{name}}/status",
            self.read_replace_patch(f"Namespaced{k}Status", f"status of the specified {k}"),
            (self.name_param, P_NAMESPACE, P_PRETTY),
        )

    def watch(
        self, path: str, rest: str, description: str, action: str, params: tuple[Param, ...]
    ) -> PathItem:
        """A deprecated watch route (`/watch/...`): a stream of WatchEvents."""
        operation = self.op(
            "get",
            "watch",
            rest,
            description,
            action,
            responses=(("200", META_PREFIX + "WatchEvent"),),
            produces=LIST_TYPES,
        )
        return PathItem(
            f"{self.base}/watch/{path}", (operation,), (*params, *_sorted((*LIST_PARAMS, P_PRETTY)))
        )

    def watches(self) -> list[PathItem]:
        k, plural = self.kind.kind, self.kind.plural
        watch_list = (
            f"watch individual changes to a list of {k}. deprecated: use the 'watch' parameter with a list "
            "operation instead."
        )
        watch_one = (
            f"watch changes to an object of kind {k}. deprecated: use the 'watch' parameter with a list "
            "operation instead, filtered to a single item with the 'fieldSelector' parameter."
        )
        return [
            self.watch(plural, f"{k}ListForAllNamespaces", watch_list, "watchlist", ()),
            self.watch(
                f"namespaces/{{namespace}}/{plural}",
                f"Namespaced{k}List",
                watch_list,
                "watchlist",
                (P_NAMESPACE,),
            ),
            self.watch(
                f"namespaces/{{namespace}}/{plural}/{{name}}",
                f"Namespaced{k}",
                watch_one,
                "watch",
                (self.name_param, P_NAMESPACE),
            ),
        ]


def resource_paths(kind: ResourceKind, object_name: str, list_name: str) -> list[PathItem]:
    """Every route of a namespaced kind, as kube-apiserver's installer names and documents them."""
    routes = KindRoutes(kind, object_name, list_name)
    status = [routes.namespaced_status()] if kind.status_subresource else []
    return [
        routes.list_all(),
        routes.namespaced_collection(),
        routes.namespaced_object(),
        *status,
        *routes.watches(),
    ]


def discovery_path(path: str, operation: str, description: str, response: str, tag_: str) -> PathItem:
    """A discovery route (`/apis/`, `/apis/<group>/`, `/apis/<group>/<version>/`)."""
    return PathItem(
        path,
        (Operation("get", operation, description, tag_, responses=(("200", META_PREFIX + response),)),),
    )
